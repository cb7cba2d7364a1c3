"""The Head Finder page: score every head on a relation (Clark et al. 2019) and look at the best ones."""

from __future__ import annotations

import hashlib

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis import (
    DIRECTIONS,
    detect_format,
    parse_items,
    predictions,
    score_model,
    to_json,
    word_attention,
)
from attnviz.probe import builtin_items
from attnviz.ui import models
from attnviz.ui.common import session_id, sidebar, t
from attnviz.ui.escape import md
from attnviz.ui.widgets import word_pair_ranking

UPLOAD_MB = 20  # matches server.maxUploadSize in .streamlit/config.toml
BUILTIN_SETS = {"builtin:en": "English (built-in)", "builtin:zh": "中文 (built-in)"}
PARSERS = {"auto": "auto", "probes": "Probe JSONL", "conllu": "CoNLL-U", "winobias": "WinoBias"}
UPLOAD_TYPES = ["jsonl", "json", "conllu", "txt", "dev", "test"]
# Memory one scoring batch may take: texts are batched by length, so the batch size follows the longest.
BATCH_BYTES = 200_000_000
EXAMPLES_SHOWN = 3  # passing and failing examples shown for the chosen head
EXAMPLE_POOL = 40  # items re-run to find them


def render() -> None:
    model, source = sidebar()
    st.title(t("finder_title"))
    st.caption(t("finder_caption"))
    if model is None:
        return
    items, items_key = choose_items()
    if not items:
        return
    relations = list(dict.fromkeys(item.relation for item in items))
    relation = st.selectbox(t("relation"), relations, key="finder_relation")
    chosen = [item for item in items if item.relation == relation]
    st.caption(t("items_counted", n=len(chosen), relation=md(relation), sentences=len({i.text for i in chosen}),
                 total=len({i.text for i in items})))
    result_key = f"{source}|{items_key}|{relation}"
    if st.button(t("run_probe"), key="run_probe", type="primary"):
        result = score(model, source, chosen, relation)
        if result is not None:
            st.session_state["finder_result"] = (result_key, result)
    stored = st.session_state.get("finder_result")
    if stored and stored[0] == result_key:
        show_scores(model, stored[1], chosen, relation, result_key)
    own_sentence(source)


def choose_items():
    """(items, a key naming them) from a built-in set or an uploaded file; errors shown, never raised."""
    mode = st.radio(t("probe_source"), ["builtin", "upload"], horizontal=True, key="finder_mode",
                    format_func=lambda m: t("builtin_set") if m == "builtin" else t("upload"))
    try:
        if mode == "builtin":
            spec = st.selectbox(t("builtin_set"), list(BUILTIN_SETS), format_func=BUILTIN_SETS.get,
                                key="finder_builtin")
            return builtin_items(spec), spec
        upload = st.file_uploader(t("upload"), type=UPLOAD_TYPES, key="finder_upload",
                                  help=t("upload_help", mb=UPLOAD_MB))
        st.caption(t("upload_help", mb=UPLOAD_MB))
        kind = st.selectbox(t("upload_kind"), list(PARSERS), format_func=lambda k: t("format_auto")
                            if k == "auto" else PARSERS[k], key="finder_kind")
        if upload is None:
            return [], None
        data = upload.getvalue()
        if kind == "auto":
            kind = detect_format(upload.name, data)
            st.caption(t("format_detected", kind=PARSERS[kind]))
        unspaced = kind == "conllu" and st.checkbox(t("conllu_sep"), key="finder_unspaced")
        items = parse_items(kind, data, upload.name, "" if unspaced else " ")
        if not items:
            st.info(t("no_items"))
        return items, f"{kind}:{hashlib.sha1(data).hexdigest()}:{unspaced}"
    except ValueError as error:  # malformed input names the file and line
        st.error(t("bad_file", error=md(error)))
        return [], None


