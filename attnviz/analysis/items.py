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

    def __post_init__(self) -> None:
        words = tuple(self.words)
        object.__setattr__(self, "words", words)
        _check_words(words)
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
        return self.sep.join(self.words)

    @cached_property
    def _spans(self) -> tuple[tuple[int, int], ...]:
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


def sentence_items(
    words: tuple[str, ...], arcs: list[tuple[str, int, int, str | None]], sep: str = " ", lang: str | None = None
) -> list[ProbeItem]:
    """The items of one sentence, one per `(relation, source, target, id)` arc, checked as `ProbeItem`
    checks them but in time linear in the sentence: the words are checked, joined and spanned once
    and shared by every item (a sentence of n words has up to n - 1 arcs)."""
    words = tuple(words)
    _check_words(words)
    _require(isinstance(sep, str), f"sep must be a string, got {_shown(sep)}")
    first = None
    items = []
    for relation, source, target, item_id in arcs:
        item = object.__new__(ProbeItem)
        for name, value in (("relation", relation), ("words", words), ("source", source), ("target", target),
                            ("sep", sep), ("lang", lang), ("id", item_id)):
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
    """The syntactic words of one CoNLL-U sentence with their 1-based heads (0 = root) and DEPRELs."""

    id: str
    words: tuple[str, ...]
    heads: tuple[int, ...]
    deprels: tuple[str, ...]


def parse_conllu_sentences(text: str | bytes, name: str = "<conllu>") -> list[ConlluSentence]:
    """Sentences in file order; `id` is the `# sent_id` comment, else `line<N>` of its first word."""
    sentences: list[ConlluSentence] = []
    # (line number, form, head, deprel) of the current sentence's syntactic words
    rows: list[tuple[int, str, int, str]] = []
    sent_id: str | None = None
    n_arcs = 0

    def flush() -> None:
        if not rows:
            return
        for line_number, _, head, _ in rows:
            if head > len(rows):
                raise ValueError(
                    f"{_where(name, line_number)}: HEAD {head} is out of range for {len(rows)} words"
                )
        sentences.append(
            ConlluSentence(
                id=sent_id if sent_id is not None else f"line{rows[0][0]}",
                words=tuple(row[1] for row in rows),
                heads=tuple(row[2] for row in rows),
                deprels=tuple(row[3] for row in rows),
            )
        )

    lines = _Lines(text, name)
    with lines.guard():
        for line_number, line in lines:
            if not line.strip():
                flush()
                rows, sent_id = [], None
                continue
            if line.startswith("#"):
                # `=(.*)` and strip: `=\s*(.*\S)` backtracks quadratically on a long run of spaces
                match = re.match(r"#\s*sent_id\s*=(.*)", line)
                if match and match.group(1).strip():
                    sent_id = match.group(1).strip()
                continue
            where = _where(name, line_number)
            columns = line.split("\t")
            if len(columns) != 10:
                raise ValueError(f"{where}: expected 10 tab-separated columns, got {len(columns)}")
            word_id, form, head, deprel = columns[0], columns[1], columns[6], columns[7]
            if _RANGE_ID.match(word_id) or _EMPTY_NODE_ID.match(word_id):
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
            rows.append((line_number, form, int(head), deprel))
        flush()
    return sentences


def read_conllu_sentences(path: str | PathLike) -> list[ConlluSentence]:
    return parse_conllu_sentences(_read(path), name=_base_name(path))


def conllu_items(sentences: list[ConlluSentence], sep: str = " ", lang: str | None = None) -> list[ProbeItem]:
    """Every head != 0 arc: source = dependent, target = head; `id` is `"<sent_id>/<dependent id>"`.

    Linear in the words: a sentence's words are checked and joined once for all its arcs."""
    items: list[ProbeItem] = []
    for sentence in sentences:
        arcs = [(deprel, k, head - 1, f"{sentence.id}/{k + 1}")
                for k, (head, deprel) in enumerate(zip(sentence.heads, sentence.deprels)) if head != 0]
        if arcs:
            items.extend(sentence_items(sentence.words, arcs, sep=sep, lang=lang))
    return items


def parse_conllu(
    text: str | bytes, sep: str = " ", name: str = "<conllu>", lang: str | None = None
) -> list[ProbeItem]:
    return conllu_items(parse_conllu_sentences(text, name=name), sep=sep, lang=lang)


def read_conllu(path: str | PathLike, sep: str = " ", lang: str | None = None) -> list[ProbeItem]:
    return parse_conllu(_read(path), sep=sep, name=_base_name(path), lang=lang)


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


def parse_items(kind: str, text: str | bytes, name: str, sep: str = " ") -> list[ProbeItem]:
    """Items of a probe JSONL, CoNLL-U (`sep` joins its words) or WinoBias text."""
    if kind == "probes":
        return parse_probes(text, name=name)
    if kind == "conllu":
        return parse_conllu(text, sep=sep, name=name)
    if kind == "winobias":
        return parse_winobias(text, name=name)
    raise ValueError(f"unknown item format {kind!r}; known: {', '.join(FORMATS)}")


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


def read_items(kind: str, path: str | PathLike, sep: str = " ") -> list[ProbeItem]:
    return parse_items(kind, _read(path), _base_name(path), sep)
