"""Trace exports: NPZ (full precision), JSON (rounded for reading), one head as CSV."""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from attnviz.trace import AttentionTrace, ReducedTrace


def token_fields(trace: AttentionTrace | ReducedTrace) -> dict[str, np.ndarray]:
    """The token and word fields both traces share, as NPZ arrays (a word index of -1: no word)."""
    return {
        "input_ids": np.asarray(trace.input_ids),
        "tokens": np.asarray(trace.tokens, dtype=str),
        "offsets": np.asarray(trace.offsets, dtype=np.int64).reshape(-1, 2),
        "kv_group": np.asarray(trace.kv_group),
        "words": np.asarray(trace.words, dtype=str),
        "word_of_token": np.asarray([-1 if w is None else w for w in trace.word_of_token]),
    }


def trace_npz(trace: AttentionTrace) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, attentions=trace.attentions, **token_fields(trace))
    return buffer.getvalue()


def reduced_npz(trace: ReducedTrace) -> bytes:
    """A long text's reduced trace as NPZ: `tiles_<view>` [L, H, t, s] (the pooled mosaic tiles of each view,
    `tile` cells a side), `statistics_<name>` [L, H] (the head profile's sums), `argmax` [L, H, T] (each row's
    strongest key) and the token fields. Not the queries and keys (190 MB at 4,096 SmolLM2 tokens, what any
    head's map is recomputed from): `LoadedModel.run_reduced` in the Python API returns them."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, tile=np.asarray(trace.tile), argmax=trace.argmax,
                        **{f"tiles_{name}": tiles for name, tiles in trace.tiles.items()},
                        **{f"statistics_{name}": values for name, values in trace.statistics.items()},
                        **token_fields(trace))
    return buffer.getvalue()


def reduced_npz_bytes(trace: ReducedTrace) -> int:
    """Peak bytes of building reduced_npz beside the trace: the compressed buffer as it grows and its copy,
    each at most the arrays' own size (argmax, tiles, statistics; the token fields are small)."""
    arrays = [trace.argmax, *trace.tiles.values(), *trace.statistics.values()]
    return 2 * sum(a.nbytes for a in arrays) + 64 * len(trace.tokens)


def trace_json(trace: AttentionTrace, decimals: int = 4) -> str:
    """The trace as JSON, attentions rounded to `decimals`. Written one head at a time: the text is the same
    as json.dumps of the whole rounded array, without that array's Python floats (about 32 bytes a cell,
    4 GB for a 512-token SmolLM2 trace)."""
    head = json.dumps({
        "model": trace.metadata.get("model"),
        "texts": list(trace.texts),
        "tokens": trace.tokens,
        "offsets": [list(o) for o in trace.offsets],
        "sequence_ids": trace.sequence_ids,
        "input_ids": trace.input_ids,
        "words": trace.words,
        "word_of_token": trace.word_of_token,
        "kv_group": trace.kv_group,
        "truncated": trace.truncated,
        "attentions": None,
    }, ensure_ascii=False)
    pieces = [head[:-len("null}")], "["]
    for index, layer in enumerate(trace.attentions):
        heads = ", ".join(json.dumps(np.round(head_map.astype(np.float64), decimals).tolist()) for head_map in layer)
        pieces += [", [" if index else "[", heads, "]"]
    return "".join([*pieces, "]}"])


# A spreadsheet reads a cell starting with one of these as a formula (CSV injection, OWASP).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_text(cell: str) -> str:
    """A text cell a spreadsheet shows as text: one starting with a formula character gets a leading
    `'` (OWASP's advice). Only for text (token labels): the exporter's own numbers, -0.5 say, stay numbers."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def head_csv(matrix: np.ndarray, labels: list[str]) -> str:
    """Rows attend to columns; the first column and the header hold the labels (neutralised by
    `csv_text`, since tokens come from visitors' text)."""
    out = io.StringIO()
    writer = csv.writer(out)
    shown = [csv_text(str(label)) for label in labels]
    writer.writerow(["from \\ to", *shown])
    for label, row in zip(shown, np.asarray(matrix)):
        writer.writerow([label, *(f"{v:.6g}" for v in row)])
    return out.getvalue()
