"""plots.qk_attribution_heatmap: the terms as given, labels escaped, a divider wherever the layer changes."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import plots


def test_the_matrix_is_drawn_as_given_with_escaped_labels_and_layer_dividers():
    matrix = np.arange(12, dtype=np.float64).reshape(3, 4) - 5
    rows, cols = ["embedding", "L0.H1", "<b>L1</b>"], ["embedding", "L0.H0", "L0.H1", "c2p"]
    fig = plots.qk_attribution_heatmap(matrix, rows, cols, [None, 0, 1], [None, 0, 0, None])
    np.testing.assert_array_equal(np.asarray(fig.data[0].z, dtype=np.float64), matrix)
    assert "<b>" not in "".join(fig.layout.yaxis.ticktext)
    vertical = sorted(s.x0 for s in fig.layout.shapes if s.yref == "paper")
    horizontal = sorted(s.y0 for s in fig.layout.shapes if s.xref == "paper")
    assert vertical == [0.5, 2.5] and horizontal == [0.5, 1.5]
    with pytest.raises(ValueError, match="do not agree"):
        plots.qk_attribution_heatmap(matrix, rows[:2], cols, [None, 0], [None, 0, 0, None])
