"""The Atlas page (issue 37, "Browse"): the loaded model's head atlas (workbench.atlas: HeadVis's six metrics of
every head pooled over a corpus), as HeadVis's head finder: every head a point on two metrics, coloured by a third,
with filters; a click on a point selects that head: its six metrics beside the model's distribution (its rank per
metric), its detector scores where the atlas has them, its relation scores, "Open in Explore" (the focus's head,
then the Explore page), its examples with its attention drawn on their tokens and its histograms
(ui/atlas_examples.py), and a published atlas beside ours (ui/atlas_published.py). Then the seed's table (Head 1
subject-verb ... Head 4 semantic association) where the atlas has relations. Without an atlas, the build over the
shipped probe sets is a heavy action (ui/heavy.py)."""

from __future__ import annotations

import shlex

import streamlit as st

from attnviz import plots
from attnviz.ui import atlas_examples, atlas_published
from attnviz.ui.escape import md
from attnviz.ui.focus import focus, head_label, set_focus
from attnviz.ui.focus_line import focus_line
from attnviz.ui.guard import workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import t
from attnviz.ui.sidebar import sidebar
from attnviz.ui.widgets import picked_head
from attnviz.workbench import atlas as work

EXPLORE_PAGE = atlas_examples.EXPLORE_PAGE
SCATTER = "atlas_scatter"
SELECTED = "_atlas_head"  # (atlas folder, layer, head) of the head a click chose; no widget owns the key
DEFAULT_AXES = ("prev_token_score", "self_attention_score", "pattern_entropy")
SEED_HEADS = {"subject-verb": 1, "coreference": 2, "modifier": 3, "semantic": 4}  # the probe sets' relations
SEED_KEYS = ("subject_verb", "coreference", "modification", "semantic_association")  # atlas_relations.SEED's keys


def metric_label(name: str) -> str:
    return t(f"atlas_metric_{name}")


def render() -> None:
    model, source = sidebar()
    st.title(t("atlas_title"))
    st.caption(t("atlas_caption"))
    if model is None:
        return
    focus_line(source)
    if not work.can_build(model):
        st.info(t("atlas_not_self_attention"))
        return
    bench = workbench()
    folder = work.atlas_folder(bench, source)
    if folder is None:
        st.info(t("atlas_switched_off"))
        return
    try:
        found = work.stored(bench, source)
    except ValueError:
        st.warning(t("atlas_unreadable"))
        return
    if found is None:
        found = build(model, source)
        if found is None:
            return
    show(found, model, source, folder.name)


def build(model, source: str) -> dict | None:
    """The first-use build over the shipped probe sets, as a heavy action; the atlas once it has finished."""
    bench = workbench()
    plan = work.builtin_plan(bench, model, source)
    st.info(t("atlas_none", model=md(source)))
    found = heavy_action(
        "atlas_build", t("atlas_build", n=plan["texts"], seconds=max(1, round(plan["seconds"]))), (source,),
        lambda job: work.build_builtin(bench, model, source, progress=job.progress),
        lambda done, total: t("atlas_progress", done=done, total=total), primary=True)
    if found is None:
        own_corpus(source)
    return found


def own_corpus(source: str) -> None:
    """The command that builds an atlas over a person's own corpus where this page reads it."""
    name = work.folder_name(work.store_key(workbench(), source))
    st.caption(t("atlas_own_corpus", name=name))
    st.code(f"python -m attnviz atlas build --model {shlex.quote(source)} --texts FILE --out ATLAS_FOLDER/{name}",
            language="bash")


