"""One way to record what a forward pass computes: a `Recorder` passed once to `Transformer.forward`.

Each attention module reports what it computed to its layer's `LayerRecord`; the recorder keeps only
the names the caller asked for, so a plain run pays for nothing it does not keep. Names and shapes
(B batch, H query heads, K key/value heads, T query positions, S key positions, D head dim):

- "attentions":   the softmax probabilities [B, H, T, S], written straight into one [L, B, H, T, S]
                  tensor (no stacking copy afterwards; a plain run keeps only these);
- "scores":       the pre-softmax scores q.k / sqrt(D) plus the additive mask [B, H, T, S];
- "queries":      per query head, after rotary [B, H, T, D] (what multiplies the keys);
- "keys":         per key/value head, after rotary [B, K, S, D];
- "values":       per key/value head [B, K, S, D] (bias included);
- "value_norms":  ||f_h(x_j)||, f_h(x) = (x W_V + b_V) W_O^h with W_O^h the head's slice of the output
                  projection (Kobayashi et al. 2020), per query head [B, H, S];
- "head_outputs": each head's context vector before the output projection [B, H, T, D];
- "score_terms":  the score's named terms where a model has several, [B, N, H, T, S] (DeBERTa: c2c, c2p,
                  p2c, attnviz.transformer.deberta.TERMS); they sum to "scores" less the mask;
- "block_inputs": the residual stream entering each block [B, T, C] (TransformerLens's resid_pre);
- "attn_outputs": the attention sublayer's output projection [B, T, C], before any norm after it (sandwich);
- "mlp_outputs":  the MLP's (or mixture of experts') output [B, T, C], before any norm after it.

Three of them are also edit points: `LayerRecord.edit(name, tensor)` returns the tensor the forward pass
goes on with, so a subclass can put another run's tensor in its place (activation patching,
attnviz.interventions.patching): "head_outputs" (before the output projection), "block_inputs" and
"mlp_outputs". A plain record keeps the tensor and returns it unchanged.

Recorded tensors are the forward pass's own (no copies); `stacked(name)` stacks the layers. In a model
split across devices (attnviz.loading.split) each layer records on the device where it runs, and
`stacked` gathers the layers on the first layer's device.
"""

from __future__ import annotations

import torch

from attnviz.memory.ceiling import kept

NAMES = ("attentions", "scores", "queries", "keys", "values", "value_norms", "head_outputs", "score_terms",
         "block_inputs", "attn_outputs", "mlp_outputs")


class Recorder:
    def __init__(self, *names: str) -> None:
        unknown = sorted(set(names) - set(NAMES))
        if unknown:
            raise ValueError(f"cannot record {unknown}; known: {', '.join(NAMES)}")
        self.names = frozenset(names)
        self.layers: list[dict[str, torch.Tensor]] = []
        self.attentions: torch.Tensor | None = None  # L, B, H, T, S once the first layer reports

    def begin(self, n_layers: int) -> None:
        """Called by the model before its first layer."""
        self.layers = [{} for _ in range(n_layers)]
        self.attentions = None

    def at(self, layer: int) -> LayerRecord:
        return LayerRecord(self, layer)

    def stacked(self, name: str) -> torch.Tensor:
        """[L, ...] for a recorded name."""
        if name not in self.names:
            raise KeyError(f"{name!r} was not recorded (asked for: {sorted(self.names)})")
        if name == "attentions":
            for index, layer in enumerate(self.layers):  # layers run on another device than the buffer: copied in
                elsewhere = layer.pop("attentions", None)
                if elsewhere is not None:
                    self.attentions[index].copy_(elsewhere)
            return self.attentions
        tensors = [layer[name] for layer in self.layers]
        return kept(sum(t.nbytes for t in tensors), f"the recorded {name}, stacked",
                    lambda: torch.stack([t.to(tensors[0].device) for t in tensors]))


class LayerRecord:
    """What one layer's attention module reports to; the module asks `wants(name)` before computing
    anything extra, so a name nobody asked for costs nothing. `kernel` names the attention implementation
    it takes its probabilities from (attnviz.transformer.attention.ATTENTION_FUNCTIONS): whole maps."""

    kernel = "full"

    def __init__(self, recorder: Recorder, layer: int) -> None:
        self.recorder, self.layer = recorder, layer

    def wants(self, name: str) -> bool:
        return name in self.recorder.names

    def keep(self, name: str, tensor: torch.Tensor) -> None:
        if self.wants(name):
            # held past this layer: the memory ceiling counts it while it lives
            self.recorder.layers[self.layer][name] = kept(tensor.nbytes, f"the recorded {name}", lambda: tensor)

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """The tensor the forward pass goes on with at an edit point: here `tensor` itself, kept if wanted."""
        self.keep(name, tensor)
        return tensor

    def probabilities_buffer(self, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor | None:
        """This layer's slice of the [L, B, H, T, S] attentions tensor (allocated on first use; `shape` is
        [B, H, T, S], in the dtype and on the device of `like`), for the softmax to write into; None when
        attentions are not wanted. A layer running on another device than the buffer (a split model) gets a
        buffer of its own there, which `Recorder.stacked` copies in at the end."""
        recorder = self.recorder
        if "attentions" not in recorder.names:
            return None
        shape = torch.Size(shape)
        nbytes = shape.numel() * like.element_size()
        if recorder.attentions is None or recorder.attentions.shape[1:] != shape:
            recorder.attentions = kept(len(recorder.layers) * nbytes, "the attention maps of every layer",
                                       lambda: like.new_empty(len(recorder.layers), *shape))
        if recorder.attentions.device != like.device:
            own = recorder.layers[self.layer]["attentions"] = kept(
                nbytes, "the attention maps of every layer", lambda: like.new_empty(shape))
            return own
        return recorder.attentions[self.layer]


class _Nothing:
    """The record of a call that records nothing (`record=None`): whole maps, nothing kept, no buffer."""

    kernel = "full"

    def wants(self, name: str) -> bool:
        return False

    def keep(self, name: str, tensor: torch.Tensor) -> None:
        pass

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def probabilities_buffer(self, shape: tuple[int, ...], like: torch.Tensor) -> None:
        return None


NOTHING = _Nothing()
