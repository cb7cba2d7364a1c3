"""`python -m attnviz atlas build | metrics | export | import`: a head atlas over a corpus (attnviz.readouts.atlas):
HeadVis's six metrics of every head from one streaming pass, kept in `DIR/atlas.duckdb`, resumable; `metrics` prints
them; `export` and `import` write and read HeadVis's data tree (`import --for-model SOURCE`: as the published atlas
the Atlas page shows beside the model's own, attnviz.readouts.atlas_folders)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attnviz
from attnviz.analysis.lines import Lines, base_name, json_object, opened, require
from attnviz.cli.arguments import int_at_least

# attnviz.readouts.atlas (duckdb, torch) is imported inside run(): `python -m attnviz` loads torch only for a
# command that needs it (tests/cli/test_package.py).
SEQ_LEN = 512  # HeadVis's default --seq-len (attnviz.readouts.atlas.SEQ_LEN)
DTYPES = ("float32", "bfloat16")


_seq_len = int_at_least(2)  # one token has no pair of positions


def add_parser(commands) -> None:
    atlas = commands.add_parser("atlas", help="a head atlas over a corpus: HeadVis's six metrics of every head, "
                                              "stored in DuckDB, resumable")
    actions = atlas.add_subparsers(dest="atlas_command", required=True)
    build = actions.add_parser("build", help="build (or resume) an atlas")
    build.add_argument("--model", required=True)
    build.add_argument("--texts", help="a UTF-8 file: one text a line, or JSONL (a .jsonl file) with a \"text\" "
                                      "field (default: the sentences of --conllu, --winobias, --probes)")
    build.add_argument("--conllu", help="a UD treebank: every head's accuracy per relation (as probe --conllu)")
    build.add_argument("--winobias", help="WinoBias-format lines: coreference (as probe --winobias)")
    build.add_argument("--probes", help="probe JSONL or builtin[:en|:zh] (as probe --probes)")
    build.add_argument("--sink-aware", action="store_true", help="the relations' sink-aware rule (as probe)")
    build.add_argument("--pairs", choices=("builtin",), default=None,
                       help="each head's causal weight: its mean activation-patching effect over the built-in "
                            "agreement and coreference minimal pairs (decoders with an LM head; others are "
                            "skipped with the reason)")
    build.add_argument("--out", required=True, help="the atlas folder (DIR/atlas.duckdb); run again to resume")
    build.add_argument("--seq-len", type=_seq_len, default=SEQ_LEN,
                       help="cut each text at this many tokens (default 512, as HeadVis)")
    build.add_argument("--dtype", choices=DTYPES, default="float32",
                       help="the model's weights and activations (default float32, at which the metrics equal HF "
                            "eager's to 1e-5; bfloat16, HeadVis's pipeline's default, runs the linear layers "
                            "about three times faster on CPUs with AMX and on GPUs; its metrics drift, see "
                            "docs/cli.md)")
    build.add_argument("--workers", type=int_at_least(1), default=1,
                       help="measure the texts on N Ray workers, each loading the model once (default 1: this "
                            "process, no Ray); needs the ray extra: pip install \"attnviz[ray]\"")
    build.add_argument("--ray-address", default=None, metavar="ADDR",
                       help="join the Ray cluster at ADDR (HOST:6379 from a node of it; default: a local Ray of "
                            "--workers CPUs)")
    build.add_argument("--no-detectors", action="store_true",
                       help="do not compute each head's detector scores (previous-token, duplicate-token, "
                            "induction on repeated random tokens, as `heads`)")
    build.add_argument("--no-examples", action="store_true",
                       help="do not sample each head's top examples (HeadVis's intervals)")
    export = actions.add_parser("export", help="write an atlas as HeadVis's data tree, or its tables as Parquet")
    export.add_argument("--atlas", required=True, help="the atlas folder")
    to = export.add_mutually_exclusive_group(required=True)
    to.add_argument("--headvis", help="the tree's folder (config.json, scatter_data.json, heads/)")
    to.add_argument("--parquet", help="a folder: one <table>.parquet per table of the atlas")
    imported = actions.add_parser("import", help="read a HeadVis data tree into an atlas folder")
    imported.add_argument("--headvis", required=True, help="the tree's folder")
    into = imported.add_mutually_exclusive_group(required=True)
    into.add_argument("--out", help="a new atlas folder")
    into.add_argument("--for-model", metavar="SOURCE",
                      help="the published atlas of SOURCE (a model as the app loads it) that the Atlas page shows "
                           "beside its own: written into the app's atlas folder (ATTNVIZ_ATLAS_DIR, else atlas/ in "
                           "the model cache's folder), replacing the one there")
    shown = actions.add_parser("metrics", help="print an atlas's metrics")
    shown.add_argument("--atlas", required=True, help="the atlas folder")
    shown.add_argument("--json", action="store_true", help="print {model, n_texts, metrics: {name: [layer][head]}, "
                                                         "relations: probe --json's relations, ...}")


def corpus_texts(path: str | Path) -> Iterator[str]:
    """The texts of a file, one at a time, read as a stream within `Lines`' limits: a .jsonl file's objects'
    "text" fields (blank ones left out, as HeadVis's pipeline leaves them), any other file's non-empty lines,
    stripped."""
    name, jsonl = base_name(path), str(path).lower().endswith(".jsonl")
    with opened(path) as f:
        lines = Lines(f, name)
        with lines.guard():
            for number, line in lines:
                if not line.strip():
                    continue
                if not jsonl:
                    yield line.strip()
                    continue
                text = json_object(line, f"{name}, line {number}", ("text",))["text"]
                require(isinstance(text, str), f"{name}, line {number}: \"text\" is not a string")
                if text.strip():
                    yield text


def run(args) -> int:
    if args.atlas_command == "metrics":
        return _metrics(args)
    if args.atlas_command in ("export", "import"):
        from attnviz.readouts import atlas_headvis

        if args.atlas_command == "export" and args.parquet:
            from attnviz.readouts import atlas, atlas_store

            database = atlas.atlas_path(args.atlas)
            if not database.is_file():
                raise ValueError(f"{args.atlas}: no atlas there (build one with `atlas build`)")
            written = atlas_store.export_parquet(database, args.parquet)
            print(f"wrote {len(written)} tables to {args.parquet}", file=sys.stderr)
        elif args.atlas_command == "export":
            print(f"wrote {atlas_headvis.export(args.atlas, args.headvis)}", file=sys.stderr)
        elif args.out is not None:
            result = atlas_headvis.import_tree(args.headvis, args.out)
            print(f"imported {result['model']} into {args.out}", file=sys.stderr)
        else:
            from attnviz.readouts.atlas_folders import published_folder_for

            folder = published_folder_for(args.for_model)
            result = atlas_headvis.import_into_place(args.headvis, folder)
            print(f"imported {result['model']} into {folder}: the Atlas page shows it beside the atlas of "
                  f"{args.for_model}", file=sys.stderr)
        return 0
    from attnviz.readouts import atlas, atlas_examples, atlas_relations

    # the relation files read, and the texts file checked whole, before the model loads
    sources = atlas_relations.read_sources(args.conllu, args.winobias, args.probes)
    if args.texts is None and not sources:
        raise ValueError("give --texts, or a relation file (--conllu, --winobias, --probes) whose sentences are read")
    total = sum(1 for _ in _corpus(args, sources))
    if not total:
        raise ValueError(f"{args.texts} has no texts" if args.texts is not None else "the relation files have no items")
    if args.workers > 1 or args.ray_address:
        _build_on_ray(args, total, sources)
        if not (sources or args.pairs or not args.no_detectors):
            return 0
        # the relations, the causal weight and the detectors run here, on one model loaded once for them all
        print(f"loading {args.model} for the relations, the causal weight and the detectors ...", file=sys.stderr)
        model = attnviz.load(args.model, dtype=args.dtype)
    else:
        start = time.perf_counter()
        print(f"loading {args.model} ...", file=sys.stderr)
        model = attnviz.load(args.model, dtype=args.dtype)
        loaded = time.perf_counter()
        result = atlas.build(model, _corpus(args, sources), args.out, seq_len=args.seq_len,
                             progress=lambda done, _total: _show_count("texts", done, total),
                             examples=not args.no_examples, warmup=atlas_examples.warmup_size(total))
        print(f"load {loaded - start:.1f} s, texts {time.perf_counter() - loaded:.1f} s; {result['n_texts']} texts "
              f"({result['skipped']} of one token left out) in {atlas.atlas_path(args.out)}", file=sys.stderr)
    if sources:
        _relations(args, sources, model)
    if args.pairs:
        _causal(args, model)
    if not args.no_detectors:
        _detectors(args, model)
    return 0


def _detectors(args, model) -> None:
    """Each head's detector scores (attnviz.readouts.atlas_detectors), kept where the same settings are stored."""
    from attnviz.readouts import atlas_detectors

    start = time.perf_counter()
    atlas_detectors.build_detectors(
        model, args.out, progress=lambda done, total: _show_count("detectors: sequences", done, total))
    print(f"detectors {time.perf_counter() - start:.1f} s", file=sys.stderr)


def _show_count(prefix: str, done: int, total: int) -> None:
    """A build step's progress, `prefix done/total`, rewritten in place on one stderr line and ended at the last."""
    print(f"\r{prefix} {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)


def _causal(args, model) -> None:
    """Each head's causal weight over the minimal pairs (attnviz.interventions.atlas_patching), each relation
    once: one stored for the same pairs and model is kept."""
    from attnviz.interventions import atlas_patching
    from attnviz.readouts import atlas

    start = time.perf_counter()
    done = atlas_patching.build_causal(
        model, atlas.atlas_path(args.out), args.pairs,
        progress=lambda relation, done, total: _show_count(f"causal weight ({relation}): pairs", done, total))
    why = atlas_patching.unusable(model)
    print(f"causal weight {time.perf_counter() - start:.1f} s; computed: {', '.join(done) or 'none'}"
          + (f" (skipped: {why})" if why else ""), file=sys.stderr)


def _corpus(args, sources=None):
    """The texts of the six metrics: --texts's, else the relation files' distinct sentences, in order."""
    if args.texts is not None:
        return corpus_texts(args.texts)
    from attnviz.readouts import atlas_relations

    if sources is None:
        sources = atlas_relations.read_sources(args.conllu, args.winobias, args.probes)
    return atlas_relations.item_texts(sources)


def _relations(args, sources, model) -> None:
    """Score the relation files (attnviz.readouts.atlas_relations), each once: a file stored with the same
    SHA-256 is not scored again."""
    from attnviz.readouts import atlas, atlas_relations

    start = time.perf_counter()
    scored = atlas_relations.build_relations(
        model, atlas.atlas_path(args.out), sources, sink_aware=args.sink_aware,
        progress=lambda kind, done, total: _show_count(f"relations ({kind}): sentences", done, total))
    kept = [source.kind for source in sources if source.kind not in scored]
    print(f"relations {time.perf_counter() - start:.1f} s; scored: {', '.join(scored) or 'none'}"
          + (f"; kept (same file): {', '.join(kept)}" if kept else ""), file=sys.stderr)


def _build_on_ray(args, total: int, sources) -> None:
    """`atlas build --workers N [--ray-address ADDR]`: the texts measured on Ray workers
    (attnviz.readouts.atlas_ray), the atlas stored as the one-process build stores it."""
    from attnviz.readouts import atlas, atlas_examples, atlas_ray

    atlas_ray.require_ray(f"--workers {args.workers}")  # one line on how to install it, before anything starts
    start = time.perf_counter()
    where = f"the Ray cluster at {args.ray_address}" if args.ray_address else "a local Ray"
    print(f"{args.workers} workers on {where}, each loading {args.model} ...", file=sys.stderr)
    result = atlas_ray.build(args.model, _corpus(args, sources), args.out, workers=args.workers, dtype=args.dtype,
                             address=args.ray_address, seq_len=args.seq_len,
                             progress=lambda done, _total: _show_count("texts", done, total),
                             examples=not args.no_examples, warmup=atlas_examples.warmup_size(total))
    print(f"{time.perf_counter() - start:.1f} s on {args.workers} workers; {result['n_texts']} texts "
          f"({result['skipped']} of one token left out) in {atlas.atlas_path(args.out)}", file=sys.stderr)


def _metrics(args) -> int:
    from attnviz.readouts import atlas

    result = atlas.metrics(args.atlas)
    if args.json:
        print(json.dumps(result))
        return 0
    state = "complete" if result["complete"] else "incomplete (run `atlas build` again to resume)"
    print(f"{result['model']}: {result['n_texts']} texts, seq_len {result['seq_len']}, {state}")
    for name, grid in result["metrics"].items():
        best = [(value, layer, head) for layer, row in enumerate(grid) for head, value in enumerate(row)
                if value is not None]
        top = ", ".join(f"L{layer}H{head} {value:.4f}" for value, layer, head in sorted(best, reverse=True)[:5])
        print(f"{name:22s} top 5: {top or '(no count)'}")
    if result.get("relations"):
        from attnviz.readouts.atlas_relations import seed_table

        for row in seed_table(result):
            label = f"{row['en']} {row['zh']}"
            if not row["available"]:
                print(f"{label:26s} -: {row['reason']}")
                continue
            best, base = row["best"], row["baseline"]
            weight = row.get("causal")
            causal = f"; causal weight {weight['effect']:.4f}" if weight and weight.get("effect") is not None else ""
            print(f"{label:26s} {row['relation']} {row['direction']}: L{best['layer']}H{best['head']} "
                  f"{best['accuracy']:.4f} (n {row['n_scorable']}; best offset {base['best_offset_accuracy']}"
                  f"{causal})")
    return 0
