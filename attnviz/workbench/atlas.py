"""The Atlas page's data: a model's head atlas (attnviz.readouts.atlas) where the app keeps it, read once and
shared, and built on first use over the shipped probe sets' sentences under the memory budget.

Where an atlas lives: one folder per model source under the atlas folder, `$ATTNVIZ_ATLAS_DIR` when set (""
or "off": no atlas), else `atlas/` in the model cache's folder (attnviz.loading.cache.cache_dir:
`$ATTNVIZ_CACHE_DIR`, default ~/.cache/attnviz). The folder's name is the SHA-256 of the model's store key
(`AppSource.key`: `hub:` and the hub id, or `local:` and the resolved path), never a path a visitor gives. The
app builds into `<name>.partial` and renames it into place when the build is complete, so a reader never sees
half an atlas and a build stopped part way (Cancel, the host's time bound) resumes from where it stopped. The
command line builds one over a person's own corpus into the same folder (`atlas build --out`; `folder_name`).
Beside it, `<name>.published` holds a published atlas (a HeadVis tree, `atlas import --for-model`) that the page
shows next to ours. Both folders' rules are attnviz.readouts.atlas_folders', which the command line shares.

One head's examples and histograms are read apart from the metrics, with SQL for that head alone
(`head_read`), once per version of the file and head.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

from attnviz.models.loaded_model import LoadedModel
from attnviz.probesets import builtin_items
from attnviz.probesets.patch_pairs import builtin_patch_pairs
from attnviz.readouts import atlas, atlas_detectors, atlas_head
from attnviz.readouts.atlas_folders import ATLAS_DIR_VARIABLE, atlas_root, folder_name, published_name
from attnviz.readouts.atlas_metrics import METRICS
from attnviz.workbench import shelf
from attnviz.workbench.shared import Workbench
from attnviz.workbench.traces import trace_bytes

__all__ = ["ATLAS_DIR_VARIABLE", "DETECTORS", "METRICS", "RELATIONS", "atlas_folder", "atlas_root", "build_builtin",
           "builtin_plan", "builtin_texts", "detector_grids", "example_text", "folder_name", "head_ranks", "head_read",
           "published", "published_folder", "relation_scores", "seed_table", "stored"]

log = logging.getLogger(__name__)

PARTIAL = ".partial"
# The detectors `atlas.metrics` may give (TransformerLens-style scores on repeated random tokens), in this order.
DETECTORS = ("previous_token", "duplicate_token", "induction")
# Special tokens an example's text keeps: the tokenizer would read "[UNK]" back as the unknown token it was.
UNKNOWN_TOKENS = ("[UNK]", "<unk>", "<UNK>")
# The seed's four relations in its order (Head 1 主谓关系 ... Head 4 语义关联).
RELATIONS = ("subject-verb", "coreference", "modifier", "semantic")
# An advance reserved around a build besides the forward passes, which spend against the ceiling themselves
# (attnviz.memory.ceiling): DuckDB's own buffers and the tokenizer's; its tables are a few KB a head.
DUCKDB_BYTES = 64_000_000
# The time estimate on the build's button: 2 x the parameters outside the token embedding FLOPs a token at this
# rate, PASSES times (the metrics' pass, then the relations' in batches of 32 with their examples), plus a fixed
# cost a text (a DuckDB commit every 16 texts, the reducer's blocks). MiniLM over the shipped sets (438 texts,
# 5,687 tokens): 9.5 s for both, on one thread of a 2-core machine, estimated 10; SmolLM2 (6,559 tokens): 81 s,
# estimated 92.
FLOPS_PER_S = {"cpu": 2e10, "cuda": 1e12}
PASSES = 1.3
SECONDS_PER_TEXT = 0.005
# The causal weight's share of the estimate (a decoder's built-in pairs, each patched once per head): seconds per
# parameter per patched run, SmolLM2's 18 s for 7 pairs x 270 heads of 106 M parameters on one thread.
SECONDS_PER_PATCHED_PARAM = 9e-11
RELATION_BATCH = 32  # `probe --batch-size`'s default (atlas_relations.BATCH_SIZE): the same numbers as `probe`


def store_key(bench: Workbench, name: str) -> str:
    """The model store's key of the model shown as `name` (shelf.load_model), or `name` itself for the untrained
    fallback (no source of its own)."""
    key = bench.model_keys.get(name)
    if key is not None:
        return str(key)
    try:
        return shelf.check_source(name).key
    except Exception:  # the labelled untrained model: its name is its key
        return name


def atlas_folder(bench: Workbench, name: str) -> Path | None:
    """The folder of the atlas of the model shown as `name`, or None when atlases are switched off."""
    root = atlas_root()
    return None if root is None else root / folder_name(store_key(bench, name))


def published_folder(bench: Workbench, name: str) -> Path | None:
    """The folder of the published atlas shown beside the model's own (`atlas import --for-model`, written by
    the command line under the same root: attnviz.readouts.atlas_folders), or None when atlases are off."""
    root = atlas_root()
    return None if root is None else root / published_name(store_key(bench, name))


def _nbytes(found: dict) -> int:
    return 4 * len(repr(found)) + 1_000


def _version(folder: Path | None) -> tuple | None:
    """The version of the atlas file in `folder` (modification time and size), None when there is none: what
    the views store's keys hold, so that a rebuilt or replaced file is read again."""
    if folder is None:
        return None
    try:
        stat = atlas.atlas_path(folder).stat()
    except OSError:
        return None
    return str(folder), stat.st_mtime_ns, stat.st_size


