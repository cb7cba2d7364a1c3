"""The Explore page's uploads (issue 36, F2) on the offline MiniLM: the corpus map's and sink anatomy's files are
parsed once per file, not on every rerun, and only their first MAX_SENTENCES / MAX_TEXTS lines are read, however
large the file. AppTest cannot give a file uploader a file, so st.file_uploader hands out the test's uploads."""

from __future__ import annotations

import pytest
import streamlit

from attnviz.workbench import qkmap as work_qkmap
from attnviz.workbench import sinks as work_sinks
from tests.helpers.pages import assert_clean, open_view
from tests.helpers.streams import SLACK, Upload

BIG = 20 * 2**20  # the host's upload limit, .streamlit/config.toml


@pytest.fixture
def uploads(monkeypatch):
    """The file each uploader (by key) holds; st.file_uploader returns it, None for the others."""
    held: dict[str, Upload] = {}
    monkeypatch.setattr(streamlit, "file_uploader", lambda *args, key=None, **kwargs: held.get(key))
    return held


def counted(monkeypatch, module, name: str) -> list:
    """Calls of module.name (the parse) recorded as the files they read."""
    calls, parse = [], getattr(module, name)

    def parse_counting(filename, data):
        calls.append(filename)
        return parse(filename, data)

    monkeypatch.setattr(module, name, parse_counting)
    return calls


def test_the_corpus_maps_file_is_read_to_its_first_sentences_once(app, uploads, monkeypatch):
    calls = counted(monkeypatch, work_qkmap, "uploaded_corpus")
    line = b"The keys to the cabinet are on the table.\n"
    big = uploads["qkmap_file"] = Upload(line * (BIG // len(line)), "big.txt", "file-1")
    open_view(app, "which")
    app.selectbox(key="qkmap_corpus").set_value("upload").run()
    assert_clean(app)
    n = work_qkmap.MAX_SENTENCES
    assert [c.value for c in app.caption if f"its first {n} are read" in c.value]
    assert app.button(key="qkmap_run").label == "Map L0 H0 over 200 sentences"
    assert calls == ["big.txt"] and big.read_bytes < (n + 1) * len(line) + SLACK  # not the 20 MB
    app.slider(key="qkmap_n").set_value(n).run()
    app.run()
    assert_clean(app)
    assert calls == ["big.txt"] and big.read_bytes < (n + 1) * len(line) + SLACK  # reruns parse nothing
    assert app.button(key="qkmap_run").label == f"Map L0 H0 over {n} sentences"

    uploads["qkmap_file"] = Upload(b"# text = bad\n1\tword\n", "bad.conllu", "file-2")  # another file
    app.run()
    app.run()
    warnings = [w.value.replace("\\", "") for w in app.warning]  # md() escaped the error's words
    assert calls == ["big.txt", "bad.conllu"]  # parsed once, its refusal kept
    assert warnings == ["The file could not be read: bad.conllu, line 2: expected 10 tab-separated columns, got 2"]
    del uploads["qkmap_file"]  # the file taken out of the uploader: what was parsed is let go
    app.run()
    assert "_qkmap_file_parsed" not in app.session_state


def test_sink_anatomys_file_takes_its_first_texts_once(app, uploads, monkeypatch):
    calls = counted(monkeypatch, work_sinks, "uploaded_texts")
    line = b"A paragraph of the visitor's own.\n"
    big = uploads["sinks_file"] = Upload(line * (BIG // len(line)), "texts.txt", "file-3")
    open_view(app, "which")
    app.radio(key="sinks_mine").set_value(True).run()
    app.run()
    assert_clean(app)
    n = work_sinks.MAX_TEXTS
    assert [c.value for c in app.caption if f"its first {n} are measured" in c.value]
    assert [b for b in app.button if b.key == "sinks_run"]  # measured, not refused for holding more
    assert calls == ["texts.txt"] and big.read_bytes < (n + 1) * len(line) + SLACK
