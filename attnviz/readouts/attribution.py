"""Direct logit attribution: how much each component writes, directly, into the logit of a target token (or
into the difference of a target and a contrast token's logits) at one position.

The final hidden state is a sum of parts (attnviz.transformer.decompose: the embeddings, every head's
output c_h W_O^h, per query head under GQA/MQA, every MLP's output, and "rest", the biases and norm
shifts), with every norm's scale frozen at this run's value; read through the LM head they split the
logit exactly, so embed + sum(heads) + sum(mlps) + rest is the model's own logit. Two heads are not linear
after the final norm, and are frozen or left out the same way: a masked-LM head's activation is frozen at
this run's act(z) / z per unit (BERT's transform); Gemma 2's final soft-cap is not applied, so the value
attributed is the logit before the cap. "Direct" means through the residual stream only: a head's effect
through later heads and MLPs is theirs, not its (activation patching measures the total effect).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnviz.models.loaded_model import LoadedModel
from attnviz.readouts import recorded_run
from attnviz.transformer.decompose import DECOMPOSE_NAMES, Parts, logit_parts, stream_parts

TOP_K = 10
VOCAB_CHUNK = 8192


@dataclass
class Attribution:
    tokens: list[str]
    position: int
    target_id: int
    target_text: str
    contrast_id: int | None
    contrast_text: str | None
    value: float  # the model's own logit of the target (minus the contrast's), before any final soft-cap
    embed: float  # the embeddings' share (token, position and type embeddings)
    heads: np.ndarray  # L, H (query heads)
    mlps: np.ndarray  # L
    rest: float  # biases and norm shifts
    capped: bool  # the model soft-caps its final logits (Gemma 2): the value is the one before the cap
    masked_lm: bool  # read through a masked-LM head, its activation frozen
    parts: Parts  # the final hidden state's parts at the position, [P, 1, C] (for `head_tokens`)

    def total(self) -> float:
        return self.embed + float(self.heads.sum()) + float(self.mlps.sum()) + self.rest

    def to_json(self) -> dict:
        return {"tokens": self.tokens, "position": self.position, "target_id": self.target_id,
                "target_text": self.target_text, "contrast_id": self.contrast_id,
                "contrast_text": self.contrast_text, "value": self.value, "embed": self.embed,
                "heads": self.heads.tolist(), "mlps": self.mlps.tolist(), "rest": self.rest,
                "capped": self.capped, "masked_lm": self.masked_lm}


@dataclass
class HeadTokens:
    """The vocabulary tokens one head's part promotes and suppresses most at the position (its direct
    effect on every logit: the part read through the head, frozen as the attribution is)."""

    promoted: list[tuple[int, str, float]]  # (id, text, logit change), largest first
    suppressed: list[tuple[int, str, float]]  # most negative first


@torch.inference_mode()
def attribute(model: LoadedModel, text: str, target: int | str | None = None, contrast: int | str | None = None,
              position: int | None = None, run: recorded_run.Run | None = None) -> Attribution:
    """Direct logit attribution of `target` (an id or one token's text; default the model's own top
    prediction at `position`), minus `contrast` when given, at `position` (recorded_run.default_position).
    `run`: a pass of `text` already recorded with at least DECOMPOSE_NAMES (recorded_run.recorded_run), read at
    `position`."""
    # the tokens before the run, so a bad target fails fast
    target_id, contrast_id = recorded_run.token_id(model, target), recorded_run.token_id(model, contrast)
    run = run.at(position) if run is not None else recorded_run.recorded_run(model, text, DECOMPOSE_NAMES, position)
    module, where = model.module, run.position
    hidden = run.out.hidden[0, where]
    own = recorded_run.head_logits(module, hidden, capped=False).double()  # V, before any soft-cap
    if target_id is None:
        target_id = int(recorded_run.head_logits(module, hidden).argmax())
    ids = [target_id] if contrast_id is None else [target_id, contrast_id]
    parts = stream_parts(module, run.out.record, run.ids, [where])
    logits = logit_parts(module, parts, ids).values[:, 0]  # P, K
    direct = logits[:, 0] if contrast_id is None else logits[:, 0] - logits[:, 1]
    value = own[target_id] if contrast_id is None else own[target_id] - own[contrast_id]
    split = Parts(parts.names, direct[:, None])
    c = model.config
    texts = recorded_run.token_texts(model, ids)
    return Attribution(
        tokens=run.tokens, position=where, target_id=target_id, target_text=texts[0], contrast_id=contrast_id,
        contrast_text=None if contrast_id is None else texts[1], value=float(value),
        embed=float(split.embed_total()[0]), heads=split.head_grid(c.n_layers, c.n_heads)[:, :, 0].cpu().numpy(),
        mlps=split.mlp_column(c.n_layers)[:, 0].cpu().numpy(), rest=float(split.rest()[0]),
        capped=module.lm_head is not None and c.final_softcap is not None, masked_lm=module.lm_head is None,
        parts=parts)


@torch.inference_mode()
def head_tokens(model: LoadedModel, attribution: Attribution, layer: int, head: int, k: int = TOP_K) -> HeadTokens:
    """The k tokens head (layer, head)'s part raises most and the k it lowers most at the attribution's
    position: its part read through the head with the same frozen scales (the rest of the stream is
    whatever else sums to the state, so a masked-LM head's frozen activation is this run's)."""
    parts = attribution.parts
    name = f"L{layer}.H{head}"
    if name not in parts.names:
        raise ValueError(f"no head {head} in layer {layer} (this model has {model.config.n_layers} layers x "
                         f"{model.config.n_heads} heads)")
    part = parts.values[parts.index(name)]  # 1, C
    pair = Parts([name, "rest"], torch.stack([part, parts.total() - part]))
    vocab = model.config.vocab_size
    # The vocabulary a slice at a time: logit_parts reads its rows of the head's weight in float64.
    effect = torch.cat([logit_parts(model.module, pair, list(range(start, min(start + VOCAB_CHUNK, vocab))))
                        .values[0, 0] for start in range(0, vocab, VOCAB_CHUNK)])  # V
    up, down = effect.topk(k), (-effect).topk(k)

    def rows(indices, values):
        ids = indices.tolist()
        return list(zip(ids, recorded_run.token_texts(model, ids), values.tolist()))

    return HeadTokens(rows(up.indices, up.values), rows(down.indices, -down.values))
