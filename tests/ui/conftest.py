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
