"""Parity with Hugging Face: max |difference| of attentions and final hidden states, same input."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ParityReport:
    n_tokens: int
    max_attention_diff: float
    max_hidden_diff: float

    def passed(self, attention_tol: float = 1e-5, hidden_tol: float = 1e-4) -> bool:
        return self.max_attention_diff <= attention_tol and self.max_hidden_diff <= hidden_tol


def check_parity(model, text: str, text_pair: str | None = None, reference=None) -> ParityReport:
    """Run `text` through our model and HF's eager float32 model on the same weights.

    reference: an HF model from `attnviz.loading.hf.reference_model` (loaded here when None).
    """
    from attnviz.loading import hf

    reference = reference or hf.reference_model(model.info.path)
    enc = model.encode(text, text_pair)
    ids = torch.tensor([enc.ids])
    mask = torch.ones_like(ids)
    types = torch.tensor([enc.type_ids])
    ours = model.forward_encodings([enc], with_logits=False)
    device = next(reference.parameters()).device  # the reference may sit on another device than ours
    ref_attn, ref_hidden = (x.float().cpu() for x in hf.reference_outputs(
        reference, ids.to(device), mask.to(device), types.to(device)))
    our_attn = ours.attentions.float().cpu()
    return ParityReport(
        n_tokens=len(enc.ids),
        max_attention_diff=float((our_attn - ref_attn).abs().max()),
        max_hidden_diff=float((ours.hidden.float().cpu() - ref_hidden).abs().max()),
    )
