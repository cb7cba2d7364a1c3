"""The line reader under every item file (probe JSONL, CoNLL-U, WinoBias, BLiMP's JSONL) and the refusals
the readers share.

Files come from anonymous visitors (the Head Finder page), so every failure is a `ValueError` starting
`<name>, line <N>: ` (1-based), never a traceback: bytes must be UTF-8 (a BOM is accepted), errors name
the file by the name the caller gives (`read_*` give the base name, never a server path), nothing a line
holds is quoted beyond a short start (`shown`), and an unexpected exception on a line (JSON nested too
deeply, say) is reported as that line's error (`Lines.guard`).

Bytes and binary streams (an upload's `UploadedFile`, a file `opened` by the CLI) are read as a stream, a block at
a time, with a byte limit for the file and a character limit for a line checked as it goes: a reader that has
what it needs (`text_lines`' first N texts, a corpus's first N sentences) stops there, and no file is decoded or
split whole (a 19.9 MB upload split whole took the corpus map's server from 0.98 to 2.34 GB, issue 36's F2).
"""

from __future__ import annotations

import codecs
import io
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import BinaryIO, TypeVar

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
        data = data.removeprefix(b"\xef\xbb\xbf")  # so that an error's place counts from the text's start
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            before = data[: error.start].decode("utf-8")
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


# The most a file named on the command line or by the API may hold. The largest UD treebanks are under this; the
# app's uploads have their own, smaller limit (.streamlit/config.toml).
MAX_FILE_BYTES = 256 * 2**20
# The longest line an item file may have: a JSONL item of MAX_ITEM_WORDS words of MAX_WORD_CHARS characters
# (escaped) fits, and a file of one endless line is refused after about 4 bytes a character, never held whole.
MAX_LINE_CHARS = 2_000_000
# One text a line (the corpus map's and sink anatomy's uploads): the models read the first 64 tokens of each.
MAX_TEXT_CHARS = 20_000
BLOCK_BYTES = 2**16  # a stream is read this much at a time


class FileRefused(ValueError):
    """A file the reader stops at (past a limit, not UTF-8 text): its message already names the file."""


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:g} MiB" if n_bytes >= 2**20 else f"{n_bytes:,} bytes"


