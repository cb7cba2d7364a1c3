"""Lenses (attnviz.analysis.attention_lenses) against independent references: value norms computed by hand from a
tiny model's weights, rollout written out on 3 x 3 matrices, max-flow and min-cut against networkx."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from attnviz.analysis import attention_lenses
from attnviz.loading import build_module
from attnviz.transformer.record import Recorder
from tests.helpers.tiny_hf import DECODERS, ENCODERS, hf_model

# ---------------------------------------------------------------------------------------------------
# value-weighted (Kobayashi et al. 2020)


def hand_value_norms(attn_module, x: torch.Tensor) -> np.ndarray:
    """||(x_j W_V^g + b_V^g) W_O^h|| for every query head h (g = its KV head), written out from the
    module's weight matrices with nothing of attnviz's code: [H, S] for one sequence x [S, C]."""
    n_heads, n_kv, d = attn_module.n_heads, attn_module.n_kv_heads, attn_module.head_dim
    w_v, w_o = attn_module.v_proj.weight.double(), attn_module.o_proj.weight.double()  # [K*D, C], [C, H*D]
    b_v = attn_module.v_proj.bias
    norms = np.zeros((n_heads, x.shape[0]))
    for h in range(n_heads):
        g = h // (n_heads // n_kv)
        rows = slice(g * d, (g + 1) * d)
        v = x.double() @ w_v[rows].T  # S, D
        if b_v is not None:
            v = v + b_v.double()[rows]
        f = v @ w_o[:, h * d:(h + 1) * d].T  # S, C
        norms[h] = f.norm(dim=-1).detach().numpy()
    return norms


@pytest.mark.parametrize("family", ["bert", "llama-gqa"])
def test_value_weighted_equals_the_norms_computed_from_the_weights(family):
    hf = hf_model({**ENCODERS, **DECODERS}[family])
    module = build_module(hf.config.to_dict(), hf.state_dict()).eval()
    inputs = {}  # each layer's attention input x, taken by a hook: the hand computation starts from it
    hooks = [block.attn.register_forward_pre_hook(lambda m, args, layer=layer: inputs.__setitem__(layer, args[0]))
             for layer, block in enumerate(module.blocks)]
    ids = torch.randint(3, 99, (1, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out = module(ids, record=Recorder("attentions", "value_norms"))
    for hook in hooks:
        hook.remove()
    attentions = out.attentions[:, 0].numpy()  # L, H, T, S
    recorded = out.record.stacked("value_norms")[:, 0].numpy()  # L, H, S
    expected_norms = np.stack([hand_value_norms(block.attn, inputs[layer][0])
                               for layer, block in enumerate(module.blocks)])
    np.testing.assert_allclose(recorded, expected_norms, rtol=1e-5, atol=1e-6)

    weighted = attention_lenses.value_weighted(attentions, recorded)
    expected = attentions * expected_norms[:, :, None, :]
    np.testing.assert_allclose(weighted, expected, rtol=1e-5, atol=1e-6)
    normalised = attention_lenses.value_weighted(attentions, recorded, normalise=True)
    np.testing.assert_allclose(normalised, expected / expected.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert not np.allclose(normalised, attentions, atol=1e-3)  # the lens changes what is shown


def test_value_weighted_rejects_mismatched_norms_and_keeps_zero_rows():
    a = np.zeros((1, 1, 2, 3), np.float32)
    a[0, 0, 0] = [0.5, 0.5, 0.0]
    with pytest.raises(ValueError, match="value_norms"):
        attention_lenses.value_weighted(a, np.ones((1, 1, 2)))
    out = attention_lenses.value_weighted(a, np.array([[[2.0, 0.0, 1.0]]]), normalise=True)
    np.testing.assert_allclose(out[0, 0], [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])


def test_loaded_model_records_value_norms_of_its_run(minilm):
    text = "The keys to the cabinet are here."
    trace = minilm.run(text)
    recorded = minilm.record(text, names=("value_norms", "attentions"))
    assert recorded["value_norms"].shape == (6, 12, len(trace.tokens))
    np.testing.assert_allclose(recorded["attentions"], trace.attentions, atol=1e-6)
    # Layer 0's input is the embedding output: the norms by hand from it.
    ids = torch.tensor([trace.input_ids])
    with torch.no_grad():
        x = minilm.module.embed(ids, torch.zeros_like(ids), minilm.module.positions(ids))[0]
    np.testing.assert_allclose(recorded["value_norms"][0], hand_value_norms(minilm.module.blocks[0].attn, x),
                               rtol=1e-4, atol=1e-5)
    one = minilm.record(text, names=("value_norms",), layer=2)
    np.testing.assert_array_equal(one["value_norms"], recorded["value_norms"][2])


# ---------------------------------------------------------------------------------------------------
# rollout (Abnar & Zuidema 2020)


def test_rollout_on_hand_made_three_by_three_matrices():
    causal = np.array([[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]])
    uniform = np.full((3, 3), 1 / 3)
    first = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])  # a permutation head
    # layer 0: heads `causal` and `uniform`; layer 1: `first` and a head whose rows sum to 0.8 (renormalised)
    short = np.array([[0.8, 0, 0], [0, 0.8, 0], [0, 0, 0.8]])
    attentions = np.stack([np.stack([causal, uniform]), np.stack([first, short])]).astype(np.float32)
    # By hand: A0 = 0.5 * (causal + uniform) / 2 + 0.5 * I; rows of A0 already sum to 1.
    a0 = np.array([[0.5 * (1 + 1 / 3) / 2 + 0.5, 0.5 * (1 / 3) / 2, 0.5 * (1 / 3) / 2],
                   [0.5 * (0.5 + 1 / 3) / 2, 0.5 * (0.5 + 1 / 3) / 2 + 0.5, 0.5 * (1 / 3) / 2],
                   [0.5 * (0.2 + 1 / 3) / 2, 0.5 * (0.3 + 1 / 3) / 2, 0.5 * (0.5 + 1 / 3) / 2 + 0.5]])
    # A1 before renormalising: 0.5 * (first + short) / 2 + 0.5 I, each row sums to 0.25 + 0.2 + 0.5 = 0.95.
    a1 = np.array([[0.2 + 0.5, 0.25, 0], [0, 0.2 + 0.5, 0.25], [0.25, 0, 0.2 + 0.5]]) / 0.95
    out = attention_lenses.rollout(attentions)
    assert out.shape == (2, 3, 3)
    np.testing.assert_allclose(out[0], a0, atol=1e-6)
    np.testing.assert_allclose(out[1], a1 @ a0, atol=1e-6)
    np.testing.assert_allclose(out.sum(-1), 1, atol=1e-6)


def test_rollout_of_a_causal_stack_stays_causal_and_refuses_cross_attention():
    rng = np.random.default_rng(0)
    a = np.tril(rng.random((4, 3, 6, 6)))
    a /= a.sum(-1, keepdims=True)
    out = attention_lenses.rollout(a)
    assert np.allclose(np.triu(out, 1), 0) and np.allclose(out.sum(-1), 1, atol=1e-6)
    with pytest.raises(ValueError, match="self-attention"):
        attention_lenses.rollout(np.full((1, 1, 2, 3), 1 / 3))


# ---------------------------------------------------------------------------------------------------
# max-flow, min-cut and attention flow


def random_graph(rng, n: int, density: float) -> np.ndarray:
    cap = rng.random((n, n)) * (rng.random((n, n)) < density)
    np.fill_diagonal(cap, 0)
    return cap


def as_networkx(cap: np.ndarray) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(cap)))
    for u, v in zip(*np.nonzero(cap)):
        graph.add_edge(int(u), int(v), capacity=float(cap[u, v]))
    return graph


@pytest.mark.parametrize("seed", range(30))
def test_max_flow_equals_networkx_and_the_min_cut(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    cap = random_graph(rng, n, float(rng.uniform(0.2, 0.9)))  # antiparallel arcs included
    source, sink = (int(v) for v in rng.choice(n, 2, replace=False))
    value, flow = attention_lenses.max_flow(cap, source, sink)
    graph = as_networkx(cap)
    assert value == pytest.approx(nx.maximum_flow_value(graph, source, sink), abs=1e-9)
    cut, side = attention_lenses.min_cut(cap, source, sink)
    assert cut == pytest.approx(value, abs=1e-9)
    assert cut == pytest.approx(nx.minimum_cut_value(graph, source, sink), abs=1e-9)
    assert source in side and sink not in side
    # A feasible flow: skew-symmetric, within capacities, conserved at every inner node.
    np.testing.assert_allclose(flow, -flow.T, atol=1e-12)
    assert (flow <= cap + 1e-12).all()
    net_out = flow.sum(axis=1)
    inner = [v for v in range(n) if v not in (source, sink)]
    np.testing.assert_allclose(net_out[inner], 0, atol=1e-9)
    assert net_out[source] == pytest.approx(value, abs=1e-9)


def test_max_flow_on_a_textbook_graph():
    # CLRS figure 26.1: the maximum flow is 23.
    cap = np.zeros((6, 6))
    for u, v, c in [(0, 1, 16), (0, 2, 13), (1, 3, 12), (2, 1, 4), (2, 4, 14), (3, 2, 9), (3, 5, 20),
                    (4, 3, 7), (4, 5, 4)]:
        cap[u, v] = c
    assert attention_lenses.max_flow(cap, 0, 5)[0] == pytest.approx(23)
    assert attention_lenses.min_cut(cap, 0, 5) == (pytest.approx(23), {0, 1, 2, 4})


def networkx_flow(attentions: np.ndarray) -> np.ndarray:
    """Abnar & Zuidema's construction written with networkx (their code's shape): node (k, p) is
    position p below layer k; arcs (k + 1, a) -> (k, b) of capacity A_k[a, b]."""
    n_layers, _, n, _ = attentions.shape
    graph = nx.DiGraph()
    for k in range(n_layers):
        a = 0.5 * attentions[k].astype(np.float64).mean(0) + 0.5 * np.eye(n)
        a /= a.sum(-1, keepdims=True)
        for p in range(n):
            for q in range(n):
                if a[p, q] > 0:
                    graph.add_edge((k + 1, p), (k, q), capacity=float(a[p, q]))
    out = np.zeros((n_layers, n, n))
    for layer in range(n_layers):
        for i in range(n):
            for j in range(n):
                out[layer, i, j] = nx.maximum_flow_value(graph, (layer + 1, i), (0, j))
        out[layer] /= out[layer].sum(-1, keepdims=True)
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_attention_flow_equals_networkx_on_the_same_graph(causal):
    rng = np.random.default_rng(3)
    a = rng.random((3, 2, 5, 5)) ** 4  # peaked rows, as trained heads have
    if causal:
        a = np.tril(a)
    a /= a.sum(-1, keepdims=True)
    seen = []
    out = attention_lenses.flow(a.astype(np.float32), progress=lambda done, total: seen.append((done, total)))
    np.testing.assert_allclose(out, networkx_flow(a), atol=1e-5)
    np.testing.assert_allclose(out[0], attention_lenses.rollout(a)[0], atol=1e-6)  # one layer: A_0 itself
    assert not np.allclose(out[-1], attention_lenses.rollout(a)[-1], atol=1e-3)  # flow is not rollout
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_flow_refuses_more_than_the_token_limit():
    n = attention_lenses.FLOW_MAX_TOKENS + 1
    with pytest.raises(ValueError, match=f"limited to {attention_lenses.FLOW_MAX_TOKENS} tokens"):
        attention_lenses.flow(np.full((1, 1, n, n), 1 / n))


def test_max_flow_rejects_bad_graphs():
    with pytest.raises(ValueError, match="square"):
        attention_lenses.max_flow(np.zeros((2, 3)), 0, 1)
    with pytest.raises(ValueError, match=">= 0"):
        attention_lenses.max_flow(np.array([[0, -1], [0, 0]]), 0, 1)
    with pytest.raises(ValueError, match="two different nodes"):
        attention_lenses.max_flow(np.zeros((2, 2)), 1, 1)
