"""The replicate command: a replication card (findings.cards) on a model, the paper's numbers beside
ours and a verdict; `replicate --list` lists the cards. The Findings page computes the same report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from attnviz.analysis.lines import read_text_lines
from attnviz.findings.cards import card, cards, report


def add_parser(commands) -> None:
    parser = commands.add_parser("replicate", help="a published finding about heads beside ours (Findings)",
                                 description="Run a replication card: the paper's numbers, ours on --model, "
                                             "and a verdict. --list names the cards.")
    parser.add_argument("card", nargs="?", help="card id (see --list)")
    parser.add_argument("--list", action="store_true", help="list the cards and exit")
    parser.add_argument("--model", help="model source (hub id or folder)")
    sources = parser.add_mutually_exclusive_group()
    sources.add_argument("--texts", help="a text file, one text a line (michel2019, olsson2022)")
    sources.add_argument("--conllu", help="a Universal Dependencies .conllu file (clark2019)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args) -> int:
    if args.list:
        for found in cards():
            model = ", ".join(found.paper_models) or "not released"
            print(f"{found.id:12s} {found.paper['title']} ({found.paper['year']}), {found.paper['cited']}; "
                  f"paper's model: {model}")
        return 0
    if not args.card or not args.model:
        raise ValueError("give a card id and --model SOURCE (or --list)")
    chosen = card(args.card)
    if args.conllu and chosen.needs != "conllu" or args.texts and chosen.needs != "texts":
        raise ValueError(f"{chosen.id} takes {'no file' if chosen.needs == 'none' else '--' + chosen.needs}")
    import attnviz
    from attnviz.findings.measures import compute

    items = texts = None
    inputs = {}
    if args.conllu:
        from attnviz.analysis.conllu import read_card_treebank

        items = read_card_treebank(args.conllu).items  # the card's bounds, as the Findings page holds an upload
        inputs["conllu"] = Path(args.conllu).name
    if args.texts:
        texts = read_text_lines(args.texts)
        inputs["texts"] = f"{Path(args.texts).name} ({len(texts)} texts)"
    model = attnviz.load(args.model)
    result = report(chosen, args.model, compute(chosen, model, args.model, items=items, texts=texts,
                                                 progress=_progress), inputs)
    print(json.dumps(result) if args.json else _readable(result))
    return 0


def _progress(done: int, total: int) -> None:
    sys.stderr.write(f"\rstep {done}/{total}" + ("\n" if done == total else ""))
    sys.stderr.flush()


def _readable(result: dict) -> str:
    same = "the paper's model" if result["same_model"] else "not the paper's model"
    lines = [f"{result['card']} on {result['model']} ({same})", result["citation"]]
    for row in result["checks"]:
        lines.append(f"  {row['key']:22s} paper {row['paper']!s:>8s}  ours {row['ours']!s:>8s}")
    lines.append(f"verdict: {result['verdict']}")
    if not result["verified"]:
        lines.append("note: the paper's numbers were not all checked against the paper (see the card)")
    return "\n".join(lines)
