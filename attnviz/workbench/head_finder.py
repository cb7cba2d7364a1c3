"""The Head Finder's computations: every head scored on a set of probe items (analysis.score_model, the
numbers of `python -m attnviz probe`), and the traces of the examples it shows, both under the budget."""

from __future__ import annotations

import contextlib
import hashlib
import json

from attnviz.analysis import detect_format, parse_item_file, score_model, scoring_peak_bytes, to_json
from attnviz.analysis.conllu import parse_card_treebank
from attnviz.workbench.shared import Workbench
from attnviz.workbench.traces import TRACE_OVERHEAD, nbytes, trace_bytes

# Memory one scoring batch may take: texts are batched by length, so the batch size follows the longest.
BATCH_BYTES = 200_000_000
EXAMPLE_BATCH = 8  # example traces run at once


def shared_key(name: str, builtin: str, relation: str, sink_aware: bool) -> tuple:
    """The views-store key of a built-in set's scores: one per model, set, relation and rule, for every visitor."""
    return ("finder_builtin", name, builtin, relation, bool(sink_aware))


def shared_score(bench: Workbench, name: str, builtin: str, relation: str, sink_aware: bool = False) -> dict | None:
    """A built-in set's scores some visitor has already computed (`score(..., builtin=...)`), else None."""
    return bench.views.get(shared_key(name, builtin, relation, sink_aware))


def score(bench: Workbench, model, name: str, items, relation: str, sink_aware: bool = False,
          progress=None, builtin: str | None = None) -> dict:
    """The docs/formats.md JSON block of this relation; the caller holds the heavy-work slot. With
    `builtin` (the built-in set's name, "builtin:zh"), the block is kept in the views store and shared: the same
    items give the same scores for every visitor, and SmolLM2 took 10-31 s a relation on each request."""
    if builtin is not None:
        held = shared_score(bench, name, builtin, relation, sink_aware)
        if held is None:
            held = score(bench, model, name, items, relation, sink_aware, progress)
            bench.views.put(shared_key(name, builtin, relation, sink_aware), held, 4 * len(json.dumps(held)) + 1_000)
        return held
    texts = sorted({item.text for item in items}, key=len)
    longest = max(len(e.ids) for e in model.encode_batch(texts[-8:]))  # sorted by characters
    per_text = trace_bytes(model, longest) - TRACE_OVERHEAD  # the overhead is paid once a batch
    batch_size = max(1, min(32, BATCH_BYTES // per_text))
    # A batch's traces, and scoring its largest trace (they are scored one after another).
    words = max(len(item.words) for item in items)
    need = max(BATCH_BYTES, trace_bytes(model, longest, batch_size)) + scoring_peak_bytes(
        model.info.n_layers, model.info.n_heads, longest, words)
    with bench.reserve(need, keep_model=name):
        scores = score_model(model, items, batch_size=batch_size, progress=progress, sink_aware=sink_aware)
    return to_json(name, scores)["relations"][relation]


# Bytes of parsing an upload per byte of its file: the peak while parsing (the decoded text, the lines, the
# items), and what the items hold afterwards (words as Python strings, spans). VmHWM measured 18.8 for a
# 5 MB CoNLL-U file of 172,000 arcs (tests/workbench/test_workbench.py), 21.3 since a treebank is read from its own
# text (each sentence's text and word spans are made while parsing).
PARSE_BYTES_PER_BYTE, PARSED_BYTES_PER_BYTE = 24, 20


DETECT_PREFIX_BYTES = 65_536  # a format is told from the file's first lines: no need to decode all 20 MB


def detected_format(name: str, data: bytes) -> str:
    """analysis.detect_format on the file's first DETECT_PREFIX_BYTES (cut at a line end): the whole of a
    20 MB upload of comment lines, decoded and split on every rerun, took 360 MB outside the budget."""
    prefix = data[:DETECT_PREFIX_BYTES]
    if len(data) > DETECT_PREFIX_BYTES and b"\n" in prefix:
        prefix = prefix[:prefix.rindex(b"\n") + 1]
    return detect_format(name, prefix)


def parsed_file(bench: Workbench, kind: str, data: bytes, name: str, card: bool = False):
    """An upload's items and what reading them left out (analysis.parse_item_file), parsed once per content,
    under the budget, and shared: the page reruns on every click, and a large file was parsed again each
    time. A file that does not parse raises each time. `card`: a replication card's treebank (kind "conllu"),
    held to the card's tighter bounds (analysis.conllu.parse_card_treebank)."""
    def parse():
        with bench.reserve(PARSE_BYTES_PER_BYTE * len(data)):
            return parse_card_treebank(data, name) if card else parse_item_file(kind, data, name)

    key = ("parsed", hashlib.sha256(data).hexdigest(), "card" if card else kind)
    return bench.shared_value(key, parse, lambda parsed: PARSED_BYTES_PER_BYTE * len(data) + 1_000)


def example_traces(bench: Workbench, model, name: str, items, hold=contextlib.nullcontext) -> list:
    """Float32 traces of the example items (the precision they were scored in, so an example's verdict is the
    score's), run in small batches under the budget and shared through the trace store. `hold()` is entered
    only when some must be run (the page's heavy-work slot)."""
    traces, missing = {}, []
    for item in items:
        held = bench.traces.get(("example", name, item.text))
        if held is None:
            missing.append(item.text)
        else:
            traces[item.text] = held
    missing = list(dict.fromkeys(missing))
    if missing:
        with hold():
            _run_examples(bench, model, name, missing, traces)
    return [traces[item.text] for item in items]


def _run_examples(bench: Workbench, model, name: str, missing: list[str], traces: dict) -> None:
    for start in range(0, len(missing), EXAMPLE_BATCH):
        batch = missing[start:start + EXAMPLE_BATCH]
        longest = max(len(e.ids) for e in model.encode_batch(batch))
        # the padded float32 batch and the per-text slices cut from it
        with bench.reserve(trace_bytes(model, longest, 2 * len(batch)), keep_model=name):
            for text, held in zip(batch, model.run_batch(batch)):
                held.attentions.setflags(write=False)
                bench.traces.put(("example", name, text), held, nbytes(held))
                traces[text] = held
