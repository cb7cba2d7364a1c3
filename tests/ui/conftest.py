"""The Explore page's AppTest as the UI tests share it: one per test module, on the offline MiniLM."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import MINILM, require_offline
from tests.helpers.pages import APP, TIMEOUT, assert_clean


@pytest.fixture(scope="module")
def app() -> AppTest:
    """The Explore page after its first run, clean (a module that needs another start defines its own)."""
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert_clean(at)
    return at


# Of the shipped sentences, what an atlas test builds over: the page's behaviour, not the build's size, is under test.
ATLAS_TEXTS = 24


@pytest.fixture(scope="module")
def atlas_env(tmp_path_factory):
    """(the atlas folder, the texts): the app's atlases kept in a fresh folder, and its first-use build over the first
    ATLAS_TEXTS shipped sentences, for the test module."""
    from attnviz.workbench import atlas as work

    require_offline(MINILM)
    folder = tmp_path_factory.mktemp("atlas")
    patch = pytest.MonkeyPatch()
    patch.setenv(work.ATLAS_DIR_VARIABLE, str(folder))
    texts = work.builtin_texts()[:ATLAS_TEXTS]
    patch.setattr(work, "builtin_texts", lambda: texts)
    yield folder, texts
    patch.undo()
