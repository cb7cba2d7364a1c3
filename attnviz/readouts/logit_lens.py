"""The logit lens (nostalgebraist 2020): the residual stream read as a prediction before the model has
finished with it, through the model's own final norm and head.

Reads, in order (R = 2L + 1 of them): "embed" (the stream entering block 0), then for each layer l
"L{l}.attn" (after its attention sub-block) and "L{l}" (after the whole block, the stream entering block
l + 1). The last read, "L{L-1}", is the model's own final hidden state, so its prediction is the model's.
Each state is read as the model reads its last one: `module.finish` (the final norm applied fresh to that
state, and OPT's projection out), then the LM head (Gemma 2's final soft-cap included) or, for an encoder,
the masked-LM head. The state after an attention sub-block is the block's own: its input plus the attention
output (through the norm after it where the block has one, Gemma's sandwich); a post-norm block (BERT)
norms that sum, as it does; a parallel block (GPT-NeoX, Phi) never forms that state, and its read is the
input plus the attention output (the MLP's share left out).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import torch

from attnviz.models.loaded_model import LoadedModel
from attnviz.readouts import recorded_run

LENS_NAMES = ("block_inputs", "attn_outputs")  # what the forward pass records for the lens
TOP_K = 5
GRID_ROWS = 256  # rows of logits [GRID_ROWS, V] held at once for the grid (SmolLM2: 50 MB)


@dataclass
class LogitLens:
    """The lens at one position (R reads, labels above), and the layers x positions picture of top-1 tokens."""

    tokens: list[str]  # the text's tokens, each decoded alone
    position: int
    labels: list[str]  # R: "embed", "L0.attn", "L0", ...
    top_ids: np.ndarray  # R, k, best first
    top_probs: np.ndarray  # R, k
    top_texts: list[list[str]]  # R x k
    target_id: int  # the token followed across reads (default: the model's own top prediction)
    target_text: str
    target_rank: np.ndarray  # R, 0 = the top token
    target_prob: np.ndarray  # R
    grid_ids: np.ndarray  # L + 1, T: the top-1 token of each block read ("embed", "L0", ...) at each position
    grid_probs: np.ndarray  # L + 1, T
    grid_texts: list[list[str]]

    @property
    def block_reads(self) -> list[int]:
        """Indices of the block reads in `labels`: the embeddings, then each block's output."""
        return [i for i, label in enumerate(self.labels) if not label.endswith(".attn")]

    @property
    def top1(self) -> list[int]:
        return [int(self.top_ids[i, 0]) for i in self.block_reads]

    @property
    def top1_prob(self) -> list[float]:
        return [float(self.top_probs[i, 0]) for i in self.block_reads]

    def to_json(self) -> dict:
        blocks = self.block_reads
        return {
            "tokens": self.tokens, "position": self.position, "labels": self.labels,
            "top1": self.top1, "top1_prob": self.top1_prob,
            "top1_text": [self.top_texts[i][0] for i in blocks],
            "top_k": [[{"id": int(i), "text": text, "prob": float(p)}
                       for i, text, p in zip(ids, texts, probs)]
                      for ids, texts, probs in zip(self.top_ids, self.top_texts, self.top_probs)],
            "target_id": self.target_id, "target_text": self.target_text,
            "target_rank": [int(r) for r in self.target_rank], "target_prob": [float(p) for p in self.target_prob],
            "grid_ids": self.grid_ids.tolist(), "grid_probs": np.round(self.grid_probs, 6).tolist(),
        }


def lens_states(module, out) -> list[tuple[str, torch.Tensor, bool]]:
    """(label, state [B, T, C], finished) of every read of a forward pass that recorded LENS_NAMES; the last
    state is the model's own final hidden one (finished: `module.finish` already applied)."""
    layers = out.record.layers
    states = [("embed", layers[0]["block_inputs"], False)]
    for index, block in enumerate(module.blocks):
        x, attn = layers[index]["block_inputs"], layers[index]["attn_outputs"]
        states.append((f"L{index}.attn", _after_attention(block, x, attn), False))
        if index + 1 < len(module.blocks):
            states.append((f"L{index}", layers[index + 1]["block_inputs"], False))
    states.append((f"L{len(module.blocks) - 1}", out.hidden, True))
    return states


