"""HeadVis's data tree both ways (issue 37, item 4): `export` writes an atlas as the tree HeadVis's pipeline
(neuronpedia's `headvis/compute-head-metrics.py`) writes for its frontend; `import_tree` reads such a tree into an
atlas folder, so that a published atlas can be read (`atlas.metrics`) beside ours.

The tree (field names and nesting as that pipeline writes them):

- `config.json`: model_name, np_model_id, dataset_name, heads [[l, h]], n_layers, n_heads, n_intervals, metrics,
  metric_descriptions, head_data_pattern "L{layer}H{head}.json", has_umap, umap_heads, custom_plots,
  custom_tables, statistics_display, pipeline_config (ours: the build row and the sampler's settings);
- `scatter_data.json`: [{layer, head, <six metrics rounded to 4 decimals, null where not finite>}];
- `heads/L{l}H{h}.json`: sequences [{sequence_id, interval (1 lowest), tokens, attention_indices (q * seq_len +
  k), attention_values, seq_len, max_activation}], qk_distance_histogram {bin_edges, bin_values: the kept COO's
  mass per |q - k| bin}, top_query_tokens / top_key_tokens [{token, weight}] (the kept COO's mass per token,
  50 a side), histogram {bin_edges, bin_values: the count of sequences per bin of their max}, statistics
  {n_samples, mean_max_activation};
- `server_config.json` and `attributions/manifest.json`, both `{}` (the static-only stubs).

Reading a tree: every file is read whole within a byte limit (attnviz.analysis.lines.read_bytes), parsed as JSON
only (nothing is executed or unpickled), and checked; a malformed file is refused with its path and, for a JSON
syntax error, its line and column.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

import attnviz
from attnviz.analysis.lines import read_bytes
from attnviz.readouts import atlas
from attnviz.readouts.atlas_examples import MAX_BINS, N_INTERVALS, QK_DISTANCE_EDGES, Samplers
from attnviz.readouts.atlas_head import top
from attnviz.readouts.atlas_metrics import INDUCTION_THRESHOLD, METRICS
from attnviz.readouts.atlas_store import insert_rows

CONFIG_BYTES = 16 * 2**20
TREE_FILE_BYTES = 256 * 2**20
DESCRIPTIONS = {
    "self_attention_score": "Mean attention from each query position to itself (the diagonal).",
    "prev_token_score": "Mean attention to the immediately preceding position.",
    "pattern_entropy": "Mean Shannon entropy of each attention row.",
    "qk_distance": "Mean |q - k| weighted by attention.",
    "qk_distance_variance": "Variance of |q - k| weighted by attention.",
    "induction_score": "Mean attention from a repeated token to the position after its earlier occurrence.",
}


def _round(value) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 4)


def _dump(path: Path, payload, indent=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=indent) + "\n", encoding="utf-8")


def export(atlas_dir: str | Path, out: str | Path) -> Path:
    """Write the atlas in `atlas_dir` as HeadVis's tree in `out` (module docstring); returns `out`."""
    import duckdb

    shown = atlas.metrics(atlas_dir)  # refuses a folder with no atlas
    con = duckdb.connect(str(atlas.atlas_path(atlas_dir)), read_only=True)
    try:
        values = con.execute("SELECT * FROM build").fetchone()
        build_row = dict(zip([d[0] for d in con.description], values))
        n_layers, n_heads, seq_len = build_row["n_layers"], build_row["n_heads"], build_row["seq_len"]
        threshold = build_row["induction_threshold"]
        tables = {name for (name,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        sampler = Samplers.load(con, n_layers, n_heads, 1) if "example_settings" in tables else None
    finally:
        con.close()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [{"layer": layer, "head": head, **{name: _round(shown["metrics"][name][layer][head]) for name in METRICS}}
            for layer in range(n_layers) for head in range(n_heads)]
    _dump(out / "scatter_data.json", rows)
    for layer in range(n_layers):
        for head in range(n_heads):
            _dump(out / "heads" / f"L{layer}H{head}.json", _head(sampler, layer, head))
    _dump(out / "server_config.json", {})
    _dump(out / "attributions" / "manifest.json", {})
    n_intervals = sampler.n_intervals if sampler is not None else N_INTERVALS
    pipeline = {key: (str(value) if value is not None and not isinstance(value, (int, float, str)) else value)
                for key, value in build_row.items()}
    pipeline.update(producer=f"attnviz {attnviz.__version__}", seq_len=seq_len, induction_attention_threshold=threshold,
                    actual_sequences_processed=shown["n_sequences"], num_hidden_layers=n_layers,
                    num_attention_heads=n_heads)
    if sampler is not None:
        pipeline.update(n_intervals=n_intervals, samples_per_interval=sampler.per_interval,
                        samples_per_top_interval=sampler.per_top, sample_seed=sampler.seed,
                        warmup_size=sampler.warmup)
    config = {
        "model_name": shown["model"], "np_model_id": Path(str(shown["model"])).name, "dataset_name": "attnviz-atlas",
        "heads": [[layer, head] for layer in range(n_layers) for head in range(n_heads)],
        "n_layers": n_layers, "n_heads": n_heads, "n_intervals": n_intervals, "metrics": list(METRICS),
        "metric_descriptions": dict(DESCRIPTIONS), "head_data_pattern": "L{layer}H{head}.json",
        "has_umap": False, "umap_heads": [],
        "custom_plots": [{"key": "qk_distance_histogram", "label": "Q-K distance"},
                         {"key": "histogram", "label": "Activation distribution"}],
        "custom_tables": [{"key": "top_query_tokens", "label": "Top query tokens"},
                          {"key": "top_key_tokens", "label": "Top key tokens"}],
        "statistics_display": {"n_samples": {"label": "Samples kept", "format": "default"},
                               "mean_max_activation": {"label": "Mean max activation", "format": "default"}},
        "pipeline_config": pipeline,
    }
    _dump(out / "config.json", config, indent=2)
    return out


def _head(sampler: Samplers | None, layer: int, head: int) -> dict:
    """One head's `heads/L{l}H{h}.json` payload."""
    sequences = []
    if sampler is not None:
        for interval, e in sampler.examples(layer, head):
            sequences.append({"sequence_id": e.sequence_id, "interval": interval,
                              "tokens": sampler.tokens[e.sequence_id],
                              "attention_indices": [int(i) for i in e.indices],
                              "attention_values": [float(v) for v in e.values], "seq_len": e.seq_len,
                              "max_activation": _round(e.max)})
    mass = [0.0] * (len(QK_DISTANCE_EDGES) - 1)
    sides: dict[str, dict[str, float]] = {"query": defaultdict(float), "key": defaultdict(float)}
    for s in sequences:
        for flat, value in zip(s["attention_indices"], s["attention_values"]):
            q, k = divmod(flat, s["seq_len"])
            at = int(np.searchsorted(QK_DISTANCE_EDGES, abs(q - k), side="right")) - 1
            if 0 <= at < len(mass):
                mass[at] += value
            sides["query"][s["tokens"][q]] += value
            sides["key"][s["tokens"][k]] += value
    counts = sampler.max_counts[layer, head].tolist() if sampler is not None else [0] * MAX_BINS
    n_max = sampler.n_max if sampler is not None else 0
    mean = float(sampler.max_sum[layer, head] / n_max) if n_max else None
    return {
        "sequences": sequences,
        "qk_distance_histogram": {"bin_edges": list(QK_DISTANCE_EDGES), "bin_values": [round(v, 4) for v in mass]},
        "top_query_tokens": _top(sides["query"]),
        "top_key_tokens": _top(sides["key"]),
        "histogram": {"bin_edges": [round(float(e), 4) for e in np.linspace(0.0, 1.0, MAX_BINS + 1)],
                      "bin_values": [int(c) for c in counts]},
        "statistics": {"n_samples": len(sequences), "mean_max_activation": _round(mean)},
    }


def _top(weights: dict[str, float]) -> list[dict]:
    return [{"token": token, "weight": weight} for token, weight in top(weights)]  # stable: first seen first


# Reading a tree.

def _load(path: Path, limit: int = TREE_FILE_BYTES):
    if not path.is_file():
        raise ValueError(f"{path}: missing (not a HeadVis tree?)")
    data = read_bytes(path, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}, line {e.lineno}, column {e.colno}: {e.msg}") from None


def _check(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise ValueError(f"{where}: {message}")


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def read_tree(tree: str | Path) -> dict:
    """{"config", "scatter": {(layer, head): {metric: value}}, "heads": {(layer, head): payload}} of a HeadVis
    tree, checked (module docstring); a head file that is absent is left out."""
    tree = Path(tree)
    config = _load(tree / "config.json", CONFIG_BYTES)
    where = str(tree / "config.json")
    _check(isinstance(config, dict), where, "not a JSON object")
    for key in ("n_layers", "n_heads"):
        _check(_int(config.get(key)) and config[key] >= 1, where, f'"{key}" is not a positive integer')
    n_layers, n_heads = config["n_layers"], config["n_heads"]
    pattern = config.get("head_data_pattern", "L{layer}H{head}.json")
    _check(pattern == "L{layer}H{head}.json", where, f"head_data_pattern {pattern!r} is not L{{layer}}H{{head}}.json")
    rows = _load(tree / "scatter_data.json")
    where = str(tree / "scatter_data.json")
    _check(isinstance(rows, list), where, "not a JSON list")
    scatter = {}
    for n, row in enumerate(rows):
        at = f"{where}, row {n}"
        _check(isinstance(row, dict), at, "not a JSON object")
        layer, head = row.get("layer"), row.get("head")
        _check(_int(layer) and 0 <= layer < n_layers and _int(head) and 0 <= head < n_heads, at,
               f"layer {layer!r}, head {head!r} not in the config's {n_layers} x {n_heads}")
        _check((layer, head) not in scatter, at, f"layer {layer}, head {head} given twice")
        for name in METRICS:
            _check(_number(row.get(name)), at, f'"{name}" is not a number or null')
        scatter[layer, head] = {name: row.get(name) for name in METRICS}
    heads = {}
    for layer in range(n_layers):
        for head in range(n_heads):
            path = tree / "heads" / f"L{layer}H{head}.json"
            if path.is_file():
                heads[layer, head] = _head_payload(_load(path), str(path))
    return {"config": config, "scatter": scatter, "heads": heads}


def _head_payload(payload, where: str) -> dict:
    _check(isinstance(payload, dict), where, "not a JSON object")
    sequences = payload.get("sequences", [])
    _check(isinstance(sequences, list), where, '"sequences" is not a list')
    for n, s in enumerate(sequences):
        at = f"{where}, sequence {n}"
        _check(isinstance(s, dict), at, "not a JSON object")
        _check(_int(s.get("seq_len")) and s["seq_len"] >= 1, at, '"seq_len" is not a positive integer')
        _check(_int(s.get("interval")), at, '"interval" is not an integer')
        tokens, indices, values = s.get("tokens"), s.get("attention_indices"), s.get("attention_values")
        _check(isinstance(tokens, list) and all(isinstance(t, str) for t in tokens), at,
               '"tokens" is not a list of strings')
        _check(isinstance(indices, list) and all(_int(i) and 0 <= i < s["seq_len"] ** 2 for i in indices), at,
               '"attention_indices" is not a list of indices below seq_len^2')
        _check(isinstance(values, list) and len(values) == len(indices)
               and all(_number(v) and v is not None for v in values), at,
               '"attention_values" is not a list of numbers as long as "attention_indices"')
    return payload


def _histogram_row(layer: int, head: int, payload: dict) -> list | None:
    """A head's `max_histogram` row from its tree's `histogram` (the count of sequences per bin of their max) and
    `statistics.mean_max_activation`; None where the tree has no well-formed one (it is shown, not needed)."""
    histogram = payload.get("histogram")
    if not isinstance(histogram, dict):
        return None
    edges, counts = histogram.get("bin_edges"), histogram.get("bin_values")
    if not (isinstance(edges, list) and isinstance(counts, list) and len(edges) == len(counts) + 1 and counts
            and all(_number(e) and e is not None for e in edges)
            and all(_number(c) and c is not None and c >= 0 and float(c).is_integer() for c in counts)):
        return None
    n = int(sum(counts))
    statistics = payload.get("statistics")
    mean = statistics.get("mean_max_activation") if isinstance(statistics, dict) else None
    max_sum = float(mean) * n if _number(mean) and mean is not None else None
    return [layer, head, [float(e) for e in edges], [int(c) for c in counts], max_sum, n]


def import_tree(tree: str | Path, out_dir: str | Path) -> dict:
    """Read the HeadVis tree `tree` into a new atlas folder `out_dir` (its metrics in `heads`, its sequences in
    `examples` and `sequences`, each head's max histogram, where well-formed, in `max_histogram`); returns
    `atlas.metrics(out_dir)`. The folder must not hold an atlas yet."""
    import duckdb

    read = read_tree(tree)
    config = read["config"]
    path = atlas.atlas_path(out_dir)
    if path.exists():
        raise ValueError(f"{path} exists: import into a new folder")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    pipeline = config.get("pipeline_config") if isinstance(config.get("pipeline_config"), dict) else {}

    def setting(key, default, kind):
        value = pipeline.get(key, default)
        return value if isinstance(value, kind) and not isinstance(value, bool) else default

    n_layers, n_heads = config["n_layers"], config["n_heads"]
    n_seq = setting("actual_sequences_processed", 0, int)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    con = duckdb.connect(str(path))
    try:
        for statement in [*atlas.SCHEMA, *Samplers.SCHEMA]:
            con.execute(statement)
        con.execute("BEGIN TRANSACTION")
        con.execute("INSERT INTO build VALUES (?, ?, 'headvis', ?, ?, ?, ?, ?, ?, 0, ?, NULL, ?, ?, ?, ?, ?)",
                    [str(config.get("model_name", "")), str(Path(tree).resolve()), n_layers, n_heads,
                     setting("seq_len", 0, int), float(setting("induction_attention_threshold", INDUCTION_THRESHOLD,
                                                               (int, float))),
                     n_seq, n_seq, f"attnviz {attnviz.__version__} (imported)", str(setting("device", "", str)),
                     str(setting("dtype", "", str)), now, now, now])
        insert_rows(con, "heads", [[layer, head, *(None if values[name] is None else float(values[name])
                                                   for name in METRICS)]
                                   for (layer, head), values in sorted(read["scatter"].items())])
        tokens_of: dict[tuple, int] = {}
        rows = []
        for (layer, head), payload in sorted(read["heads"].items()):
            for position, s in enumerate(payload.get("sequences", [])):
                key = tuple(s["tokens"])
                sid = tokens_of.setdefault(key, len(tokens_of))
                rows.append([layer, head, s["interval"], sid, s.get("max_activation") if _number(
                    s.get("max_activation")) else None, s["attention_indices"], [float(v) for v in
                                                                                s["attention_values"]],
                             s["seq_len"], position])
        insert_rows(con, "examples", rows)
        insert_rows(con, "sequences", [[sid, list(key)] for key, sid in tokens_of.items()])
        histograms = [_histogram_row(layer, head, payload) for (layer, head), payload in sorted(read["heads"].items())]
        insert_rows(con, "max_histogram", [row for row in histograms if row is not None])
        con.execute("COMMIT")
    finally:
        con.close()
    return atlas.metrics(out_dir)


def import_into_place(tree: str | Path, folder: str | Path) -> dict:
    """`import_tree` into `folder`, replacing the atlas there, never half: the import is written into
    `<folder>.partial` (one left by an import stopped part way is removed first) and renamed into place, so a
    page reading `folder` sees the old atlas or the new one. Returns the new one's `atlas.metrics`."""
    import os
    import shutil

    folder = Path(folder)
    partial, old = folder.with_name(folder.name + ".partial"), folder.with_name(folder.name + ".old")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        import_tree(tree, partial)  # a malformed tree is refused here, before the atlas in place is touched
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if folder.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(folder, old)
    os.replace(partial, folder)
    shutil.rmtree(old, ignore_errors=True)
    return atlas.metrics(folder)
