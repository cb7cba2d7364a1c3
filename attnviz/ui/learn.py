"""The Learn page: the formulas, MHA vs MQA vs GQA run live and measured side by side, who uses which, the
original Transformer's configuration beside the loaded model's, MHA -> GQA by mean-pooling the loaded
model's K/V heads (or, for a GQA/MQA model, whether heads that share K/V attend alike), and the code."""

from __future__ import annotations

import streamlit as st

from attnviz.ui import learn_mla, learn_positions
from attnviz.ui.focus import bound
from attnviz.ui.focus_line import focus_line
from attnviz.ui.guard import workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.kinds import extras_label, layers_label
from attnviz.ui.language import t
from attnviz.ui.sidebar import sidebar
from attnviz.ui.url_state import LEARN_D_MODELS, LEARN_HEADS, LEARN_TOKENS, seed_from_url, write_url
from attnviz.workbench import learn as lessons
from attnviz.workbench.learn import (
    MEASURE_LAYERS,
    MEASURE_LENGTHS,
    NAMED_MODELS,
    VARIANTS,
    group_choices,
    kv_heads_of,
    parameter_counts,
)

# Vaswani et al. 2017, Table 3: the base and big models, by row; a row's name is t(f"row_{row}"), or
# the symbol itself where there is no such key (d_model, d_ff, d_k = d_v).
ORIGINAL_TRANSFORMER = {
    "layers": (6, 6),
    "d_model": (512, 1024),
    "d_ff": (2048, 4096),
    "heads": (8, 16),
    "d_k = d_v": (64, 64),
    "dropout": (0.1, 0.3),
    "label_smoothing": (0.1, 0.1),
    "parameters": ("65M", "213M"),
}
NAMED_ROWS = {"layers", "heads", "dropout", "label_smoothing", "parameters"}

# The conversion and the head distances run the model on the visitor's sentence: bounded apart from the
# 512-token input limit, since they compare every pair of heads (or run the model twice).
SENTENCE_CHARS, SENTENCE_TOKENS = 300, 128


def attention_kinds() -> None:
    """Beyond MHA/GQA/MQA: how the families attnviz runs change where a head may look and what it scores."""
    st.subheader(t("learn_kinds"))
    st.markdown(t("learn_kinds_text"))
    rows = [{t("learn_col_family"): row.family, t("learn_col_model_type"): row.model_type,
             t("learn_col_layers"): layers_label(row.layers), t("learn_col_extras"): extras_label(row.extras)}
            for row in lessons.attention_kinds(workbench())]
    st.dataframe(rows, hide_index=True)
    st.caption(t("learn_kinds_caption"))


def render() -> None:
    model, source = sidebar()
    st.title(t("learn_title"))
    if model is not None:
        focus_line(source)
    formulas()
    d_model, n_heads, n_kv_heads = variants()
    n_tokens = measured(d_model, n_heads, n_kv_heads)
    named_models()
    learn_mla.render(model)
    attention_kinds()
    original(model)
    _, groups = kv_sections(model, source)
    learn_positions.render(model, source)
    with st.expander(t("learn_code")):
        st.code(lessons.attention_source(), language="python")
    write_url(d_model=d_model, heads=n_heads, kv_heads=n_kv_heads, tokens=n_tokens,
              groups=groups)


def formulas() -> None:
    st.subheader(t("learn_formulas"))
    st.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right) V")
    st.latex(r"\mathrm{head}_i = \mathrm{Attention}\big(XW^Q_i,\; XW^K_{g(i)},\; XW^V_{g(i)}\big), \qquad "
             r"g(i) = \left\lfloor \frac{i}{H / K} \right\rfloor")
    st.latex(r"\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_H)\, W^O")
    st.markdown(t("learn_formulas_text"))


def seed_choice(key: str, url_key: str, options, default) -> None:
    """Seed a widget from the link (or `default`), and keep its value one of `options` (a link, or a
    change of the heads, may leave it outside them)."""
    seed_from_url(key, default, url_key)
    if st.session_state[key] not in options:
        st.session_state[key] = default


