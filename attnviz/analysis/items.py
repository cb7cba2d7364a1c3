"""Relation probe items and the readers that make them: probe JSONL, CoNLL-U treebanks, WinoBias.

A `ProbeItem` is one sentence given as words plus one gold arc `source -> target` (0-based word
indices). Every reader returns `list[ProbeItem]` and raises `ValueError` naming the source and the
1-based line number of the first malformed line. `read_*` take a path; `parse_*` take the text
itself (a streamlit upload, a test string), so the UI needs no file.

Files come from anonymous visitors (the Head Finder page), so every failure is that ValueError,
never a traceback: bytes must be UTF-8 (a BOM is accepted), errors name the file by the name the
caller gives (`read_*` give the base name, never a server path), and an unexpected exception on a
line (JSON nested too deeply, say) is reported as that line's error. `detect_format` guesses the
format of an upload from its name and first line.

Formats (docs/architecture.md):
- Probe JSONL: one JSON object a line with `relation`, `words`, `source`, `target` and optional `sep`,
  `lang`, `id`. Blank lines are skipped; unknown keys are ignored.
- CoNLL-U: the syntactic words (integer ids) of each sentence; `3-4` multiword ranges and `8.1` empty
  nodes are skipped. Every arc with head != 0 is an item: source = dependent, target = head,
  relation = DEPREL as written. Sentences end at a blank line; `#` lines are comments.
- WinoBias: `<index> <sentence>` with bracketed mentions. The pronoun mention is the source and the
  last word of the other mention is the target; relation `coreference`. Tokenisation: brackets are
  removed, the line is split on whitespace, and trailing punctuation is peeled off each piece, one
  character a word (`"him]."` gives `him`, `.`); leading and inner punctuation stays (`'s`,
  `didn't`). 30 of the 1,584 dev lines bracket a second pronoun that refers to the same mention
  (`... because [he] needed to cut [his] hair.`): the first pronoun is the source, so every line
  gives exactly one item.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from os import PathLike
from pathlib import Path, PurePath

from attnviz.trace import is_punctuation, spans_of_joined_words

# Stated limits (docs/architecture.md, "Probe items and input formats"). A real treebank passes them
# easily (UD EWT's longest sentence has about 160 words, its longest word 143 characters; EWT's
# training set about 200,000 arcs); a file beyond them is refused at the line that crosses them.
MAX_ITEM_WORDS = 1_000  # words of one item (a CoNLL-U sentence, a JSONL item, a WinoBias line)
MAX_WORD_CHARS = 1_000  # characters of one word
MAX_ITEMS = 250_000  # items of one file (CoNLL-U: arcs)

PRONOUNS = frozenset(
    {
        "he", "she", "him", "her", "his", "hers", "himself", "herself",
        "they", "them", "their", "theirs", "themselves", "themself",
        "it", "its", "itself",
    }
)  # fmt: skip


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
            _require(
                isinstance(value, int) and not isinstance(value, bool),
                f"{name} must be an integer word index, got {_shown(value)}",
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
        raise ValueError(f"every word must be a non-empty string, got {_shown(list(words))}")
    longest = max(map(len, words))
    if longest > MAX_WORD_CHARS:
        raise ValueError(f"a word has {longest} characters; at most {MAX_WORD_CHARS} are read")
    for word in words:
        _require_text(word, "a word")


def _check_own_text(text, spans, n_words: int) -> None:
    """An item's own text: a string, and one span [start, end) in it per word, in order; spans are disjoint
    or identical (the words of one multi-word token share its span)."""
    _require(isinstance(text, str) and spans is not None, "own_text and own_spans go together")
    _require_text(text, "the text")
    spans = list(spans)
    _require(len(spans) == n_words, f"{len(spans)} spans for {n_words} words")
    previous = (0, 0)
    for span in spans:
        _require(isinstance(span, tuple | list) and len(span) == 2
                 and all(isinstance(v, int) and not isinstance(v, bool) for v in span), f"bad span {_shown(span)}")
        start, end = span
        _require(0 <= start < end <= len(text), f"span {_shown(tuple(span))} is outside the text")
        _require(tuple(span) == previous or start >= previous[1], "spans must be in order and disjoint or equal")
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
    _require(isinstance(sep, str), f"sep must be a string, got {_shown(sep)}")
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


_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _require_text(value: str, what: str) -> None:
    # A lone surrogate (a JSON "\ud800" escape json.loads accepts) is no text: encoding it to UTF-8,
    # as a tokenizer or a web page must, fails far from the file that brought it.
    if not value.isascii() and _SURROGATE.search(value):
        raise ValueError(f"{what} holds a lone surrogate (a \\ud800-\\udfff escape), which is not text")


def _require(condition: bool, message: str) -> None:
    # Malformed input is a ValueError throughout (docs/architecture.md), wrong JSON types included.
    if not condition:
        raise ValueError(message)


def _where(name: str, line_number: int) -> str:
    return f"{name}, line {line_number}"


def _shown(value: object, limit: int = 80) -> str:
    # A hostile line can hold megabytes; an error message quotes only its start.
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _position(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of text[index], lines numbered as the parsers number them."""
    lines = (text[:index] + "x").splitlines()
    return len(lines), len(lines[-1])


