"""Head scoring (Clark et al. 2019; docs/formats.md steps 1-5) on synthetic traces, against plain loops."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from attnviz.analysis import scoring
from attnviz.analysis.items import ProbeItem
from attnviz.analysis.runner import score_model
from attnviz.analysis.scoring import (
    predictions,
    rank_heads,
    score_items,
    to_json,
    word_attention,
    word_attention_matrix,
)
from attnviz.trace import AttentionTrace

# ---------------------------------------------------------------------------------------------
# Synthetic traces


def tokenize(item: ProbeItem, pieces: list[int], specials: bool = True, keep_words: int | None = None):
    """Tokens cutting word w into pieces[w] parts; [CLS]/[SEP] around; only the first keep_words words."""
    text = item.text
    tokens, offsets, sequence_ids = [], [], []
    if specials:
        tokens, offsets, sequence_ids = ["[CLS]"], [(0, 0)], [None]
    for w, ((start, end), n_pieces) in enumerate(zip(item.word_spans, pieces)):
        if keep_words is not None and w >= keep_words:
            break
        cuts = np.linspace(start, end, min(n_pieces, end - start) + 1).astype(int)
        for a, b in itertools.pairwise(cuts):
            tokens.append(text[a:b])
            offsets.append((int(a), int(b)))
            sequence_ids.append(0)
    if specials:
        tokens.append("[SEP]")
        offsets.append((0, 0))
        sequence_ids.append(None)
    return tokens, offsets, sequence_ids


def make_trace(tokens, offsets, sequence_ids, attentions, words=(), text=None, causal=None) -> AttentionTrace:
    n_tokens = len(tokens)
    assert attentions.shape[2:] == (n_tokens, n_tokens)
    return AttentionTrace(
        tokens=list(tokens),
        offsets=list(offsets),
        sequence_ids=list(sequence_ids),
        input_ids=list(range(n_tokens)),
        attentions=np.asarray(attentions, dtype=np.float32),
        kv_group=list(range(attentions.shape[1])),
        words=list(words),
        word_of_token=[None] * n_tokens,
        truncated=False,
        texts=() if text is None else (text,),
        special_mask=[s is None for s in sequence_ids],
        metadata={} if causal is None else {"causal": causal},
    )


def random_attentions(rng, n_layers, n_heads, n_tokens, causal=False) -> np.ndarray:
    logits = rng.standard_normal((n_layers, n_heads, n_tokens, n_tokens)) * 2.0
    if causal:
        logits = np.where(np.tril(np.ones((n_tokens, n_tokens), dtype=bool)), logits, -np.inf)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return (probs / probs.sum(-1, keepdims=True)).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# The independent re-computation: plain loops, no numpy reductions


def loop_word_of_token(offsets, sequence_ids, spans):
    result = []
    for (ts, te), seq in zip(offsets, sequence_ids):
        word = None
        if seq is not None and ts != te:
            for w, (ws, we) in enumerate(spans):
                if ts < we and ws < te:
                    word = w
                    break
        result.append(word)
    return result


def loop_word_attention(attentions, word_of_token, n_words):
    n_layers, n_heads = attentions.shape[:2]
    tokens = [[t for t, w in enumerate(word_of_token) if w == i] for i in range(n_words)]
    out = [[[[0.0] * n_words for _ in range(n_words)] for _ in range(n_heads)] for _ in range(n_layers)]
    for layer in range(n_layers):
        for head in range(n_heads):
            for i in range(n_words):
                if not tokens[i]:
                    continue
                for j in range(n_words):
                    total = 0.0
                    for t in tokens[i]:
                        for s in tokens[j]:
                            total += float(attentions[layer, head, t, s])
                    out[layer][head][i][j] = total / len(tokens[i])
    return out


def loop_predict(row, i, sink_aware=False):
    best, best_value = None, 0.0
    for j, value in enumerate(row):
        if sink_aware and j == 0:  # sink-aware: word 0 is no candidate
            continue
        if j != i and value > best_value:  # strict: the first index keeps ties; 0 is no prediction
            best, best_value = j, value
    return best


def loop_scores(traces, items, sink_aware=False):
    """The rule by plain loops; a causal trace scores an item in a direction only if gold < read."""
    result = {}
    for trace, item in zip(traces, items):
        entry = result.setdefault(
            item.relation,
            {
                "n": 0,
                "n_skipped": 0,
                "hits": {},
                "offsets": {"s2t": [], "t2s": []},
                "first": {"s2t": 0, "t2s": 0},
                "scorable": {"s2t": 0, "t2s": 0},
            },
        )
        word_of_token = loop_word_of_token(trace.offsets, trace.sequence_ids, item.word_spans)
        if item.source not in word_of_token or item.target not in word_of_token:
            entry["n_skipped"] += 1
            continue
        entry["n"] += 1
        attn = loop_word_attention(trace.attentions, word_of_token, len(item.words))
        n_layers, n_heads = trace.attentions.shape[:2]
        for name, read, gold in (("s2t", item.source, item.target), ("t2s", item.target, item.source)):
            hits = entry["hits"].setdefault(name, [[0] * n_heads for _ in range(n_layers)])
            if trace.metadata.get("causal") is True and gold > read:
                continue
            entry["scorable"][name] += 1
            for layer in range(n_layers):
                for head in range(n_heads):
                    if loop_predict(attn[layer][head][read], read, sink_aware) == gold:
                        hits[layer][head] += 1
            entry["offsets"][name].append(gold - read)
            entry["first"][name] += gold == 0
    return result


def loop_best_offset(offsets):
    best, best_count = None, -1
    for k in sorted(set(offsets), key=lambda k: (abs(k), k)):  # -1 before 1 before -2 ...
        count = offsets.count(k)
        if count > best_count:
            best, best_count = k, count
    return best, best_count


SENTENCES = [
    ("The keys to the cabinet are on the table .", [1, 2, 1, 1, 3, 1, 1, 1, 2, 1]),
    ("Unbelievably , the committee reconsidered its decision yesterday", [3, 1, 1, 2, 3, 1, 2, 2]),
    ("She said that he would come", [1, 1, 1, 1, 1, 2]),
    ("Tokenization splits words into pieces", [3, 2, 1, 1, 2]),
    ("A B", [1, 1]),
]


def build_case(seed=0, causal=False):
    """Traces and random items; `causal`: decoder-like traces (no BOS, lower-triangular, metadata)."""
    rng = np.random.default_rng(seed)
    traces, items = [], []
    for index, (sentence, pieces) in enumerate(SENTENCES):
        words = sentence.split()
        n = len(words)
        base = ProbeItem("r", tuple(words), 0, 1)
        tokens, offsets, sequence_ids = tokenize(base, pieces, specials=not causal,
                                                 keep_words=n - 1 if index == 0 else None)
        attentions = random_attentions(rng, 3, 4, len(tokens), causal=causal)
        if not causal:
            attentions[0, 0] = 1.0 / len(tokens)  # a uniform head: ties everywhere, first index wins
        attentions[2, 3] = random_attentions(rng, 1, 1, len(tokens), causal=True)[0, 0]
        attentions[1, 1, :, 0] += 5.0  # a sink head: token 0 takes most of every row
        attentions[1, 1] /= attentions[1, 1].sum(-1, keepdims=True)
        trace = make_trace(tokens, offsets, sequence_ids, attentions, text=base.text,
                           causal=True if causal else None)
        for k in range(3 * n):
            source, target = (int(x) for x in rng.choice(n, size=2, replace=False))
            items.append(ProbeItem(["nsubj", "obj", "amod"][k % 3], tuple(words), source, target))
            traces.append(trace)
    return traces, items


def test_scorer_equals_plain_loops():
    traces, items = build_case()
    scores = score_items(traces, items)
    expected = loop_scores(traces, items)
    assert list(scores) == ["nsubj", "obj", "amod"]
    assert any(e["n_skipped"] for e in expected.values())  # the truncated sentence is exercised
    for relation, entry in expected.items():
        score = scores[relation]
        assert (score.n, score.n_skipped) == (entry["n"], entry["n_skipped"])
        for name, direction in (("s2t", "source_to_target"), ("t2s", "target_to_source")):
            hits = np.array(entry["hits"][name])
            np.testing.assert_array_equal(score.correct[direction], hits)
            np.testing.assert_array_equal(score.accuracy[direction], hits / entry["n"])
            flat = int(np.argmax(hits))
            assert (score.best[direction].layer, score.best[direction].head) == divmod(flat, hits.shape[1])
            offset, count = loop_best_offset(entry["offsets"][name])
            baseline = score.baselines[direction]
            assert baseline.best_offset == offset
            assert baseline.best_offset_accuracy == count / entry["n"]
            assert baseline.first_word_accuracy == entry["first"][name] / entry["n"]


def old_rule_json(traces, items, model="m"):
    """The probe JSON of the rule before n_scorable / sink_aware existed, by plain loops: every item
    counts in both directions, over n."""
    relations = {}
    for relation, entry in loop_scores(traces, items).items():
        block = {"n": entry["n"], "n_skipped": entry["n_skipped"], "best": {}, "baselines": {}}
        for name, direction in (("s2t", "source_to_target"), ("t2s", "target_to_source")):
            hits = entry["hits"][name]
            block[direction] = [[round(h / entry["n"], 4) for h in row] for row in hits]
            flat = [h for row in hits for h in row]
            layer, head = divmod(flat.index(max(flat)), len(hits[0]))
            block["best"][direction] = {"layer": layer, "head": head,
                                        "accuracy": round(hits[layer][head] / entry["n"], 4)}
            offset, count = loop_best_offset(entry["offsets"][name])
            block["baselines"][direction] = {"best_offset": offset,
                                             "best_offset_accuracy": round(count / entry["n"], 4),
                                             "first_word_accuracy": round(entry["first"][name] / entry["n"], 4)}
        relations[relation] = block
    return {"model": model, "relations": relations}


@pytest.mark.parametrize("seed", [0, 9])
def test_encoder_json_is_the_old_rule(seed):
    """Encoders (no causal trace) keep today's numbers exactly: the new fields only add keys."""
    traces, items = build_case(seed)
    out = to_json("m", score_items(traces, items))
    expected = old_rule_json(traces, items)
    for block in out["relations"].values():
        assert block.pop("n_scorable") == dict.fromkeys(scoring.DIRECTIONS, block["n"])
        assert block.pop("sink_aware") is False
    assert out.pop("sink_aware") is False
    assert out == expected
    # a trace that says it is not causal is an encoder too, even with a lower-triangular head
    for trace in traces:
        trace.metadata = {"causal": False}
    assert to_json("m", score_items(traces, items)) == to_json("m", score_items(*build_case(seed)))


