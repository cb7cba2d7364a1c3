"""The atlas's sink share and causal weight (attnviz.readouts.atlas_causal, attnviz.interventions.atlas_patching):
the sink share from the streaming pass equals readouts.sinks.first_token_means on the same texts and model (a
resumed build's too); the stored causal grid equals interventions.patching run directly on the same built-in pairs
(the mean of `heads`); a relation stored for the same pairs is kept; an encoder is skipped with the reason; the
seed's table carries the best head's causal weight; the command line's --pairs builtin."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import attnviz
from attnviz.cli.main import main
from attnviz.interventions import atlas_patching, patching
from attnviz.probesets.patch_pairs import builtin_patch_pairs
from attnviz.readouts import atlas, atlas_causal, atlas_relations
from attnviz.readouts.sinks import first_token_means
from tests.helpers import tiny_hf
from tests.helpers.tiny_tokenizers import CORPUS, bpe_tokenizer

TEXTS = [
    "The cat sat on the mat. The cat sat on the mat. The cat",
    "a",  # GPT-2: one token, left out of both
    "The keys to the cabinet are on the table.",
    "A dog ran in the park, and the cat watched the dog from the wall.",
]


@pytest.fixture(scope="module")
def llama(tiny_llama):
    return attnviz.load(str(tiny_llama)), tiny_llama


@pytest.fixture(scope="module")
def decoder():
    """A tiny random Llama whose vocabulary keeps the English agreement pairs' targets (' are', ' is') whole; the
    coreference targets stay in pieces, so that relation is skipped pair by pair."""
    specs = builtin_patch_pairs()
    corpus = list(CORPUS) + [s.clean + s.target + " " + s.corrupt + s.contrast for s in specs if s.lang == "en"] * 20
    return tiny_hf.tiny_decoder("llama", bpe_tokenizer(True, corpus=corpus), seed=3)[0]


def test_the_sink_share_equals_first_token_means(llama, tmp_path):
    gpt2 = tiny_hf.tiny_decoder("gpt2", bpe_tokenizer(bos=False), seed=3)[0]
    for index, model in enumerate((llama[0], gpt2)):
        for seq_len in (512, 8):
            result = atlas.build(model, TEXTS, tmp_path / f"{index}-{seq_len}", seq_len=seq_len)
            want = first_token_means(model, TEXTS, max_tokens=seq_len)
            np.testing.assert_allclose(np.array(result["sink_share"], dtype=np.float64), want, atol=1e-6, rtol=0)
            assert np.array(result["sink_share"]).shape == (model.info.n_layers, model.info.n_heads)


def test_a_resumed_build_keeps_the_sink_share(llama, tmp_path):
    model, _ = llama
    straight = atlas.build(model, TEXTS, tmp_path / "straight", commit_every=1)

    def stop(done, total):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atlas.build(model, TEXTS, tmp_path / "stopped", commit_every=1, progress=stop)
    resumed = atlas.build(model, TEXTS, tmp_path / "stopped", commit_every=1)
    assert resumed["sink_share"] == straight["sink_share"]


def test_an_atlas_from_before_the_sink_share_keeps_it_unknown(llama, tmp_path):
    import duckdb

    model, _ = llama
    with pytest.raises(KeyboardInterrupt):
        atlas.build(model, TEXTS, tmp_path, commit_every=1,
                    progress=lambda done, total: (_ for _ in ()).throw(KeyboardInterrupt) if done == 2 else None)
    con = duckdb.connect(str(atlas.atlas_path(tmp_path)))
    con.execute("DROP TABLE sink_share")  # as an atlas built by an earlier version
    con.close()
    assert atlas.metrics(tmp_path)["sink_share"][0][0] is None
    resumed = atlas.build(model, TEXTS, tmp_path)
    assert all(value is None for row in resumed["sink_share"] for value in row)  # not a share of part of it


def direct(model, relation: str):
    """The mean of patching.heads over the relation's pairs this model can score, run here directly."""
    grids, skipped = [], {}
    for spec in builtin_patch_pairs(relation):
        try:
            pair = patching.patch_pair(model, spec.clean, spec.corrupt, spec.target, spec.contrast)
            grids.append(patching.heads(patching.prepare(model.module, pair)))
        except ValueError as error:
            skipped[spec.id] = str(error)
    return (np.mean(grids, axis=0) if grids else None), len(grids), skipped


