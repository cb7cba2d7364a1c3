"""Word-level attention by segment sums (issue 19, item 8): the same numbers as the definition, written as
the plain loop over tokens, and as the one-hot matrix products it replaced, at a cost linear in the
attention cells. Before, a 484-token SmolLM2 text took 25.7 s at word level against 2.4 s at token level
(benchmarks/bench_word_level.py measures both)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from attnviz.analysis.scoring import word_attention_matrix, word_one_hot


def loop_word_attention(attentions, word_of_token, n_words):
    """docs/formats.md, scoring step 2, as a loop: mean over word i's tokens of the sum over word j's."""
    n_layers, n_heads = attentions.shape[:2]
    out = np.zeros((n_layers, n_heads, n_words, n_words))
    tokens = [[t for t, w in enumerate(word_of_token) if w == word] for word in range(n_words)]
    for layer in range(n_layers):
        for head in range(n_heads):
            for i in range(n_words):
                for j in range(n_words):
                    if tokens[i] and tokens[j]:
                        total = sum(float(attentions[layer, head, t, s]) for t in tokens[i] for s in tokens[j])
                        out[layer, head, i, j] = total / len(tokens[i])
    return out


def one_hot_word_attention(attentions, word_of_token, n_words):
    """The implementation before issue 19: (M.T @ A @ M) / counts in float64."""
    hot = word_one_hot(word_of_token, n_words)
    counts = np.maximum(hot.sum(axis=0), 1.0)[:, None]
    return (hot.T @ (np.asarray(attentions, dtype=np.float64) @ hot)) / counts


def random_case(seed: int, n_tokens: int = 23, n_words: int = 9):
    rng = np.random.default_rng(seed)
    attentions = rng.random((2, 3, n_tokens, n_tokens), dtype=np.float32)
    attentions /= attentions.sum(-1, keepdims=True)
    # unsorted words, tokens of no word (specials), and a word without tokens (the last one)
    word_of_token = [None if rng.random() < 0.15 else int(rng.integers(0, n_words - 1)) for _ in range(n_tokens)]
    return attentions, word_of_token, n_words


@pytest.mark.parametrize("seed", range(4))
def test_segment_sums_equal_the_loop_and_the_old_products(seed):
    attentions, word_of_token, n_words = random_case(seed)
    matrix = word_attention_matrix(attentions, word_of_token, n_words)
    np.testing.assert_allclose(matrix, loop_word_attention(attentions, word_of_token, n_words), rtol=1e-12, atol=0)
    np.testing.assert_allclose(matrix, one_hot_word_attention(attentions, word_of_token, n_words),
                               rtol=1e-12, atol=0)
    assert not matrix[:, :, n_words - 1].any() and not matrix[:, :, :, n_words - 1].any()  # no tokens: 0
    rows, columns = [4, 1, 7], [0, 2, 4, 5, 8]  # a block of rows and columns, in any order
    np.testing.assert_array_equal(word_attention_matrix(attentions, word_of_token, n_words, np.float64, rows, columns),
                                  matrix[:, :, rows][:, :, :, columns])
    half = word_attention_matrix(attentions.astype(np.float16), word_of_token, n_words, np.float16)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, matrix, rtol=2e-3, atol=1e-3)


def test_a_uniform_head_keeps_its_ties():
    attentions = np.full((1, 1, 6, 6), 1 / 6, dtype=np.float32)
    matrix = word_attention_matrix(attentions, [None, 0, 1, 1, 2, 0], 3)
    # word 0 and word 1 have two tokens each, word 2 one: every sum over two tokens is the same 2/6
    w = matrix[0, 0]
    assert w[0, 0] == w[1, 1] == w[2, 0] == w[1, 0] == 2 * w[0, 2]


def cpu_seconds(work, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def test_word_level_costs_a_few_passes_over_the_attentions():
    """A SmolLM2-sized slice (9 heads, 480 tokens, 440 words): the word matrix costs a few passes over the
    cells, not T x T x n multiply-adds. CPU seconds of the process (every BLAS thread counted), against one
    float64 pass over the same cells; the one-hot products took about 150 such passes."""
    rng = np.random.default_rng(0)
    attentions = rng.random((3, 9, 480, 480), dtype=np.float32).astype(np.float16)
    word_of_token = sorted(int(w) for w in rng.integers(0, 440, size=480))
    n_words = max(word_of_token) + 1
    one_pass = cpu_seconds(lambda: np.asarray(attentions, dtype=np.float64).sum(axis=-1))
    words = cpu_seconds(lambda: word_attention_matrix(attentions, word_of_token, n_words, np.float16))
    assert words < 30 * max(one_pass, 1e-3), (words, one_pass)