def _read_metrics(bench: Workbench, folder: Path | None) -> dict | None:
    version = _version(folder)
    if version is None:
        return None

    def read() -> dict:
        try:
            return atlas.metrics(folder)
        except Exception as error:
            log.warning("the atlas %s could not be read: %s", folder, error)
            raise ValueError("the atlas could not be read (a build may be writing it now)") from None

    return bench.shared_value(("atlas", *version), read, _nbytes)


def stored(bench: Workbench, name: str) -> dict | None:
    """The atlas of the model shown as `name` (`atlas.metrics`: {"model", "n_texts", "metrics": {name: [layer]
    [head]}, ...}), or None when it has none. Read from DuckDB once per version of the file (its modification
    time and size) and then held in the views store: a rerun or a click costs a stat, not a read. ValueError
    when the file is there but cannot be read (a command-line build writing it now)."""
    return _read_metrics(bench, atlas_folder(bench, name))


def published(bench: Workbench, name: str) -> dict | None:
    """The published atlas beside the model's own (`published_folder`), read as `stored` reads ours; None when
    there is none, ValueError when it cannot be read."""
    return _read_metrics(bench, published_folder(bench, name))


def head_read(bench: Workbench, folder: Path | None, layer: int, head: int) -> atlas_head.HeadRead | None:
    """One head's examples and histograms in the atlas at `folder` (one of the two above: never a visitor's
    path), read with SQL for that head alone (attnviz.readouts.atlas_head) once per (file version, layer, head)
    and shared; None when there is no atlas, ValueError when it cannot be read."""
    version = _version(folder)
    if version is None:
        return None

    def read() -> atlas_head.HeadRead:
        try:
            return atlas_head.read_head(atlas.atlas_path(folder), layer, head)
        except Exception as error:
            log.warning("head L%d H%d of the atlas %s could not be read: %s", layer, head, folder, error)
            raise ValueError("the atlas could not be read (a build may be writing it now)") from None

    return bench.shared_value(("atlas_head", *version, int(layer), int(head)), read, lambda found: found.nbytes())


def example_text(model, example: atlas_head.HeadExample, own: bool, seq_len: int) -> str:
    """The text of an example for Explore. For the model's own atlas built here over the shipped sentences, an
    example whose tokens are those of shipped sentence `sequence_id` (the text's index in the corpus) is that
    sentence exactly; any other is its tokens joined (atlas_head.example_text), the model's special tokens left
    out, e.g. a byte-level piece of a character decoded alone stays U+FFFD there."""
    texts = builtin_texts()
    if own and isinstance(model, LoadedModel) and 0 <= example.sequence_id < len(texts):
        cut = min(seq_len, model.context_tokens)
        ids = model.encode(texts[example.sequence_id], max_tokens=max(2, cut)).ids
        if len(ids) < cut and tuple(model.tokenizer.decode_batch(
                [[int(i)] for i in ids], skip_special_tokens=False)) == example.tokens:
            return texts[example.sequence_id]
    special = ()
    if isinstance(model, LoadedModel):
        try:
            special = {token.content for token in model.tokenizer.get_added_tokens_decoder().values()
                       if token.special and token.content not in UNKNOWN_TOKENS}
        except AttributeError:  # a tokenizers release without it: the tokens as they are
            special = ()
    return atlas_head.example_text(example.tokens, special)


