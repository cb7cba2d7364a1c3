"""AppTest of the Learn page's new parts: MHA/GQA/MQA measured side by side, the named models, MHA -> GQA
conversion (MiniLM), the KV-group head distances (SmolLM2), their URL state and their Chinese strings.
The page's first table (one module's shapes) is covered by tests/ui/test_app.py."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import LEARN, TIMEOUT


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def open_learn(**params) -> AppTest:
    at = AppTest.from_file(LEARN, default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


@pytest.fixture(scope="module")
def page() -> AppTest:
    require_offline(MINILM)
    at = open_learn(d_model="64", heads="8", kv_heads="2", tokens="16")
    assert_clean(at)
    return at


def variants_table(at: AppTest):
    return at.table[0].value


def test_side_by_side_before_and_after_measuring(page):
    table = variants_table(page)
    assert list(table["variant"]) == ["MHA", "GQA", "MQA"]
    assert list(table["KV heads"]) == [8, 2, 1]
    # 2 layers; by hand: Q and O 64x64 + 64 each; K and V 64 x (K * 8) + K * 8 each
    by_hand = [2 * (2 * (64 * 64 + 64) + 2 * (64 * k * 8 + k * 8)) for k in (8, 2, 1)]
    assert list(table["parameters"]) == [f"{n:,}" for n in by_hand]
    assert list(table["cache bytes (measured)"]) == ["—"] * 3  # not measured yet
    finish_jobs(page.button(key="learn_measure").click().run())
    assert_clean(page)
    table = variants_table(page)
    # 2 layers x (K + V) x 16 tokens x K heads x 8 dims x 4 bytes, and what the tensors held
    expected = [f"{2 * 2 * 16 * k * 8 * 4:,}" for k in (8, 2, 1)]
    assert list(table["cache bytes (formula)"]) == expected
    assert list(table["cache bytes (measured)"]) == expected
    assert list(table["share of MHA (measured)"]) == ["1.0000", "0.2500", "0.1250"]
    assert all(float(v) > 0 for v in table["ms per token, cache 1024"])
    assert any("interleaved" in c.value for c in page.caption)


def test_controls_join_the_link(page):
    params = dict(page.query_params)
    assert {key: params[key] for key in ("d_model", "heads", "kv_heads", "tokens", "groups", "model")} == {
        "d_model": "64", "heads": "8", "kv_heads": "2", "tokens": "16", "groups": "3", "model": MINILM}
    assert params["text"] == "The keys to the cabinet are on the table."
    page.select_slider(key="learn_heads").set_value(4).run()
    assert page.select_slider(key="learn_kv_heads").value == 2  # still a divisor of 4
    page.select_slider(key="learn_heads").set_value(1).run()
    assert_clean(page)
    assert page.select_slider(key="learn_kv_heads").value == 1  # 2 no longer divides 1 heads: reset
    assert list(variants_table(page)["variant"]) == ["MHA", "GQA", "MQA"]


def test_bad_link_values_are_ignored():
    require_offline(MINILM)
    at = open_learn(d_model="100", heads="8", kv_heads="3", tokens="9999", groups="5")
    assert_clean(at)
    assert at.select_slider(key="learn_d_model").value == 512
    assert at.select_slider(key="learn_kv_heads").value == 2  # 3 does not divide 8: the default (GQA, 8 / 4)
    assert at.select_slider(key="learn_tokens").value == 128
    assert at.select_slider(key="learn_groups").value in (12, 6, 4, 3, 2, 1)
    assert at.select_slider(key="learn_groups").value != 5


def test_named_models_are_accurate(page):
    names = page.table[1].value
    by_variant = {v: set(names[names["variant"] == v]["model"]) for v in ("MHA", "MQA", "GQA")}
    assert "Llama 2 70B" in by_variant["GQA"] and "Llama 2 7B / 13B" in by_variant["MHA"]
    assert {"PaLM 540B (Chowdhery et al. 2022)", "Falcon-7B"} == by_variant["MQA"]
    assert not any("Gemini" in name for name in names["model"])
    assert any("Gemini" in c.value and "not published" in c.value for c in page.caption)


def test_mla_beside_mha_gqa_mqa_measured_at_two_sizes(page):
    """The original Transformer's size (DeepSeek's ratio: a latent of 256 and a rotary key of 32 for heads of
    64) and the loaded MiniLM's (384 wide, 12 heads of 32, 6 layers), from the cache tensors after decoding."""
    original, loaded = page.table[2].value, page.table[3].value
    assert list(original["variant"]) == ["MHA", "GQA", "MQA", "MLA"]
    per_layer = [2 * 8 * 64 * 4, 2 * 2 * 64 * 4, 2 * 64 * 4, (256 + 32) * 4]
    assert [cell.split(" B ")[0] for cell in original["KV cache memory (measured)"]] == [f"{n:,}" for n in per_layer]
    assert "DeepSeek-V3 / R1" in original["used by"].iloc[3]
    per_layer = [2 * 12 * 32 * 4, 2 * 3 * 32 * 4, 2 * 32 * 4, (4 * 32 + 16) * 4]
    assert [cell.split(" B ")[0] for cell in loaded["KV cache memory (measured)"]] == [f"{n:,}" for n in per_layer]
    assert f"{6 * (4 * 32 + 16) * 4:,} B per token over 6 layers" in loaded["KV cache memory (measured)"].iloc[3]


def test_conversion_on_minilm():
    require_offline(MINILM)
    at = open_learn(text="The keys to the cabinet are on the table.", groups="12")
    assert_clean(at)
    assert at.select_slider(key="learn_groups").options == ["12", "6", "4", "3", "2", "1"]
    finish_jobs(at.button(key="learn_convert_run").click().run())
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "mean JS distance" in d.value.columns)
    assert len(table) == 6 and (table["mean JS distance"] == 0).all() and (table["max |Δ attention|"] == 0).all()
    assert any("moved by 0.00%" in c.value for c in at.caption)
    at.select_slider(key="learn_groups").set_value(1).run()
    finish_jobs(at.button(key="learn_convert_run").click().run())
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "mean JS distance" in d.value.columns)
    assert (table["mean JS distance"] > 0).all() and (table["mean JS distance"] <= 1).all()
    assert dict(at.query_params)["groups"] == "1"


def test_too_long_sentence_is_refused_with_a_message():
    require_offline(MINILM)
    at = open_learn(text=" ".join(["word"] * 140))
    assert_clean(at)
    assert any("at most 128 tokens" in w.value for w in at.warning)
    assert not [b for b in at.button if b.key == "learn_convert_run"]


def test_kv_groups_on_smollm2_in_chinese():
    require_offline(SMOLLM)
    at = AppTest.from_file(LEARN, default_timeout=TIMEOUT)
    at.query_params["lang"] = "zh"
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = "The keys to the cabinet are on the table."
    at.run()
    assert_clean(at)
    assert any("GQA" in i.value and "9" in i.value for i in at.info)  # nothing to pool: explained
    assert not [s for s in at.select_slider if s.key == "learn_groups"]
    finish_jobs(at.button(key="learn_kv_run").click().run())
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "同一 KV 组内" in d.value.columns)
    assert len(table) == 30
    assert ((table["同一 KV 组内"] > 0) & (table["不同 KV 组间"] < 1)).all()
    assert any("p < 0.05" in c.value for c in at.caption)
    assert "KV 头数" in at.table[0].value.columns  # the side-by-side table's columns in Chinese
    assert {"K、V 共享方式", "显存占用", "使用者"} <= set(at.table[2].value.columns)  # MLA beside the others
