"""The query-key view's MLA terms (attnviz.ui.query_key.latent_parts), drawn by Streamlit: for the keys with the
highest weight, the no-rope and rotary terms of the score, which add up to the content score the view computed."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def page():
    import numpy as np

    from attnviz.analysis.query_key import query_key
    from attnviz.ui.query_key import latent_parts

    rng = np.random.default_rng(0)
    queries, keys = rng.normal(size=(2, 6, 10)), rng.normal(size=(2, 6, 10))  # 2 heads, 6 tokens, 6 + 4 dims
    view = query_key(queries, keys, [0, 1], 1, 5, causal=True, rope_from=6)
    latent_parts(view, np.arange(6), [f"t{j}" for j in range(6)])


def test_the_two_terms_of_the_heaviest_keys_add_up_to_their_scores():
    import numpy as np

    from attnviz.analysis.query_key import query_key

    at = AppTest.from_function(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Multi-head latent attention" in c.value for c in at.caption)
    table = at.table[0].value
    assert list(table.columns) == ["key", "no-rope term", "rotary term", "weight"]
    rng = np.random.default_rng(0)
    queries, keys = rng.normal(size=(2, 6, 10)), rng.normal(size=(2, 6, 10))
    view = query_key(queries, keys, [0, 1], 1, 5, causal=True, rope_from=6)
    for _, row in table.iterrows():
        j = int(row["key"][1:])
        assert abs(row["no-rope term"] + row["rotary term"] - view.scores[j]) <= 2e-4
    assert table["weight"].is_monotonic_decreasing and len(table) == 6
