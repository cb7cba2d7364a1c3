"""The residual stream as a sum of parts, and reads of it that are linear once every norm's scale is frozen.

At each position the residual stream is a sum: the embeddings (token, absolute position, token type), each
head's output (its context times its slice of the output projection, o_h = c_h W_O^h), each MLP's output,
and biases. A norm is linear in its input once its scale is fixed at this run's value (LayerNorm's centring
is linear too): norm(y) = (y - mean(y)) * w / sigma(y) + b, with sigma(y) computed from the whole y and
then applied to each part, and b added to "rest". So the final hidden state, or the stream entering any
block, splits exactly into parts that sum to it; a linear read (the unembedding, a head's query or key
projection) splits the same way. This is the one primitive under the logit lens, direct logit attribution,
information-flow routes and query-key attribution (attnviz.interventions).

`stream_parts` replays `Block.forward`'s placements on the parts of a few positions, from what a forward pass
recorded (`DECOMPOSE_NAMES`); tests check that the parts sum to the model's own states and logits.
Everything is float64 (the parts are few: P parts x N positions x C), so the sum is the model's up to its
own float32 rounding. Shape legend: P parts, N positions read, C model width, H heads, D head dim, V vocab.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnviz.transformer.layers import GemmaRMSNorm, RMSNorm
from attnviz.transformer.record import Recorder

# What a forward pass must record for `stream_parts` (attnviz.transformer.record).
DECOMPOSE_NAMES = ("head_outputs", "mlp_outputs")


@dataclass
class Parts:
    """Parts of the residual stream (or of a read of it) at N positions: values [P, N, ...] summing to it.

    names: "embed" (token embeddings), "pos_embed" (learned absolute positions), "type_embed" (token types),
    "L{l}.H{h}" (layer l's head h, 0-based), "L{l}.mlp", "rest" (every bias: output-projection biases, the
    norms' shifts, the embedding projection's)."""

    names: list[str]
    values: torch.Tensor  # P, N, ... float64

    def total(self) -> torch.Tensor:
        return self.values.sum(0)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def head_grid(self, n_layers: int, n_heads: int) -> torch.Tensor:
        """The heads' parts as [L, H, N, ...] (zeros for layers not walked)."""
        grid = self.values.new_zeros(n_layers, n_heads, *self.values.shape[1:])
        for i, name in enumerate(self.names):
            if ".H" in name:
                layer, head = name[1:].split(".H")
                grid[int(layer), int(head)] = self.values[i]
        return grid

    def mlp_column(self, n_layers: int) -> torch.Tensor:
        column = self.values.new_zeros(n_layers, *self.values.shape[1:])
        for i, name in enumerate(self.names):
            if name.endswith(".mlp"):
                column[int(name[1:].split(".")[0])] = self.values[i]
        return column

    def embed_total(self) -> torch.Tensor:
        return sum((self.values[i] for i, n in enumerate(self.names) if n.endswith("embed")),
                   self.values.new_zeros(self.values.shape[1:]))

    def rest(self) -> torch.Tensor:
        return self.values[self.index("rest")]


class _Walk:
    """Parts as a list of (name, [N, C]) plus one running "rest", with the operations the blocks apply."""

    def __init__(self, width: int, n: int) -> None:
        self.names: list[str] = []
        self.values: list[torch.Tensor] = []
        self.rest = torch.zeros(n, width, dtype=torch.float64)

    def add(self, name: str, value: torch.Tensor) -> None:
        self.names.append(name)
        self.values.append(value.double())

    def total(self) -> torch.Tensor:
        return sum(self.values, self.rest.clone())

    def linear(self, layer: nn.Linear | None) -> None:
        """Every part through a linear map; its bias joins "rest"."""
        if layer is None:
            return
        weight = layer.weight.double()
        self.values = [v @ weight.T for v in self.values]
        self.rest = self.rest @ weight.T
        if layer.bias is not None:
            self.rest = self.rest + layer.bias.double()

    def norm(self, norm: nn.Module | None) -> None:
        """Every part through `norm` with its scale frozen at the norm of their sum (this run's)."""
        if norm is None:
            return
        scale, shift, centre = frozen_norm(norm, self.total())
        self.values = [(v - v.mean(-1, keepdim=True) if centre else v) * scale for v in self.values]
        self.rest = (self.rest - self.rest.mean(-1, keepdim=True) if centre else self.rest) * scale
        if shift is not None:
            self.rest = self.rest + shift

    def parts(self) -> Parts:
        return Parts(self.names + ["rest"], torch.stack(self.values + [self.rest]))


def frozen_norm(norm: nn.Module, y: torch.Tensor):
    """(scale [N, C], shift [C] or None, centre) such that norm(y) = (y - mean(y) if centre else y) * scale
    + shift, with the scale computed from y: LayerNorm, RMSNorm, Gemma's (1 + w) RMSNorm."""
    y = y.double()
    if isinstance(norm, nn.LayerNorm):
        sigma = torch.sqrt(y.var(-1, unbiased=False, keepdim=True) + norm.eps)
        weight = 1.0 if norm.weight is None else norm.weight.double()
        shift = None if norm.bias is None else norm.bias.double()
        return weight / sigma, shift, True
    if isinstance(norm, RMSNorm):
        rms = torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + norm.eps)
        weight = (1.0 + norm.weight.double()) if isinstance(norm, GemmaRMSNorm) else norm.weight.double()
        return rms * weight, None, False
    raise TypeError(f"no frozen form for {type(norm).__name__}")