@pytest.mark.parametrize("sink_aware", [False, True])
def test_causal_traces_equal_plain_loops(sink_aware):
    traces, items = build_case(seed=10, causal=True)
    scores = score_items(traces, items, sink_aware=sink_aware)
    expected = loop_scores(traces, items, sink_aware=sink_aware)
    for relation, entry in expected.items():
        score = scores[relation]
        assert score.sink_aware is sink_aware
        for name, direction in (("s2t", "source_to_target"), ("t2s", "target_to_source")):
            n_scorable = entry["scorable"][name]
            assert score.n_scorable[direction] == n_scorable
            assert 0 < n_scorable < entry["n"]  # random items: both word orders occur
            hits = np.array(entry["hits"][name])
            np.testing.assert_array_equal(score.correct[direction], hits)
            np.testing.assert_array_equal(score.accuracy[direction], hits / n_scorable)
            baseline = score.baselines[direction]
            scorable_offsets = [k for k in entry["offsets"][name] if k < 0]  # gold before read
            assert (baseline.best_offset, baseline.best_offset_accuracy * n_scorable) == pytest.approx(
                loop_best_offset(scorable_offsets))


def causal_forward_case():
    """A decoder trace (no BOS) and items whose gold word always follows the source word."""
    words = ("dogs", "that", "bark", "rarely", "bite", ".")
    items = [ProbeItem("sv", words, 0, 4), ProbeItem("sv", words, 2, 4), ProbeItem("sv", words, 1, 3)]
    tokens, offsets, sequence_ids = tokenize(items[0], [2, 1, 1, 2, 1, 1], specials=False)
    attentions = random_attentions(np.random.default_rng(11), 2, 3, len(tokens), causal=True)
    return make_trace(tokens, offsets, sequence_ids, attentions, text=items[0].text, causal=True), items


