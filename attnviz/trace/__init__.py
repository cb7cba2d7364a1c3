"""The data every layer passes on: a forward pass's trace (`traces.py`) and the word rule that gives its
words (`words.py`). Both are re-exported here, so `from attnviz.trace import X` names any of them.

Imports only numpy, jieba (on the first Han text) and the standard library."""

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
    "punctuation_token_mask",
    "spans_of_joined_words",
    "special_token_mask",
    "split_han",
    "split_words",
]
