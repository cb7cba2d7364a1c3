"""A head atlas over a corpus (issue 37, first slice): HeadVis's six metrics of every head
(attnviz.readouts.atlas_metrics) from one streaming pass over the texts, kept in an embedded DuckDB database,
`<out_dir>/atlas.duckdb`, so that a build stopped part way resumes where it stopped.

Texts are read one at a time, tokenized as `LoadedModel.encode` does by default (special tokens included) and cut
at `seq_len` tokens (at most the model's own context), as HeadVis's pipeline tokenizes them; each runs one forward
pass of our module with the probabilities reduced block by block (no [T, T] map held), and its sums are added to
the build's. Tables:

- `build` (one row): the model (`model`: the source as given, `model_path`, `model_type`, `n_layers`, `n_heads`),
  the settings (`seq_len`, `induction_threshold`), `n_texts` (texts taken so far), `n_sequences` (of them, those
  of 2 tokens or more: the ones pooled), `skipped`, provenance (`attnviz_version`, `torch_version`, `device`,
  `dtype`, `started`, `updated`, `finished`: ISO times in UTC, `finished` NULL until the last text is in);
- `heads`: `layer`, `head` and the six metrics (NULL where a metric has no count, e.g. no repeated token);
- `sink_share`: `layer`, `head`, the sink share and its sum (attnviz.readouts.atlas_causal: the mean attention on
  the first token, readouts.sinks.first_token_means' rule, from the same pass);
- `sums`: `layer`, `head` and the float64 sums the metrics are ratios of (atlas_metrics.SUMS);
- `progress` (one row): `texts_done`, the counts (atlas_metrics.COUNTS), `texts_chain` (a SHA-256 chain over the
  texts taken, so a resumed build refuses a different corpus) and `updated`.

All four are written in one transaction every `commit_every` texts (but not within `commit_seconds` of the last
commit), at the end, and when the build stops on an error or an interruption (KeyboardInterrupt included); run
again with the same model, texts and settings, a build skips the texts already taken (checking them against the
chain) and goes on from the sums stored, which are the float64 values themselves: the resumed build's numbers are
the uninterrupted build's, bit for bit.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np

import attnviz
from attnviz.models.loaded_model import LoadedModel
from attnviz.readouts import atlas_causal, atlas_detectors, atlas_examples, atlas_relations
from attnviz.readouts.atlas_metrics import COUNTS, INDUCTION_THRESHOLD, METRICS, SUMS, HeadSums, sequence_sums

logger = logging.getLogger(__name__)

ATLAS_FILE = "atlas.duckdb"
SEQ_LEN = 512  # HeadVis's default --seq-len
# A commit every COMMIT_EVERY texts, but not within COMMIT_SECONDS of the last (a commit writes the examples changed,
# about a second of CPU early in a SmolLM2 build, when most slots change): a hard kill loses at most the larger.
COMMIT_EVERY = 16
COMMIT_SECONDS = 60.0

# What must be the same for a build to resume: the build table's columns, compared as stored.
SETTINGS = ("model", "n_layers", "n_heads", "seq_len", "induction_threshold", "dtype")

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS build (model VARCHAR, model_path VARCHAR, model_type VARCHAR, n_layers INTEGER,
       n_heads INTEGER, seq_len INTEGER, induction_threshold DOUBLE, n_texts BIGINT, n_sequences BIGINT,
       skipped BIGINT, attnviz_version VARCHAR, torch_version VARCHAR, device VARCHAR, dtype VARCHAR,
       started VARCHAR, updated VARCHAR, finished VARCHAR)""",
    "CREATE TABLE IF NOT EXISTS heads (layer INTEGER, head INTEGER, "
    + ", ".join(f"{name} DOUBLE" for name in METRICS) + ")",
    "CREATE TABLE IF NOT EXISTS sums (layer INTEGER, head INTEGER, "
    + ", ".join(f"{name} DOUBLE" for name in SUMS) + ")",
    "CREATE TABLE IF NOT EXISTS progress (texts_done BIGINT, "
    + ", ".join(f"{name} BIGINT" for name in COUNTS) + ", texts_chain VARCHAR, updated VARCHAR)",
]
SCHEMA = tuple(_SCHEMA)  # the tables, for an atlas written elsewhere (atlas_headvis.import_tree)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _chain(previous: str, text: str) -> str:
    """The next link of the texts' SHA-256 chain: H(previous link, H(text))."""
    return hashlib.sha256((previous + hashlib.sha256(text.encode("utf-8")).hexdigest()).encode("ascii")).hexdigest()


