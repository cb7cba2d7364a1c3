"""The Atlas page on MiniLM: without an atlas it offers the build (a heavy action with its size and time); once the
atlas is built (workbench.atlas.build_builtin, called here directly into a temporary ATTNVIZ_ATLAS_DIR), the head
finder has one point per head, a chosen head gets its dashboard (metrics with ranks, relation scores), "Open in
Explore" makes it the focus head and opens Explore, and the seed's table is filled; both languages, no exception."""

from __future__ import annotations

import time

from streamlit.testing.v1 import AppTest

from attnviz.ui.guard import workbench
from attnviz.workbench import Workbench, shelf
from attnviz.workbench import atlas as work
from tests.conftest import MINILM
from tests.helpers.i18n import data_words, walk
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart

ATLAS = "app_pages/5_Atlas.py"


def table(at: AppTest, column: str):
    """The page's table with this column (the English page's)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def page(at: AppTest) -> AppTest:
    at.switch_page(ATLAS).run()
    assert_clean(at)
    return at


def test_atlas_page(atlas_env):
    folder, texts = atlas_env
    at = page(AppTest.from_file(APP, default_timeout=TIMEOUT).run())
    assert any(b.key == "atlas_build" and f"{len(texts)} sentences" in b.label for b in at.button), \
        [b.label for b in at.button]
    assert not at.get("plotly_chart")
    walk(at, "zh")
    walk(at, "en")

    # the build, as the page's job runs it (on a Workbench of its own: the atlas is found by the model's key)
    bench = Workbench()
    model = shelf.load_model(bench, shelf.check_source(MINILM))
    found = work.build_builtin(bench, model, MINILM)
    assert found["n_texts"] == len(texts) and len(found["metrics"]["pattern_entropy"]) == model.info.n_layers
    assert not list(folder.glob("*" + work.PARTIAL))  # renamed into place once complete
    assert work.stored(bench, MINILM) is found  # a second read is the views store's, not DuckDB's

    at.run()
    assert_clean(at)
    assert not any(b.key == "atlas_build" for b in at.button)
    n_heads = model.info.n_layers * model.info.n_heads
    scatter = chart(at, "atlas_scatter")
    assert scatter["layout"]["meta"]["points"] == n_heads
    picks = {tuple(point) for trace in scatter["data"] for point in trace["customdata"]}
    assert picks == {(layer, head) for layer in range(model.info.n_layers) for head in range(model.info.n_heads)}

    # a click's choice (the callback's session key) gives that head's dashboard
    scope = work.atlas_folder(bench, MINILM).name
    at.session_state["_atlas_head"] = (scope, 3, 5)
    at.run()
    assert_clean(at)
    assert any(h.value == "Head L3 H5" for h in at.subheader), [h.value for h in at.subheader]
    metrics = table(at, "model's median")
    assert len(metrics) == 6 and all("/ 72" in rank for rank in metrics["rank"])
    relations = table(at, "direction")
    assert "subject-verb" in set(relations["relation"])
    seed = table(at, "best head")
    assert list(seed["head"]) == ["Head 1", "Head 2", "Head 3", "Head 4"]
    assert chart(at, "atlas_scatter")["data"][-1]["customdata"] == [[3, 5]]  # the chosen head is ringed

    data = data_words(*texts, *(str(cell) for cell in seed["example it gets right"]))
    walk(at, "zh", data)
    assert any(h.value == "注意力头 L3 H5" for h in at.subheader)
    walk(at, "en", data)

    # the filters keep the heads of the chosen layers
    at.slider(key=f"atlas_layers_{scope}").set_value((2, 3)).run()
    assert chart(at, "atlas_scatter")["layout"]["meta"]["points"] == 2 * model.info.n_heads

    # "Open in Explore": the focus head, then the Explore page
    at.button(key="atlas_open_explore").click().run()
    assert_clean(at)
    assert (at.session_state["_focus"].layer, at.session_state["_focus"].head) == (3, 5)
    assert not any(b.key == "atlas_open_explore" for b in at.button)


def test_atlas_built_from_the_page_and_refused_past_the_budget(atlas_env, tmp_path, monkeypatch):
    """The button runs the build as a heavy action (progress, then the atlas drawn); a build that cannot fit the
    budget is refused with the figures, as every heavy action's refusal is, and nothing is left half built."""
    monkeypatch.setenv(work.ATLAS_DIR_VARIABLE, str(tmp_path))
    monkeypatch.setattr(work, "build_bytes", lambda model, longest: 10 ** 15)
    at = page(AppTest.from_file(APP, default_timeout=TIMEOUT).run())
    at.button(key="atlas_build").click().run()
    while workbench().jobs.running():  # ended, then drawn once: the refusal is said on the run that finds it
        time.sleep(0.2)
    at.run()
    assert_clean(at)
    assert any("budget" in e.value for e in at.error), [e.value for e in at.error]
    assert not list(tmp_path.glob("*/" + "atlas.duckdb")) and not at.get("plotly_chart")

    monkeypatch.undo()
    monkeypatch.setenv(work.ATLAS_DIR_VARIABLE, str(tmp_path))
    monkeypatch.setattr(work, "builtin_texts", lambda: atlas_env[1])
    finish_jobs(at.button(key="atlas_build").click().run())
    assert_clean(at)
    assert chart(at, "atlas_scatter")["layout"]["meta"]["points"] == 72
    assert list(tmp_path.glob("*/atlas.duckdb")) and not list(tmp_path.glob("*" + work.PARTIAL))