def _after_attention(block, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
    """The stream after a block's attention sub-block (attnviz.transformer.blocks' placements)."""
    if block.residual != "sequential":  # parallel: the MLP reads x, not this
        return x + attn
    if block.placement == "post":
        return block.attn_norm(x + attn)
    return x + (attn if block.attn_post_norm is None else block.attn_post_norm(attn))


@torch.inference_mode()
def lens_logits(module, out, positions: list[int]) -> tuple[list[str], torch.Tensor]:
    """(labels, logits [R, N, V]) of every read at `positions` of batch row 0."""
    states = lens_states(module, out)
    hidden = torch.stack([_finished(module, state[0, positions], done) for _, state, done in states])
    return [label for label, _, _ in states], recorded_run.head_logits(module, hidden).float()


def _finished(module, state: torch.Tensor, finished: bool) -> torch.Tensor:
    return state if finished else module.finish(state)


@torch.inference_mode()
def logit_lens(model: LoadedModel, text: str, position: int | None = None, target: int | str | None = None,
               k: int = TOP_K, grid: bool = True, run: recorded_run.Run | None = None) -> LogitLens:
    """The logit lens of `text` at `position` (default: recorded_run.default_position): top-k tokens and
    probabilities at every read, the rank and probability of `target` (an id or one token's text; default
    the model's own top prediction there), and (with `grid`) every block read's top-1 token at every
    position. `run`: a pass of `text` already recorded with at least LENS_NAMES (recorded_run.recorded_run), read at
    `position`."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k must be a whole number of at least 1 (the top tokens kept per read), got {k!r}")
    target_id = recorded_run.token_id(model, target)  # a bad target is refused before the run
    run = run.at(position) if run is not None else recorded_run.recorded_run(model, text, LENS_NAMES, position)
    module, where = model.module, run.position
    states = lens_states(module, run.out)
    # Every read in one product with the head's weight: read one at a time, the weight (SmolLM2's 113 MB) would
    # be streamed through memory once per read, which costs more than the products themselves.
    hidden = torch.stack([_finished(module, state[0, where], done) for _, state, done in states])  # R, C
    probs = torch.softmax(recorded_run.head_logits(module, hidden).float(), -1)  # R, V
    top = probs.topk(min(k, probs.shape[-1]), dim=-1)
    if target_id is None:
        target_id = int(top.indices[-1, 0])
    target_prob = probs[:, target_id]
    target_rank = (probs > target_prob[:, None]).sum(-1)
    grid_ids, grid_probs = _grid(module, states) if grid else (np.zeros((0, 0), np.int64), np.zeros((0, 0)))
    top_ids = top.indices.cpu().numpy()
    return LogitLens(
        tokens=run.tokens, position=where, labels=[label for label, _, _ in states], top_ids=top_ids,
        top_probs=top.values.cpu().numpy().astype(np.float64),
        top_texts=[recorded_run.token_texts(model, row.tolist()) for row in top_ids], target_id=target_id,
        target_text=recorded_run.token_texts(model, [target_id])[0], target_rank=target_rank.cpu().numpy(),
        target_prob=target_prob.cpu().numpy().astype(np.float64), grid_ids=grid_ids, grid_probs=grid_probs,
        grid_texts=[recorded_run.token_texts(model, row.tolist()) for row in grid_ids])


def _grid(module, states) -> tuple[np.ndarray, np.ndarray]:
    """Top-1 id and probability of each block read at every position, GRID_ROWS rows of logits at a time."""
    blocks = [(state[0], done) for label, state, done in states if not label.endswith(".attn")]
    hidden = torch.cat([_finished(module, state, done) for state, done in blocks])  # (L + 1) T, C
    ids, probs = [], []
    for start in range(0, hidden.shape[0], GRID_ROWS):
        best = torch.softmax(recorded_run.head_logits(module, hidden[start:start + GRID_ROWS]).float(), -1).max(-1)
        ids.append(best.indices)
        probs.append(best.values)
    shape = (len(blocks), -1)
    return (torch.cat(ids).view(shape).cpu().numpy(), torch.cat(probs).view(shape).cpu().double().numpy())
