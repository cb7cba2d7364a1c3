"""Exports round-trip; a model too large for free memory is refused before any download."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
import transformers as tf

from attnviz.analysis import export


def test_exports_round_trip(minilm):
    trace = minilm.run("The keys are <b>here</b>.")
    npz = np.load(io.BytesIO(export.trace_npz(trace)))
    np.testing.assert_array_equal(npz["attentions"], trace.attentions)  # full precision
    assert npz["tokens"].tolist() == trace.tokens
    data = json.loads(export.trace_json(trace))
    assert data["tokens"] == trace.tokens and data["offsets"] == [list(o) for o in trace.offsets]
    np.testing.assert_allclose(data["attentions"], trace.attentions, atol=5e-5)
    rows = list(csv.reader(io.StringIO(export.head_csv(trace.attentions[2, 3], trace.tokens))))
    assert rows[0][1:] == trace.tokens and len(rows) == len(trace.tokens) + 1
    np.testing.assert_allclose(np.array(rows[1][1:], dtype=float), trace.attentions[2, 3, 0], rtol=1e-5)


def test_too_large_hub_model_is_refused_from_its_config_before_download(monkeypatch):
    from attnviz.loading import hf
    from attnviz.loading.sources import AppSource
    from attnviz.ui import models

    llama_7b = tf.LlamaConfig().to_dict()  # 6.7B parameters
    monkeypatch.setattr(hf, "read_config", lambda source: llama_7b)
    monkeypatch.setattr(hf, "_download", lambda *args: pytest.fail("downloaded a model that cannot fit"))
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_GB", "16")
    with pytest.raises(models.OverBudget) as refused:
        models.load_model(AppSource("someone/llama-7b", "someone/llama-7b", from_hub=True))
    assert refused.value.need > 50e9 and refused.value.budget == 16e9


def test_random_fallback_is_off_in_ci(monkeypatch):
    from attnviz.ui import models

    monkeypatch.setenv("CI", "true")
    assert not models.allow_random_fallback()
    monkeypatch.setenv("CI", "")
    assert models.allow_random_fallback()
