"""The reduced pass (attnviz.models.reduced_pass: a Reducer given the view reductions of
attnviz.models.view_reductions) equals the views of the full trace.

Tiny random models of several families (GQA, a sliding window, soft-capping, learned sinks, ALiBi, an
encoder, an encoder with local-band layers) run once with the ordinary recorder and once with a Reducer
that gets the probabilities in blocks of 8 rows; the pooled tiles of the token, hidden-special and word
views, the head profile and each head's recomputed window must match the full trace's within 1e-6
(float32 rounding: 1e-6 plus 1e-6 relative, as the mean distance is in tokens). SmolLM2 (about 300
tokens) and MiniLM do the same through LoadedModel.run_reduced. The Reducer's own mechanism, without
views, is tested in tests/transformer/test_reduce.py."""

from __future__ import annotations

import io
from dataclasses import fields

import numpy as np
import pytest
import torch

import attnviz
from attnviz import plots, trace
from attnviz.analysis import profile_heads, profile_reduced
from attnviz.analysis.export import reduced_npz
from attnviz.analysis.long_views import head_window_view, view_positions
from attnviz.analysis.views import attention_view
from attnviz.models.reduced_pass import reduced_trace
from attnviz.models.view_poolings import view_poolings
from attnviz.models.view_reductions import HeadProfileSums, MosaicTiles, RowArgmax
from attnviz.plots import pooling
from attnviz.plots.pooling import mosaic, mosaic_of_tiles, pool_tiles
from attnviz.trace import AttentionTrace
from attnviz.transformer.reducer import Reducer
from attnviz.workbench.views import aside_view
from tests.helpers.tiny_hf import block_bytes, tiny

T, TILE, ROWS = 40, 6, 8
FAMILIES = ["llama", "mistral", "gemma2", "gpt_oss", "bloom", "bert", "modernbert"]
TOLERANCE = dict(atol=1e-6, rtol=1e-6)


def token_fields(n: int, encoder: bool) -> dict:
    """Made-up tokens: specials at the start (and the end for an encoder), punctuation every 7th token, and
    words of one or two tokens, so every view and statistic has something to count."""
    special = [i == 0 or (encoder and i == n - 1) for i in range(n)]
    tokens = ["<s>" if s else ("," if i % 7 == 3 else f"w{i}") for i, s in enumerate(special)]
    word_of_token, word = [], -1
    for i, s in enumerate(special):
        if not s and (i % 3 != 2 or word < 0):
            word += 1  # every third token continues the word before it
        word_of_token.append(None if s else word)
    return dict(tokens=tokens, offsets=[(0, 0) if s else (i, i + 1) for i, s in enumerate(special)],
                sequence_ids=[None if s else 0 for s in special], input_ids=[],
                words=[f"w{k}" for k in range(word + 1)],
                word_of_token=word_of_token, truncated=False, special_mask=special,
                metadata={"causal": not encoder})


def both(module, n: int = T, keep_dtype=torch.float32):
    ids = torch.randint(3, 99, (1, n), generator=torch.Generator().manual_seed(2))
    info = token_fields(n, not module.config.causal) | {"input_ids": ids[0].tolist()}
    with torch.no_grad():
        full = module(ids, torch.ones_like(ids), torch.zeros_like(ids), with_logits=False)
    trace = AttentionTrace(**info, attentions=full.attentions[:, 0].float().numpy(), kv_group=module.kv_group)
    return trace, reduced_trace(module, info, tile=TILE, chunk_rows=ROWS, keep_dtype=keep_dtype)


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param, *both(tiny(request.param))


def test_pooled_tiles_equal_the_full_views(family):
    _, full, reduced = family
    for level, hide in (("token", False), ("token", True), ("word", False)):
        expected = pool_tiles(attention_view(full, level, hide).attentions, TILE)
        np.testing.assert_allclose(reduced.view_tiles(level, hide), expected, **TOLERANCE, err_msg=f"{level} {hide}")
    np.testing.assert_allclose(mosaic_of_tiles(reduced.view_tiles()), mosaic(full.attentions, TILE), **TOLERANCE)


