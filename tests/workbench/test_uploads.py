"""The corpus map's and sink anatomy's uploads (issue 36, F2): read as a stream only until their first
MAX_SENTENCES / MAX_TEXTS items are had, keyed by those items, never by the file's bytes."""

from __future__ import annotations

import io

import pytest

from attnviz.workbench import qkmap as work_qkmap
from attnviz.workbench import sinks as work_sinks
from tests.helpers.streams import SLACK, Endless


def test_the_corpus_map_and_sink_uploads_take_their_first_items():
    stream = Endless(b"One sentence a line.\n")
    upload = work_qkmap.uploaded_corpus("big.txt", stream)
    assert len(upload.sentences) == work_qkmap.MAX_SENTENCES and upload.more
    assert upload.sentences[0].text == "One sentence a line." and upload.key.startswith("upload:")
    assert stream.read_bytes < (work_qkmap.MAX_SENTENCES + 1) * 21 + SLACK
    # the key is the sentences': another file of the same first sentences shares the map
    assert work_qkmap.uploaded_corpus("other.txt", Endless(b"One sentence a line.\n")).key == upload.key
    stream = Endless(b"One text a line.\n")
    texts, more = work_sinks.uploaded_texts("big.txt", stream)
    assert len(texts) == work_sinks.MAX_TEXTS and more
    assert stream.read_bytes < (work_sinks.MAX_TEXTS + 1) * 17 + SLACK
    with pytest.raises(ValueError, match=r"^empty\.txt: no texts"):
        work_sinks.uploaded_texts("empty.txt", io.BytesIO(b"\n \n"))
