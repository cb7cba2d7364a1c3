"""Any of the three item formats by name (the CLI reads files, the Head Finder page uploaded bytes), and
which format an upload is (`detect_format`, from its name and first line)."""

from __future__ import annotations

import re
from os import PathLike
from pathlib import PurePath

from attnviz.analysis.conllu import ConlluReading, parse_conllu_reading
from attnviz.analysis.items import ProbeItem
from attnviz.analysis.lines import as_text, at_line, base_name, opened
from attnviz.analysis.probe_jsonl import parse_probes
from attnviz.analysis.winobias import parse_winobias

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
    for line_number, line in enumerate(as_text(data, name).splitlines(), start=1):
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
            f"{at_line(name, line_number)}: cannot tell the format; expected a probe JSONL object ({{...}}), "
            "a CoNLL-U word line (10 tab-separated columns) or a WinoBias line ('<index> <sentence>' "
            "with [bracketed] mentions)"
        )
    raise ValueError(f"{name}: no content to tell the format from")


def read_items(kind: str, path: str | PathLike) -> list[ProbeItem]:
    with opened(path) as f:
        return parse_items(kind, f, base_name(path))


def read_item_file(kind: str, path: str | PathLike) -> ConlluReading:
    with opened(path) as f:
        return parse_item_file(kind, f, base_name(path))
