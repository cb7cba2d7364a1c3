"""`python -m attnviz probe`: the docs/formats.md JSON, the readable table, and clear errors."""

from __future__ import annotations

import json

from attnviz.__main__ import main
from tests.conftest import MINILM, SMOLLM, require_data, require_offline

KEYS = {"n", "n_skipped", "source_to_target", "target_to_source", "best", "baselines", "n_scorable", "sink_aware"}


def test_probe_json_on_winobias(minilm, capsys):
    path = require_data("winobias/pro_stereotyped_type1.txt.dev")
    assert main(["probe", "--model", MINILM, "--winobias", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    block = out["relations"]["coreference"]
    assert out["model"] == MINILM and set(block) == KEYS
    assert out["sink_aware"] is False and block["sink_aware"] is False
    assert block["n_scorable"] == {"source_to_target": block["n"], "target_to_source": block["n"]}  # encoder
    assert block["n"] + block["n_skipped"] == 396
    assert len(block["source_to_target"]) == 6 and len(block["source_to_target"][0]) == 12
    best = block["best"]["source_to_target"]
    assert best["accuracy"] == max(max(row) for row in block["source_to_target"])
    # A real pretrained model has heads that beat both baselines on coreference.
    baseline = block["baselines"]["source_to_target"]
    assert best["accuracy"] > max(baseline["best_offset_accuracy"], baseline["first_word_accuracy"])


def test_probe_table_and_conllu(minilm, capsys, tmp_path):
    sample = tmp_path / "tiny.conllu"
    sample.write_text(
        "# text = Dogs bark loudly.\n"
        "1\tDogs\tdog\tNOUN\t_\t_\t2\tnsubj\t_\t_\n"
        "2\tbark\tbark\tVERB\t_\t_\t0\troot\t_\t_\n"
        "3\tloudly\tloudly\tADV\t_\t_\t2\tadvmod\t_\t_\n"
        "4\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_\n\n"
    )
    assert main(["probe", "--model", MINILM, "--conllu", str(sample)]) == 0
    out = capsys.readouterr().out
    assert "nsubj" in out and "advmod" in out and "source_to_target" in out


def test_probe_errors_are_clear(capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"relation": "x", "words": ["a", "b"], "source": 0, "target": 1}\n{"relation": "x"}\n')
    assert main(["probe", "--model", MINILM, "--probes", str(bad)]) == 2
    assert "line 2" in capsys.readouterr().err
    assert main(["probe", "--model", MINILM, "--probes", "builtin:en", "--relation", "nope"]) == 2
    assert "no items with relation 'nope'" in capsys.readouterr().err


def test_probe_sink_aware_flag_and_impossible_direction_on_a_decoder(smollm, capsys, tmp_path, monkeypatch):
    """SmolLM2 is causal: subject -> later verb cannot be scored (null grid, no best head, the table
    says why); `--sink-aware` is recorded in the JSON and changes the other direction's grid."""
    import attnviz

    require_offline(SMOLLM)
    monkeypatch.setattr(attnviz, "load", lambda source, *args, **kwargs: smollm)  # loaded once per session
    probes = tmp_path / "sv.jsonl"
    rows = [("The dog barks .", 1, 2), ("My old friends live here .", 2, 3), ("The keys are lost .", 1, 2),
            ("A girl with two cats sings .", 1, 5)]
    probes.write_text("".join(json.dumps({"relation": "sv", "words": text.split(), "source": s, "target": t})
                              + "\n" for text, s, t in rows))
    outs = {}
    for flag in ([], ["--sink-aware"]):
        assert main(["probe", "--model", SMOLLM, "--probes", str(probes), "--json", *flag]) == 0
        outs[bool(flag)] = json.loads(capsys.readouterr().out)
    for sink_aware, out in outs.items():
        block = out["relations"]["sv"]
        assert out["sink_aware"] is sink_aware and block["sink_aware"] is sink_aware
        assert block["n"] == 4 and block["n_scorable"] == {"source_to_target": 0, "target_to_source": 4}
        assert block["source_to_target"] is None and block["best"]["source_to_target"] is None
        assert len(block["target_to_source"]) == 30 and block["best"]["target_to_source"] is not None
        assert block["baselines"]["target_to_source"]["first_word_accuracy"] == 0.0
    assert outs[True]["relations"]["sv"]["target_to_source"] != outs[False]["relations"]["sv"]["target_to_source"]
    assert main(["probe", "--model", SMOLLM, "--probes", str(probes), "--sink-aware"]) == 0
    table = capsys.readouterr().out
    assert "impossible for a causal model" in table and "scoring: sink-aware" in table
