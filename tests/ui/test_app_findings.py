"""The Findings page in both languages: every card drawn (claim, citation, model label, rule and data), the
run offered where the card applies to the loaded model (MiniLM, an encoder) and refused where it needs a
decoder. On the Chinese page English is left only in the cards' own data: the papers' names and titles, the
paper models' ids, the texts fed to the model, and the names a card's Chinese text keeps as they are (relation
labels such as dobj, commands, keys such as share_prunable, corpora such as MNLI)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from attnviz.interventions.cards import cards
from tests.conftest import MINILM, ROOT, require_offline
from tests.helpers.i18n import data_words, walk
from tests.helpers.pages import TIMEOUT

FINDINGS = str(ROOT / "app_pages" / "4_Findings.py")


def test_findings_page_in_both_languages(monkeypatch):
    require_offline(MINILM)
    monkeypatch.delenv("ATTNVIZ_DATA_DIR", raising=False)  # no server treebank: clark2019 asks for an upload
    at = AppTest.from_file(FINDINGS, default_timeout=TIMEOUT)
    at.session_state["lang"] = "zh"
    at.run()
    papers = data_words(*(text for c in cards() for text in (
        c.citation(), c.id, *c.paper_models, *(c.inputs or {}).get("texts", []), c.claim["zh"], c.rule["zh"],
        c.data["zh"], c.verified_note["zh"], (c.labels_note or {}).get("zh", ""))))
    walk(at, "zh", papers)
    walk(at, "en", papers)
    assert len([h for h in at.subheader if "et al" in h.value]) == len(cards())
    runs = {button.key for button in at.button if button.key and button.key.startswith("findings_run_")}
    assert runs == {"findings_run_michel2019", "findings_run_gu2024"}  # wu, olsson, wang need a decoder
    assert len([e for e in at.info if "decoder" in e.value]) == 3
