"""Lenses: other readings of the attention weights than the raw softmax probabilities alpha.

- `value_weighted`: ||alpha_ij f_h(x_j)|| = alpha_ij ||f_h(x_j)||, with f_h(x) = (x W_V + b_V) W_O^h the
  value vector mapped through the head's slice of the output projection (Kobayashi et al. 2020,
  "Attention is not only a weight"): a head may put high weight on a token whose vector is tiny, so
  that weight moves nothing. Works for every attention kind (self and cross).
- `rollout` (Abnar & Zuidema 2020, "Quantifying attention flow in transformers"): per layer
  A = 0.5 * mean_h(alpha) + 0.5 * I (the residual connection), rows renormalised, multiplied from the
  first layer up: R_l = A_l A_{l-1} ... A_0. One map per layer: how much of position i at the output of
  layer l comes from input token j, if information only mixed along attention.
- `flow` (same paper): the same graph of A's, read as capacities; flow[l, i, j] is the maximum flow
  from position i above layer l to input token j, rows normalised to sum to 1 (their code does the
  same). It costs one max-flow per (layer, i, j), hence the token limit FLOW_MAX_TOKENS.

Rollout and flow need T == S self-attention stacks (a decoder's causal maps work: rows stay
stochastic). Everything is numpy on arrays (attnviz.analysis works on traces, never on models); the
max-flow is our own (Dinic's algorithm), tested against networkx, which this package does not import.

Shapes: L layers, H heads, T query positions, S key positions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

LENSES = ("raw", "value", "rollout", "flow")
FLOW_MAX_TOKENS = 20  # flow runs L * T * T max-flows on graphs of up to L * T nodes
_EPS = 1e-12  # residual capacity below this is saturated (float64 sums of float32 weights)


def _attention_array(attentions) -> np.ndarray:
    a = np.asarray(attentions)
    if a.ndim != 4:
        raise ValueError(f"attentions must be [layers, heads, T, S], got shape {a.shape}")
    return a


def value_weighted(attentions, value_norms, normalise: bool = False, out: np.ndarray | None = None) -> np.ndarray:
    """[L, H, T, S] float32: alpha_ij * ||f_h(x_j)|| from attentions [L, H, T, S] and value_norms
    [L, H, S] (`Recorder("value_norms")`). With `normalise`, each row is divided by its sum, so it reads
    as a share like alpha does; a row that sums to 0 stays 0. `out`, a float32 array of the attentions'
    shape, receives the result; it may be the attentions themselves (computed in place, one layer at a time)."""
    a = _attention_array(attentions)
    norms = np.asarray(value_norms)
    if norms.shape != (a.shape[0], a.shape[1], a.shape[3]):
        raise ValueError(f"value_norms must be [layers, heads, S] = {(a.shape[0], a.shape[1], a.shape[3])}, "
                         f"got {norms.shape}")
    if out is None:
        out = np.empty(a.shape, dtype=np.float32)
    elif out.shape != a.shape or out.dtype != np.float32:
        raise ValueError(f"out must be float32 {a.shape}, got {out.dtype} {out.shape}")
    for layer in range(a.shape[0]):  # one layer at a time: no full-size float64 copy
        weighted = a[layer].astype(np.float32) * norms[layer, :, None, :].astype(np.float32)  # H, T, S
        if normalise:
            totals = weighted.sum(axis=-1, keepdims=True)
            weighted = np.divide(weighted, totals, out=np.zeros_like(weighted), where=totals > 0)
        out[layer] = weighted
    return out


def residual_attention(attentions) -> np.ndarray:
    """[L, T, T] float64: A_l = 0.5 * mean over heads of alpha_l + 0.5 * I, rows renormalised."""
    a = _attention_array(attentions)
    if a.shape[2] != a.shape[3]:
        raise ValueError(f"rollout and flow need self-attention (T == S), got T={a.shape[2]}, S={a.shape[3]}")
    n = a.shape[2]
    out = np.empty((a.shape[0], n, n), dtype=np.float64)
    for layer in range(a.shape[0]):
        mixed = 0.5 * a[layer].astype(np.float64).mean(axis=0) + 0.5 * np.eye(n)
        out[layer] = mixed / mixed.sum(axis=-1, keepdims=True)  # the diagonal keeps every sum > 0
    return out


def rollout(attentions) -> np.ndarray:
    """[L, T, T] float32: R_0 = A_0, R_l = A_l R_{l-1} (Abnar & Zuidema 2020, eq. 1)."""
    steps = residual_attention(attentions)
    out = np.empty(steps.shape, dtype=np.float32)
    product = np.eye(steps.shape[1])
    for layer, step in enumerate(steps):
        product = step @ product
        out[layer] = product
    return out


# ---------------------------------------------------------------------------------------------------
# maximum flow


def max_flow(capacity, source: int, sink: int) -> tuple[float, np.ndarray]:
    """Dinic's algorithm on a dense capacity matrix (capacity[u, v] >= 0 is the arc u -> v).

    Returns (value, flow) where flow [N, N] is the net flow, skew-symmetric (flow[v, u] = -flow[u, v]),
    so the residual capacity of every arc, reverse arcs included, is capacity - flow. Each phase finds
    the shortest-path levels breadth-first, then augments along level-increasing paths depth-first
    until none is left (a blocking flow); at most N phases. Scalars in Python lists, not numpy: on
    graphs of tens to hundreds of nodes the per-element numpy calls cost more than the arithmetic
    (Edmonds-Karp with a numpy BFS per path took 100 s for the flow of a 19-token MiniLM input; Dinic
    on lists, with one `_Network` per layer, 3 s of CPU)."""
    cap = np.array(capacity, dtype=np.float64)
    if cap.ndim != 2 or cap.shape[0] != cap.shape[1]:
        raise ValueError(f"capacity must be a square matrix, got shape {cap.shape}")
    if (cap < 0).any() or not np.isfinite(cap).all():
        raise ValueError("capacities must be finite and >= 0")
    n = cap.shape[0]
    if not (0 <= source < n and 0 <= sink < n) or source == sink:
        raise ValueError(f"source {source} and sink {sink} must be two different nodes of 0..{n - 1}")
    value, residual = _Network(cap).solve(source, sink)
    return value, cap - np.array(residual)


class _Network:
    """A capacity matrix prepared once for many (source, sink) problems: the residual capacities as
    Python lists (copied per problem, row by row, at C speed) and each node's neighbours either way
    (a reverse arc gains capacity as flow is sent)."""

    def __init__(self, cap: np.ndarray) -> None:
        self.capacity = cap.tolist()
        linked = (cap > 0) | (cap.T > 0)
        self.neighbours = [np.flatnonzero(row).tolist() for row in linked]

    def solve(self, source: int, sink: int) -> tuple[float, list[list[float]]]:
        residual = [row[:] for row in self.capacity]
        total = 0.0
        while True:
            level = _levels(residual, self.neighbours, source)
            if level[sink] < 0:
                return total, residual
            total += _blocking_flow(residual, self.neighbours, level, source, sink)


def _levels(residual: list[list[float]], neighbours: list[list[int]], source: int) -> list[int]:
    """Breadth-first distance from the source over arcs with residual capacity (-1: unreachable)."""
    level = [-1] * len(residual)
    level[source] = 0
    queue = [source]
    for u in queue:  # the list grows while it is read: a FIFO queue without pops
        row, next_level = residual[u], level[u] + 1
        for v in neighbours[u]:
            if level[v] < 0 and row[v] > _EPS:
                level[v] = next_level
                queue.append(v)
    return level


def _blocking_flow(residual, neighbours, level, source: int, sink: int) -> float:
    """Augment along paths whose levels rise by one each arc until none is left; returns the amount.
    `arc[u]` is u's current arc (arcs before it are saturated or lead nowhere); a dead-end node is
    taken out of the level graph, so each arc is given up at most once per phase."""
    arc = [0] * len(residual)
    sent = 0.0
    path = [source]
    while path:
        u = path[-1]
        if u == sink:
            arcs = list(zip(path, path[1:]))
            bottleneck = min(residual[a][b] for a, b in arcs)
            for a, b in arcs:
                residual[a][b] -= bottleneck
                residual[b][a] += bottleneck
            sent += bottleneck
            # Go on from the tail of the first saturated arc: the path up to it still has capacity.
            first = next(k for k, (a, b) in enumerate(arcs) if residual[a][b] <= _EPS or k == len(arcs) - 1)
            path = path[: first + 1]
            continue
        row, options, want = residual[u], neighbours[u], level[u] + 1
        while arc[u] < len(options):
            v = options[arc[u]]
            if level[v] == want and row[v] > _EPS:
                path.append(v)
                break
            arc[u] += 1
        else:
            level[u] = -1  # dead end for the rest of this phase
            path.pop()
            if path:
                arc[path[-1]] += 1
    return sent


def min_cut(capacity, source: int, sink: int) -> tuple[float, set[int]]:
    """(cut capacity, source side): the nodes reachable from the source in the residual graph of a
    maximum flow, and the capacity of the arcs leaving them. Equals the max-flow value (the theorem
    the tests check)."""
    cap = np.asarray(capacity, dtype=np.float64)
    _, flow = max_flow(cap, source, sink)
    open_arcs = cap - flow > _EPS
    side = {source}
    stack = [source]
    while stack:
        for v in np.flatnonzero(open_arcs[stack.pop()]):
            if int(v) not in side:
                side.add(int(v))
                stack.append(int(v))
    inside = np.zeros(len(cap), dtype=bool)
    inside[list(side)] = True
    return float(cap[inside][:, ~inside].sum()), side


def flow(attentions, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """[L, T, T] float32 attention flow (Abnar & Zuidema 2020) for T <= FLOW_MAX_TOKENS.

    The graph: one node per (layer boundary, position), arcs from position a above layer k to position
    b below it with capacity A_k[a, b] (`residual_attention`). flow[l, i, j] = max-flow from i above
    layer l to input token j, then each row divided by its sum. Layer 0 is A_0 itself (a single arc).
    `progress(done, total)` is told after each layer."""
    steps = residual_attention(attentions)
    n_layers, n = steps.shape[0], steps.shape[1]
    if n > FLOW_MAX_TOKENS:
        raise ValueError(f"attention flow is limited to {FLOW_MAX_TOKENS} tokens (one max-flow per layer and "
                         f"pair of tokens); this input has {n}")
    out = np.empty((n_layers, n, n), dtype=np.float32)
    for layer in range(n_layers):
        values = steps[0].copy() if layer == 0 else _layer_flow(steps[: layer + 1])
        totals = values.sum(axis=-1, keepdims=True)
        out[layer] = np.divide(values, totals, out=np.zeros_like(values), where=totals > 0)
        if progress is not None:
            progress(layer + 1, n_layers)
    return out


def flow_graph(steps: np.ndarray) -> np.ndarray:
    """The capacity matrix of the flow graph of `steps` [l+1, T, T]: node k * T + p is position p below
    layer k (k = 0 the input tokens, k = l + 1 the positions above the last layer); arcs from position a
    above layer k to position b below it with capacity A_k[a, b]. The max-flow from node (l+1) T + i to
    node j is flow[l, i, j] before normalising; other top and input nodes lead nowhere."""
    depth, n = steps.shape[0], steps.shape[1]
    cap = np.zeros(((depth + 1) * n, (depth + 1) * n))
    for k in range(depth):
        cap[(k + 1) * n:(k + 2) * n, k * n:(k + 1) * n] = steps[k]
    return cap


def _layer_flow(steps: np.ndarray) -> np.ndarray:
    n = steps.shape[1]
    network = _Network(flow_graph(steps))
    top = (steps.shape[0]) * n
    values = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            values[i, j] = network.solve(top + i, j)[0]
    return values
