"""Minimal pairs: word alignment and the per-head attention difference (attnviz.analysis.minimal_pairs) against
hand computation; the BLiMP-style reader (attnviz.analysis.blimp_jsonl) on the real files and on hostile
lines; the built-in pairs; the preference (attnviz.readouts.preference) against log-probabilities computed from
Hugging Face's logits of tiny random GPT-2 and Llama models; the `blimp` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers as tf
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

import attnviz
from attnviz.__main__ import main
from attnviz.analysis import blimp_jsonl
from attnviz.analysis.blimp_jsonl import MinimalPair, parse_pairs, read_pairs
from attnviz.analysis.minimal_pairs import (
    align_texts,
    align_words,
    attention_difference,
    slot_attention,
    trace_difference,
)
from attnviz.loading import build_module
from attnviz.models.loaded_model import LoadedModel, ModelInfo
from attnviz.readouts import predictions, preference
from tests.conftest import require_data
from tests.helpers import tiny_hf, tiny_tokenizers

BLIMP_FILES = ("distractor_agreement_relational_noun.jsonl", "distractor_agreement_relative_clause.jsonl",
               "regular_plural_subject_verb_agreement_1.jsonl")


# --- alignment -------------------------------------------------------------------------------------------


def test_substitution_in_english():
    a = align_texts("The keys to the cabinet are on the table.", "The keys to the cabinet is on the table.")
    assert (a.prefix, a.suffix, a.span_a, a.span_b, a.kind) == (5, 4, (5, 6), (5, 6), "substitution")
    assert a.labels() == ["The", "keys", "to", "the", "cabinet", "are→is", "on", "the", "table", "."]
    assert a.slot_of_word("a") == a.slot_of_word("b") == list(range(10))


def test_insertion_in_english_maps_the_suffix_past_the_inserted_words():
    a = align_texts("The guests arrived late.", "The guests arrived the party late.")
    assert (a.prefix, a.suffix, a.span_a, a.span_b, a.kind) == (3, 2, (3, 3), (3, 5), "insertion")
    assert a.labels() == ["The", "guests", "arrived", "∅→the party", "late", "."]
    assert a.slot_of_word("a") == [0, 1, 2, 4, 5]
    assert a.slot_of_word("b") == [0, 1, 2, 3, 3, 4, 5]  # both inserted words share the changed slot


def test_chinese_substitution_and_insertion_align_by_jieba_words():
    # jieba.lcut: 桌子/上/有/三把/椅子 and 桌子/上/有/三条/椅子 (issue 19: before, one word a character)
    a = align_texts("桌子上有三把椅子。", "桌子上有三条椅子。")
    assert (a.prefix, a.suffix, a.kind) == (3, 2, "substitution")
    assert a.labels("") == ["桌子", "上", "有", "三把→三条", "椅子", "。"]
    b = align_texts("你去不去学校？", "你去不去学校吗？")
    assert (b.prefix, b.suffix, b.span_a, b.span_b, b.kind) == (3, 1, (3, 3), (3, 4), "insertion")
    assert b.labels("")[3] == "∅→吗"
    c = align_texts("虽然下雨了，但是我们还是去了公园。", "虽然下雨了，所以我们还是去了公园。")
    assert c.labels("")[c.changed_slot] == "但是→所以" and c.kind == "substitution"


def test_repeated_words_and_identical_sentences():
    # The suffix may not reach into the prefix: "a a" vs "a" is one inserted "a", not a negative span.
    a = align_words(["a", "a"], ["a"])
    assert (a.prefix, a.suffix, a.span_a, a.span_b) == (1, 0, (1, 2), (1, 1))
    with pytest.raises(ValueError, match="same words"):
        align_texts("The dog barks.", "The  dog barks.")  # whitespace is no word
    with pytest.raises(ValueError, match="at least one word"):
        align_words([], ["a"])


# --- the per-head difference against hand computation ---------------------------------------------------------


def hand_word_attention(attention: np.ndarray, token_words: list[set[int]], n: int) -> np.ndarray:
    """W[i, j] = mean over the tokens of slot i of the sum over the tokens of slot j, by loops."""
    out = np.full((n, n), np.nan)
    for i in range(n):
        rows = [t for t, words in enumerate(token_words) if i in words]
        for j in range(n):
            cols = [s for s, words in enumerate(token_words) if j in words]
            if rows and cols:
                out[i, j] = sum(attention[t, s] for t in rows for s in cols) / len(rows)
    return out


def random_rows(rng, shape):
    a = rng.random(shape)
    return a / a.sum(axis=-1, keepdims=True)


def test_difference_equals_hand_computation_for_a_substitution():
    rng = np.random.default_rng(0)
    alignment = align_words(["The", "keys", "are", "here", "."], ["The", "keys", "is", "here", "."])
    # A: a special token first, "keys" in two tokens. B: "here" in two tokens, a special token last.
    tokens_a = [None, 0, 1, 1, 2, 3, 4]
    tokens_b = [0, 1, 2, 3, 3, 4, None]
    att_a, att_b = random_rows(rng, (2, 3, 7, 7)), random_rows(rng, (2, 3, 7, 7))
    diff = attention_difference(att_a, tokens_a, att_b, tokens_b, alignment)
    for layer in range(2):
        for head in range(3):
            ha = hand_word_attention(att_a[layer, head], [set() if w is None else {w} for w in tokens_a], 5)
            hb = hand_word_attention(att_b[layer, head], [set() if w is None else {w} for w in tokens_b], 5)
            np.testing.assert_allclose(diff.difference[layer, head], ha - hb, rtol=0, atol=1e-12)
    expected_max = np.abs(diff.difference).reshape(2, 3, -1).max(axis=-1)
    np.testing.assert_array_equal(diff.max_abs, expected_max)
    assert diff.labels == ["The", "keys", "are→is", "here", "."]


def test_insertion_pools_the_span_and_leaves_the_missing_slot_nan():
    rng = np.random.default_rng(1)
    alignment = align_words(["She", "has", "been", "."], ["She", "has", "not", "ever", "been", "."])
    tokens_a = [0, 1, 2, 3]
    tokens_b = [0, 1, 2, 3, 3, 4, 5]  # "ever" in two tokens; "not ever" pools into slot 2
    att_a, att_b = random_rows(rng, (1, 2, 4, 4)), random_rows(rng, (1, 2, 7, 7))
    diff = attention_difference(att_a, tokens_a, att_b, tokens_b, alignment)
    slots_b = alignment.slot_of_word("b")
    assert slots_b == [0, 1, 2, 2, 3, 4]
    slot_words_a = [{alignment.slot_of_word("a")[w]} for w in tokens_a]
    slot_words_b = [{slots_b[w]} for w in tokens_b]
    for head in range(2):
        ha = hand_word_attention(att_a[0, head], slot_words_a, 5)
        hb = hand_word_attention(att_b[0, head], slot_words_b, 5)
        assert np.isnan(ha[2]).all() and np.isnan(ha[:, 2]).all()  # A has no word in the changed slot
        np.testing.assert_allclose(diff.difference[0, head], ha - hb, rtol=0, atol=1e-12, equal_nan=True)
        # Pooled row: mean over the span's 3 tokens of the sum over each column's tokens.
        assert diff.b[0, head, 2, 0] == pytest.approx(att_b[0, head, 2:5, 0].mean())
    assert np.isfinite(diff.max_abs).all()
    finite = np.nan_to_num(np.abs(diff.difference), nan=0)
    np.testing.assert_array_equal(diff.max_abs, finite.reshape(1, 2, -1).max(axis=-1))


def test_slot_attention_rejects_word_indices_out_of_range():
    alignment = align_words(["a", "b"], ["a", "c"])
    with pytest.raises(ValueError, match="out of range"):
        slot_attention(np.ones((1, 1, 2, 2)) / 2, [0, 5], alignment, "a")


# --- tiny random decoders with a byte-level BPE --------------------------------------------------------------

CORPUS = [
    "The keys to the cabinet are on the table. The key to the cabinets is on the table.",
    "The dogs bark at night and the dog barks at noon. She has not ever been to Rome.",
    "The guests arrived late, the party was long. 桌子上有三把椅子。河里有两条鱼。",
] * 20


def bpe_tokenizer(bos: bool) -> Tokenizer:
    return tiny_tokenizers.bpe_tokenizer(bos, CORPUS, vocab_size=360)


def tiny_decoder(family: str):
    """(our LoadedModel, HF's eager model) on the same random weights; Llama's tokenizer adds a BOS."""
    return tiny_hf.tiny_decoder(family, bpe_tokenizer(bos=family == "llama"), seed=1, intermediate_size=40,
                                max_position_embeddings=64)


@pytest.fixture(scope="module")
def gpt2():
    return tiny_decoder("gpt2")


@pytest.fixture(scope="module")
def llama():
    return tiny_decoder("llama")


def hf_sum(hf, ids: list[int], first: int) -> float:
    """sum over t >= first of log softmax(HF logits)[t - 1, ids[t]], in float64."""
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor([ids])).logits[0].double()
    logprobs = torch.log_softmax(logits, dim=-1)
    return float(sum(logprobs[t - 1, ids[t]] for t in range(first, len(ids))))


AGREEMENT = MinimalPair("The keys to the cabinet are on the table.", "The keys to the cabinet is on the table.",
                        "The keys to the cabinet", "are", "is")
INSERTION = MinimalPair("She has not ever been to Rome.", "She has ever been to Rome.")


def test_prefix_preference_equals_hf_logits(gpt2):
    model, hf = gpt2
    result = preference.pair_preference(model, AGREEMENT)
    assert result.method == "prefix" and not result.first_token_unscored
    tok = model.tokenizer
    for side, value in (("good", result.good), ("bad", result.bad)):
        ids = tok.encode(AGREEMENT.prefix + AGREEMENT.continuation(side)).ids
        first = len(tok.encode(AGREEMENT.prefix).ids)  # the boundary is a space: a clean BPE boundary
        assert value == pytest.approx(hf_sum(hf, ids, first), abs=1e-4)
    assert result.margin == pytest.approx(result.good - result.bad)
    assert result.prefers_good == (result.good > result.bad)


def test_sentence_preference_without_bos_leaves_the_first_token_out(gpt2):
    model, hf = gpt2
    result = preference.pair_preference(model, INSERTION)
    assert result.method == "sentence" and result.first_token_unscored
    for sentence, value in ((INSERTION.good, result.good), (INSERTION.bad, result.bad)):
        ids = model.tokenizer.encode(sentence).ids
        assert value == pytest.approx(hf_sum(hf, ids, 1), abs=1e-4)


def test_sentence_preference_with_bos_scores_every_token(llama):
    model, hf = llama
    result = preference.pair_preference(model, INSERTION)
    assert result.method == "sentence" and not result.first_token_unscored
    for sentence, value in ((INSERTION.good, result.good), (INSERTION.bad, result.bad)):
        ids = model.tokenizer.encode(sentence).ids
        assert ids[0] == 0  # <s>
        assert value == pytest.approx(hf_sum(hf, ids, 1), abs=1e-4)


def test_head_mask_reaches_the_preference(gpt2):
    model, _ = gpt2
    plain = preference.pair_preference(model, AGREEMENT)
    ones = preference.pair_preference(model, AGREEMENT, head_mask=np.ones((2, 4)))
    assert (ones.good, ones.bad) == (plain.good, plain.bad)
    off = np.ones((2, 4))
    off[1, 2] = 0
    ablated = preference.pair_preference(model, AGREEMENT, head_mask=off)
    assert ablated.good != plain.good
    reference, _ = predictions.continuation_logprob(model, AGREEMENT.prefix, " are", off)
    assert ablated.good == reference


def test_batched_scores_equal_one_by_one_with_padding_and_per_row_masks(gpt2):
    model, _ = gpt2
    requests = [("The keys to the cabinet", " are on the table."), ("The dog", " barks"),
                ("She has", " not ever been to Rome."), ("桌子上有三", "把")]
    rows = [predictions.continuation_ids(model, *r) for r in requests]
    assert len({len(ids) for ids, _ in rows}) > 1  # padding is exercised
    expected = [predictions.continuation_logprob(model, *r)[0] for r in requests]
    np.testing.assert_allclose(preference.continuation_batch(model, rows), expected, rtol=0, atol=1e-4)
    masks = np.ones((2, len(rows), 4))
    masks[0, 1, 3] = masks[1, 2, 0] = masks[1, 3, :] = 0
    batched = preference.continuation_batch(model, rows, head_mask=masks)
    one_by_one = [predictions.continuation_logprob(model, *r, masks[:, b])[0] for b, r in enumerate(requests)]
    np.testing.assert_allclose(batched, one_by_one, rtol=0, atol=1e-4)


def test_score_pairs_counts_what_pair_preference_says(gpt2):
    model, _ = gpt2
    pairs = preference.builtin_pairs()
    result = preference.score_pairs(model, "builtin", pairs, batch=7)
    margins = [preference.pair_preference(model, pair).margin for pair in pairs]
    np.testing.assert_allclose(result.margins, margins, rtol=0, atol=1e-4)
    assert result.n == len(pairs) and result.correct == sum(m > 0 for m in margins)
    assert result.methods == {"prefix": sum(p.has_prefix for p in pairs),
                              "sentence": sum(not p.has_prefix for p in pairs)}


def test_encoder_without_mlm_head_has_no_preference():
    torch.manual_seed(0)
    hf = tf.BertModel(tf.BertConfig(vocab_size=360, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                    intermediate_size=37, max_position_embeddings=64))
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    model = LoadedModel(module, bpe_tokenizer(bos=False), ModelInfo.describe(module, "tiny bert", "(test)", "bert", 64),
                        {"pad_token": "<pad>"})
    with pytest.raises(ValueError, match="not available"):
        preference.pair_preference(model, AGREEMENT)


def test_trace_difference_of_a_real_causal_run(gpt2):
    """The words before the change see the same tokens in both sentences, so a causal model's rows for
    them do not differ; the changed slot does."""
    model, _ = gpt2
    traces = [model.run(AGREEMENT.good), model.run(AGREEMENT.bad)]
    diff = trace_difference(*traces)
    n_layers, n_heads = model.info.n_layers, model.info.n_heads
    assert diff.difference.shape == (n_layers, n_heads, 10, 10)
    np.testing.assert_allclose(diff.difference[:, :, :5], 0, atol=1e-6)
    assert np.abs(diff.difference[:, :, 5]).max() > 1e-3
    assert (diff.max_abs > 1e-3).all()
    expected = slot_attention(traces[0].attentions, traces[0].word_of_token, diff.alignment, "a")
    np.testing.assert_array_equal(diff.a, expected)


# --- the reader -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BLIMP_FILES)
def test_reads_the_real_blimp_files(name):
    path = require_data(f"blimp/{name}")
    pairs = read_pairs(path)
    assert len(pairs) == 1000
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for pair, row in zip(pairs, rows):
        assert (pair.good, pair.bad) == (row["sentence_good"], row["sentence_bad"])
        assert pair.prefix == row["one_prefix_prefix"]
        assert pair.id == row["pairID"] and pair.phenomenon == row["UID"] == name.removesuffix(".jsonl")
        for side in ("good", "bad"):
            assert pair.continuation(side) == " " + row[f"one_prefix_word_{side}"]
            assert pair.sentence(side).startswith(pair.prefix + pair.continuation(side))
        # In these files the sentences differ only in that word: one substitution in the alignment.
        assert align_texts(pair.good, pair.bad).kind == "substitution"
    assert read_pairs(path, limit=3) == pairs[:3]


def test_prefix_fields_may_be_absent_and_extra_keys_are_ignored():
    text = ('{"sentence_good": "He is here.", "sentence_bad": "He are here.", "field": "x", "pairID": 7}\n\n'
            '{"sentence_good": "我买了一本书。", "sentence_bad": "我买了一匹书。", "one_prefix_prefix": "我买了一", '
            '"one_prefix_word_good": "本", "one_prefix_word_bad": "匹", "lang": "zh"}\n')
    first, second = parse_pairs(text.encode("utf-8-sig"))
    assert not first.has_prefix and first.id == "7" and first.continuation("good") is None
    assert second.continuation("good") == "本" and second.lang == "zh"


HOSTILE = [
    ("not json", "line 2: not valid JSON"),
    ("[1, 2]", "line 2: expected a JSON object, got list"),
    ('{"sentence_good": "A b."}', "line 2: missing key(s) sentence_bad"),
    ('{"sentence_good": 3, "sentence_bad": "A b."}', "line 2: sentence_good must be a non-empty string"),
    ('{"sentence_good": "  ", "sentence_bad": "A b."}', "line 2: sentence_good must be a non-empty string"),
    ('{"sentence_good": "A b.", "sentence_bad": "A b."}', "line 2: sentence_good and sentence_bad are the same"),
    ('{"sentence_good": "A b.", "sentence_bad": "A c.", "one_prefix_prefix": "A"}',
     "line 2: has one_prefix_prefix but not one_prefix_word_good, one_prefix_word_bad"),
    ('{"sentence_good": "A b.", "sentence_bad": "A c.", "one_prefix_prefix": "A", "one_prefix_word_good": "x", '
     '"one_prefix_word_bad": "c"}', "line 2: sentence_good does not start with one_prefix_prefix"),
    ('{"sentence_good": "A b.", "sentence_bad": "A c.", "one_prefix_prefix": "A", "one_prefix_word_good": [1], '
     '"one_prefix_word_bad": "c"}', "line 2: one_prefix_prefix, one_prefix_word_good, one_prefix_word_bad must be"),
    ('{"sentence_good": "A b.", "sentence_bad": "A c.", "one_prefix_prefix": "A", "one_prefix_word_good": " b", '
     '"one_prefix_word_bad": "c"}', "line 2: one_prefix_word_good must be a word without surrounding spaces"),
    ('{"sentence_good": "A b.", "sentence_bad": "A c.", "pairID": true}', "line 2: pairID must be a string"),
    ('{"sentence_good": "' + "x" * 1001 + '", "sentence_bad": "A b."}', "line 2: sentence_good has 1001 characters"),
    ("[" * 100_000 + "]" * 100_000, "line 2: nested too deeply"),
]


@pytest.mark.parametrize("line, message", HOSTILE)
def test_hostile_lines_are_value_errors_naming_the_line(line, message):
    good = '{"sentence_good": "He is here.", "sentence_bad": "He are here."}'
    with pytest.raises(ValueError) as caught:
        parse_pairs(f"{good}\n{line}\n", name="upload.jsonl")
    assert str(caught.value).startswith(f"upload.jsonl, {message}"), str(caught.value)
    assert len(str(caught.value)) < 300  # a hostile line is never echoed whole


@pytest.mark.parametrize("data, message", [
    (b'{"sentence_good": "\xff"}', "line 1: not UTF-8 text"),
    ("\ufeff{}".encode("utf-16"), "line 1: the file is UTF-16 text"),
    (b'{"a": 1}\n\x00\x00', "line 2: not a text file"),
])
def test_bytes_that_are_not_utf8_text(data, message):
    with pytest.raises(ValueError, match=message):
        parse_pairs(data, name="f.jsonl")


def test_file_and_limit_bounds(monkeypatch, tmp_path):
    lines = [json.dumps({"sentence_good": f"He is here {k}.", "sentence_bad": f"He are here {k}."}) for k in range(5)]
    assert len(parse_pairs("\n".join(lines), limit=2)) == 2
    with pytest.raises(ValueError, match="limit must be >= 1"):
        parse_pairs("\n".join(lines), limit=0)
    monkeypatch.setattr(blimp_jsonl, "MAX_PAIRS", 3)
    with pytest.raises(ValueError, match="f.jsonl, line 4: more than 3 pairs"):
        parse_pairs("\n".join(lines), name="f.jsonl")
    path = tmp_path / "deep" / "secret.jsonl"
    path.parent.mkdir()
    path.write_text("oops\n")
    with pytest.raises(ValueError) as caught:
        read_pairs(path)
    assert str(caught.value).startswith("secret.jsonl, line 1") and str(tmp_path) not in str(caught.value)


# --- the built-in pairs ---------------------------------------------------------------------------------------


def test_builtin_pairs_are_well_formed():
    pairs = preference.builtin_pairs()
    by_lang = {lang: [p for p in pairs if p.lang == lang] for lang in ("en", "zh")}
    assert len(by_lang["en"]) >= 20 and len(by_lang["zh"]) >= 12 and len(pairs) == sum(map(len, by_lang.values()))
    assert len({p.id for p in pairs}) == len(pairs)
    assert all(p.phenomenon for p in pairs)
    for pair in pairs:
        alignment = align_texts(pair.good, pair.bad)
        assert alignment.prefix >= 1, pair.id  # no first-word change: the sentence method stays exact
        if pair.has_prefix:  # the prefix ends where the alignment's change starts (or inside that word)
            assert pair.good.startswith(pair.prefix) and pair.bad.startswith(pair.prefix)
    kinds = {align_texts(p.good, p.bad).kind for p in by_lang["zh"]}
    assert kinds == {"substitution", "insertion"}
    assert preference.builtin_pairs("zh") == by_lang["zh"]


def test_builtin_pairs_are_not_from_blimp():
    folder = require_data("blimp")
    ours = {s for p in preference.builtin_pairs() for s in (p.good, p.bad)}
    for path in sorted(folder.glob("*.jsonl")):
        for pair in read_pairs(path):
            assert not {pair.good, pair.bad} & ours, path.name


# --- the command --------------------------------------------------------------------------------------------


def test_blimp_command_prints_per_file_accuracy(gpt2, monkeypatch, tmp_path, capsys):
    model, _ = gpt2
    monkeypatch.setattr(attnviz, "load", lambda source, **kw: model)
    lines = [{"sentence_good": "The dog barks.", "sentence_bad": "The dog bark.", "one_prefix_prefix": "The dog",
              "one_prefix_word_good": "barks", "one_prefix_word_bad": "bark"},
             {"sentence_good": "The dogs bark.", "sentence_bad": "The dogs barks."}]
    for name in ("b.jsonl", "a.jsonl"):
        (tmp_path / name).write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert main(["blimp", "--model", "tiny", "--data", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["files"]) == ["a.jsonl", "b.jsonl"]
    pairs = parse_pairs("\n".join(json.dumps(line) for line in lines))
    margins = [preference.pair_preference(model, pair).margin for pair in pairs]
    block = out["files"]["a.jsonl"]
    assert block["n"] == 2 and block["correct"] == sum(m > 0 for m in margins)
    assert block["mean_margin"] == pytest.approx(np.mean(margins), abs=1e-3)
    assert block["methods"] == {"prefix": 1, "sentence": 1} and out["overall"]["n"] == 4
    assert main(["blimp", "--model", "tiny", "--data", str(tmp_path), "--limit", "1"]) == 0
    table = capsys.readouterr().out
    assert "a.jsonl" in table and "accuracy" in table
    assert main(["blimp", "--model", "tiny", "--data", str(tmp_path / "none")]) == 2
    assert "error: no BLiMP data" in capsys.readouterr().err
    assert main(["blimp", "--model", "tiny", "--data", "builtin", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["files"]) == {"builtin:en", "builtin:zh"}


def test_blimp_command_on_real_files(gpt2, monkeypatch, capsys):
    require_data("blimp")
    model, _ = gpt2
    monkeypatch.setattr(attnviz, "load", lambda source, **kw: model)
    assert main(["blimp", "--model", "tiny", "--data", str(require_data("blimp")), "--limit", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["files"]) == set(BLIMP_FILES)
    assert all(block["n"] == 4 and block["methods"] == {"prefix": 4} for block in out["files"].values())


def test_ablation_benchmark_margins_equal_one_ablation_at_a_time(gpt2):
    import importlib.util

    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("blimp_ablation", ROOT / "benchmarks" / "blimp_ablation.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    model, _ = gpt2
    pairs = [AGREEMENT, MinimalPair("The dog barks at night.", "The dog bark at night.", "The dog", "barks", "bark")]
    base, ablated = bench.ablation_margins(model, pairs, heads_per_pass=3)  # 8 heads: passes of 3, 3, 2
    assert ablated.shape == (2, 2, 4)
    for p, pair in enumerate(pairs):
        assert base[p] == pytest.approx(preference.pair_preference(model, pair).margin, abs=1e-4)
        for layer, head in ((0, 0), (1, 3), (0, 2)):
            mask = np.ones((2, 4))
            mask[layer, head] = 0
            expected = preference.pair_preference(model, pair, head_mask=mask).margin
            assert ablated[p, layer, head] == pytest.approx(expected, abs=1e-4)


def tiny_bert_mlm():
    """(our LoadedModel, HF BertForMaskedLM) on the same random weights, a BPE vocabulary with [MASK]."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=360, special_tokens=["[CLS]", "[SEP]", "[PAD]", "[MASK]"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=True),
        processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 0), ("[SEP]", 1)]),
    ])
    torch.manual_seed(2)
    hf = tf.BertForMaskedLM(tf.BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=32,
                                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                                          max_position_embeddings=64, pad_token_id=2))
    hf.config.architectures = ["BertForMaskedLM"]
    hf.config._attn_implementation = "eager"
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf.eval()
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    info = ModelInfo.describe(module, "tiny bert MLM", "(test)", "bert", 64)
    return LoadedModel(module, tokenizer, info, {"pad_token": "[PAD]"}), hf