def atlas_path(out_dir: str | Path) -> Path:
    return Path(out_dir) / ATLAS_FILE


def build(model: LoadedModel, texts: Iterable[str], out_dir: str | Path, seq_len: int = SEQ_LEN,
          progress: Callable[[int, int | None], None] | None = None, commit_every: int = COMMIT_EVERY,
          commit_seconds: float = COMMIT_SECONDS,
          threshold: float = INDUCTION_THRESHOLD, examples: bool = False, warmup: int | None = None) -> dict:
    """Build (or resume) the atlas of `model` over `texts` (an iterable read once, one text at a time) in
    `out_dir`; `progress(done, total)` after each text taken (`total` None when `texts` has no length; it may
    raise to stop the build, which keeps what is done). Returns `metrics(out_dir)`.

    `model` is a LoadedModel, measured here (`measure_texts`), or an object with `info` (a ModelInfo) and
    `measure(texts, seq_len, threshold)` yielding each text with its HeadSums in text order, computed elsewhere
    and possibly ahead (attnviz.readouts.atlas_ray's Ray workers); the sums are added, saved and resumed here
    alike.

    `examples`: also sample each head's top examples (attnviz.readouts.atlas_examples), the first `warmup`
    sequences (default `atlas_examples.warmup_size` of the texts' count) fixing the intervals; stored in the same
    transactions, resumed with the sums (a resumed build's sample is the uninterrupted one's). A `measure` computed
    elsewhere is then called with `sampler=` and `first_id=` and yields (text, HeadSums, SequenceExamples or None),
    with the rows of every head the sampler will keep. A build without them leaves what is stored of them as it
    is."""
    import duckdb

    if isinstance(model, LoadedModel):
        measure = partial(measure_texts, model, examples=examples)
    elif callable(getattr(model, "measure", None)):
        measure = model.measure
    else:
        raise ValueError("the atlas takes a self-attention model (attnviz.load's LoadedModel), not a translation model")
    if seq_len < 2:
        raise ValueError(f"seq_len must be >= 2, got {seq_len}")
    if commit_every < 1:
        raise ValueError(f"commit_every must be >= 1, got {commit_every}")
    total = len(texts) if hasattr(texts, "__len__") else None
    info = model.info
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(atlas_path(out_dir)))
    try:
        for statement in _SCHEMA:
            con.execute(statement)
        had_sink = "sink_share" in {row[0] for row in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        con.execute(atlas_causal.SINK_SCHEMA)
        settings = {"model": info.name, "n_layers": info.n_layers, "n_heads": info.n_heads, "seq_len": seq_len,
                    "induction_threshold": float(threshold), "dtype": str(info.dtype)}
        sums, done, chain = _resume(con, settings, model)
        if had_sink or done:
            atlas_causal.load_sink(con, sums, done)  # the sink share's sums (NaN: an atlas from before them)
        sampler = None
        if examples:
            for statement in atlas_examples.Samplers.SCHEMA:
                con.execute(statement)
            sampler = atlas_examples.Samplers.load(
                con, info.n_layers, info.n_heads, atlas_examples.warmup_size(total) if warmup is None else warmup)
            # top-k rows only for the heads that will keep a text (Samplers.keeps; on Ray, each worker's shard's)
            measure = (partial(measure_texts, model, examples=True, sampler=sampler, first_id=done)
                       if isinstance(model, LoadedModel) else partial(model.measure, sampler=sampler, first_id=done))
        saved = done
        stored_chain = chain if done else None
        chain = ""

        def save(finished: bool = False) -> None:
            if finished and sampler is not None and sampler.boundaries is None:
                sampler.set_boundaries()  # a corpus shorter than the warmup
            _save(con, sums, done, chain, finished, sampler)

        start, seen, last_commit = saved, 0, time.monotonic()

        def fresh() -> Iterator[str]:
            """The texts not taken yet (a measure may read ahead of the sums added)."""
            nonlocal chain, seen
            for index, text in enumerate(texts):
                seen = index + 1
                if not isinstance(text, str) or not text.strip():
                    raise ValueError(f"text {index + 1} is empty")
                if index < start:  # taken by the run that stopped: only checked against the chain
                    chain = _chain(chain, text)
                    if index == start - 1 and chain != stored_chain:
                        raise ValueError(f"{atlas_path(out_dir)} was built from other texts (its first {start} "
                                         "differ from these): use another --out, or the same texts")
                    continue
                yield text

        try:
            for text, part, *found in measure(fresh(), seq_len, threshold):
                sums = sums + part
                if sampler is not None and found[0] is not None:
                    sampler.add(done, found[0])  # the sequence id: the text's 0-based index in the corpus
                chain, done = _chain(chain, text), done + 1
                if done % commit_every == 0 and time.monotonic() - last_commit >= commit_seconds:
                    save()
                    saved, last_commit = done, time.monotonic()
                if progress is not None:
                    progress(done, total)
            if seen < saved:
                raise ValueError(f"{atlas_path(out_dir)} was built from {saved} texts, more than these ({seen}): "
                                 "use another --out, or the same texts")
        except BaseException:
            if done > saved:
                try:
                    save()  # what the stopped run took is kept; the error is the caller's
                except Exception:
                    logger.exception("the atlas could not keep the texts taken since its last commit")
            raise
        save(finished=True)
    finally:
        con.close()
    return metrics(out_dir)


def measure_texts(model: LoadedModel, texts: Iterable[str], seq_len: int = SEQ_LEN,
                  threshold: float = INDUCTION_THRESHOLD, examples: bool = False, sampler=None,
                  first_id: int = 0) -> Iterator[tuple]:
    """Each text with its HeadSums, in order, one at a time: tokenized as `LoadedModel.encode` does by default and
    cut at `seq_len` tokens (at most the model's own context), one forward pass each. The one-process build's
    measure, and each Ray worker's (attnviz.readouts.atlas_ray). With `examples`, each comes with its
    atlas_examples.SequenceExamples (tokens decoded one by one, as HeadVis's pipeline shows them), None for a text
    of one token, from the same pass. With a `sampler` (atlas_examples.Samplers) the texts are its sequences
    `first_id`, `first_id + 1`, ... and each must be added to it before the next is measured: only the heads it
    will keep get their top-k rows."""
    cut = min(seq_len, model.context_tokens)
    for index, text in enumerate(texts):
        ids = model.encode(text, max_tokens=cut).ids
        if not examples:
            yield text, sequence_sums(model.module, ids, model.info.device, threshold)
            continue
        keeps = None if sampler is None else sampler.keeps(first_id + index)
        sums, found = atlas_examples.sequence_measures(model.module, ids, model.info.device, threshold, keeps=keeps)
        if found is not None:
            found.tokens = model.tokenizer.decode_batch([[int(i)] for i in ids], skip_special_tokens=False)
        yield text, sums, found


def _resume(con, settings: dict, model: LoadedModel) -> tuple[HeadSums, int, str]:
    """(sums, texts done, chain) stored by an earlier build with the same settings; a new build row otherwise."""
    info = model.info
    row = con.execute(f"SELECT {', '.join(SETTINGS)} FROM build").fetchall()
    if not row:
        import torch

        con.execute("INSERT INTO build VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?, ?, ?, ?, NULL)",
                    [info.name, info.path, info.model_type, info.n_layers, info.n_heads, settings["seq_len"],
                     settings["induction_threshold"], attnviz.__version__, torch.__version__, str(info.device),
                     str(info.dtype), _now(), _now()])
        return HeadSums.zeros(info.n_layers, info.n_heads), 0, ""
    stored = dict(zip(SETTINGS, row[0]))
    if stored != settings:
        different = {key: (stored[key], settings[key]) for key in SETTINGS if stored[key] != settings[key]}
        raise ValueError(f"the atlas there was built with other settings {different} (stored, asked): "
                         "use another --out, or the same model and settings to resume it")
    counts = con.execute(f"SELECT texts_done, {', '.join(COUNTS)}, texts_chain FROM progress").fetchall()
    if not counts:
        return HeadSums.zeros(info.n_layers, info.n_heads), 0, ""
    done, *numbers, chain = counts[0]
    table = con.execute(f"SELECT layer, head, {', '.join(SUMS)} FROM sums").fetchnumpy()
    sums = HeadSums.zeros(info.n_layers, info.n_heads)
    for name in SUMS:
        getattr(sums, name)[table["layer"], table["head"]] = np.asarray(table[name], dtype=np.float64)
    for name, number in zip(COUNTS, numbers):
        setattr(sums, name, int(number))
    return sums, int(done), chain


def _save(con, sums: HeadSums, done: int, chain: str, finished: bool, sampler=None) -> None:
    """The sums, metrics, counts and the build row (and the examples' samplers), in one transaction."""
    n_layers, n_heads = sums.shape
    layer, head = (a.ravel() for a in np.indices((n_layers, n_heads)))
    grids = sums.metrics()
    now = _now()
    con.execute("BEGIN TRANSACTION")
    try:
        con.register("sums_in", {"layer": layer, "head": head, **{name: getattr(sums, name).ravel() for name in SUMS}})
        con.register("heads_in", {"layer": layer, "head": head, **{name: grids[name].ravel() for name in METRICS}})
        con.execute("DELETE FROM sums")
        con.execute(f"INSERT INTO sums SELECT layer, head, {', '.join(SUMS)} FROM sums_in")
        con.execute("DELETE FROM heads")
        nulls = ", ".join(f"CASE WHEN isnan({name}) THEN NULL ELSE {name} END" for name in METRICS)
        con.execute(f"INSERT INTO heads SELECT layer, head, {nulls} FROM heads_in")
        con.execute("DELETE FROM progress")
        con.execute(f"INSERT INTO progress VALUES (?, {', '.join('?' for _ in COUNTS)}, ?, ?)",
                    [done, *(getattr(sums, name) for name in COUNTS), chain, now])
        con.execute("UPDATE build SET n_texts = ?, n_sequences = ?, skipped = ?, updated = ?, finished = ?",
                    [done, sums.sequences, sums.skipped, now, now if finished else None])
        atlas_causal.save_sink(con, sums)
        if sampler is not None:
            sampler.save(con)
            if finished:
                sampler.compact(con)
        con.execute("COMMIT")
        if sampler is not None:
            sampler.committed()
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.unregister("sums_in")
        con.unregister("heads_in")


def metrics(out_dir: str | Path) -> dict:
    """{"model", "n_texts", "n_sequences", "skipped", "seq_len", "complete", "metrics": {name: [layer][head]},
    "relations", "relation_sources", "relation_examples", "sink_share": [layer][head], "causal": {relation: {"grid",
    "n_pairs", "skipped", ...}}, "detectors": {detector: [layer][head]} or None} of the atlas in `out_dir` (a metric
    with no count is None, as in HeadVis's scatter data; "relations" is `probe --json`'s,
    attnviz.readouts.atlas_relations.stored; "sink_share" and "causal" are attnviz.readouts.atlas_causal's,
    "detectors" attnviz.readouts.atlas_detectors')."""
    import duckdb

    path = atlas_path(out_dir)
    if not path.is_file():
        raise ValueError(f"{path}: no atlas there (build one with `atlas build`)")
    con = duckdb.connect(str(path), read_only=True)
    try:
        row = con.execute("SELECT model, n_texts, n_sequences, skipped, seq_len, finished, n_layers, n_heads "
                          "FROM build").fetchall()
        if not row:
            raise ValueError(f"{path}: an atlas with no build row")
        model, n_texts, n_sequences, skipped, seq_len, finished, n_layers, n_heads = row[0]
        table = con.execute(f"SELECT layer, head, {', '.join(METRICS)} FROM heads").fetchnumpy()
        relations = atlas_relations.stored(con)  # {"relations", "relation_sources", "relation_examples"}
        sink_share = atlas_causal.sink_grid(con, n_layers, n_heads)
        causal = atlas_causal.stored_causal(con)
        detectors = atlas_detectors.detector_grids(con)
    finally:
        con.close()
    grids = {}
    for name in METRICS:
        grid: list[list[float | None]] = [[None] * n_heads for _ in range(n_layers)]
        values = np.ma.filled(np.ma.asarray(table[name], dtype=np.float64), np.nan)
        for layer, head, value in zip(table["layer"], table["head"], values):
            grid[int(layer)][int(head)] = None if np.isnan(value) else float(value)
        grids[name] = grid
    return {"model": model, "n_texts": int(n_texts), "n_sequences": int(n_sequences), "skipped": int(skipped),
            "seq_len": int(seq_len), "complete": finished is not None, "metrics": grids, **relations,
            "sink_share": sink_share, "causal": causal, "detectors": detectors}
