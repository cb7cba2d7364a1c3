"""Information-flow routes (Ferrando & Voita 2024, "Information flow routes: automatically interpreting language
models at scale"): the subgraph of components through which the prediction at one position is carried.

Nodes: "x{l}@{i}", the residual stream entering block l at position i (l = L: after the last block, where the
prediction is read); "mid{l}@{i}", the stream after block l's attention sub-block; "L{l}.H{h}@{i}", head h
of layer l writing at position i; "L{l}.mlp@{i}", layer l's MLP at position i. Every node is a sum of the
nodes below it, and the edge from a part to its sum weighs the part by the paper's proximity rule:

    importance(part, sum) = max(0, ||sum||_1 - ||sum - part||_1), normalised over the sum's parts,

so a part near the whole weighs most and a part pointing away weighs nothing. The sums, as the blocks form
them (attnviz.transformer.blocks; a norm on a sum has its scale frozen at this run's value and applied to
every part, as attnviz.transformer.decompose does):

- x{l+1}@i = mid{l}@i + L{l}.mlp@i;
- mid{l}@i = x{l}@i + sum_h L{l}.H{h}@i (with the attention output's bias, which is no node);
- L{l}.H{h}@i = sum_j a_ij f_h(x{l}@j), a the head's attention, f_h(x) = (x W_V + b_V) W_O^h: the edge from
  x{l}@j to the head weighs the key position j's term.

A parallel block (GPT-NeoX, Phi) has no mid state of its own: its mid node is the input plus the attention
output. The graph is built from x{L}@position downwards, keeping an edge where its importance reaches the
threshold (0.04, the paper's) and walking on from its source; only the positions reached are computed.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import torch

from attnviz.models.loaded_model import LoadedModel
from attnviz.readouts import recorded_run
from attnviz.transformer.decompose import frozen_norm, head_parts

ROUTE_NAMES = ("block_inputs", "attn_outputs", "mlp_outputs", "head_outputs", "attentions", "values")
THRESHOLD = 0.04  # Ferrando & Voita's


@dataclass
class Routes:
    tokens: list[str]
    position: int
    threshold: float
    n_layers: int
    n_heads: int
    nodes: list[dict] = field(default_factory=list)  # {"id", "kind", "layer", "position", "head"}
    edges: list[dict] = field(default_factory=list)  # {"source", "target", "importance"}

    def to_json(self) -> dict:
        return {"tokens": self.tokens, "position": self.position, "threshold": self.threshold,
                "n_layers": self.n_layers, "n_heads": self.n_heads, "nodes": self.nodes, "edges": self.edges}

    def heads(self) -> list[tuple[int, int]]:
        """The (layer, head) pairs the routes pass through, once each, in layer order."""
        return sorted({(n["layer"], n["head"]) for n in self.nodes if n["kind"] == "head"})

    def _feeds(self) -> dict[str, list[tuple[str, float]]]:
        """Each node's outgoing edges: the sums it is a part of, with the edge's importance."""
        feeds: dict[str, list[tuple[str, float]]] = {}
        for e in self.edges:
            feeds.setdefault(e["source"], []).append((e["target"], e["importance"]))
        return feeds

    def carried(self) -> dict[str, float]:
        """The share of the prediction each node carries: 1 for the prediction's stream, and for a part its
        edge's importance times what its sum carries, summed over the sums it feeds (as rollout multiplies
        attention down the layers)."""
        feeds = self._feeds()
        carried: dict[str, float] = {f"x{self.n_layers}@{self.position}": 1.0}

        def share(name: str) -> float:  # the graph is a DAG from the top down: depth at most 3 per layer
            if name not in carried:
                carried[name] = sum(importance * share(target) for target, importance in feeds.get(name, ()))
            return carried[name]

        for node in self.nodes:
            share(node["id"])
        return carried

    def strongest(self, k: int) -> Routes:
        """The routes cut to the `k` heads that carry the most of the prediction (`carried`), each with the
        positions it reads from and its one strongest path up to the prediction (at each step the sum it
        feeds that passes on the most); the edges are those between nodes kept. A full graph is hundreds of
        nodes (SmolLM2, 9 tokens: 504, 718 edges), most of them the residual stream carrying itself."""
        heads = [n["id"] for n in self.nodes if n["kind"] == "head"]
        if k >= len(heads):
            return self
        carried, feeds = self.carried(), self._feeds()
        fed_by: dict[str, list[str]] = {}
        for e in self.edges:
            fed_by.setdefault(e["target"], []).append(e["source"])
        chosen = heapq.nlargest(k, heads, key=lambda name: carried[name])
        kept = {f"x{self.n_layers}@{self.position}"}
        for head in chosen:
            kept.update(fed_by.get(head, ()))  # where it reads
            name = head
            while name not in kept:
                kept.add(name)
                name = max(feeds[name], key=lambda edge: edge[1] * carried[edge[0]])[0]
        return Routes(self.tokens, self.position, self.threshold, self.n_layers, self.n_heads,
                      [n for n in self.nodes if n["id"] in kept],
                      [e for e in self.edges if e["source"] in kept and e["target"] in kept])


def proximity(total: torch.Tensor, parts: torch.Tensor) -> torch.Tensor:
    """Ferrando & Voita's importance of each of `parts` [P, C] to their `total` [C] (which may hold more than
    the parts, a bias): max(0, ||total||_1 - ||total - part||_1), normalised to sum to 1 (zeros if none is
    positive)."""
    raw = (total.abs().sum() - (total - parts).abs().sum(-1)).clamp(min=0)
    mass = raw.sum()
    return raw / mass if mass > 0 else raw


@torch.inference_mode()
def routes(model: LoadedModel, text: str, position: int | None = None, threshold: float = THRESHOLD,
           run: recorded_run.Run | None = None) -> Routes:
    """The routes of the prediction at `position` (recorded_run.default_position) of `text`, pruned at `threshold`.
    `run`: a pass of `text` already recorded with ROUTE_NAMES (recorded_run.recorded_run), read at `position`."""
    if not 0 <= threshold <= 1:
        raise ValueError(f"the threshold is an importance between 0 and 1, got {threshold}")
    run = run.at(position) if run is not None else recorded_run.recorded_run(model, text, ROUTE_NAMES, position)
    module, record = model.module, run.out.record
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    graph = Routes(run.tokens, run.position, threshold, n_layers, n_heads)
    seen: set[str] = set()

    def node(kind: str, layer: int, where: int, head: int | None = None) -> str:
        name = {"resid": f"x{layer}@{where}", "mid": f"mid{layer}@{where}", "mlp": f"L{layer}.mlp@{where}",
                "head": f"L{layer}.H{head}@{where}"}[kind]
        if name not in seen:
            seen.add(name)
            graph.nodes.append({"id": name, "kind": kind, "layer": layer, "position": where, "head": head})
        return name

    def edge(source: str, target: str, importance: float) -> None:
        graph.edges.append({"source": source, "target": target, "importance": round(float(importance), 6)})

    reached = {run.position}
    node("resid", n_layers, run.position)
    for layer in range(n_layers - 1, -1, -1):
        sums = _layer_sums(module, record, layer, sorted(reached))
        below: set[int] = set()
        for where, parts in sums.items():
            top = f"x{layer + 1}@{where}"
            mid_mlp = proximity(parts["post"], torch.stack([parts["mid"], parts["mlp"]]))
            mids = mid_mlp[0] >= threshold or mid_mlp[1] >= threshold
            if mid_mlp[1] >= threshold:
                edge(node("mlp", layer, where), top, mid_mlp[1])
            if not mids:
                continue
            mid = node("mid", layer, where)
            if mid_mlp[0] >= threshold:
                edge(mid, top, mid_mlp[0])
            if mid_mlp[1] >= threshold:
                edge(mid, f"L{layer}.mlp@{where}", 1.0)  # the MLP reads the mid state whole
            shares = proximity(parts["mid"], torch.cat([parts["x"][None], parts["heads"]]))
            if shares[0] >= threshold:
                edge(node("resid", layer, where), mid, shares[0])
                below.add(where)
            for head in range(n_heads):
                if shares[1 + head] < threshold:
                    continue
                name = node("head", layer, where, head)
                edge(name, mid, shares[1 + head])
                reads = proximity(parts["heads"][head], parts["terms"](head))  # over the key positions
                for source in torch.nonzero(reads >= threshold).flatten().tolist():
                    edge(node("resid", layer, source), name, reads[source])
                    below.add(source)
        reached = below
        if not reached:
            break
    return graph


def _layer_sums(module, record, layer: int, positions: list[int]) -> dict:
    """Per position i of `positions`, block `layer`'s sums and their parts (float64, norms frozen): "x" [C]
    (its input), "heads" [H, C], "terms" (head -> [S, C], a_ij f_h(x_j), computed when asked: [H, S, C] for
    every position would be SmolLM2's 415 MB at 100 tokens), "mid", "mlp" and "post" (the next stream,
    formed as the block forms it from the recorded sublayer outputs)."""
    block, recorded = module.blocks[layer], record.layers[layer]
    attn_raw, mlp_raw = recorded["attn_outputs"][0, positions], recorded["mlp_outputs"][0, positions]
    xi, attn_out, mlp = recorded["block_inputs"][0, positions].double(), attn_raw.double(), mlp_raw.double()
    probs = record.stacked("attentions")[layer, 0][:, positions].double()  # H, N, S
    attention = block.attn
    f = head_parts(attention, recorded["values"][0][attention.kv_group])  # H, S, C: f_h(x_j)
    heads = probs @ f  # H, N, C
    post_norm = block.residual == "sequential" and block.placement == "post"  # BERT: norm(x + f(x))
    head_scale = [None] * len(positions)  # the frozen norm every head's part goes through, per position
    if block.attn_post_norm is not None and not post_norm:  # Gemma's sandwich: the attention output normed
        scale, _, centre = frozen_norm(block.attn_post_norm, attn_out)
        heads = _scaled(heads, scale, centre)
        head_scale = [(scale[n], centre) for n in range(len(positions))]
        attn_out = block.attn_post_norm(attn_raw).double()
    if block.mlp_post_norm is not None and not post_norm:
        mlp = block.mlp_post_norm(mlp_raw).double()
    mid = xi + attn_out
    if post_norm:
        scale, _, centre = frozen_norm(block.attn_norm, mid)
        heads, xi = _scaled(heads, scale, centre), _scaled(xi, scale, centre)
        head_scale = [(scale[n], centre) for n in range(len(positions))]
        mid = block.attn_norm(mid.to(attn_raw.dtype)).double()
    post = mid + mlp
    if post_norm:
        scale, _, centre = frozen_norm(block.mlp_norm, post)
        mid, mlp = _scaled(mid, scale, centre), _scaled(mlp, scale, centre)
        post = block.mlp_norm(post.to(mlp_raw.dtype)).double()

    def terms(n: int, head: int) -> torch.Tensor:
        part = probs[head, n][:, None] * f[head]  # S, C
        return part if head_scale[n] is None else _scaled(part, *head_scale[n])

    return {where: {"x": xi[n], "heads": heads[:, n], "terms": lambda head, n=n: terms(n, head), "mid": mid[n],
                    "mlp": mlp[n], "post": post[n]} for n, where in enumerate(positions)}


def _scaled(v: torch.Tensor, scale: torch.Tensor, centre: bool) -> torch.Tensor:
    return (v - v.mean(-1, keepdim=True) if centre else v) * scale
