"""Activation patching for the pages (interventions.patching): one pair's heads grid, MLP column and
residual heatmap in one direction, one head per position, the same grids estimated by attribution patching
(interventions.attribution_patching) with the exact check of the estimate's top heads, and the built-in pairs'
heads grids for the Head Finder; each computed once per plain inputs and shared in the views store, under the
memory budget."""

from __future__ import annotations

import numpy as np

from attnviz.interventions import attribution_patching, patching
from attnviz.models import batch_bytes
from attnviz.probesets.patch_pairs import builtin_patch_pairs
from attnviz.workbench.shared import Workbench

# The longest pair the app patches: the residual heatmap is L x T patched runs (30 x 64 for SmolLM2).
MAX_PATCH_TOKENS = 64


def patch_bytes(model, n_tokens: int) -> int:
    """Transient bytes of patching: one batch of patched runs, both runs' recordings at the edit points (head
    outputs, MLP outputs, block inputs: [L, T, about 3 C] each, twice, and the aligned copy) and, for a decoder,
    the receiving run's keys and values that the per-position rows reuse (interventions.patching)."""
    c = model.config
    itemsize = next(model.module.parameters()).element_size()
    batch = patching.patch_batch_size(model.module, n_tokens)
    recorded = 3 * c.n_layers * n_tokens * (c.n_heads * c.dim_per_head + 2 * c.d_model) * itemsize
    # a decoder's receiving run keeps every layer's keys and values for the rows that reuse its prefix
    kept = 2 * c.n_layers * n_tokens * c.kv_heads * c.dim_per_head * itemsize if c.causal else 0
    return batch_bytes.scan_bytes(model, n_tokens, batch, scored=1) + recorded + kept


def attribution_bytes(model, n_tokens: int) -> int:
    """Transient bytes of attribution patching: the receiving run with autograd keeps what each layer's backward
    needs until it runs (about one scan row a layer: scores, probabilities, hidden states, the MLP's inner
    width), a gradient as large as the recordings at every edit point, and the float64 copies of both."""
    per_layer = batch_bytes.scan_bytes(model, n_tokens, 1, scored=1) - batch_bytes.scan_bytes(model, n_tokens, 0,
                                                                                              scored=1)
    return model.config.n_layers * per_layer + 3 * patch_bytes(model, n_tokens)


def pair_of(model, clean: str, corrupt: str, target: str | None, contrast: str | None):
    """The PatchPair (ValueError with the reason: a target of several tokens, unalignable pairs, too long)."""
    pair = patching.patch_pair(model, clean, corrupt, target, contrast)
    if max(len(pair.clean_ids), len(pair.corrupt_ids)) > MAX_PATCH_TOKENS:
        raise ValueError(f"patching takes pairs of at most {MAX_PATCH_TOKENS} tokens here")
    return pair


def _key(kind: str, name: str, clean, corrupt, target, contrast, direction, *more) -> tuple:
    return ("patching", kind, name, clean, corrupt, target or "", contrast or "", direction, *more)


def result(bench: Workbench, name: str, clean: str, corrupt: str, target, contrast, direction: str):
    """The PatchResult of these inputs, if some visitor has computed it."""
    return bench.views.get(_key("all", name, clean, corrupt, target, contrast, direction))


def patch(bench: Workbench, model, name: str, clean: str, corrupt: str, target, contrast, direction: str,
          progress=None):
    """Heads, MLPs and residual stream of one pair (interventions.patching.patch); the caller holds the
    heavy-work slot. `progress` may raise (a cancelled job) between batches."""
    key = _key("all", name, clean, corrupt, target, contrast, direction)
    done = bench.views.get(key)
    if done is not None:
        return done
    pair = pair_of(model, clean, corrupt, target, contrast)
    need = patch_bytes(model, max(len(pair.clean_ids), len(pair.corrupt_ids)))
    with bench.run_slot(need), bench.reserve(need, keep_model=name):
        value = patching.patch(model, pair, direction, progress=progress)
    for array in (value.heads, value.mlps, value.residual):
        array.setflags(write=False)
    bench.views.put(key, value, value.heads.nbytes + value.mlps.nbytes + value.residual.nbytes + 4096)
    return value


def head_positions(bench: Workbench, model, name: str, clean: str, corrupt: str, target, contrast,
                   direction: str, layer: int, head: int) -> np.ndarray:
    """One head patched at each position alone ([T] over the receiving run; NaN: no partner): T runs."""
    def compute():
        pair = pair_of(model, clean, corrupt, target, contrast)
        need = patch_bytes(model, max(len(pair.clean_ids), len(pair.corrupt_ids)))
        with bench.run_slot(need), bench.reserve(need, keep_model=name):
            runs = patching.prepare(model.module, pair, direction)
            values = patching.head_positions(runs, layer, head)
        values.setflags(write=False)
        return values

    key = _key("positions", name, clean, corrupt, target, contrast, direction, layer, head)
    return bench.shared_value(key, compute, lambda values: values.nbytes + 1024)