def test_direction_impossible_for_a_causal_model():
    """source -> target never looks back here: no grid, no best head, no baselines; the other
    direction is scored over all items."""
    from attnviz.cli.probe import format_table

    trace, items = causal_forward_case()
    score = score_items([trace] * 3, items)["sv"]
    assert score.n == 3 and score.n_scorable == {"source_to_target": 0, "target_to_source": 3}
    assert score.impossible("source_to_target") and not score.impossible("target_to_source")
    assert score.best["source_to_target"] is None
    assert score.best["target_to_source"] is not None
    out = to_json("m", {"sv": score})
    block = out["relations"]["sv"]
    assert block["source_to_target"] is None and block["best"]["source_to_target"] is None
    assert block["baselines"]["source_to_target"] == {"best_offset": None, "best_offset_accuracy": None,
                                                      "first_word_accuracy": None}
    assert len(block["target_to_source"]) == 2 and block["n_scorable"]["target_to_source"] == 3
    json.dumps(out, allow_nan=False)
    table = format_table(out)
    assert "impossible for a causal model" in table
    assert "L0H0" not in table.splitlines()[2]  # the source_to_target row names no head
    # the same attentions without the causal flag: every item is scored, the old way
    trace.metadata = {}
    plain = score_items([trace] * 3, items)["sv"]
    assert plain.n_scorable == {"source_to_target": 3, "target_to_source": 3}
    assert plain.best["source_to_target"] == scoring.BestHead(0, 0, 0.0)


