"""Issue 26, item 8: the Head Finder's upload says what it takes once, in a caption, not also as its help."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.conftest import MINILM, require_offline
from tests.helpers.pages import APP, TIMEOUT, assert_clean


def test_the_upload_help_text_appears_once():
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page("app_pages/1_Head_Finder.py").run()
    assert_clean(at)
    at.radio(key="finder_mode").set_value("upload").run()
    assert_clean(at)
    shown = [c.value for c in at.caption if c.value.startswith("At most")]
    helps = [e.proto.help for e in at.get("file_uploader")]
    assert len(shown) == 1 and helps and not any(h.startswith("At most") for h in helps)
