"""attnviz.interventions.circuit against references written here: single-edge path patches and the EAP gradient
terms by Hugging Face's own modules, with hooks that add to a norm's input (an edge into an MLP, into the logits, or
into one head through a second run that takes only that head's output) and autograd through them (tiny random GPT-2
and Llama GQA; GPT-2's heads one by one through its fused q/k/v projection); all edges on and off against HF's clean
and corrupted runs on tiny models of seven families (sandwich norms, parallel blocks, q/k norms, ALiBi); each score
(steps=1) as the derivative of exact edge patching; integrated gradients' completeness; the scores summed over
receivers against attribution patching; the circuit's pruning and controls; SmolLM2 offline; the command line."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest
import torch

from attnviz.cli.main import main
from attnviz.interventions import attribution_patching as ap
from attnviz.interventions import circuit as circuits
from attnviz.interventions import patching
from attnviz.probesets.patch_pairs import builtin_patch_pairs
from tests.helpers import tiny_hf
from tests.helpers.hf_hooks import first_input, with_first_input
from tests.helpers.tiny_tokenizers import bpe_tokenizer

TOL = 1e-5  # logit-difference units: our float32 pass against HF's
GRAD_TOL = 1e-6  # the gradient terms against HF's autograd (measured within 2e-7)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def decoder(request):
    bos = request.param == "llama"
    return tiny_hf.tiny_decoder(request.param, bpe_tokenizer(bos), seed=3, intermediate_size=37,
                                max_position_embeddings=128)


def same_length_pair(model):
    return patching.patch_pair(model, "The keys to the cabinet", "The cat to the cabinet", " are", " the")


@functools.cache
def tiny_pair(family: str):
    """(our module, HF's) of tiny_hf's random model of this family, built once per session (neither is changed)."""
    return tiny_hf.tiny_pair(family)


def id_pair():
    """Ids of the tiny families' vocabulary of 99: one token differs, scored at the last position."""
    clean = [1, 17, 40, 23, 8, 51, 12, 33]
    corrupt = clean[:2] + [77] + clean[3:]
    return patching.PatchPair(tuple(clean), tuple(corrupt), 7, 7, 5, 9, tuple((i, i) for i in range(8)))


# --- Hugging Face's modules, hooked ------------------------------------------------------------------------------


def hf_parts(hf):
    """(each layer: (layer, norm before attention, norm before the MLP, output projection, MLP)), the final norm."""
    if hasattr(hf, "transformer"):  # GPT-2
        return [(b, b.ln_1, b.ln_2, b.attn.c_proj, b.mlp) for b in hf.transformer.h], hf.transformer.ln_f
    return ([(la, la.input_layernorm, la.post_attention_layernorm, la.self_attn.o_proj, la.mlp)
             for la in hf.model.layers], hf.model.norm)


def o_rows(proj, n_heads: int) -> torch.Tensor:
    """The output projection as [H, D, C]: head h's output is z_h @ o_rows[h]. GPT-2's Conv1D stores [in, out]."""
    weight = proj.weight if type(proj).__name__ == "Conv1D" else proj.weight.T
    return weight.reshape(n_heads, -1, weight.shape[-1])


def metric(hf, ids, position, target, contrast, hooks=()):
    """HF's logit difference with `hooks` [(module, pre-hook or hook, is_pre)] registered for the run."""
    handles = [m.register_forward_pre_hook(f, with_kwargs=True) if pre else m.register_forward_hook(f)
               for m, f, pre in hooks]
    try:
        logits = hf(input_ids=torch.tensor([ids])).logits[0, position].double()
    finally:
        for handle in handles:
            handle.remove()
    return logits[target] - logits[contrast]


def keeping(store: dict, key):
    """A forward pre-hook that keeps a copy of a module's first input and changes nothing."""
    def hook(m, a, k):
        store[key] = first_input(a, k)[0].clone()
    return hook


def adding(delta):
    """A forward pre-hook adding `delta` [T, C] to a module's first input."""
    return lambda m, a, k: with_first_input(a, k, first_input(a, k) + delta)


@torch.no_grad()
def hf_outputs(hf, ids, n_heads: int) -> torch.Tensor:
    """Every source node's output in our node order [N - 1, T, C], from HF's run: the embedding (the first layer's
    input), each head's slice of the output projection's input times its rows, each MLP's output."""
    layers, _ = hf_parts(hf)
    seen, hooks = {}, []
    hooks.append((layers[0][0], keeping(seen, "embed"), True))
    for index, (_, _, _, proj, mlp) in enumerate(layers):
        hooks.append((proj, keeping(seen, ("z", index)), True))
        hooks.append((mlp, lambda m, a, out, i=index: seen.__setitem__(("m", i), out[0].clone()), False))
    metric(hf, ids, 0, 0, 1, hooks)
    out = [seen["embed"]]
    for index, (_, _, _, proj, _) in enumerate(layers):
        z = seen[("z", index)].view(len(ids), n_heads, -1).transpose(0, 1)  # H, T, D
        out += list(torch.einsum("htd,hdc->htc", z, o_rows(proj, n_heads)))
        out.append(seen[("m", index)])
    return torch.stack(out)


@torch.no_grad()
def hf_edge_patch(hf, pair, direction, graph, edge) -> float:
    """The receiving run with edge u -> v carrying the source run's output of u, by HF's modules: the difference
    added to the input of v's norm (an MLP's, the final one), or, for a head, added to its layer's attention norm in
    a first run whose head output then replaces that head's alone in a second."""
    denoise = direction == "denoise"
    ids, position = (pair.corrupt_ids, pair.corrupt_position) if denoise else (pair.clean_ids, pair.clean_position)
    src_ids = pair.clean_ids if denoise else pair.corrupt_ids
    u, v = edge
    delta = hf_outputs(hf, src_ids, graph.n_heads)[u] - hf_outputs(hf, ids, graph.n_heads)[u]
    layers, final = hf_parts(hf)
    kind, layer = graph.kind(v), graph.layer(v)
    args = (hf, ids, position, pair.target_id, pair.contrast_id)
    if kind == "logits":
        return float(metric(*args, [(final, adding(delta), True)]))
    _, attn_norm, mlp_norm, proj, _ = layers[layer]
    if kind == "mlp":
        return float(metric(*args, [(mlp_norm, adding(delta), True)]))
    seen = {}
    metric(*args, [(attn_norm, adding(delta), True), (proj, keeping(seen, "z"), True)])
    head = graph.row(v)
    d = seen["z"].shape[-1] // graph.n_heads
    cols = slice(int(head) * d, (int(head) + 1) * d)

    def replaced(m, a, k):
        z = first_input(a, k).clone()
        z[0, :, cols] = seen["z"][:, cols]
        return with_first_input(a, k, z)
    return float(metric(*args, [(proj, replaced, True)]))


def hf_gradients(hf, ids, position, target, contrast, n_heads: int) -> dict:
    """dm/d input in the run `ids` by HF's autograd: each layer's attention norm input (the sum over its heads),
    its MLP norm's input, the final norm's input; for GPT-2 also each head's own, through its columns of the fused
    q/k/v projection (c_attn) and the attention norm's Jacobian."""
    layers, final = hf_parts(hf)
    leaves, inputs, hooks = {}, {}, []

    def leaf(key):
        def hook(m, a, k):
            x = first_input(a, k)
            inputs[key] = x[0].detach().clone()
            leaves[key] = torch.zeros_like(x, requires_grad=True)
            return with_first_input(a, k, x + leaves[key])
        return hook

    def qkv_leaf(key):
        def hook(m, a, out):
            leaves[key] = torch.zeros_like(out, requires_grad=True)
            return out + leaves[key]
        return hook
    gpt2 = hasattr(hf, "transformer")
    for index, (layer, attn_norm, mlp_norm, _, _) in enumerate(layers):
        hooks += [(attn_norm, leaf(("heads", index)), True), (mlp_norm, leaf(("mlp", index)), True)]
        if gpt2:
            hooks.append((layer.attn.c_attn, qkv_leaf(("qkv", index)), False))
    hooks.append((final, leaf(("logits",)), True))
    with torch.enable_grad():
        value = metric(hf, ids, position, target, contrast, hooks)
        keys = sorted(leaves, key=str)
        grads = dict(zip(keys, (g[0] for g in torch.autograd.grad(value, [leaves[k] for k in keys]))))
    if gpt2:
        for index, (layer, attn_norm, _, _, _) in enumerate(layers):
            c = inputs[("heads", index)].shape[-1]
            d = c // n_heads
            weight = layer.attn.c_attn.weight  # C, 3C: out = x @ W + b
            for head in range(n_heads):
                cols = [part * c + head * d + i for part in range(3) for i in range(d)]
                normed_grad = grads[("qkv", index)][:, cols] @ weight[:, cols].T
                x = inputs[("heads", index)].clone().requires_grad_(True)
                with torch.enable_grad():
                    grads[("head", index, head)] = torch.autograd.grad(attn_norm(x), x, normed_grad)[0]
    return {"value": float(value.detach()), **grads}


# --- exact edge patching against HF --------------------------------------------------------------------------------


def edge_cases(graph):
    """Edges of every kind: from the embedding, a head, an MLP; into a head, an MLP, the logits."""
    h, m = graph.head, graph.mlp
    return [(0, h(0, 1)), (0, m(0)), (h(0, 2), h(1, 3)), (h(0, 1), m(1)), (m(0), h(1, 0)), (h(1, 2), graph.logits),
            (m(1), graph.logits), (h(0, 3), m(0)), (m(0), graph.logits), (0, graph.logits)]


@pytest.mark.parametrize("direction", patching.DIRECTIONS)
def test_single_edge_patches_equal_hf_hooks(decoder, direction):
    model, hf = decoder
    pair = same_length_pair(model)
    runs = circuits.prepare(model.module, pair, direction)
    graph = runs.graph
    cases = edge_cases(graph)
    weights = np.repeat(circuits.all_edges(graph)[None], len(cases), axis=0)
    for row, (u, v) in enumerate(cases):
        weights[row, u, v] = 0.0
    ours = circuits.path_patch(runs, weights, runs.source)
    expected = np.array([hf_edge_patch(hf, pair, direction, graph, edge) for edge in cases])
    assert np.abs(ours - expected).max() <= TOL, (ours, expected)
    receiving = runs.corrupt_value if direction == "denoise" else runs.clean_value
    assert np.abs(expected - receiving).max() > 1e-3  # the edges move the metric: the test bites
    effects = circuits.edge_effects(runs, cases)  # the same passes in the scores' units
    sign = 1 if direction == "denoise" else -1
    assert np.abs(effects - sign * (ours - receiving) / runs.gap).max() <= 1e-9


def test_all_edges_on_and_off_are_hfs_runs_even_for_a_pair_of_two_lengths(decoder):
    """'keys' is one token here and 'key' two. Denoising (on the corrupted run's positions), all on is the
    corrupted run with the clean run's embedding at every aligned position (HF: the first layer's input replaced
    there), all off the corrupted run; noising (on the clean run's), all on is the clean run, all off reads the
    corrupted run's values aligned onto the clean positions: at the scored positions, which pair, its metric."""
    model, hf = decoder
    pair = patching.patch_pair(model, "The keys to the cabinet", "The key to the cabinet", " are", " the")
    assert len(pair.corrupt_ids) == len(pair.clean_ids) + 1
    layers, _ = hf_parts(hf)
    for direction in patching.DIRECTIONS:
        runs = circuits.prepare(model.module, pair, direction)
        denoise = direction == "denoise"
        ids, position = (pair.corrupt_ids, pair.corrupt_position) if denoise else (pair.clean_ids,
                                                                                 pair.clean_position)
        src_ids = pair.clean_ids if denoise else pair.corrupt_ids
        src_embed = hf_outputs(hf, src_ids, 4)[0]
        moves = [(c, k) if denoise else (k, c) for c, k in pair.pairs]

        def aligned(m, a, k, moves=moves, src_embed=src_embed):
            x = first_input(a, k).clone()
            for s, d in moves:
                x[0, d] = src_embed[s]
            return with_first_input(a, k, x)
        args = (hf, ids, position, pair.target_id, pair.contrast_id)
        with torch.no_grad():
            own, mixed = float(metric(*args)), float(metric(*args, [(layers[0][0], aligned, True)]))
        on, off = circuits.path_patch(runs, np.stack([circuits.all_edges(runs.graph),
                                                      np.zeros((runs.graph.n_nodes,) * 2)]))
        if denoise:  # the pass starts from the clean embedding (aligned), the fixed run is the corrupted one
            assert abs(on - mixed) <= TOL and abs(off - own) <= TOL and abs(runs.corrupt_value - own) <= TOL
            if model.config.family == "gpt2":  # learned positions: the aligned embedding moves (Llama's is equal)
                assert abs(mixed - own) > 1e-3
        else:
            assert abs(on - own) <= TOL and abs(runs.clean_value - own) <= TOL
            assert abs(off - runs.corrupt_value) <= TOL


FAMILIES = ["gemma3_text", "gemma2", "gpt_neox", "phi", "qwen3", "bloom", "mistral"]


@pytest.mark.parametrize("family", FAMILIES)
def test_all_edges_on_and_off_are_the_clean_and_corrupted_runs(family):
    """Sandwich norms (Gemma 2/3, a final soft-cap), parallel blocks (GPT-NeoX, Phi's shared norm), per-head q/k
    norms (Qwen3), ALiBi (BLOOM), a sliding window (Mistral): HF's own runs."""
    module, hf = tiny_pair(family)
    pair = id_pair()
    with torch.no_grad():
        expected = [float(metric(hf, ids, 7, 5, 9)) for ids in (pair.clean_ids, pair.corrupt_ids)]
    for direction in patching.DIRECTIONS:
        runs = circuits.prepare(module, pair, direction)
        on, off = circuits.path_patch(runs, np.stack([circuits.all_edges(runs.graph),
                                                      np.zeros((runs.graph.n_nodes,) * 2)]))
        assert abs(on - expected[0]) <= TOL and abs(off - expected[1]) <= TOL, (direction, on, off, expected)
        assert abs(runs.clean_value - expected[0]) <= TOL and abs(runs.corrupt_value - expected[1]) <= TOL
    assert abs(expected[0] - expected[1]) > 1e-3


def test_unsupported_models_are_refused_with_the_reason():
    for family, reason in (("olmo2", "after-norm"), ("deepseek_v3", "LatentAttention"), ("bert", "decoders")):
        module = tiny_pair(family)[0]
        with pytest.raises(ValueError, match=reason):
            circuits.graph_of(module)


def test_a_model_split_by_a_device_map_is_refused(tiny_llama, tmp_path):
    """Offloaded blocks keep their weights on "meta" until accelerate's hooks bring them for a call: the per-head
    pass, which reads the projections' weights itself, refuses the model instead of reading nothing."""
    import attnviz
    from tests.helpers.tiny_hf import block_bytes

    whole = attnviz.load(str(tiny_llama))
    split = attnviz.load(str(tiny_llama), device_map="auto", max_memory={"cpu": 4 * block_bytes(whole),
                                                                         "disk": "10MB"}, offload_folder=tmp_path)
    assert "disk" in set(split.module.hf_device_map.values())
    with pytest.raises(ValueError, match="device map"):
        circuits.graph_of(split.module)
    circuits.graph_of(whole.module)


# --- the scores ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("direction", patching.DIRECTIONS)
def test_eap_scores_equal_hf_autograd(decoder, direction):
    """steps=1: (out_u(clean) - out_u(corrupted)) . dm/d input_v in the receiving run, every edge into an MLP or the
    logits, and into each head (GPT-2, through its q/k/v columns) or each layer's heads summed (Llama's GQA shares
    keys and values between heads, which HF computes once)."""
    model, hf = decoder
    pair = same_length_pair(model)
    runs = circuits.prepare(model.module, pair, direction)
    graph = runs.graph
    edges = circuits.edge_scores(runs, steps=1)
    denoise = direction == "denoise"
    ids, position = (pair.corrupt_ids, pair.corrupt_position) if denoise else (pair.clean_ids, pair.clean_position)
    grads = hf_gradients(hf, ids, position, pair.target_id, pair.contrast_id, graph.n_heads)
    difference = (hf_outputs(hf, pair.clean_ids, graph.n_heads)
                  - hf_outputs(hf, pair.corrupt_ids, graph.n_heads)).double()  # N - 1, T, C
    ours = np.nan_to_num(edges.scores) * runs.gap  # logit-difference units
    valid = graph.valid()

    def expected(grad):
        return torch.einsum("ntc,tc->n", difference, grad.double()).numpy()
    sources = ours[:-1]  # the logits are no source
    per_head = 0
    for layer in range(graph.n_layers):
        mlp = graph.mlp(layer)
        rows = valid[:-1, mlp]
        assert np.abs(sources[rows, mlp] - expected(grads[("mlp", layer)])[rows]).max() <= GRAD_TOL
        heads = [graph.head(layer, h) for h in range(graph.n_heads)]
        rows = valid[:-1, heads[0]]
        summed = sources[:, heads].sum(1)
        assert np.abs(summed[rows] - expected(grads[("heads", layer)])[rows]).max() <= GRAD_TOL
        if ("head", layer, 0) in grads:  # GPT-2
            for h, node in enumerate(heads):
                assert np.abs(sources[rows, node] - expected(grads[("head", layer, h)])[rows]).max() <= GRAD_TOL
                per_head += 1
    assert np.abs(sources[:, graph.logits] - expected(grads[("logits",)])).max() <= GRAD_TOL
    assert per_head == (graph.n_layers * graph.n_heads if model.config.family == "gpt2" else 0)
    assert np.abs(ours).max() > 1e-2  # the test bites


def derivative_case(family):
    if family in ("gpt2", "llama"):
        model, _ = tiny_hf.tiny_decoder(family, bpe_tokenizer(family == "llama"), seed=3, intermediate_size=37,
                                        max_position_embeddings=128)
        return model.module, same_length_pair(model)
    return tiny_pair(family)[0], id_pair()


@pytest.mark.parametrize("family", ["llama", "gemma3_text", "gpt_neox", "phi", "qwen3"])
@pytest.mark.parametrize("direction", patching.DIRECTIONS)
def test_each_score_is_the_derivative_of_exact_edge_patching(family, direction):
    """d/d alpha of the receiving run with edge u -> v carrying out_u(receiving) + alpha (out_u(source) -
    out_u(receiving)) is the score (steps=1) times the gap, signed by direction: a central difference of path_patch
    (our inference-mode pass, no autograd; fractional weights) with alpha = +-1e-2, for the top 8 edges by |score|.
    Through a sandwich norm (Gemma 3) the score carries the norm's Jacobian; heads of a GQA group one by one."""
    module, pair = derivative_case(family)
    runs = circuits.prepare(module, pair, direction)
    edges = circuits.edge_scores(runs, steps=1)
    top = edges.top(8)
    alpha = 1e-2
    weights = np.repeat(circuits.all_edges(runs.graph)[None], 2 * len(top), axis=0)
    for row, (u, v) in enumerate(top):  # fixed = the source: weight 1 - alpha puts alpha of it into the edge
        weights[2 * row, u, v], weights[2 * row + 1, u, v] = 1 - alpha, 1 + alpha
    values = circuits.path_patch(runs, weights, runs.source)
    slope = (values[0::2] - values[1::2]) / (2 * alpha)
    sign = 1 if direction == "denoise" else -1
    ours = np.array([edges.scores[e] for e in top]) * runs.gap * sign
    assert np.abs(ours - slope).max() <= 2e-5 + 1e-3 * np.abs(slope).max(), (ours, slope)
    assert np.abs(slope).max() > 1e-3


def test_integrated_gradients_complete_the_difference(decoder):
    """The embedding's edges summed, (e_clean - e_corrupted) . the mean gradient over the line, tend to the whole
    difference (1 normalised) as the steps grow, the error falling as 1 / steps (a left Riemann sum)."""
    model, _ = decoder
    runs = circuits.prepare(model.module, same_length_pair(model), "denoise")
    errors = [float(np.nansum(circuits.edge_scores(runs, steps).scores[0])) - 1 for steps in (1, 16, 64)]
    assert abs(errors[2]) < 0.03 and 3 < errors[1] / errors[2] < 5, errors
    assert abs(errors[0]) > 4 * abs(errors[1])


@pytest.mark.parametrize("family", ["llama", "gemma3_text"])
def test_scores_are_the_same_whatever_points_share_a_backward_pass(family, monkeypatch):
    """The interpolation points go through the backward pass as many at a time as fit the memory bound: two at a
    time (and the sandwich norm's Jacobian per point) give what all five at once give."""
    module, pair = derivative_case(family)
    runs = circuits.prepare(module, pair)
    whole = circuits.edge_scores(runs, 5).scores
    monkeypatch.setattr(circuits, "gradient_rows", lambda *_: 2)
    chunked = circuits.edge_scores(runs, 5).scores
    assert np.array_equal(np.isnan(whole), np.isnan(chunked))
    assert np.nanmax(np.abs(whole - chunked)) * abs(runs.gap) <= 1e-6 and np.nanmax(np.abs(whole)) > 1e-2


@pytest.mark.parametrize("direction", patching.DIRECTIONS)
@pytest.mark.parametrize("family", ["llama", "gemma3_text"])
def test_scores_summed_over_receivers_are_attribution_patchings_estimate(family, direction):
    """A node's outgoing edges together are the node: summed over receivers, the steps=1 scores of a head (through
    the sandwich norm's Jacobian on Gemma 3) and of an MLP equal attribution patching's estimate of patching it.
    Not Gemma 3's MLPs: our MLP node includes the sandwich norm on its own output, whose output difference is taken
    exactly, where attribution patching patches before that norm and takes it to first order."""
    module, pair = derivative_case(family)
    runs = circuits.prepare(module, pair, direction)
    edges = circuits.edge_scores(runs, steps=1)
    estimate = ap.estimate(patching.prepare(module, pair, direction))
    raw = {name: estimate.grid(name) * (estimate.clean_value - estimate.corrupt_value) + estimate.corrupt_value
           - estimate.value for name in ("heads", "mlps")}
    sign = 1 if direction == "denoise" else -1
    summed = np.nansum(edges.scores, axis=1) * runs.gap * sign
    graph = runs.graph
    heads = np.array([[summed[graph.head(la, h)] for h in range(graph.n_heads)] for la in range(graph.n_layers)])
    mlps = np.array([summed[graph.mlp(la)] for la in range(graph.n_layers)])
    assert np.abs(heads - raw["heads"]).max() <= 1e-6 and np.abs(raw["heads"]).max() > 1e-2
    if family != "gemma3_text":
        assert np.abs(mlps - raw["mlps"]).max() <= 1e-6 and np.abs(raw["mlps"]).max() > 1e-3


# --- circuits and controls --------------------------------------------------------------------------------------


def test_pruning_keeps_the_connected_edges_and_changes_no_faithfulness(decoder):
    model, _ = decoder
    runs = circuits.prepare(model.module, same_length_pair(model))
    graph = runs.graph
    h, m = graph.head, graph.mlp
    dangling = [(h(0, 1), m(1)), (m(1), h(1, 2))]  # reads nothing of the circuit; feeds nothing of it
    connected = [(0, h(0, 2)), (h(0, 2), m(0)), (m(0), graph.logits)]
    assert circuits.pruned(dangling + connected, graph) == connected
    assert circuits.pruned(dangling, graph) == []
    edges = circuits.edge_scores(runs)
    for n in (3, 8, 20):
        top = edges.top(n)
        kept = circuits.pruned(top, graph)
        masks = np.zeros((2, graph.n_nodes, graph.n_nodes), dtype=np.float32)
        for row, chosen in enumerate((top, kept)):
            for u, v in chosen:
                masks[row, u, v] = 1
        both = circuits.faithfulness(runs, masks)
        assert abs(both[0] - both[1]) <= 1e-5, (n, both)
    chosen = circuits.circuit(edges, 8)
    assert len(chosen.edges) >= 8 and len(circuits.pruned(edges.top(chosen.top - 1), graph)) < 8
    assert circuits.pruned(chosen.edges, graph) == chosen.edges
    assert np.array_equal(chosen.scores, [edges.scores[e] for e in chosen.edges])
    whole = circuits.faithfulness(runs, [circuits.all_edges(graph)])[0]
    assert abs(whole - 1) <= 1e-5


def test_random_circuits_have_the_size_asked_and_paths_connect(decoder):
    model, _ = decoder
    graph = circuits.graph_of(model.module)
    valid = graph.valid()
    for kind in ("edges", "paths"):
        masks = circuits.random_circuits(graph, 9, 5, kind, seed=1)
        assert masks.shape == (5, graph.n_nodes, graph.n_nodes)
        for mask in masks:
            chosen = [tuple(e) for e in np.argwhere(mask)]
            assert len(chosen) == 9 and valid[mask > 0].all()
            if kind == "paths":
                assert circuits.pruned(chosen, graph) == chosen
    assert not np.array_equal(*circuits.random_circuits(graph, 9, 2, "paths"))


def test_check_edges_patches_the_top_edges_exactly(decoder):
    model, _ = decoder
    runs = circuits.prepare(model.module, same_length_pair(model), "noise")
    edges = circuits.edge_scores(runs)
    checked = circuits.check_edges(runs, edges, 6)
    assert checked.edges == edges.top(6)
    one_by_one = circuits.edge_effects(runs, checked.edges, batch_size=1)
    assert np.abs(checked.exact - one_by_one).max() * abs(runs.gap) <= 1e-6  # batch rounding, in logits
    assert checked.agreement.cells == 6 and np.isfinite(checked.agreement.r)


def test_find_circuit_reports_every_pass(decoder):
    model, _ = decoder
    seen = []
    found = circuits.find_circuit(model.module, same_length_pair(model), "noise", 6, steps=2, samples=3, check=4,
                                  progress=lambda done, total: seen.append((done, total)))
    total = 1 + 2 + 2 * 3 + 4
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:])) and {t for _, t in seen} == {total}
    assert len(found.controls["paths"]) == 3 and len(found.checked.edges) == 4 and found.edges.steps == 2
    assert abs(found.complete - 1) <= 1e-5 and len(found.circuit.edges) >= 6


