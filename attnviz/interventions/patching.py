"""Activation patching on a minimal pair: put one run's activation into the other run and see how far the
prediction moves (Vig et al. 2020; Meng et al. 2022; TransformerLens's `patching` module).

Two runs: the clean sentence ("The keys to the cabinet") and the corrupted one ("The key to the cabinet").
The metric (`PatchPair`) is the logit difference target - contrast (" are" - " is") at the receiving run's
last non-special token (decoders) or at its mask token (encoders with a masked-LM head), read through those two
rows of the head alone (`metric_function`); an encoder without a head (a sentence-embedding model) is scored by
the cosine of its mean-pooled embedding with the clean run's. Every result is normalised so that 0 is the
corrupted run's value and 1 the clean run's: (patched - corrupted) / (clean - corrupted).

Directions: "denoise" (the default) puts the clean run's activation into the corrupted run (how much of
the clean behaviour one component restores); "noise" puts the corrupted run's into the clean run (how much
one component's corruption destroys: an important component reads near 0).

Components (the edit points of attnviz.transformer.record, one patched component per batch row): each
head's output before the output projection, at all positions ("head_outputs" [B, H, T, D], per query head)
or at one position; each MLP's output ("mlp_outputs"); the residual stream entering each layer at each
position ("block_inputs", TransformerLens's resid_pre).

Alignment (`align_positions`): two runs of the same token count pair position i with i. Otherwise their
words are aligned by `attnviz.analysis.minimal_pairs.align_words` (common prefix, common suffix, the differing span
between): leading and trailing special tokens pair in order, and the tokens of each common word pair in
order. A common word that tokenises differently in the two runs is refused (ValueError); the differing
span's tokens pair only when both sides have as many tokens, else they stay unpatched (the receiving run's
own values) and their per-position results are NaN.

Batching: a component of layer l leaves layers 0..l-1 as in the receiving run, so a batch starts from the
receiving run's residual stream entering the lowest layer it patches and runs only the layers from there
(attnviz.interventions.ablation's importance scan does the same), at most `batch_size` rows (default: what
fits batch_bytes.SCAN_BATCH_BYTES). `progress(done, total)` after each batch; `should_stop()` before each,
raising ablation.ScanStopped.

Reusing the prefix (`prepare(..., reuse_prefix=True)`, the default, where `prefix_reusable`): in a causal
decoder a patch at position p leaves every position before p as in the receiving run, at every layer. So a
batch whose lowest patched position is p computes positions p.. only, attending to the receiving run's keys
and values before p (made once in `prepare`, each layer's from the receiving run's recorded input to it, as
its KV cache holds them: after rotary; MLA's latent), with the receiving run's rotary angles, mask and bias
from row p on. Rows are taken by patched position, then layer, and each row joins its batch at the layer it
patches, from the receiving run's residual stream there, so a row costs its layers from l and its positions
from p. A component patched at every position (a head's, an MLP's output) starts at position 0, so only the
joining by layer applies to it. A patch after the scored position cannot reach it, and one inside the runs'
shared prefix (the leading positions where both runs have the same token, paired with itself) puts in what is
already there: both read the receiving run's value without a run. Encoders (bidirectional attention: every
position sees the patch) compute every patched run whole, as `reuse_prefix=False` does for any model (the
reference the tests compare the reuse with).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from attnviz.analysis.minimal_pairs import align_words
from attnviz.interventions.ablation import ScanStopped
from attnviz.memory.ceiling import kept
from attnviz.models.batch_bytes import scan_batch_size
from attnviz.models.inputs import has_mlm_head, mask_token, text_ids
from attnviz.models.loaded_model import LoadedModel
from attnviz.readouts.predictions import mean_pooled
from attnviz.trace import split_words
from attnviz.transformer.kv_cache import LayerCache
from attnviz.transformer.record import LayerRecord, Recorder

DIRECTIONS = ("denoise", "noise")
POINTS = ("head_outputs", "mlp_outputs", "block_inputs")


# --- the pair ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PatchPair:
    """A clean and a corrupted token sequence, where each is scored, what with, and how they align.

    metric: "logit_diff" (logit of target_id minus logit of contrast_id, or the target's logit alone when
    contrast_id is None) or "embedding" (cosine of the mean-pooled final hidden states with the clean
    run's). pairs: (clean position, corrupted position) of every aligned position."""

    clean_ids: tuple[int, ...]
    corrupt_ids: tuple[int, ...]
    clean_position: int
    corrupt_position: int
    target_id: int | None
    contrast_id: int | None
    pairs: tuple[tuple[int, int], ...]
    metric: str = "logit_diff"
    clean_tokens: tuple[str, ...] = ()
    corrupt_tokens: tuple[str, ...] = ()


def single_token(model: LoadedModel, text: str, what: str = "target") -> int:
    """The id of `text` as one token (no special tokens added); ValueError naming the pieces otherwise."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"the {what} is empty: type one token, e.g. ' are'")
    enc = model.encode(text, add_special_tokens=False)
    if len(enc.ids) != 1:
        pieces = " + ".join(model.piece_texts(enc.ids))
        raise ValueError(f"the {what} {text!r} is {len(enc.ids)} tokens ({pieces}), not one: choose a word the "
                         "tokenizer keeps whole (mind the leading space)")
    return int(enc.ids[0])


def patch_pair(model: LoadedModel, clean: str, corrupt: str, target: str | None = None,
               contrast: str | None = None) -> PatchPair:
    """The pair of two texts: decoders score the last non-special token, encoders with a masked-LM head
    their one mask token (type [MASK] or <mask>), encoders without one the embedding (no target)."""
    mlm = not model.config.causal and has_mlm_head(model)
    if not model.config.causal and not mlm:
        metric, target_id, contrast_id = "embedding", None, None
    else:
        metric = "logit_diff"
        target_id = single_token(model, target or "", "target")
        contrast_id = None if not contrast else single_token(model, contrast, "contrast")
        if contrast_id == target_id:
            raise ValueError("the target and the contrast are the same token")
    encodings = []
    for text in (clean, corrupt):
        if mlm:  # the mask as the model spells it
            for spelling in ("[MASK]", "<mask>"):
                text = text.replace(spelling, mask_token(model))
        text_ids(model, text)  # the empty and over-long texts' messages
        encodings.append(model.encode(text))
    positions = [_scored_position(model, enc, mlm) for enc in encodings]
    clean_enc, corrupt_enc = encodings
    pairs = align_positions(clean, corrupt, clean_enc, corrupt_enc)
    return PatchPair(tuple(clean_enc.ids), tuple(corrupt_enc.ids), positions[0], positions[1], target_id,
                     contrast_id, pairs, metric, tuple(clean_enc.tokens), tuple(corrupt_enc.tokens))


def _scored_position(model, enc, mlm: bool) -> int:
    if mlm:
        mask_id = model.tokenizer.token_to_id(mask_token(model))
        found = [i for i, t in enumerate(enc.ids) if t == mask_id]
        if len(found) != 1:
            raise ValueError(f"place exactly one {mask_token(model)} in each sentence (found {len(found)})")
        return found[0]
    plain = [i for i, s in enumerate(enc.special_tokens_mask) if not s]
    return plain[-1] if plain else len(enc.ids) - 1


def align_positions(clean: str, corrupt: str, clean_enc, corrupt_enc) -> tuple[tuple[int, int], ...]:
    """(clean position, corrupted position) pairs by the rule in the module docstring."""
    n_clean, n_corrupt = len(clean_enc.ids), len(corrupt_enc.ids)
    if n_clean == n_corrupt:
        return tuple((i, i) for i in range(n_clean))
    words = [[text[s:e] for s, e in split_words(text)] for text in (clean, corrupt)]
    alignment = align_words(*words)  # ValueError when the words are the same
    segments = [_segments(enc, text, alignment.prefix, len(w) - alignment.suffix, len(w))
                for enc, text, w in zip((clean_enc, corrupt_enc), (clean, corrupt), words)]
    pairs = []
    for key in sorted(set(segments[0]) | set(segments[1]), key=_segment_order):
        a, b = segments[0].get(key, []), segments[1].get(key, [])
        if len(a) == len(b):
            pairs.extend(zip(a, b))
        elif key != ("span",):
            where = "special tokens" if key[0] in ("lead", "trail") else f"the common word {key}"
            raise ValueError(f"the two sentences have {n_clean} and {n_corrupt} tokens and {where} tokenise "
                             f"differently ({len(a)} and {len(b)} tokens): their positions cannot be aligned "
                             "by words; make the pair differ in one place, tokenised alike around it")
    return tuple(sorted(pairs))


def _segments(enc, text: str, span_start: int, span_end: int, n_words: int) -> dict[tuple, list[int]]:
    """Each token's segment: ("lead",) / ("trail",) special tokens, ("prefix", w) / ("suffix", w from the end)
    common words, ("span",) the differing words. A non-special token of no word joins the next word's."""
    spans = split_words(text)
    word_of = []
    for (start, end), special in zip(enc.offsets, enc.special_tokens_mask):
        match = None if special or start == end else next(
            (w for w, (ws, we) in enumerate(spans) if start < we and ws < end), None)
        word_of.append(("special", None) if special else ("word", match))
    for i in range(len(word_of) - 2, -1, -1):  # wordless pieces (a lone space) join the next word
        if word_of[i] == ("word", None):
            word_of[i] = word_of[i + 1]
    seen_word = False
    segments: dict[tuple, list[int]] = {}
    for i, (kind, w) in enumerate(word_of):
        if kind == "special" or w is None:
            key = ("trail",) if seen_word else ("lead",)
        else:
            seen_word = True
            key = ("prefix", w) if w < span_start else ("span",) if w < span_end else ("suffix", n_words - w)
        segments.setdefault(key, []).append(i)
    return segments


def _segment_order(key: tuple):
    rank = {"lead": 0, "prefix": 1, "span": 2, "suffix": 3, "trail": 4}[key[0]]
    return rank, -key[1] if key[0] == "suffix" else key[1] if len(key) > 1 else 0


# --- two runs and the patched runs from a layer on -----------------------------------------------------------


class _Patched(LayerRecord):
    """A layer's record that, at an edit point, puts the source run's (aligned) tensor into some rows:
    edits[(layer, name)] = index tensors (rows, then heads and/or positions) into the receiving tensor."""

    def __init__(self, recorder, layer, edits, sources) -> None:
        super().__init__(recorder, layer)
        self.edits, self.sources = edits, sources

    def edit(self, name, tensor):
        index = self.edits.get((self.layer, name))
        if index is None:
            return tensor
        tensor = tensor.clone()
        tensor[index] = self.sources[name][self.layer][index[1:]]
        return tensor


class _PatchRecorder(Recorder):
    def __init__(self, edits, sources) -> None:
        super().__init__()
        self.edits, self.sources = edits, sources

    def at(self, layer: int) -> LayerRecord:
        return _Patched(self, layer, self.edits, self.sources)


@dataclass
class _Runs:
    """The source run's activations, aligned onto the receiving run's positions (the receiving run's own
    where a position has no partner), the receiving run split by layer, and the metric's two ends."""

    module: torch.nn.Module
    ids: torch.Tensor  # the receiving run's, [1, T]
    position: int  # where the receiving run is scored
    sources: dict  # name -> [L, ...] per layer, without the batch dimension
    inputs: list  # the receiving run's residual stream entering each layer, [1, T, C]
    layer_inputs: list
    aligned: np.ndarray  # [T] bool: the receiving positions with a partner
    clean_value: float
    corrupt_value: float
    score: Callable = field(repr=False)  # final hidden [B, T, C] -> [B] metric values
    metric: Callable = field(repr=False)  # the same as a differentiable torch float64 [B]
    metric_kind: str = "logit_diff"  # PatchPair.metric
    # Each layer's keys and values of the receiving run as its KV cache holds them ([1, K, T, D] each; MLA's
    # latent and rotary key), for `run_suffix`; None: every patched run is computed whole (`run_from`).
    prefix: list | None = field(default=None, repr=False)
    receiving_value: float = float("nan")  # the metric of the receiving run (unnormalised)
    shared: int = 0  # the leading positions both runs have the same tokens at: the same activations there too
    metric_at: Callable | None = field(default=None, repr=False)  # metric_function's: (hidden, position) -> [B]

    def normalised(self, values: np.ndarray) -> np.ndarray:
        return (values - self.corrupt_value) / (self.clean_value - self.corrupt_value)

    @torch.inference_mode()
    def run_from(self, first: int, edits: dict, rows: int) -> np.ndarray:
        """The metric of `rows` patched runs, each from the receiving run's input to layer `first` on."""
        recorder = _PatchRecorder(edits, self.sources)
        recorder.begin(len(self.module.blocks))
        x = self.inputs[first].expand(rows, -1, -1)
        for index in range(first, len(self.module.blocks)):
            mask, rotary, bias = self.layer_inputs[index]
            x, _ = self.module.blocks[index](x, mask, rotary, record=recorder.at(index), bias=bias)
        return self.score(self.module.finish(x))

    @torch.inference_mode()
    def run_suffix(self, start: int, joins: list[int], edits: dict) -> np.ndarray:
        """The metric of len(joins) patched runs that leave every position before `start` as in the receiving
        run: only positions start.. are computed, attending to the receiving run's keys and values (`prefix`)
        before `start`. Row r joins the batch at layer joins[r] (ascending) from the receiving run's residual
        stream entering it. `edits` as run_from's, with positions counted from `start`."""
        sources = {name: tensor[..., start:, :] for name, tensor in self.sources.items()}  # positions: axis -2
        recorder = _PatchRecorder(edits, sources)
        recorder.begin(len(self.module.blocks))
        x = None
        for index in range(joins[0], len(self.module.blocks)):
            rows = bisect.bisect_right(joins, index)
            joining = self.inputs[index][:, start:]
            if x is None:
                x = joining.expand(rows, -1, -1)
            elif rows > x.shape[0]:
                x = torch.cat((x, joining.to(x.device).expand(rows - x.shape[0], -1, -1)))
            mask, rotary, bias = self.layer_inputs[index]
            cache = None
            if start:  # positions before `start` enter as a cache that the rows' own keys and values extend
                cache = LayerCache()
                cache.keys, cache.values = (t[:, :, :start].expand(rows, -1, -1, -1) for t in self.prefix[index])
            x, _ = self.module.blocks[index](x, _from_row(mask, start), _rotary_from(rotary, start),
                                             record=recorder.at(index), cache=cache, bias=_from_row(bias, start))
        return self.metric_at(self.module.finish(x), self.position - start).detach().cpu().numpy()


def _from_row(tensor, start: int):
    """A keep-mask or score bias broadcastable to [B, H, T, S], from query row `start` on (a size-1 row axis, as
    ALiBi's, holds for every row)."""
    if tensor is None or not start or tensor.shape[-2] == 1:
        return tensor
    return tensor[..., start:, :]


def _rotary_from(rotary, start: int):
    """Rotary (cos, sin) [B, T, R] from position `start` on."""
    return None if rotary is None else tuple(t[:, start:] for t in rotary)


def prefix_reusable(module) -> bool:
    """Whether a patch at position p leaves every position before p as in the receiving run, so that patched
    runs may start at p (`_Runs.run_suffix`): a causal decoder. Its norms, MLPs, experts and soft-caps act on
    each position alone and its attention (sliding windows included) looks back only, so nothing before p sees
    the patch. Encoders attend both ways; DeBERTa's attention takes no cache."""
    return bool(module.config.causal) and not module.config.pos_att_type


def _receiving_cache(module, inputs: list, layer_inputs: list) -> list[tuple]:
    """Each layer's keys and values as its KV cache holds them, made by running that layer alone on the receiving
    run's recorded input to it (the numbers the receiving run attended to), kept under the memory ceiling."""
    caches = []
    for index, block in enumerate(module.blocks):
        cache = LayerCache()
        mask, rotary, bias = layer_inputs[index]
        block(inputs[index], mask, rotary, cache=cache, bias=bias)
        # the tensors exist already: `kept` only accounts for them under the ceiling while the runs hold them
        caches.append(tuple(kept(t.nbytes, "the receiving run's keys and values", lambda t=t: t)
                            for t in (cache.keys, cache.values)))
    return caches


@torch.inference_mode()
def _recorded(module, ids: torch.Tensor):
    out = module(ids, record=Recorder(*POINTS), with_logits=False)
    return out.hidden, {name: out.record.stacked(name)[:, 0] for name in POINTS}  # L, ...


@torch.inference_mode()
def prepare(module, pair: PatchPair, direction: str = "denoise", reuse_prefix: bool = True) -> _Runs:
    """Both runs once, recorded at every edit point; the metric's clean and corrupted values. reuse_prefix: patched
    runs start at the first position they patch where `prefix_reusable` (the receiving run's keys and values are
    then made once here); False computes every patched run whole (the reference)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; choose one of {', '.join(DIRECTIONS)}")
    device = next(module.parameters()).device
    clean_ids = torch.tensor([pair.clean_ids], device=device)
    corrupt_ids = torch.tensor([pair.corrupt_ids], device=device)
    clean_hidden, clean = _recorded(module, clean_ids)
    corrupt_hidden, corrupt = _recorded(module, corrupt_ids)
    metric = metric_function(module, pair, clean_hidden)

    def score(hidden, at):
        return metric(hidden, at).detach().cpu().numpy()
    clean_value = float(score(clean_hidden, pair.clean_position)[0])
    corrupt_value = float(score(corrupt_hidden, pair.corrupt_position)[0])
    if abs(clean_value - corrupt_value) < 1e-6:
        raise ValueError(f"the clean and the corrupted runs score the same ({clean_value:.6g}): there is no "
                         "difference for a patch to restore")
    denoise = direction == "denoise"
    (source, receiving) = (clean, corrupt) if denoise else (corrupt, clean)
    ids, position = (corrupt_ids, pair.corrupt_position) if denoise else (clean_ids, pair.clean_position)
    aligned = np.zeros(ids.shape[1], dtype=bool)
    sources = {name: tensor.clone() for name, tensor in receiving.items()}
    for clean_pos, corrupt_pos in pair.pairs:
        src, dst = (clean_pos, corrupt_pos) if denoise else (corrupt_pos, clean_pos)
        aligned[dst] = True
        for name in POINTS:  # positions are the second-last axis of head outputs, the last but one of the others
            if name == "head_outputs":
                sources[name][:, :, dst] = source[name][:, :, src]
            else:
                sources[name][:, dst] = source[name][:, src]
    inputs = [receiving["block_inputs"][layer][None] for layer in range(len(module.blocks))]
    layer_inputs = module.layer_inputs(ids)
    prefix = _receiving_cache(module, inputs, layer_inputs) if reuse_prefix and prefix_reusable(module) else None
    return _Runs(module, ids, position, sources, inputs, layer_inputs, aligned, clean_value, corrupt_value,
                 lambda hidden: score(hidden, position), lambda hidden: metric(hidden, position), pair.metric,
                 prefix=prefix, receiving_value=corrupt_value if denoise else clean_value,
                 shared=_shared_prefix(pair), metric_at=metric)


def _shared_prefix(pair: PatchPair) -> int:
    """How many leading positions the two runs share: paired with themselves, the same token in both."""
    paired = set(pair.pairs)
    shared = 0
    for clean, corrupt in zip(pair.clean_ids, pair.corrupt_ids):
        if clean != corrupt or (shared, shared) not in paired:
            break
        shared += 1
    return shared


def metric_function(module, pair: PatchPair, clean_hidden):
    """The metric as a torch function, (final hidden [B, T, C], position) -> float64 [B], differentiable
    (attnviz.interventions.attribution_patching takes its gradient).

    The logit difference is read through the target's and the contrast's rows of the head alone, [B, C] @
    [C, 2], never the [B, V] logits: the same numbers (each logit is its own row's dot product; SmolLM2's heads
    grid is bit for bit the same), without the vocabulary-sized matmul (SmolLM2's 49,152 rows: 0.26 CPU-s per
    batch of 64 patched runs, five batches for its 270 heads; two rows, 0.1 ms). A final soft-cap (Gemma 2) is
    applied to each row's logit before the difference, as `Transformer.unembed` caps every logit; the difference
    of two rows alone (W_target - W_contrast) would skip it."""
    if pair.metric == "embedding":
        clean = mean_pooled(clean_hidden).double()

        def cosine(hidden, position):
            # a clone: `clean` may come from an inference-mode pass, which autograd may not save
            return torch.nn.functional.cosine_similarity(mean_pooled(hidden).double(), clean.clone(), dim=-1)
        return cosine
    rows = [pair.target_id] if pair.contrast_id is None else [pair.target_id, pair.contrast_id]
    read = _head_rows(module, rows)

    def logit_diff(hidden, position):
        logits = read(hidden[:, position]).double()  # B, 1 or 2
        return logits[:, 0] if len(rows) == 1 else logits[:, 0] - logits[:, 1]  # B
    return logit_diff


def _head_rows(module, rows: list[int]):
    """hidden [B, C] -> the logits of `rows` [B, len(rows)], as the model's head gives them. The index is made
    at each call, in the caller's mode: one made under inference mode could not be saved for a backward pass."""
    if module.config.causal:
        head, cap = module.lm_head, module.config.final_softcap
        if head.weight.is_meta:  # offloaded by a device map: accelerate's hook brings the weight for a call only
            return lambda hidden: module.unembed(hidden)[:, torch.tensor(rows, device=hidden.device)]

        def read(hidden):
            at = torch.tensor(rows, device=head.weight.device)
            logits = torch.nn.functional.linear(hidden, head.weight[at], None if head.bias is None else head.bias[at])
            return logits if cap is None else torch.tanh(logits / cap) * cap
        return read
    head = module.mlm_head  # decoder(norm(act(dense(x)))): the transform is per token, the decoder per row
    if head.decoder.weight.is_meta:
        return lambda hidden: head(hidden)[:, torch.tensor(rows, device=hidden.device)]

    def read_masked(hidden):
        at = torch.tensor(rows, device=head.decoder.weight.device)
        return torch.nn.functional.linear(head.norm(head.act(head.dense(hidden))), head.decoder.weight[at],
                                          head.decoder.bias[at])
    return read_masked


# --- the scans -----------------------------------------------------------------------------------------------


def scan(runs: _Runs, components: list[tuple], progress, should_stop, batch_size) -> np.ndarray:
    """float64 [N]: the normalised effect of each component (layer, name, *index), name one of POINTS and
    index the head and/or the receiving position (head outputs: head, or head and position; block inputs:
    position; MLP outputs: nothing, all positions, or a position). One batch row each. Computed whole
    (`runs.prefix` None), the components must come by layer: each batch starts at its first row's layer.
    Reusing the prefix, any order: they are batched by patched position, then layer (module docstring)."""
    if runs.prefix is not None:
        return _scan_suffixes(runs, components, progress, should_stop, batch_size)
    total = len(components)
    batch = batch_size or patch_batch_size(runs.module, runs.ids.shape[1])
    values = np.empty(total, dtype=np.float64)
    for start in range(0, total, batch):
        if should_stop is not None and should_stop():
            raise ScanStopped(f"stopped after {start} of {total} patches")
        chunk = components[start : start + batch]
        values[start : start + len(chunk)] = runs.run_from(chunk[0][0], _edits(chunk, 0), len(chunk))
        if progress is not None:
            progress(start + len(chunk), total)
    return runs.normalised(values)


def _edits(chunk: list[tuple], start: int) -> dict:
    """run_from's and run_suffix's edits: (layer, name) -> index tensors (batch rows, then the head and/or the
    position, counted from `start`) of the chunk's components, one row each in order."""
    grouped: dict[tuple, list[list[int]]] = {}
    for row, component in enumerate(chunk):
        layer, name, *index = component
        if _per_position(component):
            index[-1] -= start
        grouped.setdefault((layer, name), []).append([row, *index])
    return {key: tuple(torch.tensor(column) for column in zip(*rows)) for key, rows in grouped.items()}


def _per_position(component: tuple) -> bool:
    """Whether a component patches one position (its index's last entry) rather than all of them."""
    _, name, *index = component
    return len(index) == (2 if name == "head_outputs" else 1)


def _scan_suffixes(runs: _Runs, components: list[tuple], progress, should_stop, batch_size) -> np.ndarray:
    """`scan` by `_Runs.run_suffix`: the rows by the first position they patch (0 for every position), then by
    layer; each batch starts at its lowest such position, each row joins it at its own layer."""
    total = len(components)
    batch = batch_size or patch_batch_size(runs.module, runs.ids.shape[1])
    first = [component[-1] if _per_position(component) else 0 for component in components]
    # Two kinds of patch leave the scored position as in the receiving run, which gives their value without a run:
    # one after it (attention looks back only), and one at a position of the runs' shared prefix (in a causal
    # model the same tokens there give both runs the same activations there: the patch puts in what is there).
    needs_run = [first[i] <= runs.position and not (_per_position(components[i]) and first[i] < runs.shared)
             for i in range(total)]
    values = np.full(total, runs.receiving_value)
    order = sorted((i for i in range(total) if needs_run[i]), key=lambda i: (first[i], components[i][0]))
    skipped = total - len(order)
    if skipped and progress is not None:
        progress(skipped, total)
    for start in range(0, len(order), batch):
        if should_stop is not None and should_stop():
            raise ScanStopped(f"stopped after {skipped + start} of {total} patches")
        rows = sorted(order[start : start + batch], key=lambda i: components[i][0])
        position = min(first[i] for i in rows)
        chunk = [components[i] for i in rows]
        values[rows] = runs.run_suffix(position, [layer for layer, *_ in chunk], _edits(chunk, position))
        if progress is not None:
            progress(skipped + start + len(rows), total)
    return runs.normalised(values)


def patch_batch_size(module, n_tokens: int) -> int:
    """Rows per batch: batch_bytes.scan_batch_size's bound, one position scored per row."""
    return scan_batch_size(_Sized(module), n_tokens, scored=1)


class _Sized:
    """What scan_batch_size reads of a LoadedModel, for a bare module."""

    def __init__(self, module) -> None:
        self.module, self.config = module, module.config


def heads(runs: _Runs, progress=None, should_stop=None, batch_size=None) -> np.ndarray:
    """float64 [L, H]: each query head's output at all positions patched."""
    c = runs.module.config
    components = [(layer, "head_outputs", head) for layer in range(c.n_layers) for head in range(c.n_heads)]
    return scan(runs, components, progress, should_stop, batch_size).reshape(c.n_layers, c.n_heads)


def head_positions(runs: _Runs, layer: int, head: int, progress=None, should_stop=None,
                   batch_size=None) -> np.ndarray:
    """float64 [T]: one head's output patched at each receiving position alone (NaN: no partner)."""
    c = runs.module.config
    if not (0 <= layer < c.n_layers and 0 <= head < c.n_heads):
        raise ValueError(f"no head {layer}.{head} in {c.n_layers} layers x {c.n_heads} heads")
    positions = np.flatnonzero(runs.aligned)
    out = np.full(runs.aligned.shape, np.nan)
    components = [(layer, "head_outputs", head, int(p)) for p in positions]
    out[positions] = scan(runs, components, progress, should_stop, batch_size)
    return out


def mlps(runs: _Runs, progress=None, should_stop=None, batch_size=None) -> np.ndarray:
    """float64 [L]: each MLP's output at all positions patched."""
    components = [(layer, "mlp_outputs") for layer in range(runs.module.config.n_layers)]
    return scan(runs, components, progress, should_stop, batch_size)


def residual(runs: _Runs, progress=None, should_stop=None, batch_size=None) -> np.ndarray:
    """float64 [L, T]: the residual stream entering each layer, at each receiving position alone (NaN: no
    partner)."""
    n_layers, positions = runs.module.config.n_layers, np.flatnonzero(runs.aligned)
    out = np.full((n_layers, runs.aligned.shape[0]), np.nan)
    components = [(layer, "block_inputs", int(p)) for layer in range(n_layers) for p in positions]
    out[:, positions] = scan(runs, components, progress, should_stop, batch_size).reshape(n_layers, -1)
    return out


# --- everything at once ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PatchResult:
    direction: str
    clean_value: float  # the metric of the clean run
    corrupt_value: float
    heads: np.ndarray  # [L, H]
    mlps: np.ndarray  # [L]
    residual: np.ndarray  # [L, T] over the receiving run's positions
    tokens: tuple[str, ...]  # the receiving run's tokens (the corrupted run's when denoising)
    pair: PatchPair


def patch(model: LoadedModel, pair: PatchPair, direction: str = "denoise", progress=None, should_stop=None,
          batch_size=None) -> PatchResult:
    """The heads grid, the MLP column and the residual heatmap of one pair, in one direction.
    `progress(done, total)` counts patched runs over all three."""
    runs = prepare(model.module, pair, direction)
    c = model.config
    total = c.n_layers * c.n_heads + c.n_layers + c.n_layers * int(runs.aligned.sum())

    def step(base):
        return None if progress is None else (lambda n, _total: progress(base + n, total))
    grid = heads(runs, step(0), should_stop, batch_size)
    column = mlps(runs, step(grid.size), should_stop, batch_size)
    heat = residual(runs, step(grid.size + column.size), should_stop, batch_size)
    tokens = pair.corrupt_tokens if direction == "denoise" else pair.clean_tokens
    return PatchResult(direction, runs.clean_value, runs.corrupt_value, grid, column, heat, tokens, pair)
