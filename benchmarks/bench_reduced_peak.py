"""A reduced run's peak memory in a long-lived process (a benchmark, not a test), for one or more app trees
side by side, so before/after is one command:

    git -C . archive HEAD~1 | (mkdir -p /tmp/attnviz-before && tar -x -C /tmp/attnviz-before)
    .venv/bin/python benchmarks/bench_reduced_peak.py --tree /tmp/attnviz-before --tree . --runs 4

For each tree, in a fresh process of this python: SmolLM2-135M-Instruct loaded as the app loads it, then
`--runs` distinct long texts (`--chars`, default 20,000 characters: about 3,100 tokens), each reduced by
workbench.traces.reduced in a thread of its own with a 1,500-character full-map trace computed in another
thread before it, as the app's heavy actions and visitors do. Per pass: the RSS before it, its peak over
that (VmHWM, reset through /proc/self/clear_refs), what workbench.traces.reduced_bytes reserved, what the
trace holds; and the process's CPU seconds (utime + stime) so far.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.helpers.reduced_peak import measure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, help="an app tree (default: this one); repeatable")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--chars", type=int, default=20_000, help="characters of each long text")
    args = parser.parse_args()
    trees = args.tree or [Path(__file__).resolve().parent.parent]
    print("| tree | pass | tokens | RSS before MB | peak over it MB | reserved MB | held MB | process CPU s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for tree in trees:
        for k, row in enumerate(measure(tree.resolve(), args.runs, args.chars)):
            print(f"| {tree} | {k} | {row['tokens']:,} | {row['rss_before'] / 1e6:,.0f} | {row['peak_over'] / 1e6:,.0f}"
                  f" | {row['reserved'] / 1e6:,.0f} | {row['held'] / 1e6:,.0f} | {row['cpu_s']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
