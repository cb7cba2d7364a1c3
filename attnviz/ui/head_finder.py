"""The Head Finder page: score every head on a relation (Clark et al. 2019) and look at the best ones."""

from __future__ import annotations

import hashlib

import numpy as np
import streamlit as st

from attnviz import plots
from attnviz.analysis import (
    DIRECTIONS,
    predictions,
    word_attention,
)
from attnviz.probesets import builtin_items
from attnviz.ui.escape import md
from attnviz.ui.focus import bound, focus, head_label, set_focus
from attnviz.ui.focus_line import focus_line
from attnviz.ui.guard import heavy_slot, refused, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import plot_text, t
from attnviz.ui.patch_finder import looks_or_matters
from attnviz.ui.retrieval import retrieval_section
from attnviz.ui.sidebar import sidebar
from attnviz.ui.strings import STRINGS
from attnviz.ui.url_state import MAX_TEXT
from attnviz.ui.widgets import head_grid, head_table, word_pair_ranking
from attnviz.workbench import head_finder, traces

UPLOAD_MB = 20  # matches server.maxUploadSize in .streamlit/config.toml
BUILTIN_SETS = {"builtin:en": "builtin_en", "builtin:zh": "builtin_zh"}  # option -> its label's key
PARSERS = {"auto": "auto", "probes": "Probe JSONL", "conllu": "CoNLL-U", "winobias": "WinoBias"}
UPLOAD_TYPES = ["jsonl", "json", "conllu", "txt", "dev", "test"]
EXAMPLES_SHOWN = 3  # passing and failing examples shown for the chosen head
EXAMPLE_POOL = 40  # items re-run to find them
EXAMPLE_MAX_WORDS = 96  # an example is drawn as a words x words heatmap: longer items are not examples


def render() -> None:
    model, source = sidebar()
    st.title(t("finder_title"))
    st.caption(t("finder_caption"))
    if model is None:
        return
    focus_line(source)
    relation_scores(model, source)
    looks_or_matters(model, source)  # its own section (ui/patch_finder.py)
    retrieval_section(model, source)  # its own section (ui/retrieval.py)


def relation_scores(model, source: str) -> None:
    items, items_key, read_note = choose_items()
    if not items:
        return
    relations = list(dict.fromkeys(item.relation for item in items))
    relation = st.selectbox(t("relation"), relations, key="finder_relation",
                            format_func={r: relation_label(r) for r in relations}.get, placeholder=t("choose_option"))
    chosen = [item for item in items if item.relation == relation]
    st.caption(t("items_counted", n=len(chosen), relation=md(relation_label(relation)),
                 sentences=len({i.text for i in chosen}),
                 total=len({i.text for i in items})) + read_note)
    # Sink-aware scoring is offered for decoders only (docs/formats.md, "Scoring rule").
    sink_aware = bool(model.info.causal) and st.checkbox(t("sink_aware"), key="finder_sink_aware",
                                                         help=t("sink_aware_help"))
    result_key = f"{source}|{items_key}|{relation}|{sink_aware}"
    bench = workbench()
    builtin = items_key if items_key in BUILTIN_SETS else None
    # A built-in set's scores are the same for every visitor: once some visitor scored them, they are shown at once.
    result = builtin and head_finder.shared_score(bench, source, builtin, relation, sink_aware)
    if result:
        st.caption(t("finder_shared"))
    else:
        result = heavy_action("run_probe", t("run_probe"), (result_key,),
                              lambda job: head_finder.score(bench, model, source, chosen, relation, sink_aware,
                                                       progress=job.progress, builtin=builtin),
                              lambda done, total: t("scoring", done=done, n=total), primary=True)
    if result is not None:
        st.session_state["finder_result"] = (result_key, result)
    stored = st.session_state.get("finder_result")
    if stored and stored[0] == result_key:
        show_scores(model, source, stored[1], chosen, relation, result_key)
        if builtin:
            tops_several(bench, source, builtin, relation, relations, sink_aware, stored[1])
    own_sentence(source)


