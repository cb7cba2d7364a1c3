"""The Learn page's positional schemes (attnviz/workbench/positions.py, attnviz/ui/learn_positions.py): each
panel's matrix is the position-only part of the score its formula says, checked against the modules and
functions the models run (HF's for T5's buckets); the section renders every scheme with its formula, says
when numbers are untrained, uses the loaded model's own positions, and keeps a hostile sentence as data."""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz.loading.registry import CONVERTERS
from attnviz.transformer.alibi import alibi_slopes
from attnviz.transformer.seq2seq import sinusoidal_positions
from attnviz.workbench import positions
from attnviz.workbench.shared import Workbench


@pytest.fixture(scope="module")
def bench():
    return Workbench(budget=2_000_000_000)


def toeplitz(m: np.ndarray) -> bool:
    """Every diagonal one value: the matrix depends on j - i only."""
    n = m.shape[0]
    return all(np.allclose(np.diag(m, k), np.diag(m, k)[0], atol=1e-4) for k in range(-n + 1, n))


def test_sinusoidal_and_rotary_depend_on_the_distance_only(bench):
    sin = positions.panel(bench, "sinusoidal", 12, 0)
    table = sinusoidal_positions(12, 512)
    assert sin.source == "exact" and np.allclose(sin.matrix, (table @ table.T / math.sqrt(512)).numpy())
    assert toeplitz(sin.matrix)  # sin a sin b + cos a cos b = cos(a - b), summed over frequencies
    rot = positions.panel(bench, "rotary", 12, 3)
    assert rot.source == "exact" and toeplitz(rot.matrix)
    assert np.argmax(rot.matrix[5]) == 5  # a vector agrees most with itself, unrotated
    assert not np.allclose(rot.matrix, positions.panel(bench, "rotary", 12, 4).matrix)  # one vector per head


def test_t5_panel_is_the_heads_bucket_bias(bench):
    from transformers.models.t5.modeling_t5 import T5Attention

    item = positions.panel(bench, "relative", 20, 2)
    assert item.source == "untrained" and item.n_heads == 8
    module = positions._tiny("t5")  # the same seed: the same table
    table = module.encoder_relative.embedding.weight.detach()
    relative = torch.arange(20)[None, :] - torch.arange(20)[:, None]
    buckets = T5Attention._relative_position_bucket(relative, True, 32, 128)
    assert np.allclose(item.matrix, table[buckets, 2].numpy())
    assert not np.allclose(item.matrix, item.matrix.T)  # keys before and after the query: other buckets


def test_alibi_panel_is_slope_times_key_on_visible_keys(bench):
    item = positions.panel(bench, "alibi", 8, 5)
    slope = float(alibi_slopes(16)[5])
    assert item.source == "exact" and item.n_heads == 16
    assert np.isnan(item.matrix[2, 3]) and np.isnan(item.matrix[0, 1])  # causal: later keys masked
    assert np.allclose(item.matrix[7], slope * np.arange(8))
    assert positions.panel(bench, "alibi", 8, 5 + 16).matrix is not None  # heads taken modulo


def test_learned_panel_untrained_and_from_a_loaded_model(bench):
    item = positions.panel(bench, "learned", 9, 0)
    assert item.source == "untrained"
    table = positions._tiny("bert").position_embedding.weight.detach()[:9]
    assert np.allclose(item.matrix, cosines(table), atol=1e-5)

    from attnviz.loading.random_model import random_model

    model = random_model(max_tokens=64)  # a loaded BERT-shaped model: its own table is used
    own = positions.panel(bench, "learned", 9, 0, model, "my-bert")
    mine = model.module.position_embedding.weight.detach()[:9]
    assert own.source == "loaded" and own.model == "my-bert"
    assert np.allclose(own.matrix, cosines(mine), atol=1e-4)


def cosines(table: torch.Tensor) -> np.ndarray:
    """cos(P_i, P_j) of a position table's rows: what the learned panel draws."""
    unit = table / table.norm(dim=-1, keepdim=True)
    return (unit @ unit.T).numpy()


