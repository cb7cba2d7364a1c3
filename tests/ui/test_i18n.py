"""Every visible string of every page is in the chosen language.

Each page is walked in Chinese and in English (AppTest: the element tree as the browser would get it).
Chinese shows no English word (a run of two or more ASCII letters) outside ALLOWED_PHRASES /
ALLOWED_WORDS / ALLOWED_PATTERNS (names, ids, units, formulas, code) and the data on screen (the example
sentences, the probe items' words, the tokens of the current sentence); English shows no CJK character
outside the same data and the "中文" language option.

Covered: titles, headers, subheaders, markdown, captions, alerts, widget labels, help and placeholders,
radio/selectbox/select-slider options as displayed (AppTest holds the format_func output), buttons,
download buttons, expanders and statuses, dataframe column names and string cells (not the predicted
tokens), the token chips' text, and each plotly figure's title, axis titles, tick texts, colour-bar
title and tick texts, annotations and hover templates. Not covered: st.latex and st.code (formulas and
code), the browser tab's page titles, progress bars' transient texts, the parity check and the head
detectors' results (heavy actions: their texts are table keys all the same).
"""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.probesets import builtin_items
from attnviz.ui.explore import EXAMPLES
from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.i18n import data_words, walk
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import APP, FINDER, LEARN, TIMEOUT


def both(at: AppTest, data: set[str] = frozenset()) -> None:
    walk(at, "zh", data)
    walk(at, "en", data)


@pytest.fixture(scope="module")
def offline():
    require_offline(MINILM)


def test_explore_in_both_languages(offline):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.radio(key="scale").set_value("power").run()
    at.radio(key="level").set_value("word").run()
    at.selectbox(key="explore_source").set_value(1).run()  # keys
    at.selectbox(key="explore_target").set_value(5).run()  # are: the ranking table
    both(at)
    walk(at, "zh")
    # the option values (and so the view) survive a change of language: only their display is translated
    assert (at.radio(key="scale").value, at.radio(key="level").value) == ("power", "word")
    assert at.radio(key="scale").options != ["linear", "power", "log"]
    at.radio(key="level").set_value("token").run()
    # long input: pooled tiles (their own hover) and the head detail's window slider
    at.text_input(key="text").input(" ".join([EXAMPLES[1]] * 8)).run()
    assert json.loads(next(c for c in at.get("plotly_chart") if c.proto.id.endswith("-model_view")).proto.spec)[
        "layout"]["meta"]["pooled"]
    both(at)


def test_explore_decoder_in_both_languages():
    """A decoder: causal mask hovers, GQA notes, next-token predictions; loaded with the page in Chinese."""
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["lang"] = "zh"
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = "The capital of France is"
    at.run()
    both(at, data_words("The capital of France is"))


def test_head_finder_in_both_languages(offline):
    at = AppTest.from_file(FINDER, default_timeout=TIMEOUT)
    at.query_params["lang"] = "zh"
    at.run()
    # Built-in scores are shared by every session of the process: an earlier test's English set may show its
    # examples at once. Their sentences are data, not UI text.
    english = data_words(*(" ".join(item.words) for item in builtin_items("builtin:en")))
    both(at, english)
    at.radio(key="finder_mode").set_value("upload").run()
    both(at)
    at.radio(key="finder_mode").set_value("builtin").run()
    at.selectbox(key="finder_builtin").set_value("builtin:zh").run()
    at.selectbox(key="finder_relation").set_value("subject-verb").run()
    finish_jobs(at.button(key="run_probe").click().run())  # scores the set once: grids, table, examples
    assert at.session_state["finder_result"]
    assert [e for e in at.expander if e.label.startswith(("✅", "❌"))]
    items = builtin_items("builtin:zh")
    both(at, data_words(*(" ".join(item.words) for item in items)))


def test_learn_in_both_languages(offline):
    at = AppTest.from_file(LEARN, default_timeout=TIMEOUT)
    at.query_params["lang"] = "zh"
    at.run()
    both(at)


def test_plot_text_changes_words_only():
    """A translated PlotText changes the figures' words, never their data or the axis categories."""
    import numpy as np

    from attnviz import plots

    a = np.full((2, 3, 4, 4), 0.25, np.float32)
    words = plots.PlotText(**{name: f"«{name}»" for name in plots.PlotText.__dataclass_fields__})
    for build in (lambda text: plots.model_view(a, text=text),
                  lambda text: plots.head_heatmap(a[0, 0], list("abcd"), list("abcd"), causal=True, text=text),
                  lambda text: plots.score_grid(a[:, :, 0, 0], "t", text=text)):
        english, other = (json.loads(build(text).to_json()) for text in (plots.ENGLISH, words))
        assert len(english["data"]) == len(other["data"])
        for mine, theirs in zip(english["data"], other["data"]):
            words_only = ("hovertemplate", "colorbar")
            for trace in (mine, theirs):  # the mosaic's colour bar is a marker's (plots.mosaic.colour_bar)
                trace.get("marker", {}).get("colorbar", {}).pop("title", None)
            assert {k: v for k, v in mine.items() if k not in words_only} == {
                k: v for k, v in theirs.items() if k not in words_only}
        assert english["layout"]["meta"] == other["layout"]["meta"]
        shown = json.dumps(other)
        assert not any(f'"{word}"' in shown for word in ("attention", "mean", "from (query)", "to (key)", "layer"))
