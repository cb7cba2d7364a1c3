"""Cross-attention read as a word alignment between a translation's target and source (a `Seq2SeqTrace`).

Word level as the scoring rule's step 2 (docs/formats.md): W[i, j] = mean over the decoder positions of
target word i of the sum over the tokens of source word j of the cross-attention, in float64. A target word's
positions are the steps that *predict* its tokens (`label_word_of_token`), the usual way alignments are read
from an encoder-decoder's attention (Garg et al. 2019, "Jointly Learning to Align and Translate with
Transformer Models"). Special tokens (</s>, a language code given apart) belong to no word.
"""

from __future__ import annotations

import numpy as np


def word_matrix(cross: np.ndarray, target_word_of_token: list, source_word_of_token: list,
                n_target_words: int, n_source_words: int) -> np.ndarray:
    """cross [T, S] -> [n_target_words, n_source_words] float64; a word with no token is a row of zeros."""
    cross = np.asarray(cross, dtype=np.float64)
    if cross.shape != (len(target_word_of_token), len(source_word_of_token)):
        raise ValueError(f"cross-attention {cross.shape} does not match {len(target_word_of_token)} target and "
                         f"{len(source_word_of_token)} source tokens")
    summed = np.zeros((cross.shape[0], n_source_words))
    for s, word in enumerate(source_word_of_token):
        if word is not None:
            summed[:, word] += cross[:, s]
    out = np.zeros((n_target_words, n_source_words))
    counts = np.zeros(n_target_words)
    for t, word in enumerate(target_word_of_token):
        if word is not None:
            out[word] += summed[t]
            counts[word] += 1
    return np.divide(out, counts[:, None], out=out, where=counts[:, None] > 0)


def alignment(trace, layer: int, head: int | None = None) -> np.ndarray:
    """Word-level cross-attention of one layer: one head, or the mean over heads (head None)."""
    cross = trace.cross_attentions[layer]
    matrix = cross.mean(axis=0, dtype=np.float64) if head is None else cross[head]
    return word_matrix(matrix, trace.label_word_of_token, trace.word_of_token, len(trace.target_words),
                       len(trace.words))


def best_source_words(matrix: np.ndarray) -> list[tuple[int, int, float]]:
    """(target word, source word it attends to most, that weight) for every target word with any weight;
    ties go to the first source word."""
    rows = []
    for i, row in enumerate(np.asarray(matrix)):
        if row.size and row.max() > 0:
            j = int(np.argmax(row))
            rows.append((i, j, float(row[j])))
    return rows