# --- SmolLM2 offline ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm_circuit(smollm):
    """The issue's pair (en-agree-1), denoising: the runs and the EAP-IG scores."""
    spec = next(p for p in builtin_patch_pairs() if p.id == "en-agree-1")
    pair = patching.patch_pair(smollm, spec.clean, spec.corrupt, spec.target, spec.contrast)
    runs = circuits.prepare(smollm.module, pair)
    return runs, circuits.edge_scores(runs)


def test_smollm_circuit_beats_random_circuits_of_its_size(smollm_circuit):
    """Measured (benchmarks/bench_circuit.py): 500 edges keep 0.49 of the logit difference, random circuits of as
    many edges at most 0.001 (random paths) and 0.000 (uniform edges); every edge on is the clean run."""
    runs, edges = smollm_circuit
    assert runs.graph.n_nodes == 302 and int(runs.graph.valid().sum()) == 44371
    chosen = circuits.circuit(edges, 500)
    size = len(chosen.edges)
    masks = [chosen.mask(), circuits.all_edges(runs.graph), *circuits.random_circuits(runs.graph, size, 5, "paths"),
             *circuits.random_circuits(runs.graph, size, 5, "edges")]
    values = circuits.faithfulness(runs, masks)
    assert values[0] > 0.3 and np.abs(values[2:]).max() < 0.05, values
    assert abs(values[1] - 1) < 1e-4


