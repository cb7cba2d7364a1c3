"""A model that cannot be shown: the page says so in the main area, the sidebar shows what is shown (no
"Loading ..." left), the link keeps the model asked for on every page, and a hub preset with no route to
the hub says so before anyone waits (issue 26)."""

from __future__ import annotations

import time

from streamlit.testing.v1 import AppTest

from tests.conftest import MINILM, ROOT, require_offline

APP = str(ROOT / "app.py")
FINDER = str(ROOT / "app_pages" / "1_Head_Finder.py")


def test_presets_say_where_they_come_from(monkeypatch):
    require_offline(MINILM)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(APP, default_timeout=300).run()
    box = at.selectbox(key="model_preset")
    labels = dict(zip(box.options, box.options))
    assert "all-MiniLM-L6-v2 · offline" in labels and "gpt2 · hub" in labels and "Qwen2.5-0.5B · hub" in labels
    assert all(len(label) <= 32 for label in labels), labels  # the sidebar's box showed 32 characters
    # an offline preset is said once, by the loaded model's note (no second line before it)
    captions = [c.value.replace("\\", "") for c in at.sidebar.caption]
    assert sum(f"{MINILM} is loaded from its package-index copy" in c for c in captions) == 1, captions
    assert not any("from the Hugging Face hub" in c for c in captions), captions


def test_a_hub_preset_offline_says_so_at_once_and_the_link_keeps_it(monkeypatch):
    require_offline(MINILM)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no route to the hub, as on this machine
    for page in (APP, FINDER):
        at = AppTest.from_file(page, default_timeout=300).run()
        started = time.monotonic()
        at.selectbox(key="model_preset").set_value("gpt2").run()
        took = time.monotonic() - started
        assert not at.exception, [e.value for e in at.exception]
        assert took < 10, took  # was 26 s of the hub client's retries before it failed
        assert any("which this server cannot reach" in c.value for c in at.sidebar.caption)  # under the box
        main = " ".join(w.value for w in at.main.warning)
        assert "gpt2 cannot be shown" in main and "no route to the hub" in main
        assert any(c.value.replace("\\", "") == f"Shown: {MINILM}" for c in at.sidebar.caption)
        statuses = [e.label for e in at.sidebar.get("expandable")]
        assert not any("Loading gpt2" in label for label in statuses), statuses
        assert at.query_params["model"] in ("gpt2", ["gpt2"])


def _in_order(block) -> list:
    """The main area's elements in the order the page draws them (tabs and columns walked depth first)."""
    found = []
    for _, child in sorted(getattr(block, "children", {}).items()):
        found += _in_order(child) if getattr(child, "children", None) else [child]
    return found


def test_no_figure_of_another_model_goes_unlabelled(monkeypatch):
    """Issue 35, item 2: a model that cannot load (gpt2, with no route to the hub) is said in the main area
    before any figure, the line above the figures names the model they were computed on and the one asked
    for, and every page keeps both the model asked for in its link and the banner."""
    require_offline(MINILM)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for page in (APP, FINDER, str(ROOT / "app_pages" / "4_Findings.py")):
        at = AppTest.from_file(page, default_timeout=300)
        at.query_params["model"] = "gpt2"
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        drawn = _in_order(at.main)
        kinds = [element.type for element in drawn]
        said = [str(getattr(e, "value", "")).replace("\\", "") for e in drawn]
        banner = next(k for k, e in enumerate(drawn) if e.type == "warning" and "gpt2 cannot be shown" in said[k])
        assert MINILM in said[banner]
        line = next(k for k, text in enumerate(said) if text.startswith("Computed on"))
        assert said[line].startswith(f"Computed on **{MINILM}**, not on gpt2"), said[line]
        figures = [k for k, kind in enumerate(kinds) if kind in ("plotly_chart", "dataframe")]
        assert banner < line and all(line < k for k in figures), (page, banner, line, figures[:3])
        assert figures or page != APP  # Explore draws its figures (on MiniLM), all below the line
        assert at.query_params["model"] in ("gpt2", ["gpt2"])