def variants() -> tuple[int, int, int]:
    """One class, three variants: the user picks sizes and sees the chosen module's shapes and groups."""
    st.subheader(t("learn_variants"))
    seed_choice("learn_d_model", "d_model", LEARN_D_MODELS, 512)
    seed_choice("learn_heads", "heads", LEARN_HEADS, 8)
    cols = st.columns(3)
    d_model = cols[0].select_slider("d_model", LEARN_D_MODELS, key="learn_d_model")
    n_heads = cols[1].select_slider("n_heads", LEARN_HEADS, key="learn_heads")
    divisors = [k for k in range(1, n_heads + 1) if n_heads % k == 0]
    # GQA by default (a quarter of the query heads, as Llama 2 70B's 64 / 8 is near): with MHA's K = H the
    # side-by-side table's GQA row would repeat MHA's until the visitor moved the slider.
    grouped = [k for k in divisors if 1 < k < n_heads and 4 * k >= n_heads]
    seed_choice("learn_kv_heads", "kv_heads", divisors, grouped[0] if grouped else divisors[-1])
    n_kv_heads = cols[2].select_slider("n_kv_heads", divisors, key="learn_kv_heads")
    kind = "MHA" if n_kv_heads == n_heads else ("MQA" if n_kv_heads == 1 else "GQA")
    demo = lessons.module_demo(d_model, n_heads, n_kv_heads)
    st.dataframe([{
        t("column_variant"): kind,
        "x": str(demo["x"]),
        t("column_out"): str(demo["out"]),
        t("column_attn"): str(demo["attn"]),
        "head_dim": demo["head_dim"],
        t("column_parameters"): demo["parameters"],
        t("column_kv_cache"): 2 * n_kv_heads * demo["head_dim"],
        t("column_kv_map"): " ".join(f"{h}→{g}" for h, g in enumerate(demo["kv_group"])),
    }], hide_index=True, key="learn_table")
    st.caption(t("learn_shapes_caption"))
    st.caption(t("learn_variants_text"))
    return d_model, n_heads, n_kv_heads


def _no_steps(done: int, total: int) -> str:
    return t("heavy_starting")  # one step: no count to show


def measured(d_model: int, n_heads: int, n_groups: int) -> int:
    """MHA, GQA (the chosen KV heads as groups) and MQA side by side: parameters and the formula at once,
    the cache measured from the tensors and the time per token on request (shared once computed)."""
    st.subheader(t("learn_measured"))
    seed_choice("learn_tokens", "tokens", LEARN_TOKENS, 128)
    n_tokens = st.select_slider(t("learn_tokens"), LEARN_TOKENS, key="learn_tokens", help=t("learn_tokens_help"))
    result = lessons.stored(workbench(), ("learn_variants", d_model, n_heads, n_groups, n_tokens))
    if result is None:
        bench = workbench()
        result = heavy_action("learn_measure", t("learn_measure"), (d_model, n_heads, n_groups, n_tokens),
                              lambda job: lessons.measure_variants(bench, d_model, n_heads, n_groups, n_tokens,
                                                                   progress=job.progress),
                              lambda done, total: t("learn_measure_progress", done=done, total=total))
    st.table(variant_rows(d_model, n_heads, n_groups, n_tokens, result))
    if result is None:
        st.caption(t("learn_not_measured"))
    else:
        st.caption(t("learn_measured_caption", layers=result.n_layers, d_model=d_model, heads=n_heads,
                     n=n_tokens, dtype=result.dtype, repeats=result.repeats, threads=result.threads))
    return n_tokens


def variant_rows(d_model: int, n_heads: int, n_groups: int, n_tokens: int, result) -> list[dict]:
    kv = kv_heads_of(n_heads, n_groups)
    parameters = parameter_counts(d_model, n_heads, n_groups, MEASURE_LAYERS)
    head_dim = d_model // n_heads
    by_name = {} if result is None else {row.name: row for row in result.rows}
    rows = []
    for name in VARIANTS:
        k = kv[name]
        row = {
            t("column_variant"): name, t("learn_col_kv_heads"): k,
            t("column_parameters"): f"{parameters[name]:,}",
            t("learn_col_formula_bytes"): f"{2 * MEASURE_LAYERS * n_tokens * k * head_dim * 4:,}",
            t("learn_col_formula_ratio"): f"{k}/{n_heads} = {k / n_heads:.4f}",
        }
        measured_row = by_name.get(name)
        row[t("learn_col_cache_bytes")] = "—" if measured_row is None else f"{measured_row.cache_bytes:,}"
        row[t("learn_col_measured_ratio")] = "—" if measured_row is None else f"{measured_row.measured_ratio:.4f}"
        for length in MEASURE_LENGTHS:
            row[t("learn_col_ms", n=length)] = (
                "—" if measured_row is None else f"{measured_row.ms_per_token[length]:.3f}")
        rows.append(row)
    return rows


def named_models() -> None:
    st.subheader(t("learn_who"))
    rows = [{t("column_variant"): variant, t("learn_col_model"): name, t("learn_col_query_heads"): q,
             t("learn_col_kv_heads"): k}
            for variant, entries in NAMED_MODELS.items() for name, q, k in entries]
    st.table(rows)
    st.caption(t("learn_who_caption"))


