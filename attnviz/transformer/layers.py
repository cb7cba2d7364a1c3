"""Norms, MLPs and the activation registry shared by the blocks."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),  # exact erf form (BERT)
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's gelu_new
    "relu": F.relu,
    "silu": F.silu,  # Llama
}


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in float32, then cast back, as HF LlamaRMSNorm."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


class GemmaRMSNorm(RMSNorm):
    """Gemma's RMSNorm: scales by (1 + w), in float32, with w stored around 0 (HF GemmaRMSNorm)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__(dim, eps)
        nn.init.zeros_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * (1.0 + self.weight.float())).to(x.dtype)


def make_norm(kind: str, dim: int, eps: float) -> nn.Module:
    if kind == "rmsnorm":
        return RMSNorm(dim, eps)
    if kind == "gemma_rmsnorm":
        return GemmaRMSNorm(dim, eps)
    return nn.LayerNorm(dim, eps=eps)


class MLP(nn.Module):
    """down(act(up(x))): BERT's intermediate/output, GPT-2's c_fc/c_proj."""

    def __init__(self, d_model: int, d_ff: int, activation: str, bias: bool = True) -> None:
        super().__init__()
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.act = ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.up_proj(x)))


class GatedMLP(nn.Module):
    """down(act(gate(x)) * up(x)): Llama's SwiGLU feed-forward."""

    def __init__(self, d_model: int, d_ff: int, activation: str, bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)
        self.act = ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class MaskedLMHead(nn.Module):
    """decoder(LayerNorm(act(dense(x)))) with a bias per vocabulary entry: BERT's cls.predictions
    (transform + decoder) and RoBERTa's lm_head, whose decoder weight is usually tied to the token
    embedding. Gives masked-LM logits [..., V] from final hidden states [..., C]. `width`: the transform's
    output, the embedding width of factorised models (ALBERT, ELECTRA's generator); default d_model."""

    def __init__(self, d_model: int, vocab_size: int, activation: str, eps: float, width: int | None = None) -> None:
        super().__init__()
        width = width or d_model
        self.dense = nn.Linear(d_model, width)
        self.act = ACTIVATIONS[activation]
        self.norm = nn.LayerNorm(width, eps=eps)
        self.decoder = nn.Linear(width, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.norm(self.act(self.dense(x))))


class MixtureOfExperts(nn.Module):
    """A router picks `top_k` of `n_experts` gated MLPs per token and mixes their outputs (Mixtral, gpt-oss).

    Experts are stored as 3-D tensors, as HF stores them: gate_up [E, 2F, C] (gate rows, then up rows),
    down [E, C, F], with optional biases. Only the experts a token was routed to run on it.
    router "softmax_topk": softmax over all experts, keep the top k, renormalise (Mixtral);
    "topk_softmax": keep the top k logits, softmax over them (gpt-oss).
    glu "gated": act(gate) * up (Mixtral's SiLU); "clamped_swiglu": gpt-oss's
    (clamp(up, -l, l) + 1) * g * sigmoid(1.702 g), g = clamp(gate, max=l).
    """

    def __init__(self, d_model: int, d_ff: int, n_experts: int, top_k: int, activation: str, router: str,
                 glu: str = "gated", limit: float | None = None, bias: bool = False) -> None:
        super().__init__()
        self.top_k, self.router_kind, self.glu, self.limit = top_k, router, glu, limit
        self.router = nn.Linear(d_model, n_experts, bias=bias)
        self.gate_up = nn.Parameter(torch.empty(n_experts, 2 * d_ff, d_model))
        self.down = nn.Parameter(torch.empty(n_experts, d_model, d_ff))
        self.gate_up_bias = nn.Parameter(torch.zeros(n_experts, 2 * d_ff)) if bias else None
        self.down_bias = nn.Parameter(torch.zeros(n_experts, d_model)) if bias else None
        for p in (self.gate_up, self.down):
            nn.init.normal_(p, std=0.02)
        self.act = ACTIVATIONS[activation]

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [N, C] -> (weights [N, k], expert indices [N, k])."""
        logits = self.router(x)  # N, E
        if self.router_kind == "topk_softmax":
            top, index = torch.topk(logits, self.top_k, dim=-1)
            return torch.softmax(top, dim=-1, dtype=top.dtype), index
        probs = torch.softmax(logits.float(), dim=-1)
        top, index = torch.topk(probs, self.top_k, dim=-1)
        return top / top.sum(dim=-1, keepdim=True), index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])  # N, C
        weights, index = self.route(x)
        out = torch.zeros_like(x)
        for expert in index.unique().tolist():
            token, slot = torch.where(index == expert)
            up_bias = None if self.gate_up_bias is None else self.gate_up_bias[expert]
            h = F.linear(x[token], self.gate_up[expert], up_bias)
            gate, up = h.chunk(2, dim=-1)
            if self.glu == "clamped_swiglu":
                gate, up = gate.clamp(max=self.limit), up.clamp(-self.limit, self.limit)
                h = (up + 1) * (gate * torch.sigmoid(gate * 1.702))
            else:
                h = self.act(gate) * up
            h = F.linear(h, self.down[expert], None if self.down_bias is None else self.down_bias[expert])
            out.index_add_(0, token, (h * weights[token, slot, None]).to(out.dtype))
        return out.reshape(shape)
