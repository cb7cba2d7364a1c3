"""AppTest of the Head Finder page's retrieval-heads section (attnviz/ui/retrieval.py): on SmolLM2 the grid
is a heavy action whose result equals readouts.retrieval run directly, then the top heads switched off
against random ones; an encoder gets a note instead; the Chinese labels."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attnviz.analysis.retrieval import top_heads
from attnviz.probesets.needles import NEEDLES
from attnviz.readouts import retrieval as needle_work
from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import FINDER as PAGE
from tests.helpers.pages import TIMEOUT, assert_clean, chart, z_array

FILLER = 0  # SmolLM2 answers every built-in needle with no filler (tests/interventions/test_retrieval.py uses a
# haystack)


@pytest.mark.slow
def test_retrieval_grid_and_switching_heads_off(smollm):
    require_offline(SMOLLM)
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.query_params["model"] = SMOLLM
    at.run()
    assert_clean(at)
    assert any(h.value == "Retrieval heads" for h in at.subheader)
    assert at.selectbox(key="retrieval_haystack").value == 200  # the default length
    at.selectbox(key="retrieval_haystack").set_value(FILLER)
    at.slider(key="retrieval_needles").set_value(1).run()
    button = at.button(key="retrieval_run")
    assert button.label == "Find retrieval heads (1 prompts)"
    finish_jobs(button.click().run())
    assert_clean(at)

    expected = needle_work.retrieval_heads(smollm, [needle_work.build_prompt(smollm, NEEDLES[0], FILLER)])
    figure = chart(at, "retrieval_grid")
    grid = z_array(figure["data"][0])
    assert grid.shape == (30, 9)
    np.testing.assert_allclose(grid, expected.grid, atol=1e-9)
    runs = next(d.value for d in at.dataframe if "reply (greedy)" in d.value.columns)
    assert runs["reply (greedy)"].tolist() == [expected.runs[0].continuation]
    assert runs["answer found"].tolist() == [True]
    assert any("Scores averaged over the 1 of 1 prompts" in c.value for c in at.caption)

    at.number_input(key="retrieval_off_n").set_value(5).run()
    finish_jobs(at.button(key="retrieval_off_run").click().run())
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "needles retrieved" in d.value.columns)
    assert table["heads"].tolist() == ["all on", "top 5 retrieval heads off", "5 random heads off (3 draws)"]
    retrieved = table["needles retrieved"].tolist()
    assert retrieved[0] == "1 / 1" and retrieved[1] in ("0 / 1", "1 / 1") and retrieved[2].endswith(" / 3")
    top = top_heads(expected.grid, 5)
    assert table["switched off"].tolist()[1] == ", ".join(f"L{layer} H{head}" for layer, head in top)
    draws = table["switched off"].tolist()[2].split(" | ")
    assert len(draws) == 3 and all(len(d.split(", ")) == 5 and not set(d.split(", ")) & {
        f"L{layer} H{head}" for layer, head in top} for d in draws)


def test_an_encoder_gets_a_note():
    require_offline(MINILM)
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT).run()
    assert_clean(at)
    assert any("choose a decoder" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "retrieval_run"]


def test_chinese_labels():
    require_offline(MINILM)
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.query_params["lang"] = "zh"
    at.run()
    assert_clean(at)
    assert any(h.value == "检索头" for h in at.subheader)
