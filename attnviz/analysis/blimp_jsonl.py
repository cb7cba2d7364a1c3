"""Minimal-pair items and their reader: BLiMP's JSONL (Warstadt et al. 2020), which the built-in pairs
(attnviz/probesets/pairs.jsonl) also use.

One JSON object a line: `sentence_good`, `sentence_bad` (required); `one_prefix_prefix`,
`one_prefix_word_good`, `one_prefix_word_bad` (the "one-prefix method": the two sentences are the same
prefix followed by a different word; all three or none); optional `id` (else BLiMP's `pairID`), `lang`,
`phenomenon` (else BLiMP's `UID`). Other keys (BLiMP's `field`, `linguistics_term`, ...) are ignored;
blank lines are skipped.

Files may come from anonymous visitors, so the reader is held to the rules of `lines.py`: bytes must be
UTF-8 (a BOM is accepted), every failure is a ValueError naming the file and the 1-based line, nothing
a line holds is quoted beyond a short start, and sizes are bounded (MAX_SENTENCE_CHARS a sentence,
MAX_PAIRS a file), since every pair costs forward passes.

A one-prefix pair must be consistent: each sentence starts with the prefix, then optional whitespace,
then its word; the continuation a decoder scores is that whitespace plus the word (" are" in English,
"把" in Chinese, where no space separates words).
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike

from attnviz.analysis.lines import base_name, json_object, line_records, opened, require, require_text, shown

MAX_SENTENCE_CHARS = 1_000
MAX_PAIRS = 100_000
PREFIX_KEYS = ("one_prefix_prefix", "one_prefix_word_good", "one_prefix_word_bad")


@dataclass(frozen=True)
class MinimalPair:
    """A grammatical sentence and its minimally different ungrammatical twin."""

    good: str
    bad: str
    prefix: str | None = None
    word_good: str | None = None
    word_bad: str | None = None
    id: str | None = None
    lang: str | None = None
    phenomenon: str | None = None

    def __post_init__(self) -> None:
        for name in ("good", "bad"):
            value = getattr(self, name)
            require(isinstance(value, str) and value.strip() != "",
                     f"sentence_{name} must be a non-empty string, got {shown(value)}")
            require(len(value) <= MAX_SENTENCE_CHARS,
                     f"sentence_{name} has {len(value)} characters; at most {MAX_SENTENCE_CHARS} are read")
            require_text(value, f"sentence_{name}")
        require(self.good != self.bad, "sentence_good and sentence_bad are the same text")
        trio = (self.prefix, self.word_good, self.word_bad)
        if all(v is None for v in trio):
            return
        require(all(v is not None for v in trio), f"give all of {', '.join(PREFIX_KEYS)} or none of them")
        require(all(isinstance(v, str) for v in trio),
                 f"{', '.join(PREFIX_KEYS)} must be strings, got {shown(list(trio))}")
        require(self.prefix.strip() != "", "one_prefix_prefix is empty")
        for side in ("good", "bad"):
            word = getattr(self, f"word_{side}")
            require(word.strip() != "" and word == word.strip(),
                     f"one_prefix_word_{side} must be a word without surrounding spaces, got {shown(word)}")
            require(self.continuation(side) is not None,
                     f"sentence_{side} does not start with one_prefix_prefix followed by one_prefix_word_{side}")
        require(self.word_good != self.word_bad, "one_prefix_word_good and one_prefix_word_bad are the same")

    @property
    def has_prefix(self) -> bool:
        return self.prefix is not None

    def sentence(self, side: str) -> str:
        return self.good if side == "good" else self.bad

    def continuation(self, side: str) -> str | None:
        """The text after the prefix up to the end of the side's word (its leading space included), or
        None when the sentence does not continue the prefix with that word (or there is no prefix)."""
        if self.prefix is None:
            return None
        sentence, word = self.sentence(side), self.word_good if side == "good" else self.word_bad
        if not sentence.startswith(self.prefix):
            return None
        rest = sentence[len(self.prefix):]
        gap = len(rest) - len(rest.lstrip())
        return rest[: gap + len(word)] if rest[gap:].startswith(word) else None


def _optional_text(record: dict, key: str, where: str) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    # BLiMP's pairID is a string, but an integer id is harmless; anything else is a mistake.
    require(isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)),
             f"{where}: {key} must be a string, got {shown(value)}")
    text = str(value)
    require(len(text) <= MAX_SENTENCE_CHARS, f"{where}: {key} is longer than {MAX_SENTENCE_CHARS} characters")
    return text


def _pair(line: str, where: str) -> MinimalPair:
    record = json_object(line, where, ("sentence_good", "sentence_bad"))
    present = [key for key in PREFIX_KEYS if record.get(key) is not None]
    if present and len(present) < len(PREFIX_KEYS):
        absent = [key for key in PREFIX_KEYS if key not in present]
        raise ValueError(f"{where}: has {', '.join(present)} but not {', '.join(absent)}")
    # MinimalPair's own refusals name no line: the line reader gives them this one
    return MinimalPair(
        good=record["sentence_good"],
        bad=record["sentence_bad"],
        prefix=record.get("one_prefix_prefix"),
        word_good=record.get("one_prefix_word_good"),
        word_bad=record.get("one_prefix_word_bad"),
        id=_optional_text(record, "id", where) or _optional_text(record, "pairID", where),
        lang=_optional_text(record, "lang", where),
        phenomenon=_optional_text(record, "phenomenon", where) or _optional_text(record, "UID", where),
    )


def parse_pairs(text: str | bytes, name: str = "<pairs>", limit: int | None = None) -> list[MinimalPair]:
    """The pairs of a BLiMP-style JSONL text, in file order; at most `limit` (the rest is not parsed)."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    return line_records(text, name, _pair, most=MAX_PAIRS, what="pairs", limit=limit)


def read_pairs(path: str | PathLike, limit: int | None = None) -> list[MinimalPair]:
    """`parse_pairs` of a file; errors name its base name, never the server's path."""
    with opened(path) as f:  # read as a stream: with `limit`, no further than its last pair
        return parse_pairs(f, name=base_name(path), limit=limit)
