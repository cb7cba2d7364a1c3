"""The line reader under every item file (probe JSONL, CoNLL-U, WinoBias, BLiMP's JSONL) and the refusals
the readers share.

Files come from anonymous visitors (the Head Finder page), so every failure is a `ValueError` starting
`<name>, line <N>: ` (1-based), never a traceback: bytes must be UTF-8 (a BOM is accepted), errors name
the file by the name the caller gives (`read_*` give the base name, never a server path), nothing a line
holds is quoted beyond a short start (`shown`), and an unexpected exception on a line (JSON nested too
deeply, say) is reported as that line's error (`Lines.guard`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import TypeVar

Record = TypeVar("Record")

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def require(condition: bool, message: str) -> None:
    # Malformed input is a ValueError throughout (docs/layers.md, "Conventions"), wrong JSON types included.
    if not condition:
        raise ValueError(message)


def require_text(value: str, what: str) -> None:
    # A lone surrogate (a JSON "\ud800" escape json.loads accepts) is no text: encoding it to UTF-8,
    # as a tokenizer or a web page must, fails far from the file that brought it.
    if not value.isascii() and _SURROGATE.search(value):
        raise ValueError(f"{what} holds a lone surrogate (a \\ud800-\\udfff escape), which is not text")


def shown(value: object, limit: int = 80) -> str:
    # A hostile line can hold megabytes; an error message quotes only its start.
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def at_line(name: str, line_number: int) -> str:
    """How an error names its place: `<name>, line <N>`."""
    return f"{name}, line {line_number}"


def _position(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of text[index], lines numbered as the parsers number them."""
    lines = (text[:index] + "x").splitlines()
    return len(lines), len(lines[-1])


def as_text(data: str | bytes, name: str) -> str:
    """The text of a file's bytes (UTF-8, a BOM accepted) or of a str, refused where it is not text."""
    if isinstance(data, bytes):
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise ValueError(f"{at_line(name, 1)}: the file is UTF-16 text; save it as UTF-8")
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            before = data[: error.start].decode("utf-8-sig")
            line, column = _position(before, len(before))
            raise ValueError(
                f"{at_line(name, line)}: not UTF-8 text (byte 0x{data[error.start]:02x} at column {column})"
            ) from None
    text = data.removeprefix("\ufeff")
    surrogate = None if text.isascii() else _SURROGATE.search(text)
    if surrogate:  # only a str can hold one: UTF-8 bytes cannot encode it
        line, column = _position(text, surrogate.start())
        raise ValueError(f"{at_line(name, line)}: not text (a lone surrogate at column {column})")
    nul = text.find("\x00")
    if nul >= 0:  # UTF-16 without a BOM, or a binary file that happens to decode
        line, column = _position(text, nul)
        raise ValueError(f"{at_line(name, line)}: not a text file (NUL character at column {column})")
    return text


class Lines:
    """The numbered lines of a file; `guard()` reports any error while parsing as that of the line reached."""

    def __init__(self, data: str | bytes, name: str) -> None:
        self.name, self.number = name, 0
        self._lines = as_text(data, name).splitlines()

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
            raise ValueError(f"{at_line(self.name, self.number)}: {problem}") from None


def line_records(
    data: str | bytes, name: str, parse: Callable[[str, str], Record], most: int, what: str,
    limit: int | None = None,
) -> list[Record]:
    """`parse(line, where)` of every non-blank line, in file order, for the formats of one record a line
    (probe JSONL, WinoBias, BLiMP's JSONL); `where` is the line's `at_line`. A file of more than `most`
    records is refused at the line that crosses it (`more than <most> <what>; split the file`); with
    `limit`, reading stops after that many (the rest is not parsed). An error `parse` raises without a
    place is that line's (`Lines.guard`)."""
    records: list[Record] = []
    lines = Lines(data, name)
    with lines.guard():
        for line_number, line in lines:
            if limit is not None and len(records) >= limit:
                break
            if not line.strip():
                continue
            where = at_line(name, line_number)
            if len(records) >= most:
                raise ValueError(f"{where}: more than {most} {what}; split the file")
            records.append(parse(line, where))
    return records


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


def json_object(line: str, where: str, keys: tuple[str, ...]) -> dict:
    """The JSON object of one line, which must hold every one of `keys` (other keys are the caller's)."""
    record = json_line(line, where)
    require(isinstance(record, dict), f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [key for key in keys if key not in record]
    if missing:
        raise ValueError(f"{where}: missing key(s) {', '.join(missing)}")
    return record


# The most a file named on the command line or by the API may hold. The largest UD treebanks are under this; the
# app's uploads have their own, smaller limit (.streamlit/config.toml).
MAX_FILE_BYTES = 256 * 2**20


def read_bytes(path: str | PathLike, limit: int = MAX_FILE_BYTES) -> bytes:
    """A regular file's bytes, at most `limit` of them: a device or a pipe (/dev/zero, /dev/stdin) that never ends
    is refused before a byte is read, and a file past the limit after `limit + 1` bytes, never read whole."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{base_name(path)}: not a regular file" if path.exists() else f"{path}: no such file")
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{base_name(path)}: larger than {limit / 2**20:.0f} MiB, the most a file may hold here")
    return data


def read_text_lines(path: str | PathLike) -> list[str]:
    """A UTF-8 file's non-empty lines, stripped (one text a line), read within `read_bytes`' limits."""
    text = as_text(read_bytes(path), base_name(path))
    return [line.strip() for line in text.splitlines() if line.strip()]


def base_name(path: str | PathLike) -> str:
    """The name errors give a file: its base name, never the server's path."""
    return Path(path).name