def head_parts(attention: nn.Module, context: torch.Tensor) -> torch.Tensor:
    """Each head's output in the model's width, [H, N, C], from its context [H, N, D]: c_h W_O^h (the
    output projection's bias is not in it)."""
    h, n, d = context.shape
    w_o = attention.o_proj.weight.double().view(-1, h, d)  # C, H, D
    return torch.einsum("hnd,chd->hnc", context.double(), w_o)


def _embedding_parts(module, input_ids: torch.Tensor, positions: list[int], token_type_ids=None) -> _Walk:
    """The parts of `Transformer.embed` at `positions` (batch row 0), through its norm and projection."""
    c = module.config
    ids = input_ids[:1]
    token = module.token_embedding(ids)[0, positions]
    if c.embed_scale is not None:
        token = token * torch.tensor(c.embed_scale, dtype=token.dtype)
    if module.project_in is not None:
        token = module.project_in(token)
    walk = _Walk(token.shape[-1], len(positions))  # the embedding width (ALBERT's, OPT-350m's projected one)
    walk.add("embed", token)
    if module.position_embedding is not None:
        walk.add("pos_embed", module.position_embedding(module.positions(ids)[0, positions]))
    if module.type_embedding is not None:
        types = torch.zeros_like(ids) if token_type_ids is None else token_type_ids[:1]
        walk.add("type_embed", module.type_embedding(types)[0, positions])
    walk.norm(module.embedding_norm)
    walk.linear(module.embedding_project)
    return walk


@torch.no_grad()
def stream_parts(module, record: Recorder, input_ids: torch.Tensor, positions: list[int], layer: int | None = None,
                 token_type_ids: torch.Tensor | None = None) -> Parts:
    """Parts [P, N, C] of the residual stream entering block `layer` (layer 0: the embeddings), or with
    `layer=None` of the final hidden states (after the final norm and OPT's projection out: what the head
    reads), at `positions` of batch row 0 of a forward pass that recorded `DECOMPOSE_NAMES`.

    The parts sum to the stream the model computed (tests: `block_inputs`, `ForwardOutput.hidden`)."""
    walk = _embedding_parts(module, input_ids, positions, token_type_ids)
    last = len(module.blocks) if layer is None else layer
    for index, block in enumerate(module.blocks[:last]):
        _block_parts(walk, index, block, record.layers[index], positions)
    if layer is None:
        walk.norm(module.final_norm)
        walk.linear(module.project_out)
    return walk.parts()


def _block_parts(walk: _Walk, index: int, block, recorded: dict, positions: list[int]) -> None:
    """`Block.forward` on the parts: the same placements (attnviz.transformer.blocks' legend)."""
    attention = block.attn
    heads = head_parts(attention, recorded["head_outputs"][0][:, positions])  # H, N, C
    bias = attention.o_proj.bias
    mlp = recorded["mlp_outputs"][0][positions].double()  # N, C

    def add_attention(post_norm=None):
        sub = _Walk(heads.shape[-1], len(positions))
        for head in range(heads.shape[0]):
            sub.add(f"L{index}.H{head}", heads[head])
        if bias is not None:
            sub.rest = sub.rest + bias.double()
        sub.norm(post_norm)
        walk.names += sub.names
        walk.values += sub.values
        walk.rest = walk.rest + sub.rest

    def add_mlp(post_norm=None):
        sub = _Walk(mlp.shape[-1], len(positions))
        sub.add(f"L{index}.mlp", mlp)
        sub.norm(post_norm)
        walk.add(f"L{index}.mlp", sub.values[0] + sub.rest)

    if block.residual != "sequential" or block.placement != "post":  # pre, sandwich, after, parallel
        add_attention(block.attn_post_norm)
        add_mlp(block.mlp_post_norm)
        return
    add_attention()
    walk.norm(block.attn_norm)
    add_mlp()
    walk.norm(block.mlp_norm)


@torch.no_grad()
def logit_parts(module, hidden_parts: Parts, token_ids: list[int]) -> Parts:
    """Parts [P, N, len(token_ids)] of the logits of `token_ids` read from the final hidden parts, before any
    final soft-cap (Gemma 2's tanh, which is not linear: the cap is applied to the sum, after).

    The model's LM head is linear (its bias joins "rest"). A masked-LM head (BERT's transform: dense,
    activation, LayerNorm, decoder) is not: its activation is frozen at this run's ratio act(z) / z per unit,
    as the norms' scales are, so the parts still sum exactly to the model's logits."""
    walk = _Walk(hidden_parts.values.shape[-1], hidden_parts.values.shape[1])
    walk.names, walk.values = list(hidden_parts.names[:-1]), list(hidden_parts.values[:-1])
    walk.rest = hidden_parts.values[-1].clone()
    head = module.lm_head if module.lm_head is not None else module.mlm_head
    if head is None:
        raise ValueError("this model has no head that gives logits")
    if module.lm_head is None:  # masked-LM transform
        walk.linear(head.dense)
        z = walk.total()
        ratio = torch.where(z == 0, torch.zeros_like(z), head.act(z) / z)  # N, C: act(z) = z * ratio, frozen
        walk.values = [v * ratio for v in walk.values]
        walk.rest = walk.rest * ratio
        walk.norm(head.norm)
        head = head.decoder
    weight = head.weight[token_ids].double()  # K, C
    values = [v @ weight.T for v in walk.values]
    rest = walk.rest @ weight.T
    if head.bias is not None:
        rest = rest + head.bias[token_ids].double()
    return Parts(walk.names + ["rest"], torch.stack(values + [rest]))

