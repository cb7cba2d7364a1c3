"""The atlas's detector scores (attnviz.readouts.atlas_detectors) against TransformerLens's `detect_head` rule
written out here on Hugging Face eager's `output_attentions=True` maps of the same repeated random tokens, for a
tiny random Llama saved to a folder (GQA); kept in the atlas's DuckDB file, given by `atlas.metrics`, and not
computed again for the same settings."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as tf

import attnviz
from attnviz.analysis.detectors import DETECTORS, random_repeated_tokens, vocabulary
from attnviz.readouts import atlas, atlas_detectors

TEXTS = ["The cat sat on the mat.", "The keys to the cabinet are on the table."]


def hf_scores(hf, sequences: list[list[int]], n: int) -> dict[str, np.ndarray]:
    """Mean over the sequences of a[i, i-1] over i >= 1, a[i, i-n] and a[i, i-n+1] over the second copy."""
    totals = {name: 0.0 for name in DETECTORS}
    for ids in sequences:
        with torch.no_grad():
            a = torch.stack(hf(torch.tensor([ids]), output_attentions=True).attentions)[:, 0].double().numpy()
        i = np.arange(1, 2 * n)
        second = np.arange(n, 2 * n)
        totals["previous_token"] = totals["previous_token"] + a[:, :, i, i - 1].mean(-1)
        totals["duplicate_token"] = totals["duplicate_token"] + a[:, :, second, second - n].mean(-1)
        totals["induction"] = totals["induction"] + a[:, :, second, second - n + 1].mean(-1)
    return {name: total / len(sequences) for name, total in totals.items()}


def test_the_detectors_equal_hf_eager_and_are_kept(tiny_llama, tmp_path, monkeypatch):
    model = attnviz.load(str(tiny_llama))
    hf = tf.AutoModelForCausalLM.from_pretrained(tiny_llama, attn_implementation="eager").eval()
    with pytest.raises(ValueError, match="no atlas there"):
        atlas_detectors.build_detectors(model, tmp_path)
    atlas.build(model, TEXTS, tmp_path)
    assert atlas.metrics(tmp_path)["detectors"] is None  # none asked for yet
    n, sequences = 12, 3
    got = atlas_detectors.build_detectors(model, tmp_path, n=n, sequences=sequences)
    size, special = vocabulary(model)
    want = hf_scores(hf, random_repeated_tokens(size, special, n, sequences, seed=0), n)
    shown = atlas.metrics(tmp_path)["detectors"]
    for name in DETECTORS:
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, rtol=0, err_msg=name)
        np.testing.assert_allclose(np.array(shown[name], dtype=np.float64), want[name], atol=1e-5, rtol=0)
    assert np.asarray(shown["induction"]).shape == (model.info.n_layers, model.info.n_heads)

    def refuse(*args, **kwargs):
        raise AssertionError("computed again for the same settings")

    monkeypatch.setattr(atlas_detectors, "detect_heads", refuse)
    kept = atlas_detectors.build_detectors(model, tmp_path, n=n, sequences=sequences)
    assert all(np.array_equal(kept[name], got[name]) for name in DETECTORS)
    with pytest.raises(AssertionError, match="computed again"):  # other settings: computed again
        atlas_detectors.build_detectors(model, tmp_path, n=n + 1, sequences=sequences)