def _as_text(data: str | bytes, name: str) -> str:
    if isinstance(data, bytes):
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise ValueError(f"{_where(name, 1)}: the file is UTF-16 text; save it as UTF-8")
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            before = data[: error.start].decode("utf-8-sig")
            line, column = _position(before, len(before))
            raise ValueError(
                f"{_where(name, line)}: not UTF-8 text (byte 0x{data[error.start]:02x} at column {column})"
            ) from None
    text = data.removeprefix("\ufeff")
    surrogate = None if text.isascii() else _SURROGATE.search(text)
    if surrogate:  # only a str can hold one: UTF-8 bytes cannot encode it
        line, column = _position(text, surrogate.start())
        raise ValueError(f"{_where(name, line)}: not text (a lone surrogate at column {column})")
    nul = text.find("\x00")
    if nul >= 0:  # UTF-16 without a BOM, or a binary file that happens to decode
        line, column = _position(text, nul)
        raise ValueError(f"{_where(name, line)}: not a text file (NUL character at column {column})")
    return text


class _Lines:
    """The numbered lines of a file; `guard()` reports any error while parsing as that of the line reached."""

    def __init__(self, data: str | bytes, name: str) -> None:
        self.name, self.number = name, 0
        self._lines = _as_text(data, name).splitlines()

    def __iter__(self):
        for number, line in enumerate(self._lines, start=1):
            self.number = number
            yield number, line

    @contextmanager
    def guard(self):
        try:
            yield
        except Exception as error:  # even a bug of ours must not show a visitor a traceback
            if isinstance(error, ValueError) and str(error).startswith(f"{self.name}, line "):
                raise  # already names its line
            if isinstance(error, RecursionError):
                problem = "nested too deeply"
            elif isinstance(error, ValueError):
                problem = str(error)
            else:
                problem = f"could not be read ({type(error).__name__})"
            raise ValueError(f"{_where(self.name, self.number)}: {problem}") from None