def detector_grids(found: dict) -> dict[str, list]:
    """The atlas's detector scores ({"previous_token": [layer][head], ...}) where `atlas.metrics` gives them, in
    DETECTORS' order; {} when the key is missing, None or of another shape."""
    detectors = found.get("detectors") if isinstance(found, dict) else None
    if not isinstance(detectors, dict):
        return {}
    return {name: detectors[name] for name in DETECTORS if isinstance(detectors.get(name), list)}


@functools.cache
def builtin_texts() -> tuple[str, ...]:
    """The shipped probe sets' distinct sentences (attnviz/probesets: the English and Chinese items), in order."""
    return tuple(dict.fromkeys(item.text for item in builtin_items("builtin")))


def can_build(model) -> bool:
    """The atlas takes a self-attention model (attnviz.load's LoadedModel), not a translation model."""
    return isinstance(model, LoadedModel)


def builtin_plan(bench: Workbench, model, name: str) -> dict:
    """{"texts", "tokens", "longest", "seconds"} of a build over the shipped sets on this model (tokenized once
    per model, shared)."""
    texts = builtin_texts()

    def plan() -> dict:
        cut = min(atlas.SEQ_LEN, model.context_tokens)
        lengths = [len(model.encode(text, max_tokens=cut).ids) for text in texts]
        params = sum(p.numel() for p in model.module.parameters())
        params -= getattr(model.config, "vocab_size", 0) * model.config.d_model  # a lookup, not a product
        rate = FLOPS_PER_S["cuda" if str(model.info.device).startswith("cuda") else "cpu"]
        seconds = PASSES * 2 * max(params, 1) * sum(lengths) / rate + SECONDS_PER_TEXT * len(lengths)
        if model.config.causal:  # the causal weight over the built-in pairs (build_builtin's last step)
            runs = len(builtin_patch_pairs()) * model.config.n_layers * model.config.n_heads
            seconds += SECONDS_PER_PATCHED_PARAM * max(params, 1) * runs * FLOPS_PER_S["cpu"] / rate
        return {"texts": len(lengths), "tokens": sum(lengths), "longest": max(lengths), "seconds": seconds}

    return bench.shared_value(("atlas_plan", store_key(bench, name), len(texts), hash(texts)), plan,
                              lambda value: 1_000)


def build_bytes(model, longest: int) -> int:
    """The advance reserved around a build: the relations' scoring batch of traces (`probe`'s batch of
    RELATION_BATCH texts of `longest` tokens, maps included; the metrics' pass holds less: its reducer keeps no
    map), and DuckDB's buffers."""
    return trace_bytes(model, longest, RELATION_BATCH) + DUCKDB_BYTES


def relations(model, folder: Path, progress) -> None:
    """Clark et al.'s relation scores of every head on the shipped probe sets, stored in the atlas at `folder`
    (attnviz.readouts.atlas_relations, where this version has it: the Atlas page's relation scores and the
    seed's table), with `progress(kind, done, total)` over their distinct sentences."""
    try:
        from attnviz.readouts import atlas_relations
    except ImportError:
        return
    build, read = getattr(atlas_relations, "build_relations", None), getattr(atlas_relations, "read_sources", None)
    if build is None or read is None:
        return
    build(model, atlas.atlas_path(folder), read(probes="builtin"), batch_size=RELATION_BATCH, progress=progress)


def causal(model, folder: Path, progress) -> None:
    """Each head's causal weight over the built-in minimal pairs (attnviz.interventions.atlas_patching), for a
    decoder with an LM head (an encoder's pairs are stored as skipped, with the reason); `progress(relation,
    done, total)` over their pairs. SmolLM2's two relations (5 usable pairs): 18 s on one thread of a 2-core
    machine."""
    from attnviz.interventions import atlas_patching

    atlas_patching.build_causal(model, atlas.atlas_path(folder), "builtin", progress=progress)