def test_first_token_aside_tiles_equal_the_full_views(family):
    """A decoder's views with the first token set aside (the page's toggle) are reductions of the same pass."""
    name, full, reduced = family
    if not full.metadata["causal"]:
        with pytest.raises(ValueError, match="first token set aside"):
            reduced.view_tiles("token", False, first_aside=True)
        return
    for level, hide in (("token", False), ("token", True), ("word", False)):
        expected = pool_tiles(aside_view(full, level, hide, True).attentions, TILE)
        np.testing.assert_allclose(reduced.view_tiles(level, hide, first_aside=True), expected, **TOLERANCE,
                                   err_msg=f"{name} {level} {hide}")


def test_the_mosaic_figure_of_tiles_is_the_full_traces_figure(family):
    """plots.model_view of a reduced trace's tiles draws what it draws from the full maps: the same cells (uint8
    percent), labels and layout."""
    _, full, reduced = family
    labels = attention_view(full, "token").labels
    drawn = plots.model_view(full.attentions, row_labels=labels, max_cells=TILE)
    pooled = plots.model_view(reduced.view_tiles(), row_labels=labels, max_cells=TILE, pooled_tiles=True)
    levels = np.abs(np.asarray(drawn.data[0].z, float) - np.asarray(pooled.data[0].z, float))
    assert np.nanmax(levels) <= 1 and np.nanmean(levels) < 0.01  # a weight on a rounding edge may move a level
    assert pooled.data[0].y == drawn.data[0].y and pooled.layout.meta == drawn.layout.meta


def test_head_profile_equals_the_full_profile(family):
    _, full, reduced = family
    expected, got = profile_heads(full), profile_reduced(reduced)
    for f in fields(expected):
        np.testing.assert_allclose(getattr(got, f.name), getattr(expected, f.name), **TOLERANCE, err_msg=f.name)
    most = np.clip(1.0 - full.attentions.astype(np.float64).sum(-1), 0.0, None).max(-1)  # the most of one row
    np.testing.assert_allclose(reduced.statistics["sink_mass_max"], most, **TOLERANCE)


def test_the_reduced_export_holds_the_full_traces_views_and_loads_without_pickle(family):
    """The long page's NPZ (analysis.export.reduced_npz): what it draws, equal to the full trace's, readable
    without unpickling; not the queries and keys."""
    _, full, reduced = family
    held = np.load(io.BytesIO(reduced_npz(reduced)), allow_pickle=False)
    assert int(held["tile"]) == TILE and "queries" not in held.files and "keys" not in held.files
    assert {f"tiles_{name}" for name in reduced.tiles} | {f"statistics_{name}" for name in reduced.statistics} \
        <= set(held.files)
    np.testing.assert_allclose(held["tiles_token"], pool_tiles(attention_view(full, "token").attentions, TILE),
                               **TOLERANCE)
    np.testing.assert_allclose(held["tiles_word"], pool_tiles(attention_view(full, "word").attentions, TILE),
                               **TOLERANCE)
    np.testing.assert_allclose(held["statistics_entropy"], profile_heads(full).entropy, **TOLERANCE)
    strongest = np.take_along_axis(full.attentions, held["argmax"][..., None].astype(np.int64), -1)[..., 0]
    np.testing.assert_allclose(strongest, full.attentions.max(-1), atol=1e-6)  # each row's strongest key
    assert held["tokens"].tolist() == full.tokens and held["words"].tolist() == full.words
    assert held["word_of_token"].tolist() == [-1 if w is None else w for w in full.word_of_token]


def test_head_window_equals_the_full_maps_slice(family):
    _, full, reduced = family
    for layer in range(reduced.n_layers):
        for head in range(reduced.n_heads):
            got = reduced.head_window(layer, head, slice(5, 23), slice(2, 30))
            np.testing.assert_allclose(got, full.attentions[layer, head, 5:23, 2:30], atol=1e-6)
    np.testing.assert_allclose(reduced.head_window(1, 2, range(T)), full.attentions[1, 2], atol=1e-6)


