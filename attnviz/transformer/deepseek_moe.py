"""DeepSeekMoE (DeepSeek-V2/V3): routed experts picked in groups, plus shared experts every token goes through.

    out = sum_{e in top-k} w_e * expert_e(x) + shared(x)

The router (HF DeepseekV2TopkRouter / DeepseekV3TopkRouter, in float32):
- "softmax_group" (V2): p = softmax(x W_r); with n_group > 1 only the topk_group groups with the highest
  single p stay, the other experts' p set to 0; the top k of p are kept, times routed_scaling_factor (V2
  never renormalises them).
- "sigmoid_group" (V3): p = sigmoid(x W_r); the choice adds e_score_correction_bias (the load balancer's
  learned offsets) and ranks groups by the sum of their two best; the weights are the chosen experts' p
  without the offsets, renormalised when norm_topk_prob, times routed_scaling_factor.
The experts are `MixtureOfExperts`'s (3-D gate_up / down tensors, HF's layout); the shared experts one gated
MLP n_shared_experts times as wide.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from attnviz.transformer.layers import GatedMLP, MixtureOfExperts


class DeepSeekMoE(MixtureOfExperts):
    def __init__(self, d_model: int, d_ff: int, n_experts: int, top_k: int, router: str, n_shared: int,
                 n_group: int = 1, topk_group: int = 1, scaling: float = 1.0, norm_topk_prob: bool = False,
                 activation: str = "silu") -> None:
        if n_experts % n_group or not 1 <= topk_group <= n_group:
            raise ValueError(f"{n_experts} experts in {n_group} groups, keeping {topk_group}: does not divide")
        super().__init__(d_model, d_ff, n_experts, top_k, activation, router)
        self.n_group, self.topk_group, self.scaling, self.norm_topk_prob = n_group, topk_group, scaling, norm_topk_prob
        self.shared_experts = GatedMLP(d_model, d_ff * n_shared, activation) if n_shared else None
        if router == "sigmoid_group":
            self.register_buffer("e_score_correction_bias", torch.zeros(n_experts))

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [N, C] -> (weights [N, k] float32, expert indices [N, k])."""
        logits = F.linear(x.float(), self.router.weight.float())  # N, E
        if self.router_kind == "softmax_group":
            scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
            groups = scores.view(-1, self.n_group, scores.shape[-1] // self.n_group).amax(dim=-1)  # N, G
            scores = scores.masked_fill(~self._kept(groups), 0.0)
            weights, index = torch.topk(scores, k=self.top_k, dim=-1, sorted=False)
        else:
            scores = logits.sigmoid()
            choice = scores + self.e_score_correction_bias
            groups = choice.view(-1, self.n_group, choice.shape[-1] // self.n_group).topk(2, dim=-1)[0].sum(dim=-1)
            choice = choice.masked_fill(~self._kept(groups), float("-inf"))
            index = torch.topk(choice, k=self.top_k, dim=-1, sorted=False)[1]
            weights = scores.gather(1, index)
            if self.norm_topk_prob:
                weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return weights * self.scaling, index

    def _kept(self, groups: torch.Tensor) -> torch.Tensor:
        """Group scores [N, G] -> [N, E] True for the experts of each token's topk_group best groups."""
        best = torch.topk(groups, k=self.topk_group, dim=-1, sorted=False)[1]
        kept = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, best, True)  # N, G
        return kept.repeat_interleave(self.gate_up.shape[0] // self.n_group, dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        routed = super().forward(x)
        return routed if self.shared_experts is None else routed + self.shared_experts(x)
