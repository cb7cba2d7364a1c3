"""A circuit of heads and MLPs for a minimal pair: edge attribution patching with integrated gradients (EAP-IG,
Hanna, Pezzelle and Belinkov 2024; EAP: Syed et al. 2023), the strongest edges kept as a circuit, and every claim
checked by exact patching of edges in our own forward pass.

The graph. Nodes: the input embedding, every query head of every layer, every MLP, and the logits (the metric:
patching.metric_function's logit difference target - contrast at the receiving run's scored position). The
residual stream entering a node is the sum of what every node upstream wrote into it: the embedding, each head's
output through its slice of the output projection (y = z W_O^h, [T, C]), each MLP's output (after its sandwich
norm where the model has one), plus biases that are the same in every run. An edge u -> v is "u's output as v
reads it": each receiving node reads its own copy of the residual stream, so v may read u from one run while
another node reads it from the other. A head reads its one copy through its q, k and v alike (one receiving node
per head, not three); a head of layer l reads the heads and MLPs of layers before l; an MLP also reads its own
layer's heads (not in a parallel block, GPT-NeoX and Phi, whose MLP reads the layer's input); the logits read
every node. SmolLM2-135M: 302 nodes, 44,371 edges.

Where a layer's heads write through a norm of their sum (Gemma 2 and 3's sandwich norm after attention), the
heads of that layer do not add: v reads post_norm(sum_h y_h + b) with each y_h from the run its edge chooses,
and the norm is applied per receiving node. The MLP's own sandwich norm is part of the MLP node.

Exact patching of edges (`path_patch`). One forward pass per batch row, in our own module's weights: every
receiving node gets its own input,

    input_v = input_v(F) + sum_u w_uv (out_u(P) - out_u(F))          (through the layer's norm for heads there)

where F is a recorded run (the clean or the corrupted one, its values aligned onto the receiving run's positions
as patching's are) and P this pass's own outputs, computed from the other run's embedding. w_uv = 1 lets the
edge carry this pass's value, 0 the fixed run's; fractions interpolate (the tests take derivatives so). With all
weights 1 the pass is the other run itself; with all 0, run F. Each head computes its own queries, keys and
values from its own input (a GQA key/value head is computed once for each query head that reads it): the
heads of a layer cost about three query projections each instead of the layer's whole attention.

- A circuit C is evaluated as Hanna et al. evaluate one: its edges carry the pass's own values (which start from
  the clean embedding), every other edge the corrupted run's (F = corrupted). faithfulness = (m(C) -
  m(corrupted)) / (m(clean) - m(corrupted)): 1 keeps all of the clean run's logit difference, 0 none.
- One edge patched exactly (`edge_effects`) is the receiving run with only that edge carrying the source run's
  value, everything downstream recomputed (F = the source run, every other edge on).

The scores (`edge_scores`). EAP takes exact edge patching to first order:

    score(u -> v) = (out_u(clean) - out_u(corrupted)) . dm/d input_v / (m(clean) - m(corrupted))

(through the Jacobian of the layer's norm for heads behind one), so a positive score is an edge that carries the
clean behaviour. EAP-IG averages the gradient over `steps` points of the straight line between the two runs'
embeddings (integrated gradients on the input, as the paper): alpha = k / steps, k = 0 .. steps - 1, from the
receiving run (alpha 0: denoise, the corrupted run; noise, the clean run) towards the source. steps=1 is plain
EAP, the gradient in the receiving run. The gradient comes from a backward pass through a batch of interpolation
points (as many as fit SCAN_BATCH_BYTES, `gradient_rows`; all 5 for SmolLM2's short pairs), each head reading its
own copy of the stream plus a zero leaf that requires grad (attribution_patching's way, here one leaf per receiving
node): dm/d leaf is dm/d input_v.

A circuit (`circuit`): the fewest strongest edges (by |score|, both signs, as the paper) whose part on a path from
the embedding to the logits has at least n edges, that part. An edge whose source reads nothing of the circuit
carries the corrupted value anyway, and one whose target feeds nothing of it moves nothing, so pruning them does
not change the circuit's faithfulness (the tests check it), only its size and how it reads; taking the top n and
pruning left nothing on SmolLM2 below a hundred (the strongest edges sit at the two ends: the embedding into the
first MLP, the last layers' heads into the logits), hence the count of connected edges. The control
(`random_control`): random circuits of the same number of edges, evaluated exactly, drawn two ways: "edges",
uniform among all edges (most of them connect to nothing), and "paths", random paths from the embedding to the
logits (every edge connected, as the circuit's).

Cost. The scores: `steps` rows of one forward and one backward pass in which every head projects its own queries,
keys and values; SmolLM2 on a 5-token pair, one thread, 0.47 to 0.53 CPU-s with 5 steps, 0.27 to 0.33 with 1
(benchmarks/bench_circuit.py). A path-patched pass reads, for each receiving node, the running sum of every
difference so far less the few edges a row turns off (an edge patch), or the few it turns on (a circuit): 25 to 45
ms a row there.

Supported: causal decoders whose attention is attnviz.transformer.attention.MultiHeadAttention (MHA, GQA, MQA;
rotary, ALiBi, soft-caps, sinks, per-head q/k norms) in pre-norm or sandwich blocks, sequential or parallel: GPT-2,
Llama, Mistral, Qwen 2/3, Gemma 1/2/3, Phi, GPT-NeoX, Mixtral, gpt-oss... Refused with a ValueError: encoders
(their metric reads every position and their blocks are post-norm), post-norm blocks (BERT, OPT-350m: the stream
itself is normalised, so it is no sum of node outputs), norms only after each sublayer (OLMo 2, whose norm over
all heads' queries would also make each head's query depend on every head's input), DeepSeek's latent attention,
a model split across devices by a device map.

Shape legend: R batch rows, N nodes, L layers, H query heads, T the receiving run's positions, C model width, D head
dim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz.interventions import patching
from attnviz.interventions.ablation import ScanStopped
from attnviz.interventions.attribution_patching import Agreement, agreement
from attnviz.memory import ceiling
from attnviz.models.batch_bytes import MAX_SCAN_BATCH, SCAN_BATCH_BYTES
from attnviz.transformer.attention import MultiHeadAttention, scaled_dot_product_attention
from attnviz.transformer.rope import apply_rotary

DEFAULT_STEPS = 5  # EAP-IG's interpolation points (Hanna et al. find 5 enough on their tasks)
SIDES = ("clean", "corrupt")


# --- the graph -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Graph:
    """The nodes in topological order: 0 the embedding, then per layer its H heads and its MLP, last the logits.
    `sequential`: an MLP reads its own layer's heads (False in a parallel block)."""

    n_layers: int
    n_heads: int
    sequential: bool = True

    @property
    def n_nodes(self) -> int:
        return 2 + self.n_layers * (self.n_heads + 1)

    @property
    def logits(self) -> int:
        return self.n_nodes - 1

    def head(self, layer: int, head: int) -> int:
        return 1 + layer * (self.n_heads + 1) + head

    def mlp(self, layer: int) -> int:
        return 1 + layer * (self.n_heads + 1) + self.n_heads

    def kind(self, node: int) -> str:
        """"embed", "head", "mlp" or "logits"."""
        if node == 0:
            return "embed"
        if node == self.logits:
            return "logits"
        return "mlp" if (node - 1) % (self.n_heads + 1) == self.n_heads else "head"

    def layer(self, node: int) -> int:
        """-1 for the embedding, L for the logits."""
        if node == 0:
            return -1
        if node == self.logits:
            return self.n_layers
        return (node - 1) // (self.n_heads + 1)

    def row(self, node: int) -> float:
        """Where a figure draws the node within its layer: a head at its index, an MLP below the heads (row H), the
        embedding and the logits midway."""
        kind = self.kind(node)
        if kind == "head":
            return float((node - 1) % (self.n_heads + 1))
        return float(self.n_heads) if kind == "mlp" else self.n_heads / 2

    def label(self, node: int) -> str:
        """As the rest of the app writes them: "embed", "L3 H2", "MLP 3", "logits"."""
        kind = self.kind(node)
        if kind == "head":
            return f"L{self.layer(node)} H{(node - 1) % (self.n_heads + 1)}"
        return f"MLP {self.layer(node)}" if kind == "mlp" else kind

    def labels(self) -> list[str]:
        return [self.label(node) for node in range(self.n_nodes)]

    def valid(self) -> np.ndarray:
        """bool [N, N]: u -> v is an edge (u writes into the stream before v reads it)."""
        n = self.n_nodes
        layer = np.array([self.layer(node) for node in range(n)])
        kind = np.array([self.kind(node) for node in range(n)])
        edges = layer[:, None] < layer[None, :]
        if self.sequential:  # an MLP reads the heads of its own layer
            edges |= (layer[:, None] == layer[None, :]) & (kind[:, None] == "head") & (kind[None, :] == "mlp")
        edges[self.logits, :] = False
        edges[:, 0] = False
        return edges

    def upstream(self, node: int) -> int:
        """The sources a receiving node may read are the nodes 0 .. upstream(node) - 1."""
        layer, kind = self.layer(node), self.kind(node)
        if kind == "logits":
            return self.logits
        first = 1 + layer * (self.n_heads + 1)
        return first + self.n_heads if kind == "mlp" and self.sequential else first