def build_builtin(bench: Workbench, model, name: str, progress=None) -> dict:
    """Build the atlas of `model` (shown as `name`) over the shipped probe sets' sentences where the app keeps
    it, and return it (`stored`). Under the budget: an advance reserved around the build (the forward passes
    spend against the ceiling themselves: OverBudget with the figures when one does not fit); `progress(done,
    total)` after each text (it may raise to stop: what is done is kept and the next build goes on from it). One
    build of a model at a time; a second caller waits for it and gets its atlas."""
    if not can_build(model):
        raise ValueError("the atlas takes a self-attention model, not a translation model")
    folder = atlas_folder(bench, name)
    if folder is None:
        raise ValueError(f"atlases are switched off here ({ATLAS_DIR_VARIABLE} or the model cache is off)")
    lock_key = ("atlas", str(folder))
    try:
        with bench.load_lock(lock_key):
            found = stored(bench, name)
            if found is not None:  # another visitor's build finished while this one waited
                return found
            texts = list(builtin_texts())
            plan = builtin_plan(bench, model, name)
            need = build_bytes(model, plan["longest"])
            partial = folder.with_name(folder.name + PARTIAL)
            # the metrics' pass, then the relations' (when this version scores them), then the causal weight's pairs
            n_pairs = len(builtin_patch_pairs()) if model.config.causal else 0
            total = 2 * len(texts) + n_pairs

            def step(done: int, _total=None) -> None:
                if progress is not None:
                    progress(done, total)

            with bench.run_slot(need), bench.reserve(need, keep_model=name):
                atlas.build(model, texts, partial, progress=step, examples=True)  # the dashboard's examples
                relations(model, partial, lambda kind, done, _: step(len(texts) + done))
                pairs_done = {}

                def pairs_step(relation: str, done: int, _total) -> None:
                    pairs_done[relation] = done
                    step(2 * len(texts) + sum(pairs_done.values()))

                causal(model, partial, pairs_step)
                atlas_detectors.build_detectors(model, partial)  # 4 short sequences: a second or two
            if folder.is_dir():  # an empty folder left by hand; a non-empty one is refused by the rename
                folder.rmdir()
            os.replace(partial, folder)
    finally:
        bench.drop_load_lock(lock_key)
    found = stored(bench, name)
    if found is None:
        raise ValueError("the atlas was built but could not be read back")
    return found


def head_ranks(grid, layer: int, head: int) -> tuple[float | None, int | None, int]:
    """(the head's value, its rank among the heads that have one, 1 = highest, how many have one) in a
    [layer][head] grid of numbers or None."""
    values = [v for row in grid for v in row if isinstance(v, (int, float))]
    try:
        value = grid[layer][head]
    except (IndexError, TypeError):
        value = None
    if not isinstance(value, (int, float)):
        return None, None, len(values)
    return float(value), 1 + sum(v > value for v in values), len(values)


def relation_scores(found: dict, layer: int, head: int) -> list[dict]:
    """The head's relation scores in the atlas's "relations" (the shape of `probe --json`'s: per relation a
    grid per direction), one row a (relation, direction) with a grid: {"relation", "direction", "score",
    "rank", "of"}; [] when the atlas has none. Read defensively: any part may be absent or null."""
    rows = []
    relations = found.get("relations") if isinstance(found, dict) else None
    if not isinstance(relations, dict):
        return rows
    for relation, block in relations.items():
        if not isinstance(block, dict):
            continue
        for direction in ("source_to_target", "target_to_source"):
            grid = block.get(direction)
            if not isinstance(grid, list):
                continue
            score, rank, of = head_ranks(grid, layer, head)
            rows.append({"relation": str(relation), "direction": direction, "score": score, "rank": rank, "of": of})
    return rows


def seed_table(found: dict) -> list[dict] | None:
    """The seed's table (Head 1 subject-verb ... Head 4 semantic association) filled from the atlas's relations
    by `attnviz.readouts.atlas_relations.seed_table`, as rows of plain values; None when that function or the
    atlas's relations are missing."""
    if not isinstance(found, dict) or not found.get("relations"):
        return None
    try:
        from attnviz.readouts import atlas_relations
    except ImportError:
        return None
    make = getattr(atlas_relations, "seed_table", None)
    if make is None:
        return None
    try:
        rows = make(found)
        return [dict(row) for row in rows] if rows else None
    except Exception as error:  # relations of another shape (an older or newer atlas): no table, not an error page
        log.warning("the atlas's seed table could not be read: %s", error)
        return None
