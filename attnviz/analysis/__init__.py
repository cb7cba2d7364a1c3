"""Analysis of attention traces: probe items, relation scoring (Clark et al. 2019), head profiles.

Works on `AttentionTrace` objects only (numpy, the standard library and `attnviz.trace`), never on a
model, and never mutates its input; `runner.score_model` takes any object with `.run(text)`.
"""

from attnviz.analysis.conllu import (
    ConlluReading,
    ConlluSentence,
    conllu_items,
    conllu_reading,
    parse_conllu,
    parse_conllu_reading,
    parse_conllu_sentences,
    read_conllu,
    read_conllu_sentences,
    sentence_text,
)
from attnviz.analysis.detectors import detect_heads
from attnviz.analysis.formats import FORMATS, detect_format, parse_item_file, parse_items, read_item_file, read_items
from attnviz.analysis.items import ProbeItem
from attnviz.analysis.probe_jsonl import parse_probes, read_probes
from attnviz.analysis.profile import (
    HeadProfile,
    profile_head,
    profile_heads,
    profile_reduced,
    punctuation_tokens,
    special_tokens,
)
from attnviz.analysis.runner import score_model
from attnviz.analysis.scoring import (
    DIRECTIONS,
    Baseline,
    BestHead,
    RelationScore,
    ScoreAccumulator,
    predictions,
    rank_heads,
    score_items,
    scoring_peak_bytes,
    to_json,
    word_attention,
    word_attention_matrix,
    word_one_hot,
)
from attnviz.analysis.winobias import PRONOUNS, parse_winobias, read_winobias

__all__ = [
    "DIRECTIONS",
    "FORMATS",
    "PRONOUNS",
    "Baseline",
    "BestHead",
    "ConlluSentence",
    "HeadProfile",
    "ProbeItem",
    "RelationScore",
    "ScoreAccumulator",
    "ConlluReading",
    "conllu_items",
    "conllu_reading",
    "detect_format",
    "detect_heads",
    "parse_conllu",
    "parse_conllu_reading",
    "parse_conllu_sentences",
    "parse_item_file",
    "parse_items",
    "parse_probes",
    "parse_winobias",
    "predictions",
    "profile_head",
    "profile_heads",
    "profile_reduced",
    "punctuation_tokens",
    "rank_heads",
    "read_conllu",
    "read_conllu_sentences",
    "read_item_file",
    "read_items",
    "sentence_text",
    "read_probes",
    "read_winobias",
    "score_items",
    "score_model",
    "scoring_peak_bytes",
    "special_tokens",
    "to_json",
    "word_attention",
    "word_attention_matrix",
    "word_one_hot",
]