def graph_of(module) -> Graph:
    """The graph of a supported module (module docstring); ValueError naming why another is refused."""
    c = module.config
    if not c.causal:
        raise ValueError("circuits are built for decoders: an encoder's metric reads every position")
    if c.norm_placement == "post":
        raise ValueError(f"circuits need a residual stream that is a sum of the nodes' outputs; this model's blocks "
                         f"normalise the stream itself (post-norm, {c.family})")
    if c.norm_placement not in ("pre", "sandwich"):
        raise ValueError(f"circuits are built for pre-norm and sandwich blocks; this model's are {c.norm_placement}-"
                         f"norm ({c.family})")
    attn = module.blocks[0].attn
    if type(attn) is not MultiHeadAttention:
        raise ValueError(f"circuits split attention into heads with their own inputs; {type(attn).__name__} "
                         f"({c.family}) is not supported")
    if attn.qk_norm == "projection":
        raise ValueError(f"a norm over all heads' queries makes each head's query depend on every head's input "
                         f"({c.family}): not supported")
    if c.shared_layers:
        raise ValueError("a block shared by every layer is not supported")
    devices = {p.device for p in module.parameters()}
    if len(devices) > 1 or any(d.type == "meta" for d in devices):
        # the per-head pass reads each projection's weights itself, where accelerate's hooks would bring them
        raise ValueError("circuits need the whole model on one device; this one is split by a device map")
    return Graph(c.n_layers, c.n_heads, c.residual == "sequential")


# --- recorded runs -------------------------------------------------------------------------------------------


