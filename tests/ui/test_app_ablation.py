"""AppTest of the Explore page's "Switch heads off" expander (attnviz/ui/ablation.py): the controls, the
numbers they show against attnviz.interventions.ablation run directly, the importance scan, URL state and Chinese.

Three kinds of model: MiniLM (sentence embedding, no head), SmolLM2 (decoder) and a tiny BertForMaskedLM
saved to a folder the app may load (ATTNVIZ_MODEL_DIRS), for mask filling.
"""

from __future__ import annotations

import numpy as np
import pytest
import transformers as tf
from streamlit.testing.v1 import AppTest

import attnviz
from attnviz.interventions import ablation
from attnviz.readouts import predictions
from tests.conftest import MINILM, SMOLLM, require_offline
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import APP, TIMEOUT, assert_clean, chart, open_view, z_array
from tests.helpers.tiny_hf import tiny_mlm
from tests.helpers.tiny_tokenizers import encoder_tokenizer

SENTENCE = "The keys to the cabinet are on the table."


def mask_of(model, off) -> np.ndarray:
    return predictions.head_mask_of(model, off)


def test_embedding_model_heads_and_layers_switch_off(app, minilm):
    open_view(app, "matters")
    app.text_input(key="text").input(SENTENCE).run()
    heads = app.multiselect(key="ablation_heads")
    assert heads.label == "Heads to switch off" and len(heads.options) == 6 * 12 and heads.options[13] == "L1 H1"
    assert any("no masked-LM head" in c.value for c in app.caption)
    assert any("Choose heads or whole layers" in i.value for i in app.info)
    heads.set_value(["0.1", "2.3"]).run()
    assert_clean(app)
    assert any("2 of 72 heads switched off" in c.value for c in app.caption)
    expected = predictions.embedding_cosine_change(minilm, SENTENCE, mask_of(minilm, [(0, 1), (2, 3)]))
    shown = [m.value for m in app.markdown if m.value.startswith("Sentence embedding change")]
    assert shown == [f"Sentence embedding change (1 - cosine): {expected:.5f}"] and expected > 1e-4
    assert app.query_params["off"] == "0.1,2.3" and "off_layers" not in app.query_params
    layers = app.multiselect(key="ablation_layers")
    assert layers.label == "Whole layers to switch off"
    layers.set_value([4]).run()
    assert_clean(app)
    assert any("14 of 72 heads switched off" in c.value for c in app.caption)  # 2 heads + all 12 of layer 4
    assert app.query_params["off_layers"] == "4"
    app.multiselect(key="ablation_heads").set_value([]).run()
    app.multiselect(key="ablation_layers").set_value([]).run()
    assert "off" not in app.query_params and "off_layers" not in app.query_params
    assert "Continuation to score" not in [w.label for w in app.text_input]  # encoders score no continuation


def test_importance_scan_draws_layers_by_heads(app, minilm):
    open_view(app, "matters")
    app.text_input(key="text").input("Dogs bark at night.").run()
    finish_jobs(app.button(key="ablation_scan_run").click().run())
    assert_clean(app)
    grid = z_array(chart(app, "ablation_scan")["data"][0])
    assert grid.shape == (6, 12)
    for layer, head in [(0, 0), (3, 7), (5, 11)]:  # each cell is that head's single ablation
        single = predictions.embedding_cosine_change(minilm, "Dogs bark at night.", mask_of(minilm, [(layer, head)]))
        assert grid[layer, head] == pytest.approx(single, rel=1e-3, abs=1e-6)
    assert (grid >= -1e-6).all() and grid.max() > 1e-4
    # Shared per (model, text, quantity): a second visitor sees the grid without pressing the button.
    other = AppTest.from_file(APP, default_timeout=TIMEOUT)
    other.query_params["view"] = "matters"
    other.query_params["text"] = "Dogs bark at night."
    other.run()
    assert z_array(chart(other, "ablation_scan")["data"][0]).shape == (6, 12)


def test_scan_refuses_long_sentences(app):
    open_view(app, "matters")
    from attnviz.ui.ablation import MAX_SCAN_TOKENS

    app.text_input(key="text").input(" ".join(["word"] * (MAX_SCAN_TOKENS + 5))).run()
    assert_clean(app)
    assert any(f"at most {MAX_SCAN_TOKENS} tokens" in i.value for i in app.info)
    assert not [b for b in app.button if b.key == "ablation_scan_run"]


