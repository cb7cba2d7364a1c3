"""`python -m attnviz probe`: the docs/architecture.md JSON, the readable table, and clear errors."""

from __future__ import annotations

import json

from attnviz.__main__ import main
from tests.conftest import MINILM, require_data

KEYS = {"n", "n_skipped", "source_to_target", "target_to_source", "best", "baselines"}


def test_probe_json_on_winobias(minilm, capsys):
    path = require_data("winobias/pro_stereotyped_type1.txt.dev")
    assert main(["probe", "--model", MINILM, "--winobias", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    block = out["relations"]["coreference"]
    assert out["model"] == MINILM and set(block) == KEYS
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