@dataclass
class Side:
    """One run's values at every node, on the receiving run's positions (T at axis -2), without a batch axis:
    embed [T, C]; y [L, H, T, C] each head's output through its slice of the output projection; a [L, T, C] the
    heads' sum plus the projection's bias; c [L, T, C] what attention writes into the stream (a, or its sandwich
    norm); m [L, T, C] each MLP's output as written into the stream; x [L + 1, T, C] the stream entering each
    layer (x[L] the last block's output); mlp_in [L, T, C] the stream the MLP reads."""

    embed: torch.Tensor
    y: torch.Tensor
    a: torch.Tensor
    c: torch.Tensor
    m: torch.Tensor
    x: torch.Tensor
    mlp_in: torch.Tensor

    def outputs(self) -> torch.Tensor:
        """[N - 1, T, C]: every source node's output in node order (heads before their layer's sandwich norm)."""
        n_layers, n_heads = self.y.shape[:2]
        per_layer = torch.cat((self.y, self.m[:, None]), dim=1)  # L, H + 1, T, C
        return torch.cat((self.embed[None], per_layer.reshape(n_layers * (n_heads + 1), *self.embed.shape)))

    def aligned_onto(self, receiving: Side, pairs: list[tuple[int, int]]) -> Side:
        """This run's values at the receiving positions they pair with, the receiving run's own elsewhere."""
        out = {}
        device = self.embed.device
        src = torch.tensor([s for s, _ in pairs], dtype=torch.long, device=device)
        dst = torch.tensor([d for _, d in pairs], dtype=torch.long, device=device)
        for name in ("embed", "y", "a", "c", "m", "x", "mlp_in"):
            mine, theirs = getattr(self, name), getattr(receiving, name).clone()
            theirs[..., dst, :] = mine[..., src, :]
            out[name] = theirs
        return Side(**out)


@dataclass
class CircuitRuns:
    """Both runs of a pair recorded at every node on the receiving run's positions, and what the passes need.
    `sides["clean"]` and `sides["corrupt"]`: one is the receiving run's own, the other aligned onto it."""

    module: torch.nn.Module
    graph: Graph
    direction: str
    ids: torch.Tensor  # the receiving run's [1, T]
    position: int  # where the receiving run is scored
    layer_inputs: list
    sides: dict
    aligned: np.ndarray  # [T] bool: receiving positions with a partner
    clean_value: float
    corrupt_value: float
    metric: Callable = field(repr=False)  # (final hidden [R, T', C], position) -> float64 [R]
    pair: patching.PatchPair | None = None

    @property
    def receiving(self) -> str:
        return "corrupt" if self.direction == "denoise" else "clean"

    @property
    def source(self) -> str:
        return "clean" if self.direction == "denoise" else "corrupt"

    @property
    def gap(self) -> float:
        return self.clean_value - self.corrupt_value

    def normalised(self, values: np.ndarray) -> np.ndarray:
        return (np.asarray(values, dtype=np.float64) - self.corrupt_value) / self.gap


def prepare(module, pair: patching.PatchPair, direction: str = "denoise") -> CircuitRuns:
    """Both runs through our forward pass, recorded at every node (Side), the source aligned onto the receiving
    run's positions as patching.prepare aligns them; the metric's clean and corrupted values."""
    if direction not in patching.DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; choose one of {', '.join(patching.DIRECTIONS)}")
    graph = graph_of(module)
    if pair.metric != "logit_diff":
        raise ValueError("circuits are scored by a logit difference (a target token)")
    device = next(module.parameters()).device
    runs = {}
    for side, ids, position in (("clean", pair.clean_ids, pair.clean_position),
                                ("corrupt", pair.corrupt_ids, pair.corrupt_position)):
        ids = torch.tensor([ids], device=device)
        runs[side] = (ids, position, module.layer_inputs(ids))
    metric = patching.metric_function(module, pair, None)
    recorded, values = {}, {}
    for side, (ids, position, inputs) in runs.items():
        with torch.inference_mode():
            embed = module.embed(ids, positions=module.positions(ids))
            side_value, value = _recorded_pass(module, graph, inputs, embed, position, metric)
        recorded[side], values[side] = side_value, value
    if abs(values["clean"] - values["corrupt"]) < 1e-6:
        raise ValueError(f"the clean and the corrupted runs score the same ({values['clean']:.6g}): there is no "
                         "difference for a circuit to carry")
    denoise = direction == "denoise"
    receiving, source = ("corrupt", "clean") if denoise else ("clean", "corrupt")
    pairs = [(c, k) if denoise else (k, c) for c, k in pair.pairs]  # (source position, receiving position)
    ids, position, inputs = runs[receiving]
    aligned = np.zeros(ids.shape[1], dtype=bool)
    aligned[[d for _, d in pairs]] = True
    sides = {receiving: recorded[receiving], source: recorded[source].aligned_onto(recorded[receiving], pairs)}
    return CircuitRuns(module, graph, direction, ids, position, inputs, sides, aligned, values["clean"],
                       values["corrupt"], metric, pair)