def original(model) -> None:
    st.subheader(t("learn_original"))
    base, big = t("column_base"), t("column_big")
    rows = {key: {"": t(f"row_{key}") if key in NAMED_ROWS else key, base: str(b), big: str(g)}
            for key, (b, g) in ORIGINAL_TRANSFORMER.items()}
    if model is not None:
        config, info = model.config, model.info
        kind = t("kind_decoder") if config.causal else t("kind_encoder")
        ours = {
            "layers": f"{config.n_layers} ({kind})", "d_model": config.d_model, "d_ff": config.d_ff,
            "heads": f"{config.n_heads} ({info.attention_kind}, {config.kv_heads} KV)",
            "d_k = d_v": config.dim_per_head, "dropout": t("inference"), "label_smoothing": "-",
            "parameters": f"{info.n_parameters / 1e6:.0f}M",
        }
        for key, row in rows.items():
            row[info.name] = str(ours[key])
    st.dataframe(list(rows.values()), hide_index=True)
    st.caption(t("learn_original_text"))


def kv_sections(model, source: str) -> tuple[str | None, int | None]:
    """The loaded model's own K/V: MHA -> GQA conversion for an MHA model, head distances within and
    across KV groups for a GQA/MQA one. Returns (sentence, chosen g) for the link."""
    if model is None:
        st.subheader(t("learn_convert_title"))
        st.info(t("learn_no_model"))
        return None, None
    text = st.text_input(t("learn_sentence"), max_chars=SENTENCE_CHARS, **bound("learn_text", "text")).strip()
    n = len(model.encode(text).ids) if text else 0
    usable = 2 <= n <= SENTENCE_TOKENS  # a decoder's first row is left out of the head distances
    if n > SENTENCE_TOKENS:
        st.warning(t("learn_too_long", limit=SENTENCE_TOKENS, n=n))
    if model.info.attention_kind == "MHA":
        return text, conversion(model, source, text, usable)
    if model.info.attention_kind == "MLA":  # every head its own keys: no groups to pool or compare
        return text, None
    kv_groups(model, source, text, usable)
    return text, None


def conversion(model, source: str, text: str, usable: bool) -> int:
    st.subheader(t("learn_convert_title"))
    st.markdown(t("learn_convert_text"))
    choices = group_choices(model.config.n_heads)
    seed_choice("learn_groups", "groups", choices, choices[len(choices) // 2])
    g = st.select_slider(t("learn_groups"), choices, key="learn_groups")
    if not usable:
        return g
    result = lessons.stored(workbench(), ("learn_conversion", source, text, g))
    if result is None:
        bench = workbench()
        result = heavy_action("learn_convert_run", t("learn_convert_run"), (source, text, g),
                              lambda job: lessons.conversion(bench, model, source, text, g), _no_steps)
        if result is None:
            return g
    st.dataframe([{t("column_layer"): layer, t("learn_col_js_mean"): round(float(js), 4),
                   t("learn_col_js_max"): round(float(js_max), 4), t("learn_col_max_abs"): round(float(diff), 4)}
                  for layer, (js, js_max, diff) in enumerate(zip(result.js_mean, result.js_max, result.max_abs))],
                 hide_index=True, key="learn_convert_table")
    st.caption(t("learn_convert_hidden", g=g, n=result.n_tokens, relative=result.hidden_relative_l2,
                 cosine=result.hidden_cosine))
    return g


def kv_groups(model, source: str, text: str, usable: bool) -> None:
    info = model.info
    st.subheader(t("learn_convert_title"))
    st.info(t("learn_convert_not_mha", kind=info.attention_kind, heads=info.n_heads, kv=info.n_kv_heads))
    st.subheader(t("learn_kv_title"))
    st.markdown(t("learn_kv_text"))
    if info.attention_kind == "MQA":
        st.caption(t("learn_kv_mqa"))
    if not usable:
        return
    result = lessons.stored(workbench(), ("learn_kv_groups", source, text))
    if result is None:
        bench = workbench()
        result = heavy_action("learn_kv_run", t("learn_kv_run"), (source, text),
                              lambda job: lessons.kv_group_distances(bench, model, source, text), _no_steps)
        if result is None:
            return
    table = [{t("column_layer"): layer, t("learn_col_within"): _number(w), t("learn_col_across"): _number(a),
              t("learn_col_p"): _number(p)}
             for layer, (w, a, p) in enumerate(zip(result.within, result.across, result.p_value))]
    st.dataframe(table, hide_index=True, key="learn_kv_table")
    if info.attention_kind == "GQA":
        st.caption(t("learn_kv_summary", closer=int((result.within < result.across).sum()), layers=len(result.within),
                     sig=int((result.p_value < 0.05).sum()), within=float(result.within.mean()),
                     across=float(result.across.mean()), pairs_within=result.n_within_pairs,
                     pairs_across=result.n_across_pairs))


def _number(value) -> float | None:
    """A table cell: rounded, None (an empty cell) where the quantity is undefined (NaN)."""
    return None if value != value else round(float(value), 4)