def sink_case():
    """A causal trace where token 0 takes 0.6 of every row and the rest goes mostly to a gold word."""
    words = ("the", "cook", "who", "won", "smiles")
    gold_of = {1: 0, 2: 1, 3: 1, 4: 1}  # row word -> the word it should point to
    items = [ProbeItem("sv", words, 4, 1), ProbeItem("sv", words, 3, 1), ProbeItem("sv", words, 1, 0)]
    tokens, offsets, sequence_ids = tokenize(items[0], [1, 1, 1, 1, 1], specials=False)
    attention = np.zeros((5, 5), dtype=np.float32)
    attention[0, 0] = 1.0
    for i in range(1, 5):
        attention[i, 0] += 0.6
        attention[i, gold_of[i]] += 0.3
        attention[i, i] += 0.1
    previous = np.eye(5, k=-1, dtype=np.float32)  # a previous-word head
    previous[0, 0] = 1.0
    attentions = np.stack([attention, previous])[None]  # 1 layer x 2 heads
    return make_trace(tokens, offsets, sequence_ids, attentions, text=items[0].text, causal=True), items


def test_sink_aware_scoring_skips_the_first_word():
    """Default rule: the sink (word 0) wins every row. Sink-aware: the next-largest word is read; an item
    whose gold word is word 0 counts wrong, and the first-word baseline reports their share."""
    trace, items = sink_case()
    plain = score_items([trace] * 3, items)["sv"]
    aware = score_items([trace] * 3, items, sink_aware=True)["sv"]
    s2t = "source_to_target"
    assert plain.n_scorable[s2t] == aware.n_scorable[s2t] == 3
    np.testing.assert_array_equal(plain.correct[s2t][0], [1, 1])  # only "cook -> the" (word 0) is right
    np.testing.assert_array_equal(aware.correct[s2t][0], [2, 0])  # head 0 finds "cook"; word 0 is out
    assert aware.best[s2t] == scoring.BestHead(0, 0, 2 / 3)
    assert plain.baselines[s2t] == aware.baselines[s2t]  # baselines do not depend on the rule
    assert aware.baselines[s2t].first_word_accuracy == 1 / 3
    word_attn = word_attention(trace, items[0].word_spans)
    assert (predictions(word_attn)[0, 0, 1:] == 0).all()
    np.testing.assert_array_equal(predictions(word_attn, sink_aware=True)[0, 0], [-1, -1, 1, 1, 1])
    out = to_json("m", {"sv": aware})
    assert out["sink_aware"] is True and out["relations"]["sv"]["sink_aware"] is True
    assert to_json("m", {"sv": plain})["sink_aware"] is False