def test_url_restores_the_heads_and_ignores_what_does_not_fit():
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["view"] = "matters"
    at.query_params["off"] = "1.2,5.11,99.0"  # 99.0: no such layer in MiniLM, dropped
    at.query_params["off_layers"] = "3"
    at.run()
    assert_clean(at)
    assert at.multiselect(key="ablation_heads").value == ["1.2", "5.11"]
    assert at.multiselect(key="ablation_layers").value == [3]
    for bad in ("1.2,abc", "1,2", ",".join(["0.0"] * 3000)):  # malformed, or beyond the length bound
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at.query_params["view"] = "matters"
        at.query_params["off"] = bad
        at.run()
        assert_clean(at)
        assert at.multiselect(key="ablation_heads").value == []


def test_chinese_labels():
    require_offline(MINILM)
    at = open_view(AppTest.from_file(APP, default_timeout=TIMEOUT), "matters")
    at.radio(key="lang").set_value("zh").run()
    assert_clean(at)
    assert at.multiselect(key="ablation_heads").label == "要关闭的注意力头"
    assert at.multiselect(key="ablation_layers").label == "整层关闭"
    assert "关闭注意力头" in [e.label for e in at.expander]
    at.multiselect(key="ablation_layers").set_value([0]).run()
    assert any("句向量变化" in m.value for m in at.markdown)


def test_decoder_continuation_and_next_tokens(smollm):
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params["view"] = "matters"
    at.query_params["model"] = SMOLLM
    at.query_params["text"] = "The capital of France is"
    at.query_params["cont"] = " Paris"
    at.query_params["off_layers"] = "0"
    at.run()
    assert_clean(at)
    assert at.text_input(key="ablation_continuation").label == "Continuation to score"
    assert at.text_input(key="ablation_continuation").value == " Paris"
    mask = mask_of(smollm, [(0, h) for h in range(9)])
    before, tokens = predictions.continuation_logprob(smollm, "The capital of France is", " Paris")
    after, _ = predictions.continuation_logprob(smollm, "The capital of France is", " Paris", mask)
    result = next(m.value for m in at.markdown if m.value.startswith("`log P(continuation | sentence)`"))
    assert f"{before:.3f} with every head" in result and f"{after:.3f} with the heads switched off" in result
    assert abs(after - before) > 0.01  # switching off layer 0 matters
    table = next(d.value for d in at.dataframe if "log-probability, all heads" in d.value.columns)
    assert list(table["log-probability, all heads"]) == pytest.approx([round(lp, 4) for _, lp in tokens], abs=1e-4)
    top_after = predictions.next_token_top_k(smollm, "The capital of France is", mask)
    after_table = next(d.value for d in at.dataframe if list(d.value.columns) == ["token", "probability"]
                       and d.value["probability"].tolist() == pytest.approx([round(p.prob, 4) for p in top_after],
                                                                            abs=1e-4))
    assert len(after_table) == 5
    assert at.button(key="ablation_scan_run").label == "Scan every head (270 forward passes)"
    assert at.query_params["cont"] == " Paris"


@pytest.fixture(scope="module")
def mlm_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_mlm")
    tokenizer = encoder_tokenizer()
    tiny_mlm("bert", tokenizer).save_pretrained(folder)
    tf.PreTrainedTokenizerFast(tokenizer_object=tokenizer, cls_token="[CLS]", sep_token="[SEP]",
                               pad_token="[PAD]", mask_token="[MASK]").save_pretrained(folder)
    return folder


def test_masked_lm_fills_and_scan(mlm_folder, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(mlm_folder.parent))
    direct = attnviz.load(str(mlm_folder), device="cpu")
    at = open_view(AppTest.from_file(APP, default_timeout=TIMEOUT), "matters")
    at.text_input(key="model_custom").input(str(mlm_folder)).run()
    at.text_input(key="text").input("The cat sat on the mat.").run()
    assert_clean(at)
    assert any("Put one `[MASK]`" in i.value for i in at.info)  # no mask yet: a hint, no table
    text = "The cat sat on the [MASK]."
    at.text_input(key="text").input(text).run()
    at.multiselect(key="ablation_heads").set_value(["1.0", "1.3"]).run()
    assert_clean(at)
    before = predictions.mask_fill_top_k(direct, text)
    after = predictions.mask_fill_top_k(direct, text, mask_of(direct, [(1, 0), (1, 3)]))
    tables = [d.value for d in at.dataframe if "probability, heads off" in d.value.columns]
    assert tables and tables[0]["probability"].tolist() == pytest.approx([round(p.prob, 4) for p in before], abs=1e-4)
    assert any(d.value["probability"].tolist() == pytest.approx([round(p.prob, 4) for p in after], abs=1e-4)
               for d in at.dataframe if list(d.value.columns) == ["token", "probability"])
    finish_jobs(at.button(key="ablation_scan_run").click().run())
    assert_clean(at)
    grid = z_array(chart(at, "ablation_scan")["data"][0])
    expected = ablation.importance_scan(direct, text, "mask_fill")
    assert grid.shape == (2, 4) and grid == pytest.approx(expected, abs=1e-4)
