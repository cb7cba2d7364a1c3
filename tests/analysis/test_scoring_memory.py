"""Scoring a long probe item in bounded memory (issue 16): word attention holds only the rows an item
reads and the words that have tokens, one block at a time, and `scoring_peak_bytes` bounds the peak
from shapes alone. Before, a 1,500-word item built [L, H, n, n] float64 over all its words plus a
masked copy: 2.5 GB for a 6 x 12-head model, growing with n²."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from attnviz.analysis import scoring
from attnviz.analysis.items import ProbeItem
from attnviz.analysis.scoring import predictions, scoring_peak_bytes, word_attention_matrix
from attnviz.trace import AttentionTrace, align_tokens_to_words
from tests.conftest import ROOT

# Run in a fresh interpreter: a trace of T tokens for one item of n one-token words, attentions
# [L, H, T, T] float32 row-stochastic; prints the peak RSS growth (VmHWM) of scoring alone and the
# estimate. `all_rows`: one item per word (every row read, as a CoNLL-U sentence's arcs).
SCRIPT = r"""
import json, sys
import numpy as np
from attnviz.analysis import items as item_module, scoring
from attnviz.analysis.items import ProbeItem, sentence_items
from attnviz.trace import AttentionTrace

def hwm():
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))

def case(L, H, T, n, all_rows, seed):
    words = tuple(f"w{i}" for i in range(n))
    if all_rows:
        items = sentence_items(words, [("dep", k, 0, None) for k in range(1, n)])
    else:
        items = [ProbeItem("r", words, n // 2, n // 3)]
    T = min(T, n + 2)
    kept = T - 2
    offsets = [(0, 0)] + items[0].word_spans[:kept] + [(0, 0)]
    attentions = np.random.default_rng(seed).random((L, H, T, T), dtype=np.float32)
    attentions /= attentions.sum(-1, keepdims=True)
    trace = AttentionTrace(tokens=["t"] * T, offsets=offsets, sequence_ids=[None] + [0] * kept + [None],
                           input_ids=list(range(T)), attentions=attentions, kv_group=list(range(H)), words=[],
                           word_of_token=[None] * T, truncated=kept < n, texts=(items[0].text,))
    return trace, items

L, H, T, n, all_rows = json.loads(sys.argv[1])
item_module.MAX_ITEM_WORDS = 10**6  # the scorer is measured, not the reader's limit
scoring.score_items(*zip(*[(t, i) for t, items in [case(1, 2, 40, 30, all_rows, 1)] for i in items]))  # warm up
trace, items = case(L, H, T, n, all_rows, 0)
before = hwm()
scoring.score_items([trace] * len(items), items)
grown = hwm() - before
print(json.dumps({"grown": grown, "estimate": scoring.scoring_peak_bytes(L, H, T, n, None if all_rows else 2)}))
"""


@pytest.mark.parametrize(
    "shape",
    [
        (2, 4, 1502, 1500, False),  # one item of 1,500 words, every word one token (a decoder's trace)
        (6, 12, 512, 1500, False),  # the same item truncated at 512 tokens (a 6 x 12-head encoder)
        (2, 2, 1000, 1000, True),  # a 1,000-word sentence with an item per word: every row read
    ],
)
def test_scoring_a_long_item_stays_under_its_estimate(shape):
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(shape)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1",
                                                       "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    grown, estimate = measured["grown"], measured["estimate"]
    assert grown <= estimate, measured
    assert estimate <= 4 * max(grown, 2**20), measured  # an estimate, not a wild upper bound
    assert estimate < 40 * 2**20  # before: [L, H, n, n] float64 twice, 2.5 GB for the encoder case


def test_the_estimate_grows_with_the_tokens_not_with_the_words_squared():
    # words beyond the tokens have no column: they cost their python objects only
    assert scoring_peak_bytes(12, 12, 512, 10_000) < 1.5 * scoring_peak_bytes(12, 12, 512, 1_000)
    assert scoring_peak_bytes(12, 12, 512, 160, 2) < scoring_peak_bytes(12, 12, 512, 160)
    assert scoring_peak_bytes(12, 12, 512, 160, 0) < 3 * 2**20  # nothing to read: python objects only
    # a 144-head model at 512 tokens, every row read: about the float64 work blocks, tens of MB
    assert scoring_peak_bytes(12, 12, 512, 512) < 64 * 2**20
    assert scoring_peak_bytes(12, 12, 512, 160) < 64 * 2**20


def random_case(rng, n_words, n_layers=2, n_heads=3):
    words = [f"w{i}" for i in range(n_words)]
    item = ProbeItem("r", words, 0, 1)
    offsets, sequence_ids = [(0, 0)], [None]
    for start, end in item.word_spans:
        cut = int(rng.integers(start + 1, end + 1))  # one or two tokens a word
        offsets += [(start, cut)] + ([(cut, end)] if cut < end else [])
    keep = int(rng.integers(len(offsets) // 2, len(offsets) + 1))  # truncated: later words have no token
    offsets = offsets[:keep] + [(0, 0)]
    sequence_ids = [None] + [0] * (keep - 1) + [None]
    n_tokens = len(offsets)
    logits = rng.standard_normal((n_layers, n_heads, n_tokens, n_tokens)) * 3
    attentions = np.exp(logits - logits.max(-1, keepdims=True))
    attentions = (attentions / attentions.sum(-1, keepdims=True)).astype(np.float32)
    attentions[0, 0] = 1.0 / n_tokens  # a uniform head: ties everywhere
    trace = AttentionTrace(tokens=["t"] * n_tokens, offsets=offsets, sequence_ids=sequence_ids,
                           input_ids=list(range(n_tokens)), attentions=attentions, kv_group=list(range(n_heads)),
                           words=[], word_of_token=[None] * n_tokens, truncated=True, texts=(item.text,))
    return trace, item


@pytest.mark.parametrize("seed", range(5))
def test_rows_and_columns_are_the_full_matrix_bit_for_bit(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    trace, item = random_case(rng, 30)
    word_of_token = align_tokens_to_words(trace.offsets, trace.sequence_ids, item.word_spans)
    assert scoring._align_to_sorted_words(trace.offsets, trace.sequence_ids, item.word_spans) == word_of_token
    full = word_attention_matrix(trace.attentions, word_of_token, 30)
    with_tokens = sorted({w for w in word_of_token if w is not None})
    rows = sorted(int(w) for w in rng.choice(with_tokens, size=6, replace=False))
    part = word_attention_matrix(trace.attentions, word_of_token, 30, np.float64, rows, with_tokens)
    np.testing.assert_array_equal(part, full[:, :, rows][:, :, :, with_tokens])
    for sink_aware in (False, True):
        expected = predictions(full, sink_aware)[:, :, rows]
        np.testing.assert_array_equal(
            scoring._row_predictions(trace.attentions, word_of_token, list(range(30)), rows, sink_aware), expected)
        monkeypatch.setattr(scoring, "BLOCK_BYTES", 1)  # a block of one row, one head: the same numbers
        np.testing.assert_array_equal(
            scoring._row_predictions(trace.attentions, word_of_token, list(range(30)), rows, sink_aware), expected)
        np.testing.assert_array_equal(word_attention_matrix(trace.attentions, word_of_token, 30), full)
        monkeypatch.undo()