def test_word_attention_equals_plain_loops_exactly():
    traces, items = build_case(seed=1)
    for trace, item in list(zip(traces, items))[::7]:
        word_of_token = loop_word_of_token(trace.offsets, trace.sequence_ids, item.word_spans)
        got = word_attention(trace, item.word_spans)
        np.testing.assert_array_equal(
            got, np.array(loop_word_attention(trace.attentions, word_of_token, len(item.words)))
        )


def test_gold_head_scores_one():
    rng = np.random.default_rng(2)
    words = ["the", "old", "dog", "that", "barked", "chased", "cats"]
    pieces = [1, 2, 1, 1, 2, 3, 2]
    gold = {0: 2, 1: 2, 2: 5, 3: 2, 4: 3, 6: 5}  # source -> target
    items = [ProbeItem("arc", tuple(words), s, t) for s, t in gold.items()]
    tokens, offsets, sequence_ids = tokenize(items[0], pieces)
    word_of_token = loop_word_of_token(offsets, sequence_ids, items[0].word_spans)
    attentions = random_attentions(rng, 2, 3, len(tokens))
    attentions[1, 2] = 0.0
    for t, w in enumerate(word_of_token):
        # tokens of a source word put all their weight on the last token of its gold word
        key = max(s for s, v in enumerate(word_of_token) if v == gold.get(w, 0))
        attentions[1, 2, t, key] = 1.0
    trace = make_trace(tokens, offsets, sequence_ids, attentions)
    score = score_items([trace] * len(items), items)["arc"]
    assert score.accuracy["source_to_target"][1, 2] == 1.0
    assert score.best["source_to_target"].layer == 1 and score.best["source_to_target"].head == 2
    assert score.best["source_to_target"].accuracy == 1.0
    assert score.accuracy["source_to_target"][0, 0] < 1.0


def previous_word_head(word_of_token):
    """Each token attends to the first token of the previous word; word 0 and specials to token 0."""
    n_tokens = len(word_of_token)
    head = np.zeros((n_tokens, n_tokens), dtype=np.float32)
    first_token = {}
    for t, w in enumerate(word_of_token):
        first_token.setdefault(w, t)
    for t, w in enumerate(word_of_token):
        head[t, first_token[w - 1] if w is not None and w > 0 else 0] = 1.0
    return head


def test_previous_word_head_equals_offset_baseline():
    words = ["my", "sister", "'s", "new", "car", "broke", "down", "again"]
    pieces = [1, 2, 1, 1, 1, 2, 1, 2]
    arcs = [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (7, 5), (0, 1), (6, 5)]  # 6 of 8 point one word left
    items = [ProbeItem("arc", tuple(words), s, t) for s, t in arcs]
    tokens, offsets, sequence_ids = tokenize(items[0], pieces)
    word_of_token = loop_word_of_token(offsets, sequence_ids, items[0].word_spans)
    attentions = random_attentions(np.random.default_rng(3), 2, 2, len(tokens))
    attentions[0, 1] = previous_word_head(word_of_token)
    score = score_items([make_trace(tokens, offsets, sequence_ids, attentions)] * len(items), items)["arc"]
    baseline = score.baselines["source_to_target"]
    assert baseline.best_offset == -1
    assert baseline.best_offset_accuracy == 6 / 8
    assert score.accuracy["source_to_target"][0, 1] == baseline.best_offset_accuracy
    # (0, 1): the head sees nothing of another word from word 0 -> no prediction -> wrong
    assert baseline.first_word_accuracy == 1 / 8
    assert score.baselines["target_to_source"].best_offset == 1
    assert score.baselines["target_to_source"].first_word_accuracy == 1 / 8