def test_the_causal_grid_equals_patching_run_directly(decoder, tmp_path, monkeypatch):
    path = atlas.atlas_path(tmp_path)
    assert atlas_patching.build_causal(decoder, path) == list(atlas_patching.RELATIONS)
    stored = atlas_causal.causal(tmp_path)
    want, n, skipped = direct(decoder, "subject-verb")
    assert n >= 2 and want is not None
    agreement = stored["subject-verb"]
    np.testing.assert_allclose(np.array(agreement["grid"], dtype=np.float64), want, atol=1e-9, rtol=0)
    assert agreement["n_pairs"] == n and agreement["skipped"] == skipped and agreement["reason"] is None
    coreference = stored["coreference"]  # every pair's target is in pieces here
    assert coreference["grid"] is None and coreference["n_pairs"] == 0
    assert set(coreference["skipped"]) == {s.id for s in builtin_patch_pairs("coreference")}
    assert all("not one" in why for why in coreference["skipped"].values())

    # the same pairs and model: kept, not computed again
    monkeypatch.setattr(patching, "heads", lambda *a, **k: pytest.fail("computed again"))
    assert atlas_patching.build_causal(decoder, path) == []
    # other pairs (their text's hash): computed again
    monkeypatch.setattr(atlas_causal, "pairs_sha256", lambda specs: "other")
    with pytest.raises(pytest.fail.Exception):
        atlas_patching.build_causal(decoder, path)


def test_an_encoder_is_skipped_with_the_reason(tmp_path):
    info = SimpleNamespace(name="an encoder", n_layers=2, n_heads=3)
    encoder = SimpleNamespace(info=info, config=SimpleNamespace(causal=False), module=SimpleNamespace())
    atlas_patching.build_causal(encoder, atlas.atlas_path(tmp_path))
    for relation, entry in atlas_causal.causal(tmp_path).items():
        assert entry["grid"] is None and entry["n_pairs"] == 0 and "encoder" in entry["reason"]
        assert set(entry["skipped"]) == {s.id for s in builtin_patch_pairs(relation)}
    headless = SimpleNamespace(info=info, config=SimpleNamespace(causal=True), module=SimpleNamespace(lm_head=None))
    assert "without an LM head" in atlas_patching.unusable(headless)
    with pytest.raises(ValueError, match="built-in"):
        atlas_patching.build_causal(encoder, atlas.atlas_path(tmp_path), pairs="mine.jsonl")


def test_the_seed_table_carries_the_best_heads_causal_weight():
    grid = [[0.1, 0.2], [0.3, 0.4]]
    block = {"n": 4, "source_to_target": [[0.5, 0.9], [0.1, 0.2]], "target_to_source": [[0.1, 0.1], [0.1, 0.1]],
             "best": {"source_to_target": {"layer": 0, "head": 1, "accuracy": 0.9},
                      "target_to_source": {"layer": 0, "head": 0, "accuracy": 0.1}},
             "baselines": {"source_to_target": {}, "target_to_source": {}}, "n_scorable": {}}
    found = {"relations": {"subject-verb": block, "modifier": block},
             "causal": {"subject-verb": {"grid": grid, "n_pairs": 3, "skipped": {}},
                        "coreference": {"grid": None, "n_pairs": 0, "skipped": {"x": "why"}, "reason": "an encoder"}}}
    rows = {row["key"]: row for row in atlas_relations.seed_table(found)}
    assert rows["subject-verb"]["causal"] == {"effect": 0.2, "relation": "subject-verb", "n_pairs": 3}
    assert "causal_note" not in rows["subject-verb"]
    assert rows["coreference"]["causal"] is None and rows["coreference"]["causal_note"] == "an encoder"
    assert rows["modification"]["causal"] is None and "no minimal pairs" in rows["modification"]["causal_note"]
    rows = atlas_relations.seed_table({"relations": {"subject-verb": block}})
    assert "--pairs builtin" in rows[0]["causal_note"]


def test_the_command_line_builds_the_causal_weight(decoder, tmp_path, capsys, monkeypatch):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS[2:]) + "\n", encoding="utf-8")
    monkeypatch.setattr(attnviz, "load", lambda source, **options: decoder)
    argv = ["atlas", "build", "--model", "tiny", "--texts", str(texts), "--out", str(tmp_path / "a"),
            "--pairs", "builtin"]
    assert main(argv) == 0
    assert "computed: subject-verb, coreference" in capsys.readouterr().err
    assert main(["atlas", "metrics", "--atlas", str(tmp_path / "a"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    want, n, _ = direct(decoder, "subject-verb")
    np.testing.assert_allclose(np.array(printed["causal"]["subject-verb"]["grid"], dtype=np.float64), want,
                               atol=1e-9, rtol=0)
    assert printed["causal"]["subject-verb"]["n_pairs"] == n
    assert len(printed["sink_share"]) == decoder.info.n_layers
    assert main(argv) == 0  # resumed: the stored causal results kept
    assert "computed: none" in capsys.readouterr().err
