"""Streams for the bounded reader's tests (issue 36, item 3): a file far larger than anything read whole, made as
it is read, and an upload like Streamlit's that counts the bytes read from it."""

from __future__ import annotations

import io

from attnviz.analysis.lines import BLOCK_BYTES

# A reader stops within a block or two of where it has what it needs, plus a buffered reader's read-ahead.
SLACK = 2 * BLOCK_BYTES + io.DEFAULT_BUFFER_SIZE


class Endless(io.RawIOBase):
    """`pattern` repeated to `size` bytes (50 MB by default), made as it is read, never held whole; `read_bytes`
    counts the bytes handed out."""

    def __init__(self, pattern: bytes, size: int = 50 * 2**20) -> None:
        self.pattern, self.size, self.read_bytes = pattern, size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.size - self.read_bytes)
        start = self.read_bytes % len(self.pattern)
        buffer[:n] = (self.pattern * (n // len(self.pattern) + 2))[start:start + n]
        self.read_bytes += n
        return n


class Upload(io.BytesIO):
    """What st.file_uploader returns (an UploadedFile: a BytesIO with a name and a file_id), counting the bytes
    read from it."""

    def __init__(self, data: bytes, name: str, file_id: str) -> None:
        super().__init__(data)
        self.name, self.file_id, self.size, self.read_bytes = name, file_id, len(data), 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.read_bytes += len(data)
        return data

    def getvalue(self) -> bytes:  # the whole file: a bounded reader never asks for it
        self.read_bytes += self.size
        return super().getvalue()