def test_causal_first_word_makes_no_prediction():
    words = ["dogs", "often", "chase", "cats"]
    items = [ProbeItem("arc", tuple(words), 0, 2), ProbeItem("arc", tuple(words), 3, 1)]
    tokens, offsets, sequence_ids = tokenize(items[0], [1, 2, 1, 2], specials=False)  # no BOS
    attentions = random_attentions(np.random.default_rng(4), 2, 3, len(tokens), causal=True)
    trace = make_trace(tokens, offsets, sequence_ids, attentions)
    predicted = predictions(word_attention(trace, items[0].word_spans))
    assert (predicted[:, :, 0] == -1).all()
    assert (predicted[:, :, 1:] >= 0).all()
    score = score_items([trace, trace], items)["arc"]
    # item 0 (source word 0) is wrong for every head; item 1 decides the rest
    expected = (predicted[:, :, 3] == 1) / 2
    np.testing.assert_array_equal(score.accuracy["source_to_target"], expected)
    assert score.accuracy["source_to_target"].max() <= 0.5


def test_offset_ties_prefer_small_then_negative():
    words = ("a", "b", "c", "d", "e", "f", "g")
    tokens, offsets, sequence_ids = tokenize(ProbeItem("r", words, 0, 1), [1] * 7)
    trace = make_trace(tokens, offsets, sequence_ids, np.full((1, 1, 9, 9), 1 / 9, dtype=np.float32))

    def best_offset(arcs):
        items = [ProbeItem("r", words, s, t) for s, t in arcs]
        return score_items([trace] * len(items), items)["r"].baselines["source_to_target"].best_offset

    assert best_offset([(3, 4), (3, 2), (1, 3), (2, 4)]) == 2  # most often wins over smaller |k|
    assert best_offset([(3, 5), (1, 3), (5, 3), (3, 1)]) == -2  # 2 against -2: negative first
    assert best_offset([(3, 4), (3, 2), (1, 3), (5, 3), (0, 1), (4, 3)]) == -1  # ties at 2: -1 over 1, -2


def test_skipped_items_and_all_skipped_relation():
    words = ("one", "two", "three", "four")
    tokens, offsets, sequence_ids = tokenize(ProbeItem("r", words, 0, 1), [1, 1, 1, 1], keep_words=2)
    trace = make_trace(tokens, offsets, sequence_ids, random_attentions(np.random.default_rng(5), 1, 2, 4))
    items = [ProbeItem("kept", words, 0, 1), ProbeItem("kept", words, 3, 1), ProbeItem("gone", words, 2, 3)]
    scores = score_items([trace] * 3, items)
    assert (scores["kept"].n, scores["kept"].n_skipped) == (1, 1)
    assert (scores["gone"].n, scores["gone"].n_skipped) == (0, 1)
    assert np.isnan(scores["gone"].accuracy["source_to_target"]).all()
    assert scores["gone"].best["source_to_target"] is None
    block = to_json("m", scores)["relations"]["gone"]
    assert block["source_to_target"] == [[None, None]]
    json.dumps(block, allow_nan=False)


def test_inputs_are_not_mutated_and_w_is_computed_once(monkeypatch):
    traces, items = build_case(seed=6)
    before = [trace.attentions.copy() for trace in traces]
    calls = []
    real = scoring.word_attention_matrix
    monkeypatch.setattr(scoring, "word_attention_matrix", lambda *a: calls.append(1) or real(*a))
    score_items(traces, items)
    assert len(calls) == len(SENTENCES)  # once per sentence, not once per item
    for trace, copy in zip(traces, before):
        np.testing.assert_array_equal(trace.attentions, copy)
        assert trace.word_of_token == [None] * len(trace.tokens)


def test_mismatched_inputs_raise():
    traces, items = build_case()
    with pytest.raises(ValueError, match="traces for"):
        score_items(traces[:-1], items)
    other = next(k for k, item in enumerate(items) if item.text != items[0].text)
    with pytest.raises(ValueError, match="another text"):
        score_items([traces[other]], [items[0]])