def test_head_window_views_equal_the_full_views_slices(family):
    """The head detail of a long text: one head's window of every view (hidden specials, words, the first token
    set aside), recomputed from queries and keys, equals that slice of the full trace's view."""
    name, full, reduced = family
    options = [("token", False, False), ("token", True, False), ("word", False, False)]
    if full.metadata["causal"]:
        options += [("token", False, True), ("token", True, True), ("word", False, True)]
    for level, hide, aside in options:
        expected = aside_view(full, level, hide, aside)
        positions = view_positions(reduced, level, hide, aside)
        assert positions.labels == expected.labels, (name, level, hide, aside)
        for window in (slice(0, 9), slice(4, 17), slice(len(positions.labels) - 5, len(positions.labels))):
            for layer, head in ((0, 0), (reduced.n_layers - 1, reduced.n_heads - 1)):
                got = head_window_view(reduced, layer, head, positions, window)
                np.testing.assert_allclose(got, expected.attentions[layer, head][window, window], atol=1e-6,
                                           err_msg=f"{name} {level} {hide} {aside} {window}")


def test_deberta_is_refused_until_head_windows_know_its_position_terms():
    module = tiny("deberta-v2")
    with pytest.raises(ValueError, match="DeBERTa"):
        reduced_trace(module, token_fields(T, True) | {"input_ids": list(range(3, 3 + T))})


def test_float16_queries_and_keys_give_the_map_to_display_precision():
    full, reduced = both(tiny("llama"), keep_dtype=torch.float16)
    assert reduced.queries.dtype == np.float16
    np.testing.assert_allclose(reduced.head_window(2, 3, slice(0, T)), full.attentions[2, 3], atol=2e-3)


def test_the_tiles_are_pooled_on_the_edges_the_plots_pool_on():
    """One definition of a tile's edges (attnviz.trace.tiles), which the plots import."""
    assert pooling.pool_edges is trace.pool_edges and plots.pool_edges is trace.pool_edges
    assert trace.pool_edges(37, 6).tolist() == [0, 6, 12, 18, 24, 30, 37]


def test_the_view_reductions_keep_no_map_and_take_one_sequence():
    module = tiny("llama")
    special = np.zeros(T, bool)
    reductions = {"tiles": MosaicTiles(view_poolings(T, TILE, special, [0] * T)),
                  "statistics": HeadProfileSums(special, special), "argmax": RowArgmax()}
    reducer = Reducer(reductions, T, chunk_rows=ROWS)
    seen = []
    reducer.progress = lambda layer, n: seen.append((layer, n))
    with torch.no_grad():
        out = module(torch.randint(3, 99, (1, T)), record=reducer)
    assert out.attentions is None and seen == [(0, 3), (1, 3), (2, 3)]
    result, h = reducer.result(), module.config.n_heads
    assert result["tiles"]["token"].shape == (3, h, TILE, TILE) and result["argmax"].shape == (3, h, T)
    with pytest.raises(ValueError, match="one sequence"), torch.no_grad():
        module(torch.randint(3, 99, (2, T)), record=reducer)


def test_smollm_at_300_tokens(smollm):
    text = " ".join(f"The {w} of the cabinet, said the clerk, is on table {k}." for k, w in
                    enumerate(["key", "lock", "door", "book", "cup", "pen"] * 3))
    full = smollm.run(text)
    assert 250 <= len(full.tokens) <= 400
    reduced = smollm.run_reduced(text, tile=34, keep_dtype=torch.float32)
    for level, hide in (("token", False), ("word", False)):
        expected = pool_tiles(attention_view(full, level, hide).attentions, 34)
        np.testing.assert_allclose(reduced.view_tiles(level, hide), expected, **TOLERANCE)
    expected, got = profile_heads(full), profile_reduced(reduced)
    for f in fields(expected):
        np.testing.assert_allclose(getattr(got, f.name), getattr(expected, f.name), **TOLERANCE, err_msg=f.name)
    for layer, head in ((0, 0), (12, 4), (29, 8)):
        np.testing.assert_allclose(reduced.head_window(layer, head, slice(100, 200), slice(0, 250)),
                                   full.attentions[layer, head, 100:200, :250], atol=1e-6)


