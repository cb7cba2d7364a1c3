"""AppTest of the Explore page's activation patching (attnviz/ui/patching.py) on MiniLM, a sentence-embedding
model (the embedding metric): the heads grid, the MLP column and the residual heatmap against
attnviz.interventions.patching run directly."""

from __future__ import annotations

import numpy as np

from attnviz.interventions import patching
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import assert_clean, chart, open_view, z_array

CLEAN, CORRUPT = "The keys to the cabinet are here.", "The key to the cabinet is here."


def test_patching_draws_what_the_engine_computes(app, minilm):
    open_view(app, "matters")
    app.text_input(key="patch_clean").input(CLEAN).run()
    app.text_input(key="patch_corrupt").input(CORRUPT).run()
    assert any("no masked-LM head" in c.value and "cosine" in c.value for c in app.caption)
    finish_jobs(app.button(key="patch_run").click().run())
    assert_clean(app)
    expected = patching.patch(minilm, patching.patch_pair(minilm, CLEAN, CORRUPT))
    heads = z_array(chart(app, "patch_grid")["data"][0])
    assert heads.shape == (6, 12) and np.abs(heads - expected.heads).max() < 1e-4
    assert np.abs(z_array(chart(app, "patch_mlps")["data"][0])[:, 0] - expected.mlps).max() < 1e-4
    residual = z_array(chart(app, "patch_residual")["data"][0])
    assert np.abs(residual - expected.residual).max() < 1e-4
    assert expected.residual[0].max() > 0.5  # the changed word's embedding restores much of the clean run