class Lines:
    """The numbered lines of a file, read lazily; `guard()` reports any error while parsing as that of the line
    reached. `data` is text (a str, checked whole: it is in memory already), bytes or a binary stream (read a
    block at a time: a reader that stops early reads no further). At most `max_bytes` bytes are read and a line
    may hold at most `max_line_chars` characters; past either the file is refused where it is."""

    def __init__(self, data: str | bytes | BinaryIO, name: str, max_bytes: int | None = None,
                 max_line_chars: int | None = None) -> None:
        self.name, self.number, self._data = name, 0, data
        self.max_bytes = MAX_FILE_BYTES if max_bytes is None else max_bytes  # read now: tests patch the module's
        self.max_line_chars = MAX_LINE_CHARS if max_line_chars is None else max_line_chars

    def __iter__(self) -> Iterator[tuple[int, str]]:
        data = self._data
        if isinstance(data, str):
            pieces: Iterator[str] = iter([as_text(data, self.name)])
        else:
            if isinstance(data, (bytes, bytearray, memoryview)):
                data = io.BytesIO(data)
            elif isinstance(data, io.RawIOBase):  # a raw stream may return fewer bytes than asked
                data = io.BufferedReader(data)
            pieces = self._pieces(data)
        for piece in pieces:
            for line in piece.splitlines():
                self.number += 1
                if len(line) > self.max_line_chars:
                    raise FileRefused(f"{self._where()}: a line of {len(line):,} characters; at most "
                                      f"{self.max_line_chars:,} are read")
                yield self.number, line

    def _where(self, ahead: int = 0) -> str:
        return at_line(self.name, self.number + ahead)

    def _pieces(self, stream: BinaryIO) -> Iterator[str]:
        """The stream's text in pieces of whole lines, decoded and checked as `as_text` checks a file, a block
        at a time: every block is checked before any line of it is parsed. A piece ends after a line break (never
        between the CR and LF of a pair), so the lines of the pieces are the lines of the whole; what follows the
        last break waits for the next block, and is refused once it is longer than a line may be."""
        text, undecoded, read = "", b"", 0  # text after the last break; the bytes of a character the block cut
        while True:
            block = stream.read(min(BLOCK_BYTES, self.max_bytes + 1 - read))
            end = not block
            if not read and block.startswith((b"\xff\xfe", b"\xfe\xff")):
                raise FileRefused(f"{at_line(self.name, 1)}: the file is UTF-16 text; save it as UTF-8")
            if not read and block.startswith(b"\xef\xbb\xbf"):
                block, read = block[3:], 3
            read += len(block)
            if read > self.max_bytes:
                raise FileRefused(f"{self.name}: larger than {_size(self.max_bytes)}, the most a file may hold here")
            data = undecoded + block
            try:
                new, used = codecs.utf_8_decode(data, "strict", end)
            except UnicodeDecodeError as error:
                before = text + data[: error.start].decode("utf-8")
                line, column = _position(before, len(before))
                raise FileRefused(f"{self._where(line)}: not UTF-8 text (byte 0x{data[error.start]:02x} at "
                                  f"column {column})") from None
            undecoded = data[used:]
            nul = new.find("\x00")
            if nul >= 0:  # UTF-16 without a BOM, or a binary file that happens to decode
                line, column = _position(text + new, len(text) + nul)
                raise FileRefused(f"{self._where(line)}: not a text file (NUL character at column {column})")
            searched = max(len(text) - 1, 0)  # the last block's final \r may end a line now
            text += new
            if end:  # the last line needs no break
                if text:
                    yield text
                return
            # the last \n, or the last \r that is not the final character (a \n may follow it in the next block)
            cut = max(text.rfind("\n", searched), text.rfind("\r", searched, len(text) - 1)) + 1
            if cut:
                yield text[:cut]
                text = text[cut:]
            if len(text) > self.max_line_chars + 1:  # one line, and perhaps a \r
                raise FileRefused(f"{self._where(1)}: a line of more than {self.max_line_chars:,} characters; "
                                  f"at most {self.max_line_chars:,} are read")

    @contextmanager
    def guard(self):
        try:
            yield
        except Exception as error:  # even a bug of ours must not show a visitor a traceback
            if isinstance(error, FileRefused) or (
                    isinstance(error, ValueError) and str(error).startswith(f"{self.name}, line ")):
                raise  # already names its file and line
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


def read_bytes(path: str | PathLike, limit: int = MAX_FILE_BYTES) -> bytes:
    """A regular file's bytes, at most `limit` of them: a device or a pipe (/dev/zero, /dev/stdin) that never ends
    is refused before a byte is read, and a file past the limit after `limit + 1` bytes, never read whole."""
    with opened(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{base_name(path)}: larger than {limit / 2**20:.0f} MiB, the most a file may hold here")
    return data


@contextmanager
def opened(path: str | PathLike) -> Iterator[BinaryIO]:
    """A regular file open for reading as a stream (for `Lines`, which holds it to MAX_FILE_BYTES): a device or a
    pipe (/dev/zero, /dev/stdin) that never ends is refused before a byte is read."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{base_name(path)}: not a regular file" if path.exists() else f"{path}: no such file")
    with path.open("rb") as f:
        yield f


def text_lines(data: str | bytes | BinaryIO, name: str, most: int | None = None,
               max_line_chars: int | None = None) -> tuple[list[str], bool]:
    """The first `most` (all, for None) non-empty lines of a file, stripped (one text a line), and whether the
    file holds more: reading stops at the first text past `most`, so a corpus of which only the first N texts
    are used is read only that far, however long the file."""
    texts: list[str] = []
    lines = Lines(data, name, max_line_chars=max_line_chars)
    with lines.guard():
        for _, line in lines:
            text = line.strip()
            if not text:
                continue
            if most is not None and len(texts) >= most:
                return texts, True
            texts.append(text)
    return texts, False


def read_text_lines(path: str | PathLike) -> list[str]:
    """A UTF-8 file's non-empty lines, stripped (one text a line), read as a stream within `Lines`' limits."""
    with opened(path) as f:
        return text_lines(f, base_name(path))[0]


def base_name(path: str | PathLike) -> str:
    """The name errors give a file: its base name, never the server's path."""
    return Path(path).name