def score(model, source: str, items, relation: str) -> dict | None:
    """The docs/architecture.md JSON block of this relation: the same numbers as `python -m attnviz probe
    --json`. A heavy action: it waits for the process's heavy-work slot, shows its progress, holds a
    share of the memory budget, and stops when the visitor presses Cancel (any rerun stops it)."""
    texts = sorted({item.text for item in items}, key=len)
    longest = max(len(e.ids) for e in model.tokenizer.encode_batch(texts[-8:]))  # sorted by characters
    batch_size = max(1, min(32, BATCH_BYTES // models.trace_bytes(model, longest)))
    st.button(t("cancel"), key="cancel_probe")  # pressing it reruns the page, which stops this run
    bar = st.progress(0.0, text=t("waiting_slot"))
    try:
        with models.heavy_slot(session_id()), models.reserve(BATCH_BYTES, keep_model=source):
            scores = score_model(model, items, batch_size=batch_size, progress=lambda done, total: bar.progress(
                done / max(total, 1), text=t("scoring", done=done, n=total)))
    except models.Busy:
        st.warning(t("busy"))
        return None
    except models.OverBudget as error:
        st.error(t("trace_over_budget", need=error.need / 1e9, budget=error.budget / 1e9, used=error.used / 1e9))
        return None
    finally:
        bar.empty()
    return to_json(source, scores)["relations"][relation]


def show_scores(model, block: dict, items, relation: str, result_key: str) -> None:
    direction_names = {"source_to_target": t("direction_s2t"), "target_to_source": t("direction_t2s")}
    cols = st.columns(2)
    for col, direction in zip(cols, DIRECTIONS):
        grid = np.array(block[direction], dtype=float)
        best = block["best"][direction]
        figure = plots.score_grid(grid, f"{relation}: {direction_names[direction]}",
                                  best=(best["layer"], best["head"]) if best else None)
        col.plotly_chart(figure, key=f"score_grid_{direction}", width="stretch")
    st.subheader(t("best_heads"))
    rows = []
    for direction in DIRECTIONS:
        best, base = block["best"][direction], block["baselines"][direction]
        rows.append({
            "direction": direction_names[direction],
            "best head": f"L{best['layer']} H{best['head']}" if best else "-",
            "accuracy": best and best["accuracy"],
            "best offset": base["best_offset"],
            "offset accuracy": base["best_offset_accuracy"],
            "first-word accuracy": base["first_word_accuracy"],
        })
    st.dataframe(rows, hide_index=True)
    st.caption(f"n = {block['n']}, skipped = {block['n_skipped']}")
    best = block["best"]["source_to_target"]
    if best:
        examples_for_head(model, items, best["layer"], best["head"], result_key)


def example_traces(model, pool, result_key: str):
    """Traces of the example pool, run once per scoring result (not on every rerun of the page)."""
    stored = st.session_state.get("finder_examples")
    if not stored or stored[0] != result_key:
        stored = (result_key, model.run_batch([item.text for item in pool]))
        st.session_state["finder_examples"] = stored
    return stored[1]


def examples_for_head(model, items, default_layer: int, default_head: int, result_key: str) -> None:
    cols = st.columns(2)
    layer = cols[0].number_input(t("layer"), 0, model.info.n_layers - 1, default_layer, key="finder_layer")
    head = cols[1].number_input(t("head"), 0, model.info.n_heads - 1, default_head, key="finder_head")
    st.markdown(f"**{t('examples_for_head', layer=layer, head=head)}**")
    pool = items[:EXAMPLE_POOL]
    shown = {True: 0, False: 0}
    for index, (item, trace) in enumerate(zip(pool, example_traces(model, pool, result_key))):
        weights = word_attention(trace, item.word_spans)[layer, head]  # n, n
        guess = int(predictions(weights[None, None])[0, 0, item.source])
        right = guess == item.target
        if shown[right] >= EXAMPLES_SHOWN:
            continue
        shown[right] += 1
        words = list(item.words)
        verdict = t("passing") if right else t("failing")
        guessed = words[guess] if guess >= 0 else "-"
        with st.expander(f"{'✅' if right else '❌'} {verdict}: {md(words[item.source])} → {md(words[item.target])} "
                         f"(head: {md(guessed)}) · {md(' '.join(words)[:80])}"):
            st.plotly_chart(plots.head_heatmap(weights, words, words), key=f"example_{index}_{layer}_{head}")
        if min(shown.values()) >= EXAMPLES_SHOWN:
            break


def own_sentence(source: str) -> None:
    st.subheader(t("own_sentence"))
    text = st.text_input(t("sentence"), "The keys to the cabinet are on the table.", key="finder_text")
    if not text.strip():
        st.info(t("empty_text"))
        return
    try:
        trace = models.run_text(source, text, None)
    except models.OverBudget as error:
        st.error(t("trace_over_budget", need=error.need / 1e9, budget=error.budget / 1e9, used=error.used / 1e9))
        return
    except ValueError as error:
        st.error(t("run_failed", error=md(error)))
        return
    word_pair_ranking(trace, key_prefix="finder")