def json_line(line: str, where: str) -> object:
    """The JSON value of one line, as the JSONL readers take it: invalid JSON, or a string holding a
    lone surrogate (a `\\ud800` escape, which json.loads accepts), is a ValueError starting with `where`."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not valid JSON ({error.msg})") from None
    if _SURROGATE_ESCAPE.search(line):  # rare: only then is the decoded value searched
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"{where}: a lone surrogate escape (\\ud800-\\udfff without its pair) is not text"
            ) from None
    return record


def _read(path: str | PathLike) -> bytes:
    return Path(path).read_bytes()


def _base_name(path: str | PathLike) -> str:
    return Path(path).name


# ---------------------------------------------------------------------------------------------
# Probe JSONL


def parse_probes(text: str | bytes, name: str = "<probes>") -> list[ProbeItem]:
    items = []
    lines = _Lines(text, name)
    with lines.guard():
        for line_number, line in lines:
            if not line.strip():
                continue
            where = _where(name, line_number)
            if len(items) >= MAX_ITEMS:
                raise ValueError(f"{where}: more than {MAX_ITEMS} items; split the file")
            record = json_line(line, where)
            _require(isinstance(record, dict), f"{where}: expected a JSON object, got {type(record).__name__}")
            missing = [key for key in ("relation", "words", "source", "target") if key not in record]
            if missing:
                raise ValueError(f"{where}: missing key(s) {', '.join(missing)}")
            relation, words, sep = record["relation"], record["words"], record.get("sep", " ")
            lang, item_id = record.get("lang"), record.get("id")
            if not isinstance(relation, str) or not relation:
                raise ValueError(f"{where}: relation must be a non-empty string, got {_shown(relation)}")
            _require(isinstance(words, list), f"{where}: words must be a list of strings, got {_shown(words)}")
            _require(isinstance(sep, str), f"{where}: sep must be a string, got {_shown(sep)}")
            _require(lang is None or isinstance(lang, str), f"{where}: lang must be a string, got {_shown(lang)}")
            try:
                item = ProbeItem(
                    relation=relation,
                    words=tuple(words),
                    source=record["source"],
                    target=record["target"],
                    sep=sep,
                    lang=lang,
                    id=None if item_id is None else str(item_id),
                )
            except ValueError as error:
                raise ValueError(f"{where}: {error}") from None
            items.append(item)
    return items


def read_probes(path: str | PathLike) -> list[ProbeItem]:
    return parse_probes(_read(path), name=_base_name(path))


# ---------------------------------------------------------------------------------------------
# CoNLL-U

_RANGE_ID = re.compile(r"^\d+-\d+$")
_EMPTY_NODE_ID = re.compile(r"^\d+\.\d+$")
_INTEGER = re.compile(r"[0-9]+")  # str.isdigit also accepts '²', which int() refuses


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


def parse_conllu_sentences(text: str | bytes, name: str = "<conllu>") -> list[ConlluSentence]:
    """Sentences in file order; `id` is the `# sent_id` comment, else `line<N>` of its first word."""
    sentences: list[ConlluSentence] = []
    # (line number, form, head, deprel) of the current sentence's syntactic words
    rows: list[tuple[int, str, int, str]] = []
    spaced: list[bool] = []
    ranges: list[tuple[int, int, str]] = []
    range_space = True
    sent_id: str | None = None
    sent_text: str | None = None
    range_end = 0  # the multi-word token being read covers the words before this (0-based) index
    range_line = 0
    n_arcs = 0

    def flush() -> None:
        if not rows:
            return
        for line_number, _, head, _ in rows:
            if head > len(rows):
                raise ValueError(
                    f"{_where(name, line_number)}: HEAD {head} is out of range for {len(rows)} words"
                )
        if range_end > len(rows):
            raise ValueError(f"{_where(name, range_line)}: the multiword range ends after the sentence's last word")
        sentences.append(
            ConlluSentence(
                id=sent_id if sent_id is not None else f"line{rows[0][0]}",
                words=tuple(row[1] for row in rows),
                heads=tuple(row[2] for row in rows),
                deprels=tuple(row[3] for row in rows),
                text=sent_text,
                space_after=tuple(spaced),
                ranges=tuple(ranges),
            )
        )

    lines = _Lines(text, name)
    with lines.guard():
        for line_number, line in lines:
            if not line.strip():
                flush()
                rows, spaced, ranges, sent_id, sent_text, range_end = [], [], [], None, None, 0
                continue
            if line.startswith("#"):
                # `=(.*)` and strip: `=\s*(.*\S)` backtracks quadratically on a long run of spaces
                match = re.match(r"#\s*(sent_id|text)\s*=(.*)", line)
                if match and match.group(2).strip():
                    if match.group(1) == "sent_id":
                        sent_id = match.group(2).strip()
                    else:
                        sent_text = match.group(2).strip()
                continue
            where = _where(name, line_number)
            columns = line.split("\t")
            if len(columns) != 10:
                raise ValueError(f"{where}: expected 10 tab-separated columns, got {len(columns)}")
            word_id, form, head, deprel = columns[0], columns[1], columns[6], columns[7]
            if _EMPTY_NODE_ID.match(word_id):
                continue
            if _RANGE_ID.match(word_id):
                first, last = (int(part) for part in word_id.split("-"))
                if first != len(rows) + 1 or last < first or range_end > len(rows):
                    raise ValueError(f"{where}: the multiword range {_shown(word_id)[1:-1]} does not start at the "
                                     f"next word ({len(rows) + 1}) or ends before it starts")
                if not form:
                    raise ValueError(f"{where}: empty FORM")
                if len(form) > MAX_WORD_CHARS:
                    raise ValueError(f"{where}: FORM has {len(form)} characters; at most {MAX_WORD_CHARS} are read")
                ranges.append((first - 1, last, form))
                range_end, range_line, range_space = last, line_number, _space_after(columns[9])
                continue
            if not _INTEGER.fullmatch(word_id):
                raise ValueError(f"{where}: ID must be an integer, a range or a decimal, got {_shown(word_id)}")
            if int(word_id) != len(rows) + 1:
                raise ValueError(f"{where}: expected word ID {len(rows) + 1}, got {_shown(word_id)[1:-1]}")
            if not form:
                raise ValueError(f"{where}: empty FORM")
            if len(rows) >= MAX_ITEM_WORDS:
                raise ValueError(f"{where}: a sentence of more than {MAX_ITEM_WORDS} words; split it")
            if len(form) > MAX_WORD_CHARS:
                raise ValueError(f"{where}: FORM has {len(form)} characters; at most {MAX_WORD_CHARS} are read")
            if not _INTEGER.fullmatch(head):
                raise ValueError(f"{where}: HEAD must be an integer, got {_shown(head)}")
            if int(head) == int(word_id):
                raise ValueError(f"{where}: word {_shown(word_id)[1:-1]} is its own head")
            if not deprel or deprel == "_":
                raise ValueError(f"{where}: missing DEPREL")
            if int(head) != 0:
                n_arcs += 1
                if n_arcs > MAX_ITEMS:
                    raise ValueError(f"{where}: more than {MAX_ITEMS} arcs (items); split the file")
            # a multi-word token's words take its range line's SpaceAfter
            spaced.append(_space_after(columns[9]) if len(rows) >= range_end else range_space)
            rows.append((line_number, form, int(head), deprel))
        flush()
    return sentences


def read_conllu_sentences(path: str | PathLike) -> list[ConlluSentence]:
    return parse_conllu_sentences(_read(path), name=_base_name(path))


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
    with the forms (docs/architecture.md, "Probe items and input formats"): the `# text` when its surface
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


def parse_conllu_reading(text: str | bytes, name: str = "<conllu>", lang: str | None = None) -> ConlluReading:
    return conllu_reading(parse_conllu_sentences(text, name=name), lang=lang)


def parse_conllu(text: str | bytes, name: str = "<conllu>", lang: str | None = None) -> list[ProbeItem]:
    return parse_conllu_reading(text, name=name, lang=lang).items


def read_conllu(path: str | PathLike, lang: str | None = None) -> list[ProbeItem]:
    return parse_conllu(_read(path), name=_base_name(path), lang=lang)


# ---------------------------------------------------------------------------------------------
# WinoBias

_WINOBIAS_LINE = re.compile(r"^(\d+) (.*)$")


def _split_winobias_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Words of bracket-free text and their character spans (see the module docstring)."""
    words, spans = [], []
    for match in re.finditer(r"\S+", text):
        piece, start = match.group(), match.start()
        end = len(piece)
        while end > 1 and is_punctuation(piece[end - 1]):
            end -= 1
        words.append(piece[:end])
        spans.append((start, start + end))
        for k in range(end, len(piece)):
            words.append(piece[k])
            spans.append((start + k, start + k + 1))
    return words, spans


