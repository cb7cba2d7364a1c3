"""What a new user could not read (issue 26): the per-layer lens mosaic (rollout, flow) stretched ~16:1 so a
diagonal read as a staircase; the Learn page's learned-positions panel showed one bright cell where its
caption promises a band near the diagonal; the probe table's header said `scor`; a caption said "both sides
score 1 tokens"."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.analysis.attention_lenses import rollout
from attnviz.cli.probe import format_table
from attnviz.plots import difference_heatmap, model_view
from attnviz.plots.mosaic import MAX_HEIGHT
from attnviz.ui.strings import STRINGS
from attnviz.workbench import positions
from attnviz.workbench.shared import Workbench
from tests.conftest import MINILM


def per_layer_maps(n_layers: int, n: int) -> np.ndarray:
    """[L, 1, n, n] rollout of previous-token-ish attentions: a diagonal in every layer's map."""
    rng = np.random.default_rng(0)
    a = rng.random((n_layers, 4, n, n)).astype(np.float32) * 0.1 + 4 * np.eye(n, dtype=np.float32)
    a /= a.sum(-1, keepdims=True)
    return rollout(a)[:, None]


@pytest.mark.parametrize(("n_layers", "n"), [(6, 16), (30, 15), (12, 200)])
def test_a_per_layer_mosaic_draws_square_tiles_under_the_height_cap(n_layers, n):
    figure = model_view(per_layer_maps(n_layers, n), head_mean=False)
    layout = figure.layout
    # One unit of x is one unit of y on screen, and the x axis gives up width (not range) to keep it so:
    assert layout.yaxis.scaleanchor == "x" and layout.xaxis.constrain == "domain"
    assert list(layout.xaxis.range) == [-0.5, len(figure.data[0].x) - 0.5]  # no padding beside the column
    rows = len(figure.data[0].y)
    assert layout.height <= MAX_HEIGHT
    cell = (layout.height - 140) / rows  # what the figure's height gives a cell: at least 1 px, not a sliver
    assert cell >= 1.0, cell


def test_a_tall_mosaic_of_many_heads_still_fills_the_width():
    """Many layers over a few heads (SmolLM2's 30 x 9) keep their stretched cells: square ones would leave a
    narrow plot in a tall figure; only one column of tiles is drawn square."""
    attentions = np.full((30, 3, 10, 10), 0.1, dtype=np.float32)
    layout = model_view(attentions).layout
    assert layout.yaxis.scaleanchor is None and layout.xaxis.constrain is None


def band_reading(matrix: np.ndarray) -> dict:
    """The panel as the heatmap colours it (difference_heatmap: [-limit, limit]): the distance-1 band and
    far cells in units of the limit, and how many cells are at least half as bright as the brightest."""
    limit = difference_heatmap(matrix, [f"w{i}" for i in range(len(matrix))], "cosine").layout.meta["limit"]
    distance = np.abs(np.subtract.outer(np.arange(len(matrix)), np.arange(len(matrix))))
    return {"band": float(matrix[distance == 1].mean() / limit), "far": float(matrix[distance >= 8].mean() / limit),
            "bright": int((matrix >= 0.5 * limit).sum())}


def test_the_learned_panel_shows_the_band_its_caption_promises(minilm):
    """"Trained, nearby positions are alike (a bright band near the diagonal); untrained, only the diagonal
    stands out." MiniLM's position 0 has a row ~5x longer than the rest: its plain product drew one bright
    cell; the cosine draws the band."""
    bench = Workbench(budget=2_000_000_000)
    trained = band_reading(positions.panel(bench, "learned", 24, 0, minilm, MINILM).matrix)
    assert trained["band"] >= 0.6 and trained["band"] - trained["far"] >= 0.2, trained
    assert trained["bright"] > 3 * 24, trained  # a band, not one cell and not the diagonal alone
    untrained = band_reading(positions.panel(bench, "learned", 24, 0).matrix)
    assert untrained["bright"] == 24 and untrained["band"] < 0.3, untrained  # the diagonal only
    assert "band near the diagonal" in STRINGS["learn_pos_reading_learned"]["en"]


def test_the_probe_table_header_spells_its_columns_and_aligns_them():
    block = {"n": 7, "n_skipped": 1, "n_scorable": {"source_to_target": 5, "target_to_source": 7},
             "best": {d: {"layer": 2, "head": 3, "accuracy": 0.5} for d in ("source_to_target", "target_to_source")},
             "baselines": {d: {"best_offset": -1, "best_offset_accuracy": 0.25, "first_word_accuracy": 0.0}
                           for d in ("source_to_target", "target_to_source")}}
    header, first, _ = format_table({"model": "m", "relations": {"subject_verb": block}}).splitlines()[1:]
    assert "scorable" in header.split() and "scor" not in header.split()
    end = header.index("scorable") + len("scorable")
    assert first[:end].split()[-1] == "5"  # the count ends under its header's last letter


@pytest.mark.parametrize("n", [1, 3])
def test_the_summed_verdict_caption_reads_for_one_token_and_many(n):
    caption = STRINGS["minpair_compares_sum"]["en"].format(n=n)
    assert f"{n} tokens" not in caption and f"{n} token" not in caption, caption  # no number before a noun
    assert caption.endswith(f": {n}).")