def test_disentangled_slot(bench):
    item = positions.panel(bench, "disentangled", 9, 0)
    if positions.DEBERTA_TYPE in CONVERTERS:
        from attnviz.transformer.record import Recorder

        assert item.matrix is not None and item.matrix.shape == (9, 9) and item.source == "untrained"
        module = positions._tiny(positions.DEBERTA_TYPE)  # the same seed: the same weights
        ids = torch.full((1, 9), 5, dtype=torch.long)
        record = Recorder("score_terms")
        with torch.no_grad():
            module(ids, torch.ones_like(ids), torch.zeros_like(ids), with_logits=False, record=record)
        c2c, c2p, p2c = record.stacked("score_terms")[0, 0, :, 0].numpy()  # head 0's terms, [T, S] each
        assert np.ptp(c2c) < 1e-4  # one token everywhere: content against content is one number
        position = c2p + p2c
        assert np.allclose(item.matrix, position - position.mean(), atol=1e-4)
        assert np.ptp(item.matrix) > 1e-2
    else:
        assert item.source == "absent" and item.matrix is None


def test_positions_are_bounded():
    assert positions.n_positions(0) == positions.MIN_POSITIONS
    assert positions.n_positions(10_000) == positions.MAX_POSITIONS
    with pytest.raises(ValueError, match="unknown positional scheme"):
        positions.panel(Workbench(budget=10**8), "nope", 5, 0)


# --- The section on the Learn page

LEARN = str(Path(__file__).resolve().parents[2] / "app_pages" / "2_Learn.py")
HOSTILE = "<b>$x^2$</b> **bold** :red[red] `code`"


def test_section_renders_every_scheme_and_keeps_the_sentence_as_data():
    from streamlit.testing.v1 import AppTest

    from tests.conftest import MINILM, require_offline
    from tests.helpers.pages import chart

    require_offline(MINILM)
    at = AppTest.from_file(LEARN, default_timeout=300)
    at.query_params["text"] = HOSTILE
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(m.value == "**How position enters attention**" or "How position enters" in m.value
               for m in [*at.subheader, *at.markdown])
    latex = " ".join(e.value for e in at.latex)
    for formula in positions_formulas():
        assert formula in latex
    assert HOSTILE not in latex and "$x^2$" not in latex
    drawn = [s for s in positions.SCHEMES if s != "disentangled" or positions.DEBERTA_TYPE in CONVERTERS]
    for scheme in drawn:
        figure = chart(at, f"learn_pos_{scheme}_chart")
        ticks = [html.unescape(x) for x in figure["layout"]["xaxis"]["ticktext"]]
        assert ticks[:2] == ["<", "b"] or "b" in ticks  # the sentence's words are tick labels, as text
        assert all("<b>" not in x for x in figure["layout"]["xaxis"]["ticktext"])  # escaped for plotly
    # MiniLM (the sidebar's offline model) has learned positions: its own table, not the untrained stand-in
    captions = " ".join(c.value for c in at.caption)
    assert "the loaded model's own numbers" in captions
    assert any("tiny untrained" in i.value for i in at.info)  # T5 offline: said so
    assert not any(HOSTILE in m.value for m in [*at.markdown, *at.caption])
    at.select_slider(key="learn_pos_head").set_value(5).run()
    assert not at.exception
    assert chart(at, "learn_pos_alibi_chart")["data"][0]["z"] is not None


def positions_formulas():
    from attnviz.ui.learn_positions import FORMULAS

    return [FORMULAS[s] for s in positions.SCHEMES]


def test_a_real_t5_another_page_loaded_replaces_the_stand_in():
    """On the host: a T5 the Translate page loaded (here a tiny one under t5-small's name) gives its own bias."""
    from attnviz.models.loaded_seq2seq import LoadedSeq2Seq, seq2seq_info
    from tests.helpers.seq2seq import hf_t5, ours_from

    bench = Workbench(budget=2_000_000_000)
    before = positions.panel(bench, "relative", 10, 1)
    module = ours_from(hf_t5(True))
    model = LoadedSeq2Seq(module, None, seq2seq_info(module, "google-t5/t5-small", "(test)", "t5", 64))
    bench.model_keys.put("google-t5/t5-small", "t5-key", 64)
    bench.models.put("t5-key", model, 1_000_000)
    after = positions.panel(bench, "relative", 10, 1)
    assert before.source == "untrained" and after.source == "loaded" and after.model == "google-t5/t5-small"
    assert np.allclose(after.matrix, module.position_bias("encoder", 10, 10)[0, 1].detach().numpy())
