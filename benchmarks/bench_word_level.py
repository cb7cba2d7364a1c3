"""Word level against token level on a long English text (a benchmark, not a test), before and after the
word pooling was vectorised (issue 19, item 8), side by side in one run.

    .venv/bin/python benchmarks/bench_word_level.py [--model HuggingFaceTB/SmolLM2-135M-Instruct] [--words 440]
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_word_level.py     # one core, as a public host

The text is the built-in English probe sentences joined until it has --words words (about 480 SmolLM2
tokens for 440). What the Explore page computes for one level, beside the trace both levels share: the
view (`analysis.views.attention_view`) and the mosaic figure (`plots.model_view`). "before" is the word
attention as it was, one-hot matrix products in float64 ([T, T] @ [T, n], then [n, T] @ [T, n] a head);
"after" is `analysis.scoring.word_attention_matrix`, segment sums over each word's tokens. Wall seconds
(time.perf_counter) and CPU seconds of the process (time.process_time, every thread), the median of
--repeats runs; the two word versions are checked to give the same matrix.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402
from attnviz import plots  # noqa: E402
from attnviz.analysis import views  # noqa: E402
from attnviz.analysis.scoring import word_one_hot  # noqa: E402
from attnviz.probesets import builtin_path  # noqa: E402
from attnviz.workbench.traces import compact  # noqa: E402


def one_hot_word_attention(attentions, word_of_token, n_words, dtype=np.float64):
    """The word attention before issue 19: W = (M.T @ A @ M) / counts with M the [T, n] one-hot matrix,
    one layer at a time, in float64 (scoring.word_attention_matrix as it was, all rows and columns)."""
    hot = word_one_hot(word_of_token, n_words)
    counts = np.maximum(hot.sum(axis=0), 1.0)[:, None]
    out = np.empty((*attentions.shape[:2], n_words, n_words), dtype=dtype)
    for layer in range(attentions.shape[0]):
        summed = np.asarray(attentions[layer], dtype=np.float64) @ hot  # [H, T, n]
        out[layer] = (hot.T @ summed) / counts  # [H, n, n]
    return out


def long_text(words: int) -> str:
    picked: list[str] = []
    for line in builtin_path("en").read_text(encoding="utf-8").splitlines():
        picked += json.loads(line)["words"]
        if len(picked) >= words:
            break
    return " ".join(picked[:words])


def timed(work, repeats: int) -> tuple[float, float, object]:
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def mosaic(view, trace):
    return plots.model_view(view.attentions, kv_group=trace.kv_group, row_labels=view.labels,
                            col_labels=view.labels)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M-Instruct")
    parser.add_argument("--words", type=int, default=440)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    model = attnviz.load(args.model)
    text = long_text(args.words)
    trace_wall, trace_cpu, trace = timed(lambda: compact(model.run(text)), 1)  # the app keeps float16
    print(f"{args.model}: {len(trace.words)} words, {len(trace.tokens)} tokens, "
          f"{trace.n_layers} x {trace.n_heads} heads")
    mosaic(views.attention_view(trace, "token"), trace)  # warm-up: plotly's first figure

    real = views.word_attention_matrix
    rows = []
    for name, level, pooling in (("token", "token", real), ("word, before", "word", one_hot_word_attention),
                                 ("word, after", "word", real)):
        views.word_attention_matrix = pooling
        try:
            view_wall, view_cpu, view = timed(lambda lv=level: views.attention_view(trace, lv), args.repeats)
        finally:
            views.word_attention_matrix = real
        plot_wall, plot_cpu, _ = timed(lambda v=view: mosaic(v, trace), args.repeats)
        rows.append((name, view, view_wall, view_cpu, plot_wall, plot_cpu))
    before, after = rows[1][1].attentions, rows[2][1].attentions
    np.testing.assert_allclose(np.asarray(before, np.float32), np.asarray(after, np.float32), rtol=1e-3, atol=1e-4)

    print(f"trace (both levels): wall {trace_wall:.2f} s, cpu {trace_cpu:.2f} s")
    print(f"{'level':14s} {'view wall':>9s} {'view cpu':>9s} {'mosaic wall':>11s} {'mosaic cpu':>10s}"
          f" {'page wall':>9s} {'page cpu':>9s} {'x token (wall, cpu)':>20s}")
    token_page = (trace_wall + rows[0][2] + rows[0][4], trace_cpu + rows[0][3] + rows[0][5])
    for name, _, view_wall, view_cpu, plot_wall, plot_cpu in rows:
        page = (trace_wall + view_wall + plot_wall, trace_cpu + view_cpu + plot_cpu)
        print(f"{name:14s} {view_wall:9.2f} {view_cpu:9.2f} {plot_wall:11.2f} {plot_cpu:10.2f} {page[0]:9.2f}"
              f" {page[1]:9.2f} {page[0] / token_page[0]:10.2f} {page[1] / token_page[1]:9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