def test_smollm_top_edges_agree_with_exact_patching(smollm_circuit):
    """Measured r 0.926 over the top 30 (plain EAP: 0.46; its largest miss is the first MLP's edge from the
    embedding, estimated 1.58, exact 1.01, which integrated gradients bring closer)."""
    runs, edges = smollm_circuit
    checked = circuits.check_edges(runs, edges, 30)
    assert checked.agreement.r > 0.8, checked.agreement
    assert checked.edges[0] == (0, runs.graph.mlp(0))  # the differing token's first MLP reads it
    node = {label: n for n, label in enumerate(edges.labels)}
    assert (node["L26 H0"], runs.graph.logits) in checked.edges


# --- the command line ------------------------------------------------------------------------------------------------

# 'cat' is one token of this vocabulary as 'keys' is: a pair of one length ('key' is two, and the aligned words are
# then the same tokens at the same positions, which a Llama embeds alike: no edge would carry a difference).
ARGS = ["--clean", "The keys to the cabinet", "--corrupt", "The cat to the cabinet", "--target", " are",
        "--contrast", " the"]


def test_patch_circuit_json(tiny_llama, capsys):
    import attnviz

    assert main(["patch", "--model", str(tiny_llama), *ARGS, "--circuit", "12", "--steps", "3", "--controls", "4",
                 "--check", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = attnviz.load(str(tiny_llama))
    pair = patching.patch_pair(model, *ARGS[1::2])
    found = circuits.find_circuit(model.module, pair, "denoise", 12, 3, 4, 5)
    got = out["circuit"]
    assert got["edges"] == [list(e) for e in found.circuit.edges] and len(got["edges"]) >= 12
    assert np.allclose(got["scores"], found.circuit.scores, atol=1e-6)
    assert abs(got["faithfulness"] - found.faithfulness) <= 1e-6 and got["steps"] == 3
    assert {k: len(v) for k, v in got["controls"].items()} == {"paths": 4, "edges": 4}
    assert got["nodes"][0] == "embed" and got["nodes"][-1] == "logits" and got["top"] == found.circuit.top
    assert abs(got["complete"] - 1) <= 1e-5 and 0 < abs(got["faithfulness"])
    assert out["check"]["edges"] == [list(e) for e in found.checked.edges]
    assert np.allclose(out["check"]["exact"], found.checked.exact, atol=1e-6)


def test_patch_circuit_text_and_refusals(tiny_llama, capsys):
    assert main(["patch", "--model", str(tiny_llama), *ARGS, "--circuit", "--controls", "2"]) == 0
    printed = capsys.readouterr().out
    assert "faithfulness of the circuit alone:" in printed and "random paths: mean" in printed
    assert "every edge: 1.000" in printed and " → logits  " in printed  # the edges labelled as the app labels nodes
    for extra, message in ((["--circuit", "--attribution"], "choose one"), (["--steps", "3"], "add --circuit"),
                           (["--circuit", "--check", "all"], "give a number")):
        assert main(["patch", "--model", str(tiny_llama), *ARGS, *extra]) == 2
        assert message in capsys.readouterr().err
