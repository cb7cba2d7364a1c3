"""The Atlas dashboard's examples, histograms, detectors and published atlas on MiniLM (issue 37, "Browse"): once the
atlas is built (workbench.atlas.build_builtin into a temporary ATTNVIZ_ATLAS_DIR), a chosen head shows its sampled
examples as tokens shaded by its attention (a query token's row once one is picked), its two histograms and its
top tokens; its detector scores with ranks when the atlas has them and nothing when it has not; without a published
atlas, the command that imports one; with ours exported and imported as published (`atlas import --for-model`),
the same six metrics with difference 0, a scatter per metric and the published examples, whose hostile tokens show
literally; "Open in Explore" with an example opens Explore on its sentence and head; both languages."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attnviz.cli.main import main
from attnviz.readouts import atlas, atlas_headvis
from attnviz.readouts.atlas_head import HeadExample
from attnviz.ui.atlas_examples import SHOWN, for_explore, tokens_html
from attnviz.ui.strings import translate
from attnviz.workbench import Workbench, shelf
from attnviz.workbench import atlas as work
from tests.conftest import MINILM
from tests.helpers.i18n import data_words, walk
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart
from tests.ui.conftest import ATLAS_TEXTS

ATLAS = "app_pages/5_Atlas.py"
HOSTILE = ["<b>x</b>", "$x$", "www.evil.example", '"><img src=x onerror=alert(1)>', "a\nb", " "]
HOSTILE_MODEL = "<b>pub</b> www.evil.example $x$"


def en(key: str, **values) -> str:
    return translate("en", key, **values)


def table(at: AppTest, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def tables(at: AppTest, column: str) -> list:
    return [d.value for d in at.dataframe if column in d.value.columns]


def html(at: AppTest) -> str:
    return "\n".join(e.proto.body for e in at.get("html"))


@pytest.fixture(scope="module")
def built(atlas_env):
    """MiniLM's atlas over the first shipped sentences, and its head with the most examples."""
    folder, texts = atlas_env
    bench = Workbench()
    model = shelf.load_model(bench, shelf.check_source(MINILM))
    work.build_builtin(bench, model, MINILM)
    ours = work.atlas_folder(bench, MINILM)
    con = duckdb.connect(str(atlas.atlas_path(ours)), read_only=True)
    try:
        layer, head = con.execute("SELECT layer, head FROM examples GROUP BY layer, head "
                                  "ORDER BY count(*) DESC, layer, head LIMIT 1").fetchone()
    finally:
        con.close()
    return {"folder": folder, "ours": ours, "texts": texts, "bench": bench, "head": (layer, head)}


def opened(built) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.switch_page(ATLAS).run()
    at.session_state["_atlas_head"] = (built["ours"].name, *built["head"])
    at.run()
    assert_clean(at)
    return at


def shown_tokens(built, folder) -> set[str]:
    """The words of every example token of the chosen head (data, in either language)."""
    read = work.head_read(built["bench"], folder, *built["head"])
    return data_words(*(token for e in read.examples for token in e.tokens))


