"""Explore page speed in headless Chromium (a benchmark, not a test).

1. End to end: with the model loaded and the trace cache cold (every sentence is new), the time from
   pressing Enter in `Sentence` to the new all-heads grid drawn, for all-MiniLM-L6-v2, SmolLM2-135M
   and a random BERT-base-sized model (12 x 12 heads) at 64 tokens.
2. Rendering alone, same attentions, same browser: our single mosaic heatmap against the naive figure
   (one make_subplots heatmap per head), Plotly.newPlot timed in the page; and bytes per value.

    .venv/bin/python benchmarks/bench_explore.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

import numpy as np
from playwright.sync_api import sync_playwright
from plotly.subplots import make_subplots

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402
from attnviz import plots  # noqa: E402
from attnviz.loading.random_model import RANDOM_MODEL_NAME, random_model  # noqa: E402
from tests.helpers.browser import GRID_HAS, launch_chromium, streamlit_server  # noqa: E402

MODELS = [
    ("sentence-transformers/all-MiniLM-L6-v2", "The keys to the cabinet are on the table", 1.0),
    ("HuggingFaceTB/SmolLM2-135M-Instruct", "The keys to the cabinet are on the table", 3.0),
    (RANDOM_MODEL_NAME, "The keys to the old cabinet in the hall are on the red table", 1.5),  # 64 byte tokens
]


def end_to_end(page, url: str, model: str, sentence: str, repeats: int) -> list[float]:
    page.goto(f"{url}/?{urllib.parse.urlencode({'model': model, 'text': sentence + ' warmup.'})}")
    page.wait_for_function(GRID_HAS, arg="warmup", timeout=300_000)
    box = page.get_by_label("Sentence", exact=True)
    times = []
    for i in range(repeats):
        marker = f"zebra{i}x"
        box.fill(f"{sentence} {marker}.")
        start = time.perf_counter()
        box.press("Enter")
        page.wait_for_function(GRID_HAS, arg=marker, timeout=60_000, polling="raf")
        times.append(time.perf_counter() - start)
    return times


def naive_figure(attentions: np.ndarray, labels: list[str]):
    """What a plain implementation draws: one heatmap subplot per head."""
    n_layers, n_heads = attentions.shape[:2]
    figure = make_subplots(rows=n_layers, cols=n_heads, horizontal_spacing=0.005, vertical_spacing=0.005)
    for layer in range(n_layers):
        for head in range(n_heads):
            figure.add_heatmap(z=attentions[layer, head], x=labels, y=labels, showscale=False,
                               row=layer + 1, col=head + 1)
    figure.update_xaxes(showticklabels=False)
    figure.update_yaxes(showticklabels=False)
    return figure.update_layout(height=1400, width=1400)


def render_ms(page, figure_json: str, repeats: int) -> float:
    """Median Plotly.newPlot time of a figure in the page, each time into a fresh div."""
    times = []
    for _ in range(repeats):
        ms = page.evaluate(
            """async spec => { const fig = JSON.parse(spec); const div = document.createElement('div');
                document.body.innerHTML = ''; document.body.appendChild(div);
                const t0 = performance.now(); await Plotly.newPlot(div, fig.data, fig.layout);
                await new Promise(r => requestAnimationFrame(() => r()));
                return performance.now() - t0; }""",
            figure_json,
        )
        times.append(ms)
    return statistics.median(times)


def rendering(browser, repeats: int) -> list[dict]:
    import plotly.offline

    page = browser.new_page(viewport={"width": 1500, "height": 1500})
    page.set_content("<html><body></body></html>")
    page.add_script_tag(content=plotly.offline.get_plotlyjs())
    rows = []
    cases = [("random 12x12 @ 64 tokens", random_model(), MODELS[2][1]),
             ("all-MiniLM-L6-v2", attnviz.load(MODELS[0][0]), MODELS[0][1])]
    for name, model, sentence in cases:
        trace = model.run(sentence)
        ours = plots.model_view(trace.attentions, kv_group=trace.kv_group, row_labels=trace.tokens,
                                col_labels=trace.tokens).to_json()
        naive = naive_figure(trace.attentions, [f"{i}:{t}" for i, t in enumerate(trace.tokens)]).to_json()
        values = trace.attentions.size
        rows.append({"case": name, "shape": list(trace.attentions.shape),
                     "ours_ms": render_ms(page, ours, repeats), "naive_ms": render_ms(page, naive, repeats),
                     "ours_bytes_per_value": len(ours) / values, "naive_bytes_per_value": len(naive) / values})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with streamlit_server() as url, sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        print("End to end: Enter in Sentence -> new grid drawn (cold trace cache), seconds")
        for model, sentence, bound in MODELS:
            times = end_to_end(page, url, model, sentence, args.repeats)
            print(f"  {model:45s} median {statistics.median(times):.2f} s  max {max(times):.2f} s  "
                  f"(bound {bound} s)  runs {json.dumps([round(x, 2) for x in times])}")
        print("Rendering alone (Plotly.newPlot, median): our mosaic vs naive make_subplots")
        for row in rendering(browser, args.repeats):
            print(f"  {row['case']:28s} {str(row['shape']):18s} ours {row['ours_ms']:7.1f} ms  "
                  f"naive {row['naive_ms']:8.1f} ms  ratio {row['naive_ms'] / row['ours_ms']:5.1f}x  "
                  f"bytes/value ours {row['ours_bytes_per_value']:.2f} naive {row['naive_bytes_per_value']:.2f}")
        browser.close()


if __name__ == "__main__":
    main()
