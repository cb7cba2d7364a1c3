"""The app's page files and what AppTest tests read from them: figures as JSON, their z arrays, exceptions."""

from __future__ import annotations

import base64
import json

import numpy as np
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

APP = str(ROOT / "app.py")
FINDER = str(ROOT / "app_pages" / "1_Head_Finder.py")
LEARN = str(ROOT / "app_pages" / "2_Learn.py")
TRANSLATE = str(ROOT / "app_pages" / "3_Translate.py")
# One AppTest run's limit. A page's first run loads a real model: the Learn page's SmolLM2 and the Translate
# page's 45M-parameter untrained model with its tokenizer had 300 s, the other pages 180 s; one limit for
# all keeps every test's old limit or more.
TIMEOUT = 300


def chart(at: AppTest, key: str) -> dict:
    """The plotly figure (as JSON) of the chart with this widget key."""
    for element in at.get("plotly_chart"):
        if element.proto.id.endswith(f"-{key}"):
            return json.loads(element.proto.spec)
    raise AssertionError(f"no chart {key!r}; charts: {[e.proto.id for e in at.get('plotly_chart')]}")


def z_array(trace: dict) -> np.ndarray:
    z = trace["z"]
    if isinstance(z, dict):  # plotly >= 6 base64 encoding
        data = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"])
        shape = z.get("shape")
        if isinstance(shape, str):  # plotly writes "rows, cols"
            shape = [int(n) for n in shape.split(",")]
        return data.reshape(shape) if shape else data
    return np.asarray(z, dtype=float)


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def open_view(at: AppTest, name: str) -> AppTest:
    """Open Explore's tab `name` (ui/url_state.EXPLORE_VIEWS: looks, writes, matters, which, check) as a
    click on it would, and run: only the open tab's views run."""
    at.session_state["_explore_view"] = name
    return at.run()