def test_masked_word_score_equals_hf_pseudo_log_likelihood():
    model, hf = tiny_bert_mlm()
    pair = MinimalPair("The keys to the cabinets are on the table.", "The keys to the cabinets is on the table.",
                       "The keys to the cabinets", "are", "is")
    result = preference.pair_preference(model, pair)
    assert result.method == "masked"
    mask_id = model.tokenizer.token_to_id("[MASK]")
    for side, value in (("good", result.good), ("bad", result.bad)):
        sentence, word = pair.sentence(side), getattr(pair, f"word_{side}")
        start = len(pair.prefix) + 1
        enc = model.tokenizer.encode(sentence)
        positions = [i for i, (s, e) in enumerate(enc.offsets) if s < start + len(word) and start < e
                     and not enc.special_tokens_mask[i]]
        assert positions
        expected = 0.0
        for position in positions:  # mask one token at a time, score the original token (by hand)
            ids = list(enc.ids)
            ids[position] = mask_id
            with torch.no_grad():
                logits = hf(input_ids=torch.tensor([ids])).logits[0, position].double()
            expected += float(torch.log_softmax(logits, -1)[enc.ids[position]])
        assert value == pytest.approx(expected, abs=1e-4)
    # Without one_prefix fields the same words are found by the word alignment.
    aligned = preference.pair_preference(model, MinimalPair(pair.good, pair.bad))
    assert (aligned.good, aligned.bad) == pytest.approx((result.good, result.bad), abs=1e-6)
    with pytest.raises(ValueError, match="insertion"):
        preference.pair_preference(model, INSERTION)


def test_masked_scores_refuse_a_long_differing_part():
    """One forward pass per masked token, and a visitor chooses the sentences: two sentences that differ
    in their first and last words make the whole sentence the differing part, which is refused."""
    model, _ = tiny_bert_mlm()
    pair = MinimalPair("Cats keys to the cabinets are on the old wooden table by the door today.",
                       "Dogs keys to the cabinets are on the old wooden table by the door tonight.")
    with pytest.raises(ValueError, match="at most 8"):
        preference.pair_preference(model, pair)