def test_minilm_with_its_special_tokens(minilm):
    """A real encoder: [CLS] and [SEP] (the hidden-special view), word pieces (the word view), no causal mask."""
    text = "The author that the critics praise writes beautiful, unbelievably intricate books. " * 6
    full = minilm.run(text)
    reduced = minilm.run_reduced(text, tile=20, chunk_rows=32, keep_dtype=torch.float32)
    assert "token_hide_special" in reduced.tiles
    for level, hide in (("token", False), ("token", True), ("word", False)):
        expected = pool_tiles(attention_view(full, level, hide).attentions, 20)
        np.testing.assert_allclose(reduced.view_tiles(level, hide), expected, **TOLERANCE, err_msg=f"{level} {hide}")
    expected, got = profile_heads(full), profile_reduced(reduced)
    for f in fields(expected):
        np.testing.assert_allclose(getattr(got, f.name), getattr(expected, f.name), **TOLERANCE, err_msg=f.name)
    np.testing.assert_allclose(reduced.head_window(5, 11, slice(10, 70)), full.attentions[5, 11, 10:70], atol=1e-6)


def test_run_says_when_the_full_maps_do_not_fit(smollm, monkeypatch):
    monkeypatch.setattr(smollm, "full_maps_limit", 100_000)  # 30 x 9 float32 heads: 9 tokens fit, not 10
    text = "The keys to the cabinet are on the table, said the clerk to the man who had lost them all again."
    n = len(smollm.encode(text).ids)
    with pytest.raises(ValueError, match=r"run_reduced") as error:
        smollm.run(text)
    assert f"{smollm.full_maps_bytes(n) / 1e9:.1f} GB" in str(error.value)
    reduced = smollm.run_reduced(text, tile=8)
    assert reduced.view_tiles().shape == (30, 9, 8, 8) and reduced.queries.dtype == np.float16
    assert smollm.run("The keys.").attentions.shape[-1] <= 4  # a short text still gets its full maps


def test_a_model_split_across_cpu_and_disk_reduces_as_the_whole(tiny_llama, tmp_path):
    """Each layer reduces on the device where it runs; here a block offloaded to disk runs on the CPU."""
    whole = attnviz.load(str(tiny_llama))
    split = attnviz.load(str(tiny_llama), device_map="auto", offload_folder=tmp_path,
                         max_memory={"cpu": 4 * block_bytes(whole), "disk": "10MB"})
    assert "disk" in split.module.hf_device_map.values()
    text = "The keys to the cabinet are on the table, and the cat sat on the mat."
    a, b = (m.run_reduced(text, tile=6, chunk_rows=4, keep_dtype=torch.float32) for m in (split, whole))
    for name in b.tiles:
        np.testing.assert_allclose(a.tiles[name], b.tiles[name], atol=1e-6)
    for name in b.statistics:
        np.testing.assert_allclose(a.statistics[name], b.statistics[name], atol=1e-6)
    np.testing.assert_allclose(a.queries, b.queries, atol=1e-6)
    assert np.array_equal(a.argmax, b.argmax)


@pytest.mark.slow
def test_a_model_loaded_at_512_tokens_reduces_a_longer_text_up_to_its_context(smollm):
    """`max_tokens` of run_reduced (and encode) cuts past the load's 512, up to the model's own context, with a
    copy of the tokenizer (the shared one keeps its cut); an encoder's cut keeps its closing special token."""
    text = " ".join(["The keys to the old cabinet are on the table."] * 120)  # about 1,300 tokens
    assert smollm.info.max_tokens == 512 and smollm.context_tokens == 8192
    assert len(smollm.encode(text).ids) == 512
    reduced = smollm.run_reduced(text, max_tokens=1000)
    assert len(reduced.tokens) == 1000 and reduced.truncated and reduced.queries.shape[2] == 1000
    assert len(smollm.encode(text).ids) == 512  # the model's own tokenizer is unchanged
    with pytest.raises(ValueError, match="max_tokens must be between 2 and this model's 8192"):
        smollm.encode(text, max_tokens=9000)
    from attnviz.loading.random_model import random_model

    encoder = random_model(max_tokens=64)
    cut = encoder.encode("a b c d e f g h i j k l", max_tokens=10)  # one token a byte: 23 + 2 specials
    assert len(cut.ids) == 10 and cut.tokens[0] == "[CLS]" and cut.tokens[-1] == "[SEP]", cut.tokens
