"""CPU seconds of the logit lens, direct logit attribution and information-flow routes (attnviz.interventions)
on one text of N tokens, each the median of a few runs, every run from the text (its own forward pass); then
the page's three sections side by side: before, each view from its own recorded pass (as the page computed
them until the pass was shared); after, one recorded pass read by all three (workbench/readout.py).

    .venv/bin/python benchmarks/bench_readout.py [--model HuggingFaceTB/SmolLM2-135M-Instruct] [--tokens 12,100]

CPU seconds are the process's (time.process_time: every thread's), so a busy machine changes them less than
wall seconds; torch's thread count is printed beside them."""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import attnviz
from attnviz.readouts.attribution import attribute
from attnviz.readouts.logit_lens import logit_lens
from attnviz.readouts.recorded_run import recorded_run
from attnviz.readouts.routes import ROUTE_NAMES, routes

WORDS = ("the keys to the cabinet are on the table and the old man who lives by the river said that it was "
         "going to rain before the evening so we should take the long road home through the quiet village ").split()


def text_of(model, n_tokens: int) -> str:
    """A text of exactly n_tokens tokens for this tokenizer (its special tokens included), words repeated."""
    words = []
    while len(model.encode(" ".join(words)).ids) < n_tokens:
        words.append(WORDS[len(words) % len(WORDS)])
    ids = model.encode(" ".join(words)).ids[:n_tokens]
    return model.tokenizer.decode(ids, skip_special_tokens=True)


def cpu_seconds(work, repeats: int) -> tuple[float, float]:
    cpu, wall = [], []
    for _ in range(repeats):
        c, w = time.process_time(), time.perf_counter()
        work()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--tokens", default="12,100")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = attnviz.load(args.model)
    logit_lens(model, "warm up")  # the first forward pass pays for allocations once
    print(f"{args.model}, torch threads {torch.get_num_threads()}, median of {args.repeats}")
    print(f"{'tokens':>6s} {'view':10s} {'CPU s':>7s} {'wall s':>7s}")
    for n in [int(v) for v in args.tokens.split(",")]:
        text = text_of(model, n)
        for name, work in (("lens", lambda text=text: logit_lens(model, text)),
                           ("attribute", lambda text=text: attribute(model, text, " are", " is")),
                           ("routes", lambda text=text: routes(model, text))):
            cpu, wall = cpu_seconds(work, args.repeats)
            print(f"{len(model.encode(text).ids):6d} {name:10s} {cpu:7.2f} {wall:7.2f}")
        shared = lambda text=text: three_views(model, text, recorded_run(model, text, ROUTE_NAMES))  # noqa: E731
        for name, work in (("3 passes", lambda text=text: three_views(model, text, None)), ("1 pass", shared)):
            cpu, wall = cpu_seconds(work, args.repeats)
            print(f"{len(model.encode(text).ids):6d} {name:10s} {cpu:7.2f} {wall:7.2f}")


def three_views(model, text: str, run) -> None:
    """The Explore page's three sections of one text: from their own passes (`run` None) or from `run`."""
    logit_lens(model, text, run=run)
    attribute(model, text, " are", " is", run=run)
    routes(model, text, run=run)


if __name__ == "__main__":
    main()
