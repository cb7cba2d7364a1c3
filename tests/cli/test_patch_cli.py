"""`python -m attnviz patch --json` on a tiny random Llama saved as from_pretrained saves it: the documented keys,
the engine's numbers, and a clear refusal of a target that is not one token."""

from __future__ import annotations

import json

import numpy as np

import attnviz
from attnviz.cli.main import main
from attnviz.interventions import patching

ARGS = ["--clean", "The keys to the cabinet", "--corrupt", "The key to the cabinet", "--target", " are",
        "--contrast", " the"]


def test_patch_json(tiny_llama, capsys):
    assert main(["patch", "--model", str(tiny_llama), *ARGS, "--direction", "noise", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = attnviz.load(str(tiny_llama))
    pair = patching.patch_pair(model, *ARGS[1::2])
    expected = patching.patch(model, pair, "noise")
    assert out["tokens"] == list(pair.clean_tokens)  # noising patches into the clean run
    assert abs(out["clean_value"] - expected.clean_value) < 1e-5
    assert abs(out["corrupt_value"] - expected.corrupt_value) < 1e-5
    assert np.abs(np.array(out["heads"]) - expected.heads).max() < 1e-5
    assert np.abs(np.array(out["mlps"]) - expected.mlps).max() < 1e-5
    residual = np.array(out["residual"], dtype=float)  # null (an unaligned position) reads as NaN
    assert residual.shape == (4, len(pair.clean_ids))
    assert np.array_equal(np.isnan(residual), np.isnan(expected.residual))
    assert np.isnan(residual).any()  # 'keys' / 'key' are one and two tokens here


def test_patch_refuses_a_target_of_several_tokens(tiny_llama, capsys):
    assert main(["patch", "--model", str(tiny_llama), *ARGS[:-1], " is"]) == 2
    assert "' is' is 3 tokens (' ' + 'i' + 's')" in capsys.readouterr().err  # the text, never Ġ
