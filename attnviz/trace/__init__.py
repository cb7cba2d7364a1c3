"""The data every layer passes on: a forward pass's trace (`traces.py`), the word rule that gives its words
(`words.py`) and the mosaic's tile edges (`tiles.py`). All are re-exported here, so `from attnviz.trace import X`
names any of them.

Imports only numpy, jieba (on the first Han text) and the standard library."""

from attnviz.trace.tiles import pool_edges, pooled_size
from attnviz.trace.traces import (
    AttentionTrace,
    BaseTrace,
    ReducedTrace,
    Seq2SeqTrace,
    punctuation_token_mask,
    special_token_mask,
)
from attnviz.trace.words import (
    HAN_SEGMENTER_BYTES,
    align_tokens_to_words,
    han_segmenter,
    han_segmenter_needed,
    is_cjk,
    is_han,
    is_punctuation,
    spans_of_joined_words,
    split_han,
    split_words,
)

__all__ = [
    "HAN_SEGMENTER_BYTES",
    "AttentionTrace",
    "BaseTrace",
    "ReducedTrace",
    "Seq2SeqTrace",
    "align_tokens_to_words",
    "han_segmenter",
    "han_segmenter_needed",
    "is_cjk",
    "is_han",
    "is_punctuation",
    "pool_edges",
    "pooled_size",
    "punctuation_token_mask",
    "spans_of_joined_words",
    "special_token_mask",
    "split_han",
    "split_words",
]