def _parse_winobias_line(sentence: str) -> ProbeItem:
    clean, mentions, opened = [], [], None
    for char in sentence:
        if char == "[":
            if opened is not None:
                raise ValueError("nested '['")
            opened = len(clean)
        elif char == "]":
            if opened is None:
                raise ValueError("']' without '['")
            mentions.append((opened, len(clean)))
            opened = None
        else:
            clean.append(char)
    if opened is not None:
        raise ValueError("'[' without ']'")
    words, spans = _split_winobias_words("".join(clean))
    # Spans are sorted and disjoint, so a mention's words are found by bisection: a line of
    # 100,000 mentions must not scan its words 100,000 times.
    starts, ends = [ws for ws, _ in spans], [we for _, we in spans]
    mention_words = []
    for start, end in mentions:
        inside = range(bisect_right(ends, start), bisect_left(starts, end))
        if not inside:
            raise ValueError("an empty bracketed mention")
        mention_words.append(list(inside))
    is_pronoun = [len(m) == 1 and words[m[0]].lower() in PRONOUNS for m in mention_words]
    pronouns = [m for m, yes in zip(mention_words, is_pronoun) if yes]
    others = [m for m, yes in zip(mention_words, is_pronoun) if not yes]
    if not pronouns or len(others) != 1:
        shown = [" ".join(words[w] for w in m) for m in mention_words]
        raise ValueError(f"expected one pronoun mention and one other mention, got {_shown(shown)}")
    return ProbeItem("coreference", tuple(words), pronouns[0][0], others[0][-1], lang="en")