def test_the_examples_histograms_and_the_published_atlas(built, tmp_path):
    layer, head = built["head"]
    at = opened(built)
    read = work.head_read(built["bench"], built["ours"], layer, head)
    assert read.examples

    # the examples: the first SHOWN drawn, top interval first, each labelled
    body = html(at)
    assert body.count('class="avx-ex') == min(SHOWN, len(read.examples))
    first = read.examples[0]
    assert en("atlas_example_label_top", n=1, interval=first.interval, of=5, max=f"{first.max:.4f}",
              tokens=first.seq_len) in body
    assert 'class="tk q"' not in body  # no query picked: each token shaded by the most it gets
    # the histograms and the top tokens
    assert chart(at, "atlas_ours_max_histogram")["layout"]["meta"]["total"] == ATLAS_TEXTS  # every sequence, once
    assert chart(at, "atlas_ours_qk_histogram")["layout"]["meta"]["bins"] >= 4
    top = tables(at, "weight")
    assert len(top) == 2 and all(len(t) > 0 for t in top)
    # no published atlas yet: one caption and the command that imports one
    assert any(en("atlas_published_none") in c.value for c in at.caption)
    assert any(f"atlas import --headvis TREE --for-model {MINILM}" in c.value for c in at.code)
    # the first-use build computes the detectors: the head's three scores, ranked among the model's heads
    [detectors] = tables(at, "detector")
    assert len(detectors) == 3 and all(rank.endswith("/ 72") for rank in detectors["rank"])

    # a query token picked: its row shades the example
    at.selectbox(key="atlas_ours_query").set_value(1).run()
    assert_clean(at)
    assert html(at).count('class="tk q"') == 1

    # ours exported, one head's first example made hostile, imported as this model's published atlas
    tree = tmp_path / "tree"
    atlas_headvis.export(built["ours"], tree)
    config = json.loads((tree / "config.json").read_text())
    config["model_name"] = HOSTILE_MODEL
    (tree / "config.json").write_text(json.dumps(config))
    path = tree / "heads" / f"L{layer}H{head}.json"
    payload = json.loads(path.read_text())
    top = max(s["interval"] for s in payload["sequences"])
    sequence = next(s for s in payload["sequences"] if s["interval"] == top)  # the top interval's largest: first shown
    sequence["tokens"][1:1 + len(HOSTILE)] = HOSTILE
    sequence["tokens"] = sequence["tokens"][:sequence["seq_len"]]
    path.write_text(json.dumps(payload))
    assert main(["atlas", "import", "--headvis", str(tree), "--for-model", MINILM]) == 0
    at.run()
    assert_clean(at)
    compared = table(at, "ours − published")
    assert len(compared) == 6 and list(compared["ours"]) == list(compared["published"])
    assert all(gap == "0.0000" for gap in compared["ours − published"] if gap != "–")
    scatter = chart(at, "atlas_published_scatter")
    found = work.stored(built["bench"], MINILM)["metrics"]
    assert scatter["layout"]["meta"]["points"] == sum(v is not None for grid in found.values() for row in grid
                                                      for v in row)
    about = next(c.value for c in at.caption if "Published atlas of" in c.value)
    assert "<b>" not in about and "www." not in about.replace("www\u200b", "")  # md(): text, never a link
    # the published examples: every hostile token shows literally, escaped once
    body = html(at)
    assert "&lt;b&gt;x&lt;/b&gt;" in body and "<b>x</b>" not in body and "&amp;lt;" not in body
    assert "$x$" in body and "<img" not in body and "<a" not in body and "www.evil.example" in body
    assert "a⏎b" in body and ">␣<" in body

    seed = table(at, "best head")  # the seed's examples are data too (tests/ui/test_app_atlas.py)
    data = data_words(*built["texts"], *HOSTILE, HOSTILE_MODEL, *map(str, seed["example it gets right"])) | \
        shown_tokens(built, built["ours"])
    walk(at, "zh", data)
    assert any(h.value == "与我们的图谱并列的已发布图谱" for h in at.subheader)
    walk(at, "en", data)

    # "Open in Explore" with the first example: its shipped sentence, exactly, at this head
    at.button(key="atlas_ours_open").click().run()
    assert_clean(at)
    opened_focus = at.session_state["_focus"]
    assert opened_focus.text == built["texts"][first.sequence_id]
    assert (opened_focus.layer, opened_focus.head) == (layer, head)
    assert not any(b.key == "atlas_ours_open" for b in at.button)


def test_detector_scores_are_shown_with_ranks_when_the_atlas_has_them(built, monkeypatch):
    layer, head = built["head"]
    stored = work.stored

    def with_detectors(bench, name):
        found = stored(bench, name)
        grid = [[float(l_ * 12 + h) for h in range(12)] for l_ in range(6)]
        return {**found, "detectors": {"previous_token": grid, "duplicate_token": None, "induction": grid}}

    monkeypatch.setattr(work, "stored", with_detectors)
    at = opened(built)
    detectors = table(at, "detector")
    assert list(detectors["detector"]) == [en("atlas_detector_previous_token"), en("atlas_detector_induction")]
    rank = 72 - (layer * 12 + head)
    assert list(detectors["rank"]) == [f"{rank} / 72"] * 2
    monkeypatch.setattr(work, "stored", lambda bench, name: {**stored(bench, name), "detectors": None})
    at.run()
    assert_clean(at)
    assert not tables(at, "detector")


def test_a_hostile_token_is_escaped_once_in_the_examples_html():
    tokens = ("<s>", *HOSTILE)
    n = len(tokens)
    example = HeadExample(0, 5, 0.5, tokens, np.array([1 * n + 0, 2 * n + 1, 2 * n + 2]), np.array([0.9, 0.3, 0.6]), n)
    label = "#1 <i>label</i>"
    for query in (-1, 2):
        body = tokens_html(example, label, query, say=en)
        assert "<b>x</b>" not in body and "<img" not in body and "<i>label" not in body
        assert "&lt;b&gt;x&lt;/b&gt;" in body and "&lt;i&gt;label&lt;/i&gt;" in body and "&amp;lt;" not in body
        assert "$x$" in body and "www.evil.example" in body and "<a" not in body
        assert 'title="#2 $x$' in body  # the tooltip names the token, escaped once with its quotes
        assert "&quot;&gt;&lt;img" in body
    assert 'title="#1 &lt;b&gt;x&lt;/b&gt;: 0.3000 from #2 $x$"' in tokens_html(example, label, 2, say=en)
    assert 'title="#0 &lt;s&gt;: most attention received 0.9000, from #1 &lt;b&gt;x&lt;/b&gt;"' in tokens_html(
        example, label, say=en)


def test_an_example_too_long_for_a_link_is_cut_between_words():
    assert for_explore("short text", 20) == "short text"
    assert for_explore("one two three", 9) == "one two"
    assert for_explore("abcdefghij", 4) == "abcd"  # no space to cut at