def tops_several(bench, source: str, builtin: str, relation: str, relations: list[str], sink_aware: bool,
                 block: dict) -> None:
    """A head that is the best on other relations of the set as well (from the scores already shared, none
    computed here) may track something general, a position or the nearest noun, rather than this relation."""
    def best_heads(scores: dict) -> set[tuple[int, int]]:
        return {(b["layer"], b["head"]) for b in scores["best"].values() if b}

    mine = best_heads(block)
    also: dict[tuple[int, int], list[str]] = {}
    for other in relations:
        scores = head_finder.shared_score(bench, source, builtin, other, sink_aware) if other != relation else None
        for head in mine & (best_heads(scores) if scores else set()):
            also.setdefault(head, []).append(relation_label(other))
    for (layer, head), others in sorted(also.items()):
        st.info(t("finder_tops_several", head=head_label(layer, head), relations=md(", ".join(others))))


def relation_label(relation: str) -> str:
    """The built-in relations in the visitor's language; a relation named by an uploaded file as it is."""
    return t(f"relation_{relation}") if f"relation_{relation}" in STRINGS else relation


def parser_label(kind: str) -> str:
    return t("format_auto") if kind == "auto" else t("format_probes") if kind == "probes" else PARSERS[kind]


def choose_items():
    """(items, a key naming them, a note for the count caption) from a built-in set or an uploaded file;
    errors shown, never raised."""
    # format_func: dicts of this run's labels (see view_options.LEVELS), not calls of t()
    mode = st.radio(t("probe_source"), ["builtin", "upload"], horizontal=True, key="finder_mode",
                    format_func={"builtin": t("builtin_set"), "upload": t("upload")}.get)
    try:
        if mode == "builtin":
            spec = st.selectbox(t("builtin_set"), list(BUILTIN_SETS), key="finder_builtin",
                                format_func={s: t(k) for s, k in BUILTIN_SETS.items()}.get,
                                placeholder=t("choose_option"))
            return builtin_items(spec), spec, ""
        upload = st.file_uploader(t("upload"), type=UPLOAD_TYPES, key="finder_upload")
        st.caption(t("upload_help", mb=UPLOAD_MB))  # once, in sight (not also as the uploader's help)
        kind = st.selectbox(t("upload_kind"), list(PARSERS), format_func={k: parser_label(k) for k in PARSERS}.get,
                            key="finder_kind", placeholder=t("choose_option"))
        if upload is None:
            return [], None, ""
        data = upload.getvalue()
        if kind == "auto":
            kind = head_finder.detected_format(upload.name, data)
            st.caption(t("format_detected", kind=parser_label(kind)))
        if kind == "conllu":  # no separator to choose: the treebank's own text is read
            st.caption(t("conllu_own_text"))
        parsed = head_finder.parsed_file(workbench(), kind, data, upload.name)
        if not parsed.items:
            st.info(t("no_items"))
        note = (" " + t("conllu_read", skipped=parsed.skipped_arcs, disagreed=parsed.disagreed)
                if kind == "conllu" else "")
        return parsed.items, f"{kind}:{hashlib.sha256(data).hexdigest()}", note
    except ValueError as error:  # malformed input names the file and line
        st.error(t("bad_file", error=md(error)))
        return [], None, ""


def impossible(block: dict, direction: str) -> bool:
    """Items were scored but none can be in this direction: a causal model cannot look ahead."""
    return block["n"] > 0 and block.get("n_scorable", {}).get(direction, block["n"]) == 0


# Under this many scorable items a direction's top head is named with its count, not simply "best".
FEW_ITEMS = 20


