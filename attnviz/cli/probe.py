"""The probe command: read items (probe JSONL, built-in sets, CoNLL-U, WinoBias), score every head
of a model on them, and print the JSON of docs/formats.md or a readable table. The Head Finder page calls the
same functions, so both give the same numbers."""

from __future__ import annotations

import json
import sys

from attnviz.analysis import read_item_file, score_model, to_json
from attnviz.probesets import builtin_items


def read_items(probes: str | None = None, conllu: str | None = None, winobias: str | None = None,
               relation: str | None = None) -> list:
    return read_item_set(probes, conllu, winobias, relation)[0]


def read_item_set(probes: str | None = None, conllu: str | None = None, winobias: str | None = None,
                  relation: str | None = None) -> tuple[list, dict | None]:
    """The items, and for a treebank what reading it from its own text left out (the JSON's "treebank")."""
    notes = None
    if probes is not None and probes.split(":")[0] == "builtin":
        items = builtin_items(probes)
    else:
        given = {"probes": probes, "conllu": conllu, "winobias": winobias}
        kind = next((k for k, path in given.items() if path is not None), None)
        if kind is None:
            raise ValueError("give one of --probes, --conllu or --winobias")
        read = read_item_file(kind, given[kind])
        items = read.items
        if kind == "conllu":
            notes = {"sentences": read.sentences, "skipped_arcs": read.skipped_arcs,
                     "text_disagreed": read.disagreed}
    if relation is not None:
        items = [item for item in items if item.relation == relation]
        if not items:
            raise ValueError(f"no items with relation {relation!r}")
    return items, notes


def format_table(result: dict) -> str:
    """A readable summary: per relation, the best head of each direction against the baselines.

    `scorable` is the number of items a head can get right in that direction (fewer than n for a causal
    model, which cannot look ahead); a direction with none says so instead of naming a best head."""
    rule = "sink-aware (word 0 is no candidate)" if result.get("sink_aware") else "default"
    treebank = result.get("treebank")
    lines = [f"model: {result['model']}  scoring: {rule}"]
    if treebank:
        lines.append(f"treebank: {treebank['sentences']} sentences read from their own text; "
                     f"{treebank['skipped_arcs']} arcs inside a multi-word token skipped; # text disagreed with "
                     f"the forms in {treebank['text_disagreed']} (their forms joined instead)")
    lines.append(f"{'relation':18s} {'n':>6s} {'skip':>5s} {'scorable':>8s}  {'direction':17s} {'best head':>9s}"
                 f" {'acc':>6s} {'offset':>6s} {'off.acc':>7s} {'first':>6s}")
    for relation, block in result["relations"].items():
        for direction in ("source_to_target", "target_to_source"):
            best, base = block["best"][direction], block["baselines"][direction]
            scorable = block.get("n_scorable", {}).get(direction, block["n"])
            head = f"L{best['layer']}H{best['head']}" if best else "-"
            row = f"{relation:18s} {block['n']:6d} {block['n_skipped']:5d} {scorable:8d}  {direction:17s} "
            if block["n"] > 0 and scorable == 0:
                lines.append(row + "impossible for a causal model (the gold word never precedes the read word)")
                continue
            lines.append(
                row + f"{head:>9s} {_pct(best and best['accuracy']):>6s} {_offset(base['best_offset']):>6s} "
                f"{_pct(base['best_offset_accuracy']):>7s} {_pct(base['first_word_accuracy']):>6s}"
            )
    return "\n".join(lines)


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _offset(value) -> str:
    return "-" if value is None else f"{value:+d}"


def run_probe_command(args) -> int:
    import attnviz

    if getattr(args, "sep", None) is not None:
        sys.stderr.write("note: --sep is no longer used; a treebank is read from its own text\n")
    items, notes = read_item_set(args.probes, args.conllu, args.winobias, args.relation)
    model = attnviz.load(args.model)
    sink_aware = bool(getattr(args, "sink_aware", False))
    scores = score_model(model, items, batch_size=args.batch_size, progress=_progress_bar(len(items)),
                         sink_aware=sink_aware)
    result = to_json(args.model, scores, sink_aware=sink_aware)
    if notes is not None:
        result["treebank"] = notes
    print(json.dumps(result) if args.json else format_table(result))
    return 0


def _progress_bar(n_items: int):
    """A one-line progress bar on stderr (stdout stays clean for --json)."""
    def show(done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} sentences ({n_items} items)")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show