def test_to_json_has_exactly_the_design_keys():
    traces, items = build_case()
    out = to_json("some/model", score_items(traces, items))
    assert set(out) == {"model", "sink_aware", "relations"}
    assert out["model"] == "some/model" and out["sink_aware"] is False
    assert list(out["relations"]) == ["nsubj", "obj", "amod"]
    directions = {"source_to_target", "target_to_source"}
    for block in out["relations"].values():
        assert set(block) == {"n", "n_skipped", "source_to_target", "target_to_source", "best", "baselines",
                              "n_scorable", "sink_aware"}
        assert isinstance(block["n"], int) and isinstance(block["n_skipped"], int)
        assert block["n_scorable"] == dict.fromkeys(directions, block["n"])  # an encoder scores every item
        assert block["sink_aware"] is False
        for direction in directions:
            grid = block[direction]
            assert len(grid) == 3 and all(len(row) == 4 for row in grid)
            assert all(
                isinstance(v, float) and 0.0 <= v <= 1.0 and round(v, 4) == v for row in grid for v in row
            )
        assert set(block["best"]) == directions
        assert set(block["baselines"]) == directions
        for direction in directions:
            best = block["best"][direction]
            assert set(best) == {"layer", "head", "accuracy"}
            assert best["accuracy"] == max(max(row) for row in block[direction])
            assert block[direction][best["layer"]][best["head"]] == best["accuracy"]
            baseline = block["baselines"][direction]
            assert set(baseline) == {"best_offset", "best_offset_accuracy", "first_word_accuracy"}
            assert isinstance(baseline["best_offset"], int)
    assert json.loads(json.dumps(out, allow_nan=False)) == out


def test_rank_heads_sorts_word_weights():
    traces, items = build_case(seed=7)
    trace, item = traces[-1], items[-1]
    ranked = rank_heads(trace, 1, 0, item.word_spans)
    word_of_token = loop_word_of_token(trace.offsets, trace.sequence_ids, item.word_spans)
    attn = loop_word_attention(trace.attentions, word_of_token, len(item.words))
    assert sorted((layer, head) for layer, head, _ in ranked) == [(la, h) for la in range(3) for h in range(4)]
    for layer, head, weight in ranked:
        assert math.isclose(weight, attn[layer][head][1][0], rel_tol=1e-12, abs_tol=1e-15)
    weights = [w for _, _, w in ranked]
    assert weights == sorted(weights, reverse=True)
    # the trace's own word map gives the same ranking when it matches the spans
    trace.word_of_token = word_of_token
    trace.words = list(item.words)
    assert rank_heads(trace, 1, 0) == ranked
    with pytest.raises(ValueError):
        rank_heads(trace, 0, 9)


def test_word_attention_matrix_of_unassigned_words_is_zero():
    attentions = np.full((1, 1, 3, 3), 1 / 3, dtype=np.float32)
    matrix = word_attention_matrix(attentions, [None, 0, 0], 2)
    np.testing.assert_allclose(matrix[0, 0], [[2 / 3, 0.0], [0.0, 0.0]])


class FakeModel:
    def __init__(self, traces_by_text, batch=False):
        self.traces_by_text = traces_by_text
        self.runs: list[str] = []
        if batch:
            self.batches: list[list[str]] = []
            self.run_batch = self._run_batch

    def run(self, text):
        self.runs.append(text)
        return self.traces_by_text[text]

    def _run_batch(self, texts):
        self.batches.append(list(texts))
        return [self.traces_by_text[text] for text in texts]


@pytest.mark.parametrize("batch", [False, True])
def test_score_model_runs_each_sentence_once(batch):
    traces, items = build_case(seed=8)
    model = FakeModel({item.text: trace for trace, item in zip(traces, items)}, batch=batch)
    seen = []
    scores = score_model(model, items, batch_size=2, progress=lambda done, total: seen.append((done, total)))
    expected = score_items(traces, items)
    assert to_json("m", scores) == to_json("m", expected)
    texts = sorted(dict.fromkeys(item.text for item in items), key=len)  # batched by length
    if batch:
        assert model.runs == [] and model.batches == [texts[0:2], texts[2:4], texts[4:5]]
    else:
        assert model.runs == texts
    assert seen == [(0, 5), (2, 5), (4, 5), (5, 5)]
