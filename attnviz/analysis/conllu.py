"""The CoNLL-U reader: a treebank's sentences, and their arcs as probe items.

The words of a sentence are its syntactic words (integer ids); `3-4` multiword ranges give their
surface form, and `8.1` empty nodes are skipped. Every arc with head != 0 is an item: source =
dependent, target = head, relation = DEPREL as written. Sentences end at a blank line; `#` lines are
comments. A sentence is read from its own text (`sentence_text`; docs/formats.md, "Probe items
and input formats").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from os import PathLike
from typing import BinaryIO

from attnviz.analysis import items
from attnviz.analysis.items import ProbeItem, sentence_items
from attnviz.analysis.lines import Lines, at_line, base_name, opened, shown

_RANGE_ID = re.compile(r"^\d+-\d+$")
_EMPTY_NODE_ID = re.compile(r"^\d+\.\d+$")
_INTEGER = re.compile(r"[0-9]+")  # str.isdigit also accepts '²', which int() refuses

# A treebank a replication card scores (clark2019: the Findings page's upload, `attnviz replicate --conllu`): every
# sentence is traced whole, so its arcs bound the card's time and its words a trace's memory. Tighter than
# items.MAX_ITEMS / MAX_ITEM_WORDS, and far above a real treebank's: UD EWT's dev split has 23,146 arcs in
# sentences of at most 75 words, its longest sentence anywhere about 160.
CARD_MAX_ARCS = 50_000
CARD_MAX_WORDS = 200


@dataclass(frozen=True)
class ConlluSentence:
    """The syntactic words of one CoNLL-U sentence with their 1-based heads (0 = root) and DEPRELs, its
    `# text` (None without one), whether a space follows each word (False after SpaceAfter=No; for the
    words of a multi-word token, its range line's), and its multi-word tokens: (first word, end word, form)
    with 0-based word indices [first, end), one per `3-4` range."""

    id: str
    words: tuple[str, ...]
    heads: tuple[int, ...]
    deprels: tuple[str, ...]
    text: str | None = None
    space_after: tuple[bool, ...] = ()
    ranges: tuple[tuple[int, int, str], ...] = ()
    upos: tuple[str, ...] = ()  # each word's universal part of speech (UPOS), "_" where the file has none

    @property
    def surface(self) -> list[tuple[str, int, int, bool]]:
        """The surface tokens (form, first word, end word, space after): a word outside a multi-word token,
        or a multi-word token's range."""
        spaced = self.space_after or (True,) * len(self.words)
        tokens, k, ranges = [], 0, iter(self.ranges)
        upcoming = next(ranges, None)
        while k < len(self.words):
            if upcoming is not None and upcoming[0] == k:
                first, end, form = upcoming
                tokens.append((form, first, end, spaced[end - 1]))
                k, upcoming = end, next(ranges, None)
            else:
                tokens.append((self.words[k], k, k + 1, spaced[k]))
                k += 1
        return tokens


def _space_after(misc: str) -> bool:
    return "SpaceAfter=No" not in misc.split("|")


def _check_form_length(form: str, where: str) -> None:
    if len(form) > items.MAX_WORD_CHARS:
        raise ValueError(f"{where}: FORM has {len(form)} characters; at most {items.MAX_WORD_CHARS} are read")


class _SentenceLines:
    """The sentence being read, line by line: its syntactic words as (line number, form, head, deprel),
    whether a space follows each, its multi-word ranges, and its `# sent_id` and `# text`."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, int, str]] = []
        self.spaced: list[bool] = []
        self.upos: list[str] = []
        self.ranges: list[tuple[int, int, str]] = []
        self.sent_id: str | None = None
        self.text: str | None = None
        self.range_end = 0  # the multi-word token being read covers the words before this (0-based) index
        self.range_line = 0
        self.range_space = True

    def comment(self, line: str) -> None:
        # `=(.*)` and strip: `=\s*(.*\S)` backtracks quadratically on a long run of spaces
        match = re.match(r"#\s*(sent_id|text)\s*=(.*)", line)
        if match and match.group(2).strip():
            if match.group(1) == "sent_id":
                self.sent_id = match.group(2).strip()
            else:
                self.text = match.group(2).strip()

    def add_range(self, columns: list[str], line_number: int, where: str) -> None:
        word_id, form = columns[0], columns[1]
        first, last = (int(part) for part in word_id.split("-"))
        if first != len(self.rows) + 1 or last < first or self.range_end > len(self.rows):
            raise ValueError(f"{where}: the multiword range {shown(word_id)[1:-1]} does not start at the "
                             f"next word ({len(self.rows) + 1}) or ends before it starts")
        if not form:
            raise ValueError(f"{where}: empty FORM")
        _check_form_length(form, where)
        self.ranges.append((first - 1, last, form))
        self.range_end, self.range_line, self.range_space = last, line_number, _space_after(columns[9])

    def add_word(self, columns: list[str], line_number: int, where: str, max_words: int) -> int:
        """Checks and keeps a syntactic word's line; its head (0: the root, no arc)."""
        word_id, form, head, deprel = columns[0], columns[1], columns[6], columns[7]
        if not _INTEGER.fullmatch(word_id):
            raise ValueError(f"{where}: ID must be an integer, a range or a decimal, got {shown(word_id)}")
        if int(word_id) != len(self.rows) + 1:
            raise ValueError(f"{where}: expected word ID {len(self.rows) + 1}, got {shown(word_id)[1:-1]}")
        if not form:
            raise ValueError(f"{where}: empty FORM")
        if len(self.rows) >= max_words:
            raise ValueError(f"{where}: a sentence of more than {max_words} words; split it")
        _check_form_length(form, where)
        if not _INTEGER.fullmatch(head):
            raise ValueError(f"{where}: HEAD must be an integer, got {shown(head)}")
        if int(head) == int(word_id):
            raise ValueError(f"{where}: word {shown(word_id)[1:-1]} is its own head")
        if not deprel or deprel == "_":
            raise ValueError(f"{where}: missing DEPREL")
        # a multi-word token's words take its range line's SpaceAfter
        self.spaced.append(_space_after(columns[9]) if len(self.rows) >= self.range_end else self.range_space)
        self.rows.append((line_number, form, int(head), deprel))
        self.upos.append(columns[3] or "_")
        return int(head)

    def finished(self, name: str) -> tuple[ConlluSentence, ...]:
        """The sentence read (none where no word line came), its heads and last range checked."""
        n_words = len(self.rows)
        if not n_words:
            return ()
        for line_number, _, head, _ in self.rows:
            if head > n_words:
                raise ValueError(f"{at_line(name, line_number)}: HEAD {head} is out of range for {n_words} words")
        if self.range_end > n_words:
            raise ValueError(f"{at_line(name, self.range_line)}: the multiword range ends after the sentence's "
                             "last word")
        sentence = ConlluSentence(
            id=self.sent_id if self.sent_id is not None else f"line{self.rows[0][0]}",
            words=tuple(row[1] for row in self.rows),
            heads=tuple(row[2] for row in self.rows),
            deprels=tuple(row[3] for row in self.rows),
            text=self.text,
            space_after=tuple(self.spaced),
            ranges=tuple(self.ranges),
            upos=tuple(self.upos),
        )
        return (sentence,)


def parse_conllu_sentences(text: str | bytes | BinaryIO, name: str = "<conllu>", most: int | None = None,
                           max_arcs: int | None = None, max_words: int | None = None) -> list[ConlluSentence]:
    """Sentences in file order; `id` is the `# sent_id` comment, else `line<N>` of its first word. With `most`,
    reading stops once that many sentences are read (a stream is read no further). A file of more than
    `max_arcs` arcs (items.MAX_ITEMS) or a sentence of more than `max_words` words (items.MAX_ITEM_WORDS) is
    refused at the line that crosses it, before the rest is read."""
    max_arcs = items.MAX_ITEMS if max_arcs is None else max_arcs  # read now: tests patch the module's
    max_words = items.MAX_ITEM_WORDS if max_words is None else max_words
    sentences: list[ConlluSentence] = []
    sentence, n_arcs = _SentenceLines(), 0
    lines = Lines(text, name)
    with lines.guard():
        for line_number, line in lines:
            if not line.strip():
                sentences.extend(sentence.finished(name))
                sentence = _SentenceLines()
                if most is not None and len(sentences) >= most:
                    return sentences
                continue
            if line.startswith("#"):
                sentence.comment(line)
                continue
            where = at_line(name, line_number)
            columns = line.split("\t")
            if len(columns) != 10:
                raise ValueError(f"{where}: expected 10 tab-separated columns, got {len(columns)}")
            if _EMPTY_NODE_ID.match(columns[0]):
                continue
            if _RANGE_ID.match(columns[0]):
                sentence.add_range(columns, line_number, where)
            elif sentence.add_word(columns, line_number, where, max_words) != 0:
                n_arcs += 1
                if n_arcs > max_arcs:
                    raise ValueError(f"{where}: more than {max_arcs} arcs (items); split the file")
        sentences.extend(sentence.finished(name))
    return sentences[:most]


def read_conllu_sentences(path: str | PathLike, most: int | None = None) -> list[ConlluSentence]:
    with opened(path) as f:
        return parse_conllu_sentences(f, name=base_name(path), most=most)


def _found_in(text: str, forms: list[str]) -> list[tuple[int, int]] | None:
    """The span of each form in `text`, found left to right with only whitespace before, between and after
    them; None when they cannot be (the text disagrees with the forms)."""
    spans, position = [], 0
    for form in forms:
        while position < len(text) and text[position].isspace():
            position += 1
        if not text.startswith(form, position):
            return None
        spans.append((position, position + len(form)))
        position += len(form)
    return spans if not text[position:].strip() else None


def _joined(surface) -> tuple[str, list[tuple[int, int]]]:
    """The surface forms joined with a space, except after a token marked SpaceAfter=No, and their spans."""
    pieces, spans, position = [], [], 0
    for k, (form, _, _, space_after) in enumerate(surface):
        spans.append((position, position + len(form)))
        gap = " " if space_after and k < len(surface) - 1 else ""
        pieces.append(form + gap)
        position += len(form) + len(gap)
    return "".join(pieces), spans


def sentence_text(sentence: ConlluSentence) -> tuple[str, tuple[tuple[int, int], ...], bool]:
    """What the model reads for a sentence, each syntactic word's span in it, and whether `# text` disagreed
    with the forms (docs/formats.md, "Probe items and input formats"): the `# text` when its surface
    forms are found in it left to right with only whitespace between; else (and without one) the surface
    forms joined with a space except after SpaceAfter=No. The words of a multi-word token share its span."""
    surface = sentence.surface
    forms = [form for form, _, _, _ in surface]
    found = None if sentence.text is None else _found_in(sentence.text, forms)
    disagreed = sentence.text is not None and found is None
    text, spans = (sentence.text, found) if found is not None else _joined(surface)
    word_spans = [None] * len(sentence.words)
    for (_, first, end, _), span in zip(surface, spans):
        for k in range(first, end):
            word_spans[k] = span
    return text, tuple(word_spans), disagreed


@dataclass(frozen=True)
class ConlluReading:
    """A treebank's items and what reading it its own way left out: arcs between two words of one
    multi-word token (they share a span, so no head can tell them apart) and the sentences whose `# text`
    disagreed with their forms (their joined forms were read instead)."""

    items: list[ProbeItem]
    sentences: int
    skipped_arcs: int
    disagreed: int


def conllu_reading(sentences: list[ConlluSentence], lang: str | None = None) -> ConlluReading:
    """Every head != 0 arc: source = dependent, target = head; `id` is `"<sent_id>/<dependent id>"`; the
    text and spans of `sentence_text`. Linear in the words: a sentence's words are checked and spanned
    once for all its arcs."""
    items: list[ProbeItem] = []
    skipped = disagreed = 0
    for sentence in sentences:
        text, spans, differs = sentence_text(sentence)
        disagreed += differs
        arcs = []
        for k, (head, deprel) in enumerate(zip(sentence.heads, sentence.deprels)):
            if head == 0:
                continue
            if spans[k] == spans[head - 1]:  # two words of one multi-word token
                skipped += 1
                continue
            arcs.append((deprel, k, head - 1, f"{sentence.id}/{k + 1}"))
        if arcs:
            items.extend(sentence_items(sentence.words, arcs, lang=lang, own_text=text, own_spans=spans))
    return ConlluReading(items, len(sentences), skipped, disagreed)


def conllu_items(sentences: list[ConlluSentence], lang: str | None = None) -> list[ProbeItem]:
    return conllu_reading(sentences, lang).items


def parse_conllu_reading(text: str | bytes | BinaryIO, name: str = "<conllu>", lang: str | None = None
                         ) -> ConlluReading:
    return conllu_reading(parse_conllu_sentences(text, name=name), lang=lang)


def parse_conllu(text: str | bytes | BinaryIO, name: str = "<conllu>", lang: str | None = None) -> list[ProbeItem]:
    return parse_conllu_reading(text, name=name, lang=lang).items


def read_conllu(path: str | PathLike, lang: str | None = None) -> list[ProbeItem]:
    with opened(path) as f:
        return parse_conllu(f, name=base_name(path), lang=lang)


def parse_card_treebank(text: str | bytes | BinaryIO, name: str = "<conllu>") -> ConlluReading:
    """A replication card's treebank: `parse_conllu_reading` held to CARD_MAX_ARCS and CARD_MAX_WORDS."""
    return conllu_reading(parse_conllu_sentences(text, name=name, max_arcs=CARD_MAX_ARCS, max_words=CARD_MAX_WORDS))


def read_card_treebank(path: str | PathLike) -> ConlluReading:
    with opened(path) as f:
        return parse_card_treebank(f, name=base_name(path))

