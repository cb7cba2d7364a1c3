"""The atlas's relations (attnviz.readouts.atlas_relations; issue 37 items 1 and 6): `atlas metrics --json`'s
"relations" equal `probe --json`'s for the same model and treebank, a resumed build does not score a file again,
and the seed's table picks each relation's best head and names it in both languages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attnviz.cli.main import main
from attnviz.readouts import atlas, atlas_relations
from tests.conftest import MINILM

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONLLU = FIXTURES / "en_sample.conllu"
WINOBIAS = FIXTURES / "winobias_sample.txt"


def printed_json(capsys, argv: list[str]) -> dict:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_the_atlas_relations_equal_probe_conllu(minilm, tmp_path, capsys):
    probe = printed_json(capsys, ["probe", "--model", MINILM, "--conllu", str(CONLLU), "--json"])
    out = tmp_path / "atlas"
    assert main(["atlas", "build", "--model", MINILM, "--conllu", str(CONLLU), "--out", str(out)]) == 0
    shown = printed_json(capsys, ["atlas", "metrics", "--atlas", str(out), "--json"])
    assert shown["relations"] == probe["relations"]  # the same numbers, keys and order
    assert list(shown["relations"]) == list(probe["relations"])
    assert shown["relations"] == atlas.metrics(out)["relations"]
    (source,) = shown["relation_sources"]
    assert (source["kind"], source["treebank"]) == ("conllu", probe["treebank"])
    assert source["sha256"] == atlas_relations.file_sha256(CONLLU)
    # without --texts the treebank's sentences are the corpus of the six metrics
    assert shown["n_texts"] == probe["treebank"]["sentences"]
    seeds = {row["key"]: row for row in atlas_relations.seed_table(out)}
    assert seeds["subject-verb"]["relation"] == "nsubj" and seeds["modification"]["relation"] == "amod"
    assert not seeds["coreference"]["available"] and "--winobias" in seeds["coreference"]["reason"]
    example = seeds["subject-verb"]["example"]  # an nsubj item of the treebank that the best head gets right
    assert (example["source_word"], example["target_word"]) in {("sister", "like"), ("brother", "ordered")}
    stored = next(row for row in shown["relation_examples"] if row["relation"] == "nsubj")
    best = seeds["subject-verb"]["best"]
    assert (stored["layer"], stored["head"], stored["direction"]) == (
        best["layer"], best["head"], seeds["subject-verb"]["direction"])


def test_a_resumed_build_does_not_score_a_file_again(minilm, tmp_path, capsys, monkeypatch):
    calls = []
    score_model = atlas_relations.score_model

    def counted(model, items, **kwargs):
        calls.append(items[0].relation if items else None)
        return score_model(model, items, **kwargs)

    monkeypatch.setattr(atlas_relations, "score_model", counted)
    texts = tmp_path / "texts.txt"
    texts.write_text("The cat sat on the mat.\nA dog barked.\n", encoding="utf-8")
    out = str(tmp_path / "atlas")
    argv = ["atlas", "build", "--model", MINILM, "--texts", str(texts), "--out", out, "--conllu", str(CONLLU)]
    assert main(argv) == 0 and len(calls) == 1
    first = atlas.metrics(out)
    assert main(argv) == 0 and len(calls) == 1  # the same file (its SHA-256 stored): not scored again
    assert "kept (same file): conllu" in capsys.readouterr().err
    assert main([*argv, "--winobias", str(WINOBIAS)]) == 0 and calls[1:] == ["coreference"]  # only the new file
    both = atlas.metrics(out)
    assert {k: v for k, v in both["relations"].items() if k != "coreference"} == first["relations"]
    assert list(both["relations"])[-1] == "coreference"
    changed = tmp_path / "changed.conllu"
    shutil.copy(CONLLU, changed)
    changed.write_text(CONLLU.read_text(encoding="utf-8").split("\n\n")[0] + "\n\n", encoding="utf-8")
    assert main([*argv[:-1], str(changed)]) == 0 and len(calls) == 3  # another file of that kind: scored
    assert atlas.metrics(out)["relation_sources"][0]["sha256"] == atlas_relations.file_sha256(changed)


def test_two_files_naming_one_relation_are_refused():
    with pytest.raises(ValueError, match="'coreference' is in both --winobias and --probes"):
        atlas_relations.read_sources(winobias=str(WINOBIAS), probes="builtin:en")


def grid(values: dict[tuple[int, int], float]) -> list[list[float]]:
    return [[values.get((layer, head), 0.0) for head in range(3)] for layer in range(2)]


def block(s2t: dict, t2s: dict | None, n: int = 10) -> dict:
    def best(values):
        if values is None:
            return None
        (layer, head), accuracy = max(values.items(), key=lambda kv: kv[1])
        return {"layer": layer, "head": head, "accuracy": accuracy}

    base = {"best_offset": 1, "best_offset_accuracy": 0.3, "first_word_accuracy": 0.1}
    return {"n": n, "n_skipped": 0, "source_to_target": grid(s2t),
            "target_to_source": None if t2s is None else grid(t2s),
            "best": {"source_to_target": best(s2t), "target_to_source": best(t2s)},
            "baselines": {"source_to_target": base, "target_to_source": {**base, "best_offset": -1}},
            "n_scorable": {"source_to_target": n, "target_to_source": 0 if t2s is None else n}, "sink_aware": False}


def test_the_seed_table_picks_the_best_head_and_names_both_languages():
    relations = {
        "nsubj": block({(0, 1): 0.5, (1, 2): 0.7}, {(1, 0): 0.9, (0, 2): 0.6}),
        "amod": block({(1, 1): 0.8, (0, 0): 0.4}, None),  # a causal model: one direction only
        "modifier": block({(0, 0): 0.99}, None),  # amod comes first
        "obj": block({(0, 2): 0.95}, None),
        "semantic": block({(1, 2): 0.3, (0, 1): 0.2}, {(0, 0): 0.25}),  # the probe sets' semantic before obj
    }
    rows = atlas_relations.seed_table({"relations": relations})
    assert rows == atlas_relations.seed_table(relations)  # a bare relations dict too
    assert [row["key"] for row in rows] == ["subject-verb", "coreference", "modification", "semantic-association"]
    assert [(row["en"], row["zh"]) for row in rows] == [
        ("subject-verb", "主谓"), ("coreference", "指代"), ("modification", "修饰"),
        ("semantic association", "语义关联")]
    subject, coreference, modification, semantic = rows
    assert (subject["relation"], subject["direction"], subject["best"]) == (
        "nsubj", "target_to_source", {"layer": 1, "head": 0, "accuracy": 0.9})
    assert [(h["layer"], h["head"], h["accuracy"]) for h in subject["runner_up"]] == [
        (1, 2, 0.7), (0, 2, 0.6), (0, 1, 0.5)]
    assert subject["baseline"]["best_offset"] == -1 and subject["n"] == 10
    assert subject["example"] is None and "example_note" in subject
    assert not coreference["available"] and "coreference" in coreference["reason"]
    assert (modification["relation"], modification["best"]["layer"], modification["best"]["head"]) == ("amod", 1, 1)
    assert (semantic["relation"], semantic["best"]["accuracy"]) == ("semantic", 0.3)


def test_the_atlas_file_is_the_atlas_modules():
    assert atlas_relations.ATLAS_FILE == atlas.ATLAS_FILE


def test_what_is_stored_reads_back_as_to_json(tmp_path, monkeypatch):
    """A causal model's impossible direction (null grid, best and baselines) and a relation whose items were all
    skipped (a grid of nulls) come back from the rows exactly as to_json writes them."""
    import numpy as np

    from attnviz.analysis import Baseline, BestHead, RelationScore, to_json

    hits = np.array([[1, 3, 0], [2, 3, 1]])
    nan = np.full((2, 3), np.nan)
    zero = np.zeros((2, 3), dtype=np.int64)
    scores = {
        "coreference": RelationScore(
            "coreference", 7, 1, {"source_to_target": hits / 7, "target_to_source": nan},
            {"source_to_target": hits, "target_to_source": zero},
            {"source_to_target": BestHead(0, 1, 3 / 7), "target_to_source": None},
            {"source_to_target": Baseline(-3, 2 / 7, 1 / 7), "target_to_source": Baseline(None, None, None)},
            n_scorable={"source_to_target": 7, "target_to_source": 0}, sink_aware=True),
        "semantic": RelationScore(
            "semantic", 0, 2, {"source_to_target": nan, "target_to_source": nan},
            {"source_to_target": zero, "target_to_source": zero}, dict.fromkeys(("source_to_target",
                                                                                  "target_to_source")),
            dict.fromkeys(("source_to_target", "target_to_source"), Baseline(None, None, None)),
            n_scorable={"source_to_target": 0, "target_to_source": 0}, sink_aware=True),
    }
    monkeypatch.setattr(atlas_relations, "score_model", lambda model, items, **kwargs: scores)

    class Info:
        name, n_layers, n_heads = "tiny", 2, 3

    class Model:
        info = Info()

    source = atlas_relations.RelationSource("probes", "p.jsonl", "0" * 64, [])
    path = tmp_path / atlas_relations.ATLAS_FILE
    assert atlas_relations.build_relations(Model(), path, [source], sink_aware=True, examples=False) == ["probes"]
    read = atlas_relations.relations(tmp_path)
    assert read["relations"] == to_json("tiny", scores)["relations"]
    assert read["relations"]["coreference"]["target_to_source"] is None
    assert read["relation_sources"][0]["relations"] == ["coreference", "semantic"]
    rows = atlas_relations.seed_table(tmp_path)
    assert rows[1]["best"] == {"layer": 0, "head": 1, "accuracy": 0.4286}
    assert not rows[3]["available"] and "no scored item" in rows[3]["reason"]
