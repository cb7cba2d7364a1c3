"""The Findings page: replication cards (findings.cards), each a published finding about heads with the
paper's numbers beside ours on the loaded model and a verdict. Each card is a heavy action (ui/heavy.py:
progress, Cancel, the heavy-work slot); workbench.findings computes, caches and shares its report."""

from __future__ import annotations

import streamlit as st

from attnviz.ui.escape import md
from attnviz.ui.focus import focus, head_label
from attnviz.ui.focus_line import focus_line
from attnviz.ui.guard import guarded, workbench
from attnviz.ui.heavy import heavy_action
from attnviz.ui.language import t
from attnviz.ui.sidebar import sidebar
from attnviz.workbench import findings as work
from attnviz.workbench.head_finder import parsed_file

UPLOAD_MB = 20  # matches server.maxUploadSize in .streamlit/config.toml


def render() -> None:
    model, source = sidebar()
    st.title(t("findings_title"))
    st.caption(t("findings_caption"))
    if model is None:
        return
    focus_line(source)
    for card in work.cards():
        card_view(model, source, card)


def _lang() -> str:
    return focus().lang


@st.fragment
@guarded
def card_view(model, source: str, card: work.Card) -> None:
    lang = _lang()
    with st.container(border=True):
        st.subheader(md(f"{card.paper['authors'].split(',')[0].split()[-1]} et al. {card.paper['year']}"))
        st.markdown(md(card.claim[lang]))
        st.caption(md(card.citation()))
        if card.is_paper_model(source):
            st.success(t("findings_same_model"))
        else:
            # the card's own hub ids, as code (they hold no backtick); the loaded source is the visitor's: escaped
            paper = ", ".join(f"`{m}`" for m in card.paper_models) if card.paper_models else t("findings_not_released")
            st.warning(t("findings_not_paper_model", paper=paper, model=md(source)))
        with st.expander(t("findings_how")):
            st.markdown(t("findings_rule") + " " + md(card.rule[lang]))
            st.markdown(t("findings_data") + " " + md(card.data[lang]))
            if card.labels_note:
                st.markdown(md(card.labels_note[lang]))
            st.caption((t("findings_verified") if card.verified else t("findings_unverified")) + " "
                       + md(card.verified_note[lang]))
            if card.inputs and "texts" in card.inputs:
                st.dataframe({t("findings_column_text"): list(card.inputs["texts"])}, hide_index=True,
                             key=f"findings_texts_{card.id}")
        if not work.applies(card, model):
            st.info(t("findings_decoders_only"))
            return
        unmeasurable = work.cannot_measure(card, source)
        if unmeasurable is not None:  # said before anyone waits for the run
            st.info(t("findings_cannot_measure", checks=md(", ".join(card.checks)),
                      paper=", ".join(f"`{m}`" for m in card.paper_models)))
        items = data = name = None
        if card.needs == "conllu":
            items, data, name = treebank(card)
            if not items:
                return
        need = work.too_large(workbench(), card, model)
        if need is not None:
            st.error(t("findings_too_large", need=need / 1e9, budget=workbench().budget / 1e9))
            return
        bench = workbench()
        result = work.shared_report(bench, card, source, data)
        if result is None:
            result = heavy_action(
                f"findings_run_{card.id}", t("findings_run"), (card.id, source, work.data_key(data)),
                lambda job: work.run(bench, card, model, source, items, data, progress=job.progress),
                lambda done, total: t("findings_progress", done=done, total=total))
        if result is not None:
            show(card, result)
        st.caption(t("findings_command"))
        st.code(command(card, source, name), language="bash")


def treebank(card: work.Card):
    """(items, the file's bytes, its name) of the treebank the card scores: an upload, else the UD English
    treebank of the reference-data folder when the server has one; errors shown, never raised."""
    upload = st.file_uploader(t("findings_upload"), type=["conllu"], key=f"findings_upload_{card.id}")
    st.caption(t("findings_upload_help", mb=UPLOAD_MB))
    if upload is not None:
        name, data = upload.name, upload.getvalue()
    else:
        found = work.default_treebank()
        if found is None:
            st.info(t("findings_no_treebank"))
            return None, None, None
        name, data = found.name, found.read_bytes()
        st.caption(t("findings_treebank", name=md(name)))
    try:
        parsed = parsed_file(workbench(), "conllu", data, name, card=True)  # held to the card's bounds
    except ValueError as error:  # malformed input names the file and line
        st.error(t("findings_bad_file", error=md(error)))
        return None, None, None
    return parsed.items, data, name


