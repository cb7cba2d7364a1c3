"""The Learn page's "how position enters attention": the positional schemes side by side, each with its
formula and the position-only part of one head's score as a heatmap over the positions of one sentence
(attnviz.workbench.positions computes them on our own modules). Formulas are constant LaTeX; the
sentence's words reach the page only as plotly labels, which plots escape."""

from __future__ import annotations

import streamlit as st

from attnviz import plots
from attnviz.trace import split_words
from attnviz.ui.focus import focus
from attnviz.ui.guard import workbench
from attnviz.ui.language import plot_text, t
from attnviz.ui.url_state import seed_from_url
from attnviz.workbench import positions

DEFAULT_SENTENCE = "The keys to the cabinet are on the table."
HEADS = 16  # the head picker's range; each scheme takes it modulo its model's heads
FORMULAS = {
    "sinusoidal": r"p_{i,2k} = \sin\frac{i}{10000^{2k/d}},\quad p_{i,2k+1} = \cos\frac{i}{10000^{2k/d}},"
                  r"\qquad s^{\mathrm{pos}}_{ij} = \frac{p_i \cdot p_j}{\sqrt{d}}",
    "learned": r"x_i = e(w_i) + P_i,\qquad \cos(P_i, P_j) = \frac{P_i \cdot P_j}{\lVert P_i \rVert\,\lVert P_j \rVert}",
    "rotary": r"s_{ij} = \frac{(R_{\Theta,i}\, q_i)^\top (R_{\Theta,j}\, k_j)}{\sqrt{d}}"
              r" = \frac{q_i^\top R_{\Theta,\,j-i}\, k_j}{\sqrt{d}}",
    "relative": r"s_{ij} = q_i \cdot k_j + b_h\big(\mathrm{bucket}(j - i)\big)",
    "disentangled": r"s_{ij} = \frac{Q^c_i \cdot K^c_j + Q^c_i \cdot K^r_{\delta(i,j)}"
                    r" + K^c_j \cdot Q^r_{\delta(j,i)}}{\sqrt{3d}}",
    "alibi": r"s_{ij} = \frac{q_i \cdot k_j}{\sqrt{d}} + m_h\, j \quad (j \le i),\qquad m_h = 2^{-8h/H}",
}


def render(model=None, model_name: str | None = None) -> None:
    st.subheader(t("learn_pos_title"))
    st.markdown(t("learn_pos_text"))
    sentence = focus().text.strip() or DEFAULT_SENTENCE
    words = [sentence[s:e] for s, e in split_words(sentence)]
    n = positions.n_positions(len(words))
    labels = words[:n] + [f"#{i}" for i in range(len(words), n)]  # a one-word sentence still has 2 positions
    seed_from_url("learn_pos_head", 0)
    if not 0 <= st.session_state["learn_pos_head"] < HEADS:
        st.session_state["learn_pos_head"] = 0
    head = st.select_slider(t("learn_pos_head"), list(range(HEADS)), key="learn_pos_head",
                            help=t("learn_pos_head_help"))
    st.caption(t("learn_pos_sentence", n=n))
    panels = [positions.panel(workbench(), scheme, n, head, model, model_name) for scheme in positions.SCHEMES]
    if any(p.source == "untrained" for p in panels):
        st.info(t("learn_pos_untrained_note"))
    for row in range(0, len(panels), 2):
        for column, item in zip(st.columns(2), panels[row:row + 2]):
            with column:
                scheme_panel(item, labels)


def code(name: str) -> str:
    """A model's name (a loaded model's may be the visitor's text) as an inline code span: Markdown, HTML and
    LaTeX are not read inside one, and a name can close it only with a backtick, which is dropped."""
    return "`" + " ".join(str(name).replace("`", "").split())[:120] + "`"


def scheme_panel(item, labels: list[str]) -> None:
    st.markdown(f"**{t(f'learn_pos_{item.scheme}')}**")
    st.latex(FORMULAS[item.scheme])
    if item.matrix is None:
        st.info(t("learn_pos_absent"))
        return
    heads = t("learn_pos_heads", n=item.n_heads) if item.n_heads > 1 else ""
    st.caption(f"{code(item.model)} · {t(f'learn_pos_source_{item.source}')} {heads}")
    what = t("learn_pos_cosine" if item.scheme == "learned" else "learn_pos_score")  # learned: cosines
    figure = plots.difference_heatmap(item.matrix, labels, what, text=plot_text())
    figure.update_layout(height=340, margin={"l": 10, "r": 10, "t": 10, "b": 10})
    st.plotly_chart(figure, key=f"learn_pos_{item.scheme}_chart", width="stretch", config={"displaylogo": False})
    st.caption(t(f"learn_pos_reading_{item.scheme}"))