def parse_winobias(text: str | bytes, name: str = "<winobias>") -> list[ProbeItem]:
    """One `coreference` item a non-blank line; `id` is the line's own index number."""
    items = []
    lines = _Lines(text, name)
    with lines.guard():
        for line_number, line in lines:
            if not line.strip():
                continue
            where = _where(name, line_number)
            if len(items) >= MAX_ITEMS:
                raise ValueError(f"{where}: more than {MAX_ITEMS} items; split the file")
            match = _WINOBIAS_LINE.match(line.strip())
            if not match:
                raise ValueError(f"{where}: expected '<index> <sentence>'")
            try:
                item = _parse_winobias_line(match.group(2))
            except ValueError as error:
                raise ValueError(f"{where}: {error}") from None
            items.append(
                ProbeItem(item.relation, item.words, item.source, item.target, lang=item.lang, id=match.group(1))
            )
    return items


def read_winobias(path: str | PathLike) -> list[ProbeItem]:
    return parse_winobias(_read(path), name=_base_name(path))


# ---------------------------------------------------------------------------------------------
# Any of the three formats by name (the CLI reads files, the Head Finder page uploaded bytes)

FORMATS = ("probes", "conllu", "winobias")


def parse_items(kind: str, text: str | bytes, name: str) -> list[ProbeItem]:
    """Items of a probe JSONL, CoNLL-U (read from its own text) or WinoBias text."""
    return parse_item_file(kind, text, name).items


def parse_item_file(kind: str, text: str | bytes, name: str) -> ConlluReading:
    """`parse_items` with what the reading left out (a treebank's skipped arcs and disagreeing texts; zero
    for the other formats, which keep the words they are given)."""
    if kind == "probes":
        items = parse_probes(text, name=name)
    elif kind == "conllu":
        return parse_conllu_reading(text, name=name)
    elif kind == "winobias":
        items = parse_winobias(text, name=name)
    else:
        raise ValueError(f"unknown item format {kind!r}; known: {', '.join(FORMATS)}")
    return ConlluReading(items, len({item.text for item in items}), 0, 0)


_FORMAT_OF_SUFFIX = {
    ".jsonl": "probes", ".json": "probes", ".conllu": "conllu", ".dev": "winobias", ".test": "winobias",
}  # fmt: skip
_WINOBIAS_INDEX = re.compile(r"\d+ ")


def _looks_like_winobias(line: str) -> bool:
    # r"\d+ .*\[.*\]" without the regex: its two `.*` backtracked quadratically on a line of '['
    index = _WINOBIAS_INDEX.match(line)
    if index is None:
        return False
    opened = line.find("[", index.end())
    return opened >= 0 and line.rfind("]") > opened


def detect_format(name: str, data: str | bytes) -> str:
    """One of FORMATS from the name's extension, else (`.txt`, none) from the first line that is
    neither blank nor a `#` comment: `{` is probe JSONL, 10 tab-separated columns CoNLL-U and
    `<index> <sentence with [mentions]>` WinoBias (whose files are `*.txt.dev`, `*.txt.test`)."""
    kind = _FORMAT_OF_SUFFIX.get(PurePath(name).suffix.lower())
    if kind is not None:
        return kind
    for line_number, line in enumerate(_as_text(data, name).splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("{"):
            return "probes"
        if line.count("\t") == 9:
            return "conllu"
        if _looks_like_winobias(stripped):
            return "winobias"
        raise ValueError(
            f"{_where(name, line_number)}: cannot tell the format; expected a probe JSONL object ({{...}}), "
            "a CoNLL-U word line (10 tab-separated columns) or a WinoBias line ('<index> <sentence>' "
            "with [bracketed] mentions)"
        )
    raise ValueError(f"{name}: no content to tell the format from")


def read_items(kind: str, path: str | PathLike) -> list[ProbeItem]:
    return parse_items(kind, _read(path), _base_name(path))


def read_item_file(kind: str, path: str | PathLike) -> ConlluReading:
    return parse_item_file(kind, _read(path), _base_name(path))