def _value(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def show_scores(model, source: str, block: dict, items, relation: str, result_key: str) -> None:
    direction_names = {"source_to_target": t("direction_s2t"), "target_to_source": t("direction_t2s")}
    if block.get("sink_aware"):
        st.info(t("sink_aware_on"))
    counts = {d: block.get("n_scorable", {}).get(d, block["n"]) for d in DIRECTIONS}
    # The direction with more items first (a decoder scores few items one way: 10 against 90).
    ordered = sorted(DIRECTIONS, key=lambda d: -counts[d])

    def best_label(direction: str) -> str:
        best = block["best"][direction]
        if not best:
            return "-"
        label = head_label(best["layer"], best["head"])
        return t("best_few", head=label, n=counts[direction]) if counts[direction] < FEW_ITEMS else label

    cols = st.columns(2)
    for col, direction in zip(cols, ordered):
        if impossible(block, direction):
            col.warning(t("direction_impossible", direction=direction_names[direction]))
            continue
        grid = np.array(block[direction], dtype=float)
        best, base = block["best"][direction], block["baselines"][direction]
        figure = plots.score_grid(grid, f"{relation_label(relation)}: {direction_names[direction]}",
                                  best=(best["layer"], best["head"]) if best else None, text=plot_text())
        # A click opens that head's examples below (the examples' layer and head, and this direction).
        head_grid(col, figure, f"score_grid_{direction}", also={"finder_example_direction": direction})
        col.caption(t("grid_caption", scorable=counts[direction], n=block["n"], best=best_label(direction),
                      accuracy=_value(best and best["accuracy"]), first=_value(base["first_word_accuracy"]),
                      offset="-" if base["best_offset"] is None else f"{base['best_offset']:+d}",
                      offset_accuracy=_value(base["best_offset_accuracy"])))
    st.subheader(t("best_heads"))
    rows = []
    possible = [d for d in ordered if not impossible(block, d)]
    for direction in possible:
        best, base = block["best"][direction], block["baselines"][direction]
        rows.append({
            t("column_direction"): direction_names[direction],
            t("column_scorable"): counts[direction],
            t("column_best_head"): best_label(direction),
            t("column_accuracy"): best and best["accuracy"],
            t("column_first_word_accuracy"): base["first_word_accuracy"],
            t("column_best_offset"): base["best_offset"],
            t("column_offset_accuracy"): base["best_offset_accuracy"],
        })
    head_table(st, {name: [row[name] for row in rows] for name in (rows[0] if rows else {})},
               [(block["best"][d]["layer"], block["best"][d]["head"]) if block["best"][d] else None for d in possible],
               "finder_best_table")
    st.caption(t("finder_counts", n=block["n"], skipped=block["n_skipped"]))
    possible = [d for d in possible if block["best"][d]]
    if not possible:
        return
    direction = st.radio(t("examples_direction"), possible, horizontal=True, key="finder_example_direction",
                         format_func=direction_names.get) if len(possible) > 1 else possible[0]
    best = block["best"][direction]
    examples_for_head(model, source, items, direction, best["layer"], best["head"], result_key,
                      bool(block.get("sink_aware")))


def read_and_gold(item, direction: str) -> tuple[int, int]:
    return (item.source, item.target) if direction == "source_to_target" else (item.target, item.source)


def scorable(item, direction: str, causal: bool) -> bool:
    """A causal model's row cannot see a later word: the gold word must come first (the scoring rule)."""
    read, gold = read_and_gold(item, direction)
    return not causal or gold < read


def mark_cells(figure, read: int, gold: int, guess: int) -> None:
    """Outline the gold cell and the attended (argmax) cell of the read word's row. The heatmap's axes
    are categorical, so category k sits at coordinate k."""
    cells = [("gold", gold, plots.LINE_COLOR, "solid"), ("attended", guess, plots.HIGHLIGHT_COLOR, "dot")]
    for name, column, color, dash in cells:
        if column < 0:
            continue
        figure.add_shape(type="rect", xref="x", yref="y", x0=column - 0.5, x1=column + 0.5, y0=read - 0.5,
                         y1=read + 0.5, line={"color": color, "width": 3, "dash": dash}, name=name)


def examples_for_head(model, source: str, items, direction: str, default_layer: int, default_head: int, result_key: str,
                      sink_aware: bool = False) -> None:
    # The examples are the focus head's (ui/focus.py): a click on a grid above, on any page, or these inputs
    # set it; the direction's best head is a button away, never put in the focus unasked.
    cols = st.columns([1, 1, 2])
    n_layers, n_heads = model.info.n_layers, model.info.n_heads
    current = focus()
    layer = cols[0].number_input(t("layer"), 0, n_layers - 1, **bound(
        f"finder_layer_{direction}", "layer", shown=current.layer if current.layer < n_layers else 0, convert=int))
    head = cols[1].number_input(t("head"), 0, n_heads - 1, **bound(
        f"finder_head_{direction}", "head", shown=current.head if current.head < n_heads else 0, convert=int))
    if (layer, head) != (default_layer, default_head):
        cols[2].button(t("finder_use_best", head=head_label(default_layer, default_head)),
                       key=f"finder_use_best_{direction}", on_click=set_focus,
                       kwargs={"layer": default_layer, "head": default_head})
    st.markdown(f"**{t('examples_for_head', layer=layer, head=head)}**")
    st.caption(t("examples_marks"))
    causal = bool(model.info.causal)
    scorable_items = [item for item in items if scorable(item, direction, causal)]
    pool = [item for item in scorable_items if len(item.words) <= EXAMPLE_MAX_WORDS][:EXAMPLE_POOL]
    if len(pool) < min(len(scorable_items), EXAMPLE_POOL):
        st.caption(t("examples_long_skipped", limit=EXAMPLE_MAX_WORDS))
    if not pool:
        return
    with refused():
        show_examples(pool, head_finder.example_traces(workbench(), model, source, pool, hold=heavy_slot), direction,
                      layer, head, sink_aware, causal)


def show_examples(pool, example_traces, direction: str, layer: int, head: int, sink_aware: bool,
                  causal: bool) -> None:
    """Up to EXAMPLES_SHOWN passing and failing items of the pool, each a words x words heatmap of the head
    with its gold and attended cells outlined."""
    shown = {True: 0, False: 0}
    for index, (item, trace) in enumerate(zip(pool, example_traces)):
        read, gold = read_and_gold(item, direction)
        weights = word_attention(trace, item.word_spans, head=(layer, head))[0, 0]  # n, n
        guess = int(predictions(weights[None, None], sink_aware, item.word_spans.count(item.word_spans[0]))[0, 0, read])
        right = guess == gold
        if shown[right] >= EXAMPLES_SHOWN:
            continue
        shown[right] += 1
        words = list(item.words)
        verdict = t("passing") if right else t("failing")
        guessed = words[guess] if guess >= 0 else "-"
        with st.expander(f"{'✅' if right else '❌'} {verdict}: {md(words[read])} → {md(words[gold])} "
                         f"({t('example_guess', word=md(guessed))}) · {md(' '.join(words)[:80])}"):
            figure = plots.head_heatmap(weights, words, words, causal=causal, text=plot_text())
            mark_cells(figure, read, gold, guess)
            st.plotly_chart(figure, key=f"example_{direction}_{index}_{layer}_{head}")
        if min(shown.values()) >= EXAMPLES_SHOWN:
            break


def own_sentence(source: str) -> None:
    st.subheader(t("own_sentence"))
    text = st.text_input(t("sentence"), max_chars=MAX_TEXT, **bound("finder_text", "text"))
    if not text.strip():
        st.info(t("empty_text"))
        return
    with refused():  # over the budget, the page goes on to its retrieval section
        try:
            trace = traces.trace(workbench(), source, text, None)
        except ValueError as error:
            st.error(t("run_failed", error=md(error)))
            return
        word_pair_ranking(trace, key_prefix="finder")