def _recorded_pass(module, graph: Graph, inputs, embed, position: int, metric) -> tuple[Side, float]:
    """One run (embed [1, T, C]) through the per-node forward pass, all of its values kept."""
    keep: dict[str, list] = {name: [] for name in ("y", "a", "c", "m", "x", "mlp_in")}
    x = embed
    for index, block in enumerate(module.blocks):
        keep["x"].append(x[0])
        heads_in = x[:, None].expand(-1, graph.n_heads, -1, -1)
        y = _head_outputs(block, heads_in, inputs[index])  # 1, H, T, C
        a = _attention_sum(block, y)
        c = a if block.attn_post_norm is None else block.attn_post_norm(a)
        mlp_in = x + c if graph.sequential else x
        m = _mlp(block, mlp_in)
        x = (x + c) + m
        for name, value in (("y", y), ("a", a), ("c", c), ("m", m), ("mlp_in", mlp_in)):
            keep[name].append(value[0])
    keep["x"].append(x[0])
    value = float(metric(module.finish(x[:, position : position + 1]), 0)[0])
    return Side(embed[0], **{name: torch.stack(values) for name, values in keep.items()}), value


# --- one layer, each head on its own input --------------------------------------------------------------------


def _head_outputs(block, heads_in: torch.Tensor, layer_input) -> torch.Tensor:
    """heads_in [R, H, T, C] (head h's copy of the stream) -> each head's output through its slice of the output
    projection, y [R, H, T, C]: the block's norm, head h's queries, keys and values from its own copy (its KV
    group's weights), the model's attention kernel, and z_h W_O^h."""
    attn = block.attn
    mask, rotary, bias = layer_input
    normed = heads_in if block.attn_norm is None else block.attn_norm(heads_in)
    n_heads, n_kv, d = attn.n_heads, attn.n_kv_heads, attn.head_dim
    r, _, t, c = normed.shape
    # Query head h = g * n_rep + i reads KV head g: the heads grouped by their KV head, so that each weight is
    # read as it is stored (indexing the weights by head would copy them at every call).
    grouped = normed.reshape(r, n_kv, n_heads // n_kv, t, c)

    def project(linear, n):  # the projection of each head's own input by its head's (n = H) or group's (n = K) rows
        weight = linear.weight.view(n, d, c)
        if n == n_heads:
            out = torch.einsum("rhtc,hdc->rhtd", normed, weight)
        else:
            out = torch.einsum("rkitc,kdc->rkitd", grouped, weight).reshape(r, n_heads, t, d)
        if linear.bias is None:
            return out
        bias = linear.bias.view(n, 1, d)
        return out + (bias if n == n_heads else bias.repeat_interleave(n_heads // n_kv, dim=0))

    q = project(attn.q_proj, n_heads)
    k = project(attn.k_proj, n_kv)
    v = project(attn.v_proj, n_kv)
    if attn.q_norm is not None:  # per head, over D (qk_norm "head": Qwen3, Gemma 3)
        q, k = attn.q_norm(q), attn.k_norm(k)
    if rotary is not None:
        q, k = apply_rotary(q, *rotary), apply_rotary(k, *rotary)
    context, _ = scaled_dot_product_attention(q, k, v, mask, attn.scale, None, bias, attn.softcap, attn.sinks)
    w_o = attn.o_proj.weight.view(-1, n_heads, d)  # C, H, D
    return torch.einsum("rhtd,chd->rhtc", context, w_o)


def _attention_sum(block, y: torch.Tensor) -> torch.Tensor:
    """[R, H, T, C] -> the attention output before any norm after it, [R, T, C]."""
    bias = block.attn.o_proj.bias
    total = y.sum(1)
    return total if bias is None else total + bias


def _mlp_norm(block):
    if block.mlp_norm is not None:
        return block.mlp_norm
    return block.attn_norm if block.residual == "parallel_shared" else None  # Phi: one norm for both


def _mlp(block, mlp_in: torch.Tensor) -> torch.Tensor:
    """The MLP's output as written into the stream (after its sandwich norm)."""
    norm = _mlp_norm(block)
    out = block.mlp(mlp_in if norm is None else norm(mlp_in))
    return out if block.mlp_post_norm is None else block.mlp_post_norm(out)


# --- the scores ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Edges:
    """Every edge's score, [N, N] float64 (source, receiver; NaN where u -> v is no edge), normalised by the
    clean - corrupted logit difference (module docstring). `labels`: each node's, as Graph.label."""

    scores: np.ndarray
    graph: Graph
    labels: list
    direction: str
    steps: int
    clean_value: float
    corrupt_value: float

    def top(self, k: int) -> list[tuple[int, int]]:
        """The k edges of largest |score|, largest first (ties by position)."""
        flat = np.abs(self.scores).ravel()
        finite = np.flatnonzero(np.isfinite(flat))
        ranked = finite[np.argsort(-flat[finite], kind="stable")][:k]
        n = self.graph.n_nodes
        return [(int(j // n), int(j % n)) for j in ranked]

    def name(self, edge: tuple[int, int]) -> str:
        return f"{self.labels[edge[0]]} → {self.labels[edge[1]]}"


def _leaf(shape, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros(shape, dtype=like.dtype, device=like.device, requires_grad=True)


def gradients(runs: CircuitRuns, alphas) -> tuple[torch.Tensor, list]:
    """dm/d input_v for every receiving node at the points `alphas` (a sequence of floats) of the line between the
    receiving run's embedding (alpha 0) and the source's, float32 [A, N, T, C] (the embedding's row, no receiver, is
    zero; the logits' only at the scored position), and each layer's attention sum `a` at each point [A, T, C]
    (where a sandwich norm needs its Jacobian). One forward and one backward pass of A rows."""
    graph, module = runs.graph, runs.module
    recv, src = runs.sides[runs.receiving], runs.sides[runs.source]
    rows = len(alphas)
    leaves: list[torch.Tensor] = []
    sums = []
    # Off inference mode even inside it (the app's jobs run there): the recordings are inference tensors, cloned.
    with torch.inference_mode(False), torch.enable_grad():
        alphas = torch.tensor(list(alphas), dtype=recv.embed.dtype, device=recv.embed.device)
        embed, delta = recv.embed.clone(), (src.embed - recv.embed).clone()
        x = embed[None] + alphas[:, None, None] * delta[None]  # A, T, C
        layer_inputs = module.layer_inputs(runs.ids.clone())  # made here: inference tensors cannot be saved
        for index, block in enumerate(module.blocks):
            heads = _leaf((rows, graph.n_heads, *x.shape[1:]), x)
            y = _head_outputs(block, x[:, None] + heads, layer_inputs[index])
            a = _attention_sum(block, y)
            sums.append(a.detach())
            c = a if block.attn_post_norm is None else block.attn_post_norm(a)
            mlp_leaf = _leaf(x.shape, x)
            m = _mlp(block, (x + c if graph.sequential else x) + mlp_leaf)
            leaves += [heads, mlp_leaf]
            x = (x + c) + m
        final = _leaf(x[:, :1].shape, x)
        value = runs.metric(module.finish(x[:, runs.position : runs.position + 1] + final), 0)  # A
        grads = torch.autograd.grad(value.sum(), leaves + [final])
    t, c = x.shape[1:]
    out = torch.zeros(rows, graph.n_nodes, t, c, dtype=grads[0].dtype, device=grads[0].device)
    for index in range(graph.n_layers):
        first = graph.head(index, 0)
        out[:, first : first + graph.n_heads] = grads[2 * index]
        out[:, graph.mlp(index)] = grads[2 * index + 1]
    out[:, graph.logits, runs.position] = grads[-1][:, 0]
    return out.detach(), sums


def gradient_row_bytes(module, n_tokens: int) -> int:
    """Bytes of one interpolation point in the backward pass: its gradient at every node, [N, T, C], and what
    autograd keeps of its layers (each head's copy of the stream, its queries, keys, values and maps, the MLP's
    inner width)."""
    c = module.config
    itemsize = next(module.parameters()).element_size()
    n_nodes = Graph(c.n_layers, c.n_heads).n_nodes
    per_layer = n_tokens * (c.n_heads * (6 * c.d_model + 4 * c.dim_per_head + 2 * n_tokens) + 4 * c.d_ff)
    return itemsize * (n_nodes * n_tokens * c.d_model + c.n_layers * per_layer)


def gradient_rows(module, n_tokens: int) -> int:
    """Interpolation points per backward pass: what fits SCAN_BATCH_BYTES and the memory ceiling now, at least 1."""
    per_row = gradient_row_bytes(module, n_tokens)
    return ceiling.fit(per_row, int(max(1, SCAN_BATCH_BYTES // per_row)))


def edge_scores(runs: CircuitRuns, steps: int = DEFAULT_STEPS) -> Edges:
    """Every edge's EAP-IG score (module docstring): (out_u(clean) - out_u(corrupted)) . the mean over `steps`
    points of dm/d input_v, through the Jacobian of a sandwich norm after a head's layer, normalised. The points go
    through the backward pass a few at a time (`gradient_rows`), each batch's products summed in float64."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    graph, module = runs.graph, runs.module
    clean, corrupt = runs.sides["clean"], runs.sides["corrupt"]
    n = graph.n_nodes
    differences = (clean.outputs() - corrupt.outputs()).detach().cpu().double().reshape(n - 1, -1)  # N - 1, T*C
    scores = torch.zeros(n - 1, n, dtype=torch.float64)
    chunk = gradient_rows(module, runs.ids.shape[1])
    for begin in range(0, steps, chunk):
        alphas = [k / steps for k in range(begin, min(steps, begin + chunk))]
        grads, sums = gradients(runs, alphas)
        flat = grads.cpu().reshape(len(alphas), n, -1)  # A, N, T*C in the model's dtype
        batch = differences @ flat.sum(0, dtype=torch.float64).T  # N - 1, N: summed in float64, whatever the dtype
        for index, block in enumerate(module.blocks):
            norm = block.attn_post_norm
            if norm is None:
                continue
            # A head of this layer reaches the stream through the norm of its layer's sum: its output as v reads it
            # is, to first order, J_norm(a) (y_clean - y_corrupted), with a at each interpolation point.
            tangent = (clean.y[index] - corrupt.y[index]).to(sums[index].dtype)  # H, T, C
            with torch.inference_mode(False), torch.enable_grad():
                base = sums[index][:, None].expand(-1, graph.n_heads, -1, -1).contiguous()  # A, H, T, C
                _, read = torch.func.jvp(norm, (base,), (tangent[None].expand_as(base).contiguous(),))
            read = read.detach().cpu().to(flat.dtype).reshape(len(alphas), graph.n_heads, -1)  # A, H, T*C
            first = graph.head(index, 0)
            # at least float32 (a bfloat16 model's products would round each term); no copy for a float32 model
            batch[first : first + graph.n_heads] = torch.einsum("ahx,anx->hn", read.float(), flat.float()).double()
        scores += batch
    scores /= steps
    out = np.full((n, n), np.nan)
    out[: n - 1] = scores.numpy() / runs.gap
    out[~graph.valid()] = np.nan
    return Edges(out, graph, graph.labels(), runs.direction, steps, runs.clean_value, runs.corrupt_value)


# --- exact patching of edges -------------------------------------------------------------------------------------


def row_bytes(module, n_tokens: int) -> int:
    """Transient bytes of one row of `path_patch`: the differences of every source node's output [N, T, C] twice
    over (with the sums that read them), the heads' private streams, queries, keys, values and outputs, one
    receiving group's input, the MLP's inner width, and the row's weights [N, N] in float32."""
    c = module.config
    graph = Graph(c.n_layers, c.n_heads)
    itemsize = next(module.parameters()).element_size()
    per_token = 2 * graph.n_nodes * c.d_model + 8 * c.n_heads * max(c.d_model, c.dim_per_head) + 3 * c.d_ff
    return itemsize * n_tokens * per_token + 4 * graph.n_nodes ** 2


def batch_rows(module, n_tokens: int) -> int:
    """Rows per batch of `path_patch`: what fits SCAN_BATCH_BYTES and the memory ceiling now, at most 64."""
    per_row = row_bytes(module, n_tokens)
    return ceiling.fit(per_row, int(max(1, min(MAX_SCAN_BATCH, SCAN_BATCH_BYTES // per_row))))


def _start_layer(runs: CircuitRuns, weights: np.ndarray, fixed: str) -> int:
    """The first layer a row must compute: the lowest receiving node with an edge not fully on. Before it the row
    is the other run itself, recorded, where that run is the receiving one (the source aligned onto the receiving
    positions is no run of its own where the sentences' lengths differ, so a row from it starts at layer 0)."""
    graph = runs.graph
    other = "corrupt" if fixed == "clean" else "clean"
    if other != runs.receiving:
        return 0
    off = graph.valid() & (weights != 1)
    receivers = np.flatnonzero(off.any(0))
    return int(min((graph.layer(v) for v in receivers), default=graph.n_layers))


@torch.inference_mode()
def path_patch(runs: CircuitRuns, weights, fixed: str = "corrupt", progress=None, should_stop=None,
               batch_size: int | None = None) -> np.ndarray:
    """float64 [R]: the metric (unnormalised) of R path-patched passes. weights [R, N, N] (source, receiver; only
    edges count): 1 an edge carries this pass's value, 0 the `fixed` run's ("clean" or "corrupt"), fractions mix
    them; each pass starts from the other run's embedding (module docstring)."""
    if fixed not in SIDES:
        raise ValueError(f"fixed must be one of {SIDES}, got {fixed!r}")
    weights = np.asarray(weights, dtype=np.float32)
    n = runs.graph.n_nodes
    if weights.ndim != 3 or weights.shape[1:] != (n, n):
        raise ValueError(f"weights must be [rows, {n}, {n}], got {weights.shape}")
    total = weights.shape[0]
    starts = np.array([_start_layer(runs, w, fixed) for w in weights])
    order = np.argsort(starts, kind="stable")
    batch = batch_size or batch_rows(runs.module, runs.ids.shape[1])
    values = np.empty(total)
    for begin in range(0, total, batch):
        if should_stop is not None and should_stop():
            raise ScanStopped(f"stopped after {begin} of {total} passes")
        rows = order[begin : begin + batch]
        values[rows] = _path_batch(runs, weights[rows], fixed, int(starts[rows].min()))
        if progress is not None:
            progress(begin + len(rows), total)
    return values


def _path_batch(runs: CircuitRuns, weights: np.ndarray, fixed_name: str, start: int) -> np.ndarray:
    """One batch of path_patch from layer `start` on (module docstring's formula)."""
    graph, module = runs.graph, runs.module
    fixed = runs.sides[fixed_name]
    other = runs.sides["corrupt" if fixed_name == "clean" else "clean"]
    rows = weights.shape[0]
    device, dtype = fixed.embed.device, fixed.embed.dtype
    w = torch.from_numpy(weights * runs.graph.valid()).to(device=device, dtype=dtype)  # R, N, N
    sandwich = [block.attn_post_norm is not None for block in module.blocks]
    # Each source node's output in this pass minus the fixed run's: the other run's before `start`.
    delta = (other.outputs() - fixed.outputs())[None].repeat(rows, 1, 1, 1)  # R, N - 1, T, C
    linear = torch.ones(graph.n_nodes - 1, dtype=dtype, device=device)  # sources read as they are (no norm)
    for index in range(graph.n_layers):
        if sandwich[index]:
            first = graph.head(index, 0)
            linear[first : first + graph.n_heads] = 0

    # The sum of every linear source's difference so far ([R, T, C], up to node `counted`): a receiver's sources are
    # the nodes before it, so an edge patch (every edge on but one) reads this sum less one difference, and a circuit
    # (few edges on) the differences of its own edges: each read multiplies only the sources whose weights are not
    # all on (or not all off) in some row, not the hundreds before a late layer.
    running = torch.zeros_like(delta[:, 0])
    counted = 0

    def read(receivers: list[int], base: torch.Tensor, positions=slice(None)) -> torch.Tensor:
        """The inputs of `receivers` [R, G, T', C]: the fixed run's, plus each edge's share of the difference."""
        nonlocal running, counted
        upto = graph.upstream(receivers[0])
        if counted < upto:
            running = running + torch.einsum("u,rutc->rtc", linear[counted:upto], delta[:, counted:upto])
            counted = upto
        on = w[:, :upto, receivers] * linear[:upto, None]  # R, U, G
        off = (1 - w[:, :upto, receivers]) * linear[:upto, None]
        some_on, some_off = (on != 0).any(2).any(0), (off != 0).any(2).any(0)  # U
        out = base[positions][None, None].expand(rows, len(receivers), -1, -1)
        complement = int(some_off.sum()) < int(some_on.sum())
        mix, some = (off, some_off) if complement else (on, some_on)
        if complement:
            out = out + running[:, None, positions]
        if bool(some.any()):
            d = delta[:, :upto, positions]  # a view: no copy of the differences
            used = torch.nonzero(some).flatten()
            if 4 * len(used) < upto:  # few sources: copy theirs and multiply only those
                mix, d = mix[:, used], d[:, used]
            term = torch.einsum("rug,rutc->rgtc", mix, d)
            out = out - term if complement else out + term
        for layer in range(graph.n_layers):  # heads behind a sandwich norm: the norm of each receiver's mix
            first = graph.head(layer, 0)
            if not sandwich[layer] or first >= upto:
                continue
            heads = slice(first, first + graph.n_heads)
            mixed = fixed.a[layer][positions][None, None] + torch.einsum("rhg,rhtc->rgtc", w[:, heads, receivers],
                                                                         delta[:, heads, positions])
            out = out + module.blocks[layer].attn_post_norm(mixed) - fixed.c[layer][positions][None, None]
        return out

    for index in range(start, graph.n_layers):
        block = module.blocks[index]
        heads = [graph.head(index, h) for h in range(graph.n_heads)]
        y = _head_outputs(block, read(heads, fixed.x[index]), runs.layer_inputs[index])  # R, H, T, C
        delta[:, heads[0] : heads[0] + graph.n_heads] = y - fixed.y[index][None]
        mlp = graph.mlp(index)
        m = _mlp(block, read([mlp], fixed.mlp_in[index])[:, 0])
        delta[:, mlp] = m - fixed.m[index][None]
    p = runs.position
    final = read([graph.logits], fixed.x[graph.n_layers], slice(p, p + 1))[:, 0]  # R, 1, C
    return runs.metric(module.finish(final), 0).detach().cpu().numpy()


def all_edges(graph: Graph) -> np.ndarray:
    """float32 [N, N]: every edge on (path_patch's weights for the whole graph)."""
    return graph.valid().astype(np.float32)


def edge_effects(runs: CircuitRuns, edges: list[tuple[int, int]], progress=None, should_stop=None,
                 batch_size: int | None = None) -> np.ndarray:
    """float64 [E]: each edge patched exactly alone: the receiving run with that edge carrying the source run's
    value, in the scores' units (positive: the edge carries the clean behaviour; denoising (m - m(corrupted)) / gap,
    noising (m(clean) - m) / gap)."""
    graph = runs.graph
    valid = graph.valid()
    weights = np.repeat(all_edges(graph)[None], len(edges), axis=0)
    for row, (u, v) in enumerate(edges):
        if not valid[u, v]:
            raise ValueError(f"{graph.label(u)} → {graph.label(v)} is no edge")
        weights[row, u, v] = 0.0
    values = path_patch(runs, weights, runs.source, progress, should_stop, batch_size)
    receiving = runs.corrupt_value if runs.direction == "denoise" else runs.clean_value
    change = values - receiving
    return (change if runs.direction == "denoise" else -change) / runs.gap


# --- circuits ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Circuit:
    """A set of edges (source, receiver), each on a path from the embedding to the logits within the set, largest
    |score| first. `requested`: the edge count asked for; `top`: how many of the strongest edges were taken to
    reach it (module docstring, "A circuit")."""

    edges: list
    scores: np.ndarray  # [E]
    requested: int
    top: int
    graph: Graph

    def mask(self) -> np.ndarray:
        """float32 [N, N]: 1 on the circuit's edges."""
        n = self.graph.n_nodes
        out = np.zeros((n, n), dtype=np.float32)
        for u, v in self.edges:
            out[u, v] = 1.0
        return out

    def nodes(self) -> list[int]:
        return sorted({node for edge in self.edges for node in edge})


def pruned(edges: list[tuple[int, int]], graph: Graph) -> list[tuple[int, int]]:
    """The edges on a path from the embedding to the logits within `edges` (order kept): the largest such subset,
    so a superset of edges never prunes to less."""
    kept = list(edges)
    while True:
        reached = {0} | {v for _, v in kept}  # a node reads something of the circuit (or is the embedding)
        feeds = {graph.logits} | {u for u, _ in kept}  # a node writes into something of it (or is the logits)
        now = [(u, v) for u, v in kept if u in reached and v in feeds]
        if len(now) == len(kept):
            return now
        kept = now


def circuit(edges: Edges, n_edges: int) -> Circuit:
    """The fewest strongest edges (by |score|) whose connected part (`pruned`) has at least n_edges edges, that
    part: a circuit of about n_edges edges, more where the edge that connects them joins several at once, all of
    the top edges where they connect fewer."""
    if n_edges < 1:
        raise ValueError(f"a circuit needs at least one edge, got {n_edges}")
    ranked = edges.top(edges.graph.n_nodes ** 2)
    low, high = 1, len(ranked)  # pruned(ranked[:n]) grows with n: the smallest n that reaches n_edges
    while low < high:
        middle = (low + high) // 2
        if len(pruned(ranked[:middle], edges.graph)) >= n_edges:
            high = middle
        else:
            low = middle + 1
    kept = pruned(ranked[:low], edges.graph)
    return Circuit(kept, np.array([edges.scores[e] for e in kept], dtype=np.float64), n_edges, low, edges.graph)


def faithfulness(runs: CircuitRuns, masks, progress=None, should_stop=None, batch_size=None) -> np.ndarray:
    """float64 [R]: each circuit's faithfulness (module docstring), masks [R, N, N] (1 on its edges) or a list of
    Circuits; 1 keeps the clean run's logit difference, 0 is the corrupted run."""
    masks = np.stack([m.mask() if isinstance(m, Circuit) else np.asarray(m, dtype=np.float32) for m in masks])
    values = path_patch(runs, masks, "corrupt", progress, should_stop, batch_size)
    return runs.normalised(values)


def random_circuits(graph: Graph, n_edges: int, samples: int, kind: str = "paths", seed: int = 0) -> np.ndarray:
    """float32 [samples, N, N]: random circuits of n_edges edges. "edges": uniform among all edges; "paths": random
    paths from the embedding to the logits (each step to a uniformly drawn node downstream, or straight to the
    logits when the edges left allow no more), until the circuit has n_edges edges."""
    if kind not in ("edges", "paths"):
        raise ValueError(f"kind must be 'edges' or 'paths', got {kind!r}")
    rng = np.random.default_rng(seed)
    valid = graph.valid()
    pool = np.argwhere(valid)
    n_edges = min(n_edges, len(pool))
    out = np.zeros((samples, graph.n_nodes, graph.n_nodes), dtype=np.float32)
    for sample in range(samples):
        if kind == "edges":
            for u, v in pool[rng.choice(len(pool), n_edges, replace=False)]:
                out[sample, u, v] = 1.0
            continue
        chosen: set[tuple[int, int]] = set()
        for _ in range(100 * n_edges):  # each try adds a path or finds nothing new to add
            if len(chosen) >= n_edges:
                break
            node, path = 0, []
            while node != graph.logits:
                left = n_edges - len(chosen) - sum(edge not in chosen for edge in path)
                targets = np.flatnonzero(valid[node])
                nxt = graph.logits if left <= 1 else int(rng.choice(targets))
                path.append((node, nxt))
                node = nxt
            chosen |= set(path)
        for u, v in chosen:
            out[sample, u, v] = 1.0
    return out


def random_control(runs: CircuitRuns, n_edges: int, samples: int = 10, kind: str = "paths", seed: int = 0,
                   progress=None, should_stop=None, batch_size=None) -> np.ndarray:
    """float64 [samples]: the faithfulness of random circuits of n_edges edges (`random_circuits`)."""
    masks = random_circuits(runs.graph, n_edges, samples, kind, seed)
    return faithfulness(runs, masks, progress, should_stop, batch_size)


@dataclass(frozen=True)
class Checked:
    """The top edges by |score|, each estimated and patched exactly alone (`edge_effects`), and their agreement."""

    edges: list
    approx: np.ndarray
    exact: np.ndarray
    agreement: Agreement


def check_edges(runs: CircuitRuns, edges: Edges, k: int = 30, progress=None, should_stop=None,
                batch_size=None) -> Checked:
    """Exact patching of the k edges of largest |score|: Pearson r between estimate and exact, and how many of the
    exact top k/3 by |effect| the estimate's top k/3 holds (among these k)."""
    top = edges.top(k)
    exact = edge_effects(runs, top, progress, should_stop, batch_size)
    approx = np.array([edges.scores[e] for e in top], dtype=np.float64)
    return Checked(top, approx, exact, agreement(approx, exact, max(1, len(top) // 3)))


# --- everything at once ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CircuitResult:
    """What the command line and the app show: the scores, the circuit, its faithfulness beside the random
    controls (per kind, `samples` values each), the faithfulness of the whole graph (1 for pairs of one length)
    and, where asked, the exact check of the top edges."""

    edges: Edges
    circuit: Circuit
    faithfulness: float
    controls: dict  # kind -> float64 [samples]
    complete: float
    checked: Checked | None
    pair: patching.PatchPair | None


def find_circuit(module, pair: patching.PatchPair, direction: str = "denoise", n_edges: int = 100,
                 steps: int = DEFAULT_STEPS, samples: int = 10, check: int = 0, seed: int = 0, progress=None,
                 should_stop=None) -> CircuitResult:
    """Scores, the circuit of about n_edges edges (`circuit`), its faithfulness, `samples` random circuits of each
    kind of its size and, when `check` > 0, the top `check` edges patched exactly. progress(done, total) counts
    passes (the gradient pass as one); should_stop() before each batch raises ablation.ScanStopped."""
    runs = prepare(module, pair, direction)
    total = 1 + 2 + 2 * samples + check  # the gradient pass, the circuit and every edge, the controls, the checks

    def report(done: int):
        if progress is not None:
            progress(done, total)
    report(0)
    edges = edge_scores(runs, steps)
    report(1)
    chosen = circuit(edges, n_edges)
    size = max(1, len(chosen.edges))
    masks = [chosen.mask(), all_edges(runs.graph)]
    masks += list(random_circuits(runs.graph, size, samples, "edges", seed))
    masks += list(random_circuits(runs.graph, size, samples, "paths", seed))
    values = faithfulness(runs, masks, lambda n, _total: report(1 + n), should_stop)
    controls = {"edges": values[2 : 2 + samples], "paths": values[2 + samples :]}
    checked = None
    if check:
        checked = check_edges(runs, edges, check, lambda n, _total: report(1 + len(masks) + n), should_stop)
    return CircuitResult(edges, chosen, float(values[0]), controls, float(values[1]), checked, pair)
