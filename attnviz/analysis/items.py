"""Relation probe items: `ProbeItem`, its checks, and the readers' stated limits.

A `ProbeItem` is one sentence given as words plus one gold arc `source -> target` (0-based word
indices). The readers that make them, one module a format: `probe_jsonl.py`, `conllu.py`,
`winobias.py`; `formats.py` picks one by name or by a file's first line; `lines.py` is the line reader
under them all (docs/formats.md, "Probe items and input formats").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from attnviz.analysis.lines import require, require_text, shown
from attnviz.trace import spans_of_joined_words

# Stated limits (docs/formats.md, "Probe items and input formats"). A real treebank passes them
# easily (UD EWT's longest sentence has about 160 words, its longest word 143 characters; EWT's
# training set about 200,000 arcs); a file beyond them is refused at the line that crosses them. The
# readers read them here at each call (`items.MAX_ITEMS`), so a test that lowers one lowers it for all.
MAX_ITEM_WORDS = 1_000  # words of one item (a CoNLL-U sentence, a JSONL item, a WinoBias line)
MAX_WORD_CHARS = 1_000  # characters of one word
MAX_ITEMS = 250_000  # items of one file (CoNLL-U: arcs)


@dataclass(frozen=True)
class ProbeItem:
    """One sentence as words and one gold arc: `source` should point at `target` (word indices)."""

    relation: str
    words: tuple[str, ...]
    source: int
    target: int
    sep: str = " "
    lang: str | None = None
    id: str | None = None
    # A treebank's own text and each word's span in it (the words of one multi-word token share a span);
    # None: the text is `sep.join(words)`, each word its own span.
    own_text: str | None = None
    own_spans: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self) -> None:
        words = tuple(self.words)
        object.__setattr__(self, "words", words)
        _check_words(words)
        if self.own_text is not None or self.own_spans is not None:
            _check_own_text(self.own_text, self.own_spans, len(words))
            object.__setattr__(self, "own_spans", tuple(tuple(span) for span in self.own_spans))
        self._check_arc()

    def _check_arc(self) -> None:
        for name in ("source", "target"):
            value = getattr(self, name)
            require(
                isinstance(value, int) and not isinstance(value, bool),
                f"{name} must be an integer word index, got {shown(value)}",
            )
            if not 0 <= value < len(self.words):
                raise ValueError(f"{name}={value} is out of range for {len(self.words)} words")
        if self.source == self.target:
            raise ValueError(f"source and target are the same word ({self.source})")

    # Cached, and shared by the items of one sentence (`sentence_items`): reading them once per item
    # must not join a long sentence once per arc.
    @cached_property
    def text(self) -> str:
        return self.sep.join(self.words) if self.own_text is None else self.own_text

    @cached_property
    def _spans(self) -> tuple[tuple[int, int], ...]:
        if self.own_spans is not None:
            return self.own_spans
        return tuple(spans_of_joined_words(list(self.words), self.sep)[1])

    @property
    def word_spans(self) -> list[tuple[int, int]]:
        """Character span [start, end) of each word in `self.text`."""
        return list(self._spans)


def _check_words(words: tuple) -> None:
    """The checks of an item's words: some, at most MAX_ITEM_WORDS, each a non-empty string of at most
    MAX_WORD_CHARS characters that is text (no lone surrogate, as a JSON `\\ud800` escape gives)."""
    if not words:
        raise ValueError("an item needs words, got none")
    if len(words) > MAX_ITEM_WORDS:
        raise ValueError(f"{len(words)} words; at most {MAX_ITEM_WORDS} words an item are read")
    if not all(isinstance(word, str) and word for word in words):
        raise ValueError(f"every word must be a non-empty string, got {shown(list(words))}")
    longest = max(map(len, words))
    if longest > MAX_WORD_CHARS:
        raise ValueError(f"a word has {longest} characters; at most {MAX_WORD_CHARS} are read")
    for word in words:
        require_text(word, "a word")


def _check_own_text(text, spans, n_words: int) -> None:
    """An item's own text: a string, and one span [start, end) in it per word, in order; spans are disjoint
    or identical (the words of one multi-word token share its span)."""
    require(isinstance(text, str) and spans is not None, "own_text and own_spans go together")
    require_text(text, "the text")
    spans = list(spans)
    require(len(spans) == n_words, f"{len(spans)} spans for {n_words} words")
    previous = (0, 0)
    for span in spans:
        require(isinstance(span, tuple | list) and len(span) == 2
                 and all(isinstance(v, int) and not isinstance(v, bool) for v in span), f"bad span {shown(span)}")
        start, end = span
        require(0 <= start < end <= len(text), f"span {shown(tuple(span))} is outside the text")
        require(tuple(span) == previous or start >= previous[1], "spans must be in order and disjoint or equal")
        previous = (start, end)


def sentence_items(
    words: tuple[str, ...], arcs: list[tuple[str, int, int, str | None]], sep: str = " ", lang: str | None = None,
    own_text: str | None = None, own_spans: tuple[tuple[int, int], ...] | None = None,
) -> list[ProbeItem]:
    """The items of one sentence, one per `(relation, source, target, id)` arc, checked as `ProbeItem`
    checks them but in time linear in the sentence: the words are checked, joined and spanned once
    and shared by every item (a sentence of n words has up to n - 1 arcs)."""
    words = tuple(words)
    _check_words(words)
    require(isinstance(sep, str), f"sep must be a string, got {shown(sep)}")
    if own_text is not None or own_spans is not None:
        _check_own_text(own_text, own_spans, len(words))
        own_spans = tuple(tuple(span) for span in own_spans)
    first = None
    items = []
    for relation, source, target, item_id in arcs:
        item = object.__new__(ProbeItem)
        for name, value in (("relation", relation), ("words", words), ("source", source), ("target", target),
                            ("sep", sep), ("lang", lang), ("id", item_id), ("own_text", own_text),
                            ("own_spans", own_spans)):
            object.__setattr__(item, name, value)
        item._check_arc()
        if first is None:
            first = item
        else:  # the first item's text and spans, computed once
            item.__dict__["text"] = first.text
            item.__dict__["_spans"] = first._spans
        items.append(item)
    return items