def _heads(n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    return [(layer, head) for layer in range(n_layers) for head in range(n_heads)]


def _values(grid) -> list[float]:
    return [float(v) for row in grid for v in row if isinstance(v, (int, float))]


def show(found: dict, model, source: str, scope: str) -> None:
    grids = found.get("metrics") or {}
    names = [name for name in work.METRICS if name in grids]
    if not names:
        st.warning(t("atlas_unreadable"))
        return
    n_layers = len(grids[names[0]])
    n_heads = max((len(row) for row in grids[names[0]]), default=0)
    st.caption(t("atlas_about", model=md(found.get("model", source)), texts=found.get("n_texts", 0),
                 seq_len=found.get("seq_len", "-")))
    if found.get("complete") is False:
        st.warning(t("atlas_incomplete"))
    st.subheader(t("atlas_finder_title"))
    st.caption(t("atlas_finder_caption"))
    columns = st.columns(3)
    # labels made now, in this run's language (ui/sinks.py says why)
    labels = {name: metric_label(name) for name in names}
    axes = []
    for column, role, default in zip(columns, ("x", "y", "colour"), DEFAULT_AXES):
        index = names.index(default) if default in names else 0
        axes.append(column.selectbox(t(f"atlas_axis_{role}"), names, index=index, key=f"atlas_axis_{role}",
                                     format_func=labels.get, placeholder=t("choose_option")))
    heads = filtered(grids, names, labels, n_layers, n_heads, scope)
    selected = _selected(scope, n_layers, n_heads)
    figure = plots.head_scatter(heads, grids[axes[0]], grids[axes[1]], grids[axes[2]], metric_label(axes[0]),
                                metric_label(axes[1]), metric_label(axes[2]), selected=selected)
    st.plotly_chart(figure, key=SCATTER, width="stretch", on_select=lambda: _pick(scope), selection_mode="points",
                    config={"displaylogo": False})
    st.caption(t("atlas_shown", n=figure.layout.meta["points"], total=n_layers * n_heads))
    dashboard(found, names, grids, scope, *selected)
    label = head_label(*selected)
    atlas_examples.section(model, work.atlas_folder(workbench(), source), *selected, label, "atlas_ours", own=True,
                           seq_len=int(found.get("seq_len") or 0))
    atlas_published.section(model, source, found, names, labels, *selected, label)
    seed(found, source)


def filtered(grids: dict, names: list[str], labels: dict, n_layers: int, n_heads: int,
             scope: str) -> list[tuple[int, int]]:
    """The heads the filters keep: a range of one chosen metric, and a range of layers."""
    columns = st.columns([1, 2, 2])
    metric = columns[0].selectbox(t("atlas_filter_metric"), names, key="atlas_filter_metric",
                                  format_func=labels.get, placeholder=t("choose_option"))
    heads = _heads(n_layers, n_heads)
    values = _values(grids[metric])
    if values and min(values) < max(values):
        low, high = float(min(values)), float(max(values))
        chosen = columns[1].slider(t("atlas_filter_range", metric=metric_label(metric)), low, high, (low, high),
                                   key=f"atlas_range_{scope}_{metric}", format="%.4f")
        heads = [(layer, head) for layer, head in heads
                 if isinstance(v := grids[metric][layer][head], (int, float)) and chosen[0] <= v <= chosen[1]]
    if n_layers > 1:
        first, last = columns[2].slider(t("atlas_filter_layers"), 0, n_layers - 1, (0, n_layers - 1),
                                        key=f"atlas_layers_{scope}")
        heads = [(layer, head) for layer, head in heads if first <= layer <= last]
    return heads


def _pick(scope: str) -> None:
    """The scatter's click callback (it runs before the page): the point's head becomes the page's head."""
    picked = picked_head(st.session_state.get(SCATTER))
    if picked is not None:
        st.session_state[SELECTED] = (scope, *picked)


def _selected(scope: str, n_layers: int, n_heads: int) -> tuple[int, int]:
    """The head a click chose on this atlas; before any, the focus head (when the model has it), else L0 H0."""
    held = st.session_state.get(SELECTED)
    if isinstance(held, tuple) and len(held) == 3 and held[0] == scope:
        layer, head = held[1], held[2]
    else:
        layer, head = focus().layer, focus().head
    if 0 <= layer < n_layers and 0 <= head < n_heads:
        return int(layer), int(head)
    return 0, 0


def _number(value) -> str:
    return "–" if not isinstance(value, (int, float)) else f"{value:.4f}"


def dashboard(found: dict, names: list[str], grids: dict, scope: str, layer: int, head: int) -> None:
    """One head: its six metrics with their rank among the model's heads, beside the model's distribution; its
    relation scores where the atlas has them; the button that opens it in Explore."""
    label = head_label(layer, head)
    st.subheader(t("atlas_head_title", head=label))
    left, right = st.columns([2, 3])
    ranks = [work.head_ranks(grids[name], layer, head) for name in names]
    medians = [_median(grids[name]) for name in names]
    left.dataframe({
        t("atlas_column_metric"): [metric_label(name) for name in names],
        t("atlas_column_value"): [_number(value) for value, _, _ in ranks],
        t("atlas_column_rank"): [f"{rank} / {of}" if rank is not None else "–" for _, rank, of in ranks],
        t("atlas_column_median"): [_number(m) for m in medians],
    }, hide_index=True, key="atlas_head_metrics")
    left.caption(t("atlas_rank_help"))
    detectors(left, found, layer, head)
    if left.button(t("atlas_open_explore", head=label), key="atlas_open_explore", type="primary"):
        set_focus(layer=layer, head=head)
        st.switch_page(EXPLORE_PAGE)
    right.plotly_chart(plots.metric_strips({name: grids[name] for name in names},
                                           {name: metric_label(name) for name in names}, layer, head, label),
                       key="atlas_strips", width="stretch", config={"displaylogo": False})
    rows = work.relation_scores(found, layer, head)
    if rows:
        st.markdown(t("atlas_relations_title", head=label))
        st.dataframe({
            t("atlas_column_relation"): [relation_label(row["relation"]) for row in rows],
            t("atlas_column_direction"): [t(f"atlas_direction_{row['direction']}") for row in rows],
            t("atlas_column_score"): [_number(row["score"]) for row in rows],
            t("atlas_column_rank"): [f"{row['rank']} / {row['of']}" if row["rank"] is not None else "–"
                                     for row in rows],
        }, hide_index=True, key="atlas_head_relations")
    else:
        st.caption(t("atlas_no_relations"))
    weights(found, label, layer, head)


def detectors(column, found: dict, layer: int, head: int) -> None:
    """The head's detector scores (previous token, duplicate token, induction on repeated random tokens) with
    their ranks, where the atlas has them (workbench.atlas.detector_grids: nothing when it has none)."""
    grids = work.detector_grids(found)
    if not grids:
        return
    ranks = {name: work.head_ranks(grid, layer, head) for name, grid in grids.items()}
    column.dataframe({
        t("atlas_column_detector"): [t(f"atlas_detector_{name}") for name in grids],
        t("atlas_column_value"): [_number(ranks[name][0]) for name in grids],
        t("atlas_column_rank"): [f"{ranks[name][1]} / {ranks[name][2]}" if ranks[name][1] is not None else "–"
                                 for name in grids],
        t("atlas_column_median"): [_number(_median(grid)) for grid in grids.values()],
    }, hide_index=True, key="atlas_head_detectors")
    column.caption(t("atlas_detectors_help"))


def _median(grid) -> float | None:
    values = sorted(_values(grid))
    return values[len(values) // 2] if values else None


def weights(found: dict, label: str, layer: int, head: int) -> None:
    """The head's sink share and causal weight, one line each, where the atlas has them."""
    share = work.head_ranks(found.get("sink_share") or [], layer, head)[0]
    if share is not None:
        st.markdown(t("atlas_sink_share_line", head=label, value=_number(share)))
    for relation, entry in (found.get("causal") or {}).items():
        grid = entry.get("grid") if isinstance(entry, dict) else None
        value, rank, of = work.head_ranks(grid or [], layer, head)
        if value is not None:
            st.markdown(t("atlas_causal_line", head=label, relation=md(relation_label(str(relation))),
                          value=_number(value), rank=rank, of=of, n=entry.get("n_pairs", 0)))


def relation_label(relation: str) -> str:
    """The seed's four relations in the page's language; any other (a treebank's label, nsubj) as it is."""
    return t(f"atlas_relation_{relation.replace('-', '_')}") if relation in SEED_HEADS else relation


def seed(found: dict, source: str) -> None:
    """The seed's table filled from the atlas's relations (workbench.atlas.seed_table), or what it takes."""
    st.subheader(t("atlas_seed_title"))
    rows = work.seed_table(found)
    if rows is None:
        st.info(t("atlas_seed_needs_relations"))
        st.code(f"python -m attnviz atlas build --model {shlex.quote(source)} --conllu FILE.conllu --out DIR",
                language="bash")
        return
    st.dataframe({
        t("atlas_seed_column_head"): [t("atlas_seed_head", n=number) for number in range(1, len(rows) + 1)],
        t("atlas_column_relation"): [_seed_name(row) for row in rows],
        t("atlas_seed_column_measure"): [relation_label(str(row.get("relation") or "–")) for row in rows],
        t("atlas_seed_column_best"): [_best(row) for row in rows],
        t("atlas_column_score"): [_number((row.get("best") or {}).get("accuracy")) for row in rows],
        t("atlas_seed_column_causal"): [_number((row.get("causal") or {}).get("effect")) for row in rows],
        t("atlas_seed_column_example"): [_example(row) for row in rows],
    }, hide_index=True, key="atlas_seed_table")
    st.caption(t("atlas_seed_caption"))


def _seed_name(row: dict) -> str:
    key = str(row.get("key", "")).replace("-", "_")
    return t(f"atlas_seed_{key}") if key in SEED_KEYS else str(row.get(focus().lang) or row.get("en") or "–")


def _best(row: dict) -> str:
    best = row.get("best") or {}
    layer, head = best.get("layer"), best.get("head")
    return head_label(layer, head) if isinstance(layer, int) and isinstance(head, int) else "–"


def _example(row: dict) -> str:
    """The example sentence with its two words (source → target), or why there is none, in the page's words."""
    if not row.get("available"):
        return t("atlas_seed_absent")
    example = row.get("example")
    if not isinstance(example, dict) or not example.get("text"):
        return t("atlas_seed_no_example")
    return f"{example['text']} ({example.get('source_word', '')} → {example.get('target_word', '')})"
