"""The head atlas's causal weight (issue 37, items 1 and 6): each head's activation-patching effect over the
built-in minimal pairs of a relation (attnviz/probesets/patch_pairs.jsonl: agreement, `subject-verb`, and
`coreference`), computed as the Head Finder's `workbench.patching.builtin_grid` computes it: each pair made by
`patching.patch_pair`, both runs by `patching.prepare` (denoising), every head's output patched by
`patching.heads`, and the mean of those [L, H] grids over the pairs the model can score; a pair it cannot (a
target of several tokens, unalignable runs, runs that score the same) is skipped with the reason. Stored in the
atlas's DuckDB file by attnviz.readouts.atlas_causal (this module sits in interventions because readouts may
not import interventions: docs/layers.md).

The built-in pairs score a decoder's next token: an encoder, or a decoder without an LM head, is skipped whole,
every pair with the reason. A relation whose pairs (their SHA-256) and model are stored already is not computed
again. No pairs file: the only minimal-pairs file formats in attnviz.analysis are alignment (minimal_pairs.py)
and sentence pairs (sentence_pairs.py), neither with a target and contrast token, so `--pairs` is `builtin`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from attnviz.interventions import patching
from attnviz.probesets.patch_pairs import PatchPairSpec, builtin_patch_pairs
from attnviz.readouts import atlas_causal

PAIRS = ("builtin",)
RELATIONS = ("subject-verb", "coreference")  # the built-in pairs' relations, in the seed's order


def unusable(model) -> str | None:
    """Why the built-in pairs cannot be patched on `model` (an encoder, no LM head), or None."""
    if not model.config.causal:
        return "an encoder: the built-in pairs score a decoder's next token (patching's logit difference)"
    if getattr(model.module, "lm_head", None) is None:
        return "a decoder without an LM head: the built-in pairs score the next token's logits"
    return None


def mean_effect(model, specs: Sequence[PatchPairSpec],
                progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray | None, list[str], dict]:
    """(the mean denoising effect [L, H] over the usable pairs, or None; their ids; {id: reason} of the others).
    `progress(done, total)` counts pairs."""
    usable, skipped = [], {}
    for spec in specs:
        try:
            usable.append((spec.id, patching.patch_pair(model, spec.clean, spec.corrupt, spec.target,
                                                        spec.contrast)))
        except ValueError as error:
            skipped[spec.id] = str(error)
    grids, used = [], []
    for index, (pid, pair) in enumerate(usable):
        try:
            runs = patching.prepare(model.module, pair)
        except ValueError as error:  # both runs score the same
            skipped[pid] = str(error)
        else:
            grids.append(patching.heads(runs))
            used.append(pid)
        if progress is not None:
            progress(index + 1, len(usable))
    return (np.mean(grids, axis=0) if grids else None), used, skipped


def build_causal(model, path: str | Path, pairs: str = "builtin", relations: Sequence[str] = RELATIONS,
                 progress: Callable[[str, int, int], None] | None = None) -> list[str]:
    """Compute and store each relation's mean effect grid in the atlas database at `path` (attnviz.readouts.
    atlas_causal), a relation stored with the same pairs' SHA-256 and model kept. `progress(relation, done,
    total)` counts pairs. Returns the relations computed."""
    import duckdb

    if pairs not in PAIRS:
        raise ValueError(f"unknown pairs {pairs!r}: the atlas takes the built-in minimal pairs (--pairs builtin)")
    info = model.info
    reason = unusable(model)
    computed = []
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    try:
        for statement in atlas_causal.CAUSAL_SCHEMA:
            con.execute(statement)
        for relation in relations:
            specs = builtin_patch_pairs(relation)
            sha = atlas_causal.pairs_sha256(specs)
            if atlas_causal.is_stored(con, relation, sha, info):
                continue
            if reason is not None:
                atlas_causal.store_causal(con, relation, pairs, sha, info, None, 0,
                                          {spec.id: reason for spec in specs}, reason)
            else:
                step = None if progress is None else (lambda done, total, r=relation: progress(r, done, total))
                grid, used, skipped = mean_effect(model, specs, step)
                why = None if grid is not None else f"none of the {len(specs)} {relation} pairs could be patched"
                atlas_causal.store_causal(con, relation, pairs, sha, info, grid, len(used), skipped, why)
            computed.append(relation)
    finally:
        con.close()
    return computed
