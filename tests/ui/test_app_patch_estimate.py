"""AppTest of the Explore page's estimate of activation patching (attnviz/ui/patch_estimate.py) on the offline
SmolLM2: drawn before the exact grid without a click, equal to attnviz.interventions.attribution_patching run
directly; once the exact grid is computed, its agreement is stated; the button patches the estimate's top 10 heads
exactly, equal to the exact grid's cells."""

from __future__ import annotations

import numpy as np
from streamlit.testing.v1 import AppTest

from attnviz.interventions import attribution_patching, patching
from tests.conftest import SMOLLM, require_offline
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart, z_array

CLEAN, CORRUPT = "The keys to the cabinet", "The key to the cabinet"


def test_the_estimate_comes_first_and_its_top_heads_are_checked_exactly(smollm):
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(view="matters", model=SMOLLM, text=CLEAN, text_b=CORRUPT, target=" are", contrast=" is")
    at.run()
    assert_clean(at)
    assert at.text_input(key="patch_clean").value == CLEAN and at.text_input(key="patch_corrupt").value == CORRUPT
    runs = patching.prepare(smollm.module, patching.patch_pair(smollm, CLEAN, CORRUPT, " are", " is"))
    expected = attribution_patching.estimate(runs)
    heads = z_array(chart(at, "patch_est_grid")["data"][0])
    assert heads.shape == (30, 9) and np.abs(heads - expected.heads).max() < 1e-4
    assert np.abs(z_array(chart(at, "patch_est_mlps")["data"][0])[:, 0] - expected.mlps).max() < 1e-4
    assert not any(c.value.startswith("Against the exact grid") for c in at.caption)  # no exact grid yet

    finish_jobs(at.button(key="patch_est_check").click().run())
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "exact" in d.value.columns)
    cells = attribution_patching.top_cells(expected.heads, 10)
    assert list(table["head"]) == [f"L{layer} H{head}" for layer, head in cells]

    finish_jobs(at.button(key="patch_run").click().run())
    assert_clean(at)
    exact = patching.heads(runs)
    checked = np.array([exact[cell] for cell in cells])
    assert np.abs(table["exact"].to_numpy() - checked).max() < 1e-3  # the table's 4 decimals
    agreement = attribution_patching.agreement(expected.heads, exact, 10)
    line = next(c.value for c in at.caption if c.value.startswith("Against the exact grid"))
    assert f"heads r = {agreement.r:.2f}, {agreement.overlap} of the top 10 the same" in line


def test_a_pair_that_scores_the_same_is_refused_in_words_and_the_exact_section_still_draws(smollm):
    """The same sentence twice: nothing to restore. The estimate says why (no traceback, no generic error), and
    the exact patching's button is still there below it."""
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(view="matters", model=SMOLLM, text=CLEAN, text_b=CLEAN, target=" are", contrast=" is")
    at.run()
    assert_clean(at)
    assert any("score the same" in w.value for w in at.warning)
    assert at.button(key="patch_run") is not None
