"""Head detectors (attnviz/analysis/detectors.py): the definitions against plain loops, a real forward
pass of a tiny model with a hand-set previous-token head, `LoadedModel.run_ids`, and `heads --json`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnviz.__main__ import main
from attnviz.analysis.detectors import (
    detect_heads,
    detector_scores,
    random_repeated_tokens,
    top_heads,
    vocabulary,
)
from attnviz.loading.random_model import byte_tokenizer
from attnviz.models.loaded_model import LoadedModel, ModelInfo
from attnviz.transformer.config import ModelConfig
from attnviz.transformer.model import Transformer
from tests.conftest import MINILM


def random_attentions(rng, shape, causal=False):
    """Row-stochastic [B, L, H, T, T] probabilities (lower-triangular when causal)."""
    a = rng.random(shape)
    if causal:
        a = np.tril(a)
    return a / a.sum(-1, keepdims=True)


def loop_scores(a, n):
    """The definitions of docs/views/head-detectors.md, written as plain loops."""
    b_, l_, h_ = a.shape[:3]
    out = {k: np.zeros((l_, h_)) for k in ("previous_token", "duplicate_token", "induction")}
    for layer in range(l_):
        for head in range(h_):
            prev, dup, ind = [], [], []
            for b in range(b_):
                m = a[b, layer, head]
                prev.append(sum(m[i, i - 1] for i in range(1, 2 * n)) / (2 * n - 1))
                dup.append(sum(m[i, i - n] for i in range(n, 2 * n)) / n)
                ind.append(sum(m[i, i - n + 1] for i in range(n, 2 * n)) / n)
            out["previous_token"][layer, head] = sum(prev) / b_
            out["duplicate_token"][layer, head] = sum(dup) / b_
            out["induction"][layer, head] = sum(ind) / b_
    return out


@pytest.mark.parametrize("n, causal", [(2, False), (3, True), (7, True), (10, False)])
def test_scores_match_plain_loops(n, causal):
    rng = np.random.default_rng(n)
    a = random_attentions(rng, (3, 2, 4, 2 * n, 2 * n), causal)
    scores, expected = detector_scores(a.astype(np.float32), n), loop_scores(a.astype(np.float32), n)
    assert set(scores) == set(expected)
    for name in expected:
        assert scores[name].shape == (2, 4)
        np.testing.assert_allclose(scores[name], expected[name], rtol=1e-6, atol=1e-7)


def test_exact_heads_score_one():
    """Attention that is exactly previous-token / duplicate / induction scores 1 on its own detector."""
    n, t = 5, 10
    a = np.zeros((2, 1, 3, t, t))
    a[:, :, :, 0, 0] = 1.0
    for i in range(1, t):
        a[:, 0, 0, i, i - 1] = 1.0  # previous token
        a[:, 0, 1, i, i - n if i >= n else i] = 1.0  # duplicate token (self in the first copy)
        a[:, 0, 2, i, i - n + 1 if i >= n else i] = 1.0  # induction
    s = detector_scores(a, n)
    assert s["previous_token"][0].tolist() == [1.0, pytest.approx(0.0), pytest.approx(0.0)]
    assert s["duplicate_token"][0].tolist() == [0.0, 1.0, 0.0]
    assert s["induction"][0].tolist() == [0.0, 0.0, 1.0]
    assert top_heads(s["induction"], k=2) == [(0, 2, 1.0), (0, 0, 0.0)]


@pytest.mark.parametrize("shape, n", [((1, 1, 1, 10, 10), 4), ((1, 1, 10, 10), 5), ((1, 1, 1, 2, 2), 1),
                                      ((0, 1, 1, 4, 4), 2), ((1, 1, 1, 4, 5), 2)])
def test_bad_shapes_are_value_errors(shape, n):
    with pytest.raises(ValueError):
        detector_scores(np.zeros(shape), n)


def test_random_repeated_tokens():
    special = [0, 5, 6]
    seqs = random_repeated_tokens(10, special, n=50, sequences=3, seed=7)
    assert len(seqs) == 3 and all(len(s) == 100 and s[:50] == s[50:] for s in seqs)
    drawn = {i for s in seqs for i in s}
    assert drawn <= set(range(10)) - set(special) and len(drawn) == 7  # 150 draws hit all 7 ids
    assert seqs == random_repeated_tokens(10, special, n=50, sequences=3, seed=7)
    assert seqs != random_repeated_tokens(10, special, n=50, sequences=3, seed=8)
    rng = np.random.default_rng(7)  # the documented draw: default_rng(seed).choice over allowed ids
    assert seqs[0][:50] == rng.choice(np.array([1, 2, 3, 4, 7, 8, 9]), size=50).tolist()
    with pytest.raises(ValueError):
        random_repeated_tokens(3, [0, 1, 2], n=4, sequences=1)


POSITIONS, WIDTH, HEAD_DIM = 32, 64, 32


def tiny_previous_token_model() -> LoadedModel:
    """A 2-layer GPT-2-style model (learned positions, pre-norm, causal) whose layer 1 head 1 is a
    previous-token head by construction; every other weight is 0 (norm gains 1), so the residual stream
    entering layer 1 is the one-hot position embedding. That head's key reads the position one-hot and
    its query the one-hot shifted by one, so q_i . k_j is large iff j = i - 1."""
    config = ModelConfig(
        family="gpt2", vocab_size=259, d_model=WIDTH, n_layers=2, n_heads=2, d_ff=16, causal=True,
        norm_eps=1e-5, norm_placement="pre", activation="gelu_tanh", max_positions=POSITIONS,
    )
    module = Transformer(config)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.fill_(1.0 if "norm" in name and name.endswith("weight") else 0.0)
        module.position_embedding.weight[:, :POSITIONS] = torch.eye(POSITIONS)
        attn = module.blocks[1].attn
        head = slice(HEAD_DIM, 2 * HEAD_DIM)  # query/key rows of head 1
        shift = torch.zeros(HEAD_DIM, WIDTH)
        shift[torch.arange(POSITIONS - 1), torch.arange(1, POSITIONS)] = 1.0  # q[d] = x[d + 1]
        attn.q_proj.weight[head] = 4.0 * shift
        attn.k_proj.weight[head, :POSITIONS] = torch.eye(POSITIONS)
    module.eval()
    info = ModelInfo.describe(module, "tiny previous-token", "(test)", "gpt2", POSITIONS)
    return LoadedModel(module, byte_tokenizer(), info, {"pad_token": "[PAD]"})


def test_hand_set_previous_token_head_scores_about_one():
    model = tiny_previous_token_model()
    assert vocabulary(model) == (259, [256, 257, 258])
    calls = []
    scores = detect_heads(model, n=10, sequences=3, seed=0, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(1, 3), (2, 3), (3, 3)]
    prev = scores["previous_token"]
    assert prev.shape == (2, 2)
    assert prev[1, 1] > 0.99, prev
    assert top_heads(prev, k=1)[0][:2] == (1, 1)
    others = np.delete(prev.ravel(), 3)  # the zero-weight heads attend uniformly over the visible keys
    assert (others < 0.2).all(), prev
    assert scores["duplicate_token"][1, 1] < 0.01 and scores["induction"][1, 1] < 0.01


def test_run_ids_shape_and_errors():
    model = tiny_previous_token_model()
    a = model.run_ids([[1, 2, 3, 4], [5, 6, 7, 8]])
    assert a.shape == (2, 2, 2, 4, 4) and a.dtype == np.float32
    np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-6)
    assert np.triu(a, 1).max() == 0.0  # causal
    for bad in ([], [[]], [[1, 2], [3]], [[1] * (POSITIONS + 1)], [[259]], [[-1]]):
        with pytest.raises(ValueError):
            model.run_ids(bad)


def test_run_ids_equals_run_on_the_same_ids(minilm):
    """Fed a trace's own ids (specials included), run_ids gives the trace's attentions."""
    trace = minilm.run("The keys to the cabinet are on the table.")
    a = minilm.run_ids([trace.input_ids])
    assert a.shape == (1, *trace.attentions.shape)
    np.testing.assert_allclose(a[0], trace.attentions, atol=1e-6)


def test_heads_json_on_minilm(minilm, capsys):
    assert main(["heads", "--model", MINILM, "--n", "10", "--sequences", "2", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)  # stdout is the JSON alone
    assert set(out) == {"model", "n", "sequences", "seed", "previous_token", "duplicate_token", "induction"}
    assert (out["model"], out["n"], out["sequences"], out["seed"]) == (MINILM, 10, 2, 0)
    for name in ("previous_token", "duplicate_token", "induction"):
        grid = np.asarray(out[name])
        assert grid.shape == (6, 12) and ((grid >= 0) & (grid <= 1)).all()
    assert "sequence 2/2" in captured.err
    # BERT-family models have strong previous-token heads (Clark et al. 2019).
    assert max(max(row) for row in out["previous_token"]) > 0.5


@pytest.mark.parametrize("argv, message", [
    (["--n", "1"], "--n must be >= 2"),
    (["--sequences", "0"], "--sequences must be >= 1"),
    (["--n", "257"], "exceed this model's limit of 512"),
])
def test_heads_bad_arguments_exit_2(minilm, capsys, argv, message):
    assert main(["heads", "--model", MINILM, *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err