def estimate(bench: Workbench, model, name: str, clean: str, corrupt: str, target, contrast, direction: str):
    """Every grid of the pair estimated by attribution patching (one forward and one backward pass:
    attribution_patching.Attribution), shared."""
    def compute():
        pair = pair_of(model, clean, corrupt, target, contrast)
        need = attribution_bytes(model, max(len(pair.clean_ids), len(pair.corrupt_ids)))
        with bench.run_slot(need), bench.reserve(need, keep_model=name):
            # no patched run follows: the receiving run's keys and values for the prefix reuse are not needed
            value = attribution_patching.estimate(patching.prepare(model.module, pair, direction,
                                                                   reuse_prefix=False))
        for grid in attribution_patching.GRIDS:
            value.grid(grid).setflags(write=False)
        return value

    key = _key("estimate", name, clean, corrupt, target, contrast, direction)
    return bench.shared_value(key, compute, lambda value: sum(value.grid(g).nbytes
                                                             for g in attribution_patching.GRIDS) + 4096)


def agreement(estimated: np.ndarray, exact: np.ndarray, k: int):
    """An estimated grid against the exact one (attribution_patching.agreement: Pearson r, top-k overlap)."""
    return attribution_patching.agreement(estimated, exact, k)


def checked_result(bench: Workbench, name: str, clean: str, corrupt: str, target, contrast, direction: str,
                   k: int):
    """The exact check of the estimate's top `k` heads (attribution_patching.Checked), if some visitor ran it."""
    return bench.views.get(_key("checked", name, clean, corrupt, target, contrast, direction, k))


def check_top(bench: Workbench, model, name: str, clean: str, corrupt: str, target, contrast, direction: str,
              k: int, progress=None):
    """Exact patching of the `k` heads the estimate puts first (k runs, not the grid's L x H); the caller holds
    the heavy-work slot. `progress` may raise (a cancelled job) between batches."""
    key = _key("checked", name, clean, corrupt, target, contrast, direction, k)
    done = bench.views.get(key)
    if done is not None:
        return done
    approx = estimate(bench, model, name, clean, corrupt, target, contrast, direction)
    pair = pair_of(model, clean, corrupt, target, contrast)
    need = patch_bytes(model, max(len(pair.clean_ids), len(pair.corrupt_ids)))
    with bench.run_slot(need), bench.reserve(need, keep_model=name):
        runs = patching.prepare(model.module, pair, direction)
        value = attribution_patching.check_top(runs, approx.heads, k, "heads", progress=progress)
    bench.views.put(key, value, value.approx.nbytes + value.exact.nbytes + 4096)
    return value


def builtin_result(bench: Workbench, name: str, relation: str):
    """The built-in pairs' mean heads grid for `relation`, if some visitor has computed it."""
    return bench.views.get(("patching_builtin", name, relation))


def builtin_grid(bench: Workbench, model, name: str, relation: str, progress=None) -> dict:
    """{"grid": [L, H] mean denoising effect over the built-in pairs of `relation` this model can score,
    "pairs": their ids, "skipped": {id: reason}}; the caller holds the heavy-work slot."""
    key = ("patching_builtin", name, relation)
    done = bench.views.get(key)
    if done is not None:
        return done
    usable, skipped = [], {}
    for spec in builtin_patch_pairs(relation):
        try:
            usable.append((spec.id, pair_of(model, spec.clean, spec.corrupt, spec.target, spec.contrast)))
        except ValueError as error:
            skipped[spec.id] = str(error)
    c = model.config
    per_pair = c.n_layers * c.n_heads
    grids = []
    for index, (_, pair) in enumerate(usable):
        need = patch_bytes(model, max(len(pair.clean_ids), len(pair.corrupt_ids)))
        with bench.run_slot(need), bench.reserve(need, keep_model=name):
            try:
                runs = patching.prepare(model.module, pair)
            except ValueError as error:  # both runs score the same
                skipped[usable[index][0]] = str(error)
                continue
            step = None if progress is None else (lambda n, _t, base=index * per_pair: progress(base + n,
                                                                                               per_pair * len(usable)))
            grids.append(patching.heads(runs, step))
    grid = np.mean(grids, axis=0) if grids else None
    if grid is not None:
        grid.setflags(write=False)
    value = {"grid": grid, "pairs": [pid for pid, _ in usable if pid not in skipped], "skipped": skipped}
    bench.views.put(key, value, (0 if grid is None else grid.nbytes) + 4096)
    return value