def show(card: work.Card, result: dict) -> None:
    """The paper's numbers beside ours, each with its verdict, then the card's own detail; a table, so every
    number and name is data, never markup."""
    rows = result["checks"]
    st.dataframe({
        t("findings_column_key"): [row["key"] for row in rows],
        t("findings_column_paper"): [_number(row["paper"]) for row in rows],
        t("findings_column_ours"): [_number(row["ours"]) for row in rows],
        t("findings_column_verdict"): [_row_verdict(card, row) for row in rows],
    }, hide_index=True, key=f"findings_checks_{card.id}")
    measured = [row for row in rows if row["agrees"] is not None]
    if card.recalled:
        st.info(t("findings_recalled"))
    elif not measured:
        st.info(t("findings_not_measured"))
    elif all(row["agrees"] for row in measured):
        st.success(t("findings_agrees_all"))
    else:
        st.warning(t("findings_differs_some", n=sum(not row["agrees"] for row in measured), total=len(measured)))
    detail(card, result["ours"])


def _row_verdict(card: work.Card, row: dict) -> str:
    """One check by the card's own rule: a bound reads as a bound ("at most 0.05: ours 0.026, holds"), a
    tolerance as one, and a number the card only recalls gets no verdict (findings.cards.reads)."""
    if row["difference"] is None:
        return t("findings_row_unmeasured")
    paper, ours = float(row["paper"]), float(row["ours"])
    if card.recalled:
        return t("findings_row_recalled", paper=paper, ours=ours)
    limit = {"at_most": paper + card.tolerance, "at_least": paper - card.tolerance}.get(card.compare, paper)
    rule = t(f"findings_bound_{card.compare}", limit=limit, tolerance=card.tolerance, paper=paper)
    if card.compare == "within":
        return t("findings_row_agrees" if row["agrees"] else "findings_row_differs", rule=rule, ours=ours,
                 difference=row["difference"])
    return t("findings_row_holds" if row["agrees"] else "findings_row_fails", rule=rule, ours=ours)


def _number(value) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _heads(heads) -> str:
    return ", ".join(f"{head_label(layer, head)} {score:.2f}" for layer, head, score in heads or [])


def detail(card: work.Card, ours: dict) -> None:
    """What each card computes besides the checked numbers: Clark's best heads and baselines, Michel's curve,
    Wu's and Olsson's top heads."""
    if card.id == "clark2019":
        labels = list(card.labels)
        st.dataframe({
            t("findings_column_relation"): [f"{s} → {card.labels[s] or '-'}" for s in labels],
            t("findings_column_paper_head"): [_head(card.numbers.get(s, {}).get("best_head")) for s in labels],
            t("findings_column_our_head"): [_head((ours.get(s) or {}).get("best_head")) for s in labels],
            t("findings_column_baseline"): [_number((ours.get(s) or {}).get("baseline")) for s in labels],
            t("findings_column_items"): [(ours.get(s) or {}).get("n", 0) for s in labels],
            t("findings_column_read"): [(ours.get(s) or {}).get("n_scored", 0) for s in labels],
        }, hide_index=True, key="findings_clark_heads", column_config={
            t("findings_column_read"): st.column_config.NumberColumn(help=t("findings_column_read_help"))})
    elif card.id == "michel2019":
        st.caption(t("findings_michel_curve", max=ours["importance_max"], median=ours["importance_median"]))
        st.line_chart({t("findings_column_removed"): [share for share, _ in ours["curve"]],
                       t("findings_column_metric"): [metric for _, metric in ours["curve"]]},
                      x=t("findings_column_removed"), y=t("findings_column_metric"))
    elif card.id == "wu2024" and ours.get("share") is not None:
        st.caption(t("findings_wu_top", n=ours["n_retrieval"], total=ours["n_heads"], heads=_heads(ours["top"])))
    elif card.id == "wu2024":
        st.warning(t("findings_wu_none", n=ours["prompts"]))
    elif card.id == "olsson2022":
        st.caption(t("findings_olsson_top", heads=_heads(ours["prefix_matching_top"])))
        if ours.get("icl_score") is not None:
            st.caption(t("findings_olsson_losses", early=ours["loss_early"], late=ours["loss_late"]))
    elif card.id == "gu2024":
        st.caption(t("findings_gu_sinks", n=ours["n_sinks"], total=ours["n_heads"], texts=ours["n_texts"]))
    elif card.id == "wang2022":
        by = t("findings_wang_paper_heads") if ours["overlap"] is not None else t("findings_wang_our_heads")
        st.caption(t("findings_wang_top", heads=_heads(ours["strongest"]), recovered=ours["recovered"], by=by))


def _head(head) -> str:
    return "-" if not head else head_label(*head)


def command(card: work.Card, source: str, treebank_name: str | None) -> str:
    """The one line that reproduces the card with the command line (the model's name shell-quoted)."""
    import shlex

    extra = f" --conllu {shlex.quote(treebank_name)}" if treebank_name else ""
    return f"python -m attnviz replicate {card.id} --model {shlex.quote(source)}{extra} --json"
