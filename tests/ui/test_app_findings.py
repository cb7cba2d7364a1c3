"""The Findings page in both languages: every card drawn (claim, citation, model label, rule and data), the
run offered where the card applies to the loaded model (MiniLM, an encoder) and refused where it needs a
decoder. On the Chinese page English is left only in the cards' own data: the papers' names and titles, the
paper models' ids, the texts fed to the model, and the names a card's Chinese text keeps as they are (relation
labels such as dobj, commands, keys such as share_prunable, corpora such as MNLI)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from attnviz.analysis.reference_data import DATA_ENV
from attnviz.findings.cards import cards
from tests.conftest import MINILM, ROOT, require_offline
from tests.helpers.i18n import data_words, walk
from tests.helpers.pages import TIMEOUT

FINDINGS = str(ROOT / "app_pages" / "4_Findings.py")


# Two sentences of our own in CoNLL-U: the server's treebank as the page finds it, without the UD data.
OWN_TREEBANK = """# text = The dog barks.
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# text = She reads books.
1\tShe\tshe\tPRON\tPRP\t_\t2\tnsubj\t_\t_
2\treads\tread\tVERB\tVBZ\t_\t0\troot\t_\t_
3\tbooks\tbook\tNOUN\tNNS\t_\t2\tobj\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_

"""


def test_findings_page_in_both_languages(monkeypatch, tmp_path):
    require_offline(MINILM)
    # An empty reference-data folder, whatever the machine has beside the repository: clark2019 asks for an upload.
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    at = AppTest.from_file(FINDINGS, default_timeout=TIMEOUT)
    at.query_params["lang"] = "zh"
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
    assert any("Upload a Universal Dependencies treebank" in e.value for e in at.info)

    # With a treebank in the server's folder the card names it (and its licence) instead, in either language.
    (tmp_path / "ud").mkdir()
    (tmp_path / "ud" / "en_ewt-ud-dev.conllu").write_text(OWN_TREEBANK, encoding="utf-8")
    at.run()
    walk(at, "zh", papers | data_words("en_ewt-ud-dev.conllu"))  # the file's name is data
    assert any("en\\_ewt" in c.value for c in at.caption), [c.value for c in at.caption]
    assert not any("通用依存树库" in e.value for e in at.info)
