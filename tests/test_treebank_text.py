"""Treebanks read their own text (issue 19, item 2): each sentence's `# text`, else its surface forms joined
with a space except after SpaceAfter=No; the words of a multi-word token share its span, arcs between them
are skipped and counted; a `# text` that disagrees with the forms falls back to the joined forms, counted.
Before, the words were joined with spaces ("do n't", "table .", "我 喜欢 喝 茶 。") whatever the file said."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from attnviz.analysis import parse_conllu_reading, read_conllu_sentences, sentence_text, word_attention
from attnviz.analysis.conllu import conllu_reading
from attnviz.analysis.scoring import ScoreAccumulator, _row_predictions, predictions
from attnviz.cli.main import main
from attnviz.trace import AttentionTrace
from tests.conftest import FIXTURES, MINILM, require_data

EWT = "ud/en_ewt-ud-dev.conllu"
GSD = "ud/zh_gsdsimp-ud-dev.conllu"


def row(word_id, form, head, deprel, misc="_"):
    return f"{word_id}\t{form}\t_\t_\t_\t_\t{head}\t{deprel}\t_\t{misc}"


def sentence(*rows, text=None, sent_id="s"):
    head = [f"# sent_id = {sent_id}"] + ([f"# text = {text}"] if text is not None else [])
    return "\n".join(head + list(rows)) + "\n\n"


DONT = [row("1", "I", "3", "nsubj"), row("2-3", "don't", "_", "_"), row("2", "do", "4", "aux"),
        row("3", "n't", "2", "advmod"), row("4", "know", "0", "root", "SpaceAfter=No"), row("5", ".", "4", "punct")]


def test_the_text_and_each_words_span_multiword_tokens_shared():
    read = parse_conllu_reading(sentence(*DONT, text="I don't know."))
    item = read.items[0]
    assert item.text == "I don't know." and item.words == ("I", "do", "n't", "know", ".")
    assert item.word_spans == [(0, 1), (2, 7), (2, 7), (8, 12), (12, 13)]
    assert (read.sentences, read.skipped_arcs, read.disagreed) == (1, 1, 0)  # n't -> do is inside "don't"
    assert [(i.source, i.target) for i in read.items] == [(0, 2), (1, 3), (4, 3)]


def test_without_a_text_the_surface_forms_are_joined_as_space_after_says():
    read = parse_conllu_reading(sentence(*DONT))
    assert read.items[0].text == "I don't know." and read.disagreed == 0
    unspaced = [row("1", "我", "2", "nsubj", "SpaceAfter=No"), row("2", "喜欢", "0", "root", "SpaceAfter=No"),
                row("3", "茶", "2", "obj", "SpaceAfter=No"), row("4", "。", "2", "punct", "SpaceAfter=No")]
    assert parse_conllu_reading(sentence(*unspaced)).items[0].text == "我喜欢茶。"


def test_a_text_that_disagrees_with_the_forms_is_replaced_and_counted():
    read = parse_conllu_reading(sentence(*DONT, text="I do not know.") + sentence(*DONT, text="  I don't  know . "))
    assert read.disagreed == 1
    first, second = read.items[0], read.items[3]
    assert first.text == "I don't know."  # the joined forms
    assert second.text == "I don't  know ." and second.word_spans[3] == (9, 13)  # only spaces between: agrees


def test_malformed_ranges_name_their_line():
    with pytest.raises(ValueError, match=r"<conllu>, line 3: the multiword range 3-4"):
        parse_conllu_reading(sentence(row("1", "a", "0", "root"), row("3-4", "xy", "_", "_"),
                                      row("2", "b", "1", "dep")))
    with pytest.raises(ValueError, match=r"<conllu>, line 3: the multiword range ends after"):
        parse_conllu_reading(sentence(row("1", "a", "0", "root"), row("2-3", "bc", "_", "_"),
                                      row("2", "b", "1", "dep")))


def raw_sentences(path):
    """(# text, rows) per sentence, read with plain string operations, not with the reader under test."""
    blocks = path.read_text(encoding="utf-8").strip().split("\n\n")
    result = []
    for block in blocks:
        lines = block.splitlines()
        text = next((line.split("=", 1)[1].strip() for line in lines if line.startswith("# text =")), None)
        result.append((text, [line.split("\t") for line in lines if not line.startswith("#")]))
    return result


def test_ewt_is_read_from_its_own_text():
    path = require_data(EWT)
    read = conllu_reading(read_conllu_sentences(path))
    raw = raw_sentences(path)
    texts = {item.id.rsplit("/", 1)[0]: item.text for item in read.items}
    sentence_ids = [s.id for s in read_conllu_sentences(path)]
    assert len(raw) == len(sentence_ids) == 2001
    for sid, (text, _) in zip(sentence_ids, raw):
        if sid in texts:
            assert texts[sid] == text  # EWT's texts all agree with their forms
    assert read.disagreed == 0
    # "do n't" is read as "don't": the words of the multi-word token share its span
    dont = next(item for item in read.items if re.search(r"\bdon't\b", item.text, re.IGNORECASE)
                and "n't" in item.words)
    k = dont.words.index("n't")
    assert dont.word_spans[k] == dont.word_spans[k - 1]
    assert dont.text[slice(*dont.word_spans[k])].lower() in {"don't", "didn't", "doesn't"}
    assert "do n't" not in dont.text.lower()
    # the skipped arcs, counted from the raw rows: dependent and head inside one range
    skipped = 0
    for _, rows in raw:
        ranges = [tuple(map(int, r[0].split("-"))) for r in rows if re.fullmatch(r"\d+-\d+", r[0])]
        for r in rows:
            if r[0].isdigit() and r[6] != "0":
                dep, head = int(r[0]), int(r[6])
                skipped += any(a <= dep <= b and a <= head <= b for a, b in ranges)
    assert skipped > 50 and read.skipped_arcs == skipped
    n_arcs = sum(r[0].isdigit() and r[6] != "0" for _, rows in raw for r in rows)
    assert len(read.items) == n_arcs - skipped


def test_chinese_gsd_is_read_without_spaces():
    path = require_data(GSD)
    read = conllu_reading(read_conllu_sentences(path))
    raw = raw_sentences(path)
    assert read.sentences == 500 and read.disagreed == 0 and read.skipped_arcs == 0
    texts = {item.text for item in read.items}
    assert texts == {text for text, _ in raw}
    first = read.items[0]
    assert " " not in first.text and first.text == "".join(first.words)
    assert [first.text[a:b] for a, b in first.word_spans] == list(first.words)


def test_words_of_one_span_have_the_same_rows_and_columns():
    item = parse_conllu_reading(sentence(*DONT, text="I don't know.")).items[0]
    # tokens: "I", " don", "'t", " know", "." (a byte-level BPE's split)
    offsets = [(0, 1), (1, 5), (5, 7), (7, 12), (12, 13)]
    rng = np.random.default_rng(0)
    attentions = rng.random((1, 2, 5, 5), dtype=np.float32)
    attentions /= attentions.sum(-1, keepdims=True)
    trace = AttentionTrace(tokens=["t"] * 5, offsets=offsets, sequence_ids=[0] * 5, input_ids=list(range(5)),
                           attentions=attentions, kv_group=[0, 1], words=[], word_of_token=[None] * 5,
                           truncated=False, texts=(item.text,))
    w = word_attention(trace, item.word_spans)
    np.testing.assert_array_equal(w[:, :, 1], w[:, :, 2])
    np.testing.assert_array_equal(w[:, :, :, 1], w[:, :, :, 2])
    # "don't" = tokens 1 and 2 (a token belongs to the span its first non-space character lies in)
    np.testing.assert_allclose(w[0, 0, 1, 3], attentions[0, 0, 1:3, 3].astype(np.float64).mean())
    # the scorer's predictions are those of the plain rule on that matrix: ties to the lower word
    units = [0, 1, 1, 2, 3]
    for sink_aware in (False, True):
        np.testing.assert_array_equal(
            _row_predictions(attentions, [0, 1, 1, 2, 3], units, [0, 1, 2, 3, 4], sink_aware),
            predictions(w, sink_aware))
    accumulator = ScoreAccumulator()
    accumulator.add(trace, parse_conllu_reading(sentence(*DONT, text="I don't know.")).items)
    assert sum(score.n for score in accumulator.result().values()) == 3


def test_probe_cli_reads_the_treebank_text_and_reports_what_it_left_out(tmp_path, capsys):
    path = tmp_path / "t.conllu"
    path.write_text(sentence(*DONT, text="I don't know.") + sentence(*DONT, text="I do not know.", sent_id="t"),
                    encoding="utf-8")
    assert main(["probe", "--model", MINILM, "--conllu", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["treebank"] == {"sentences": 2, "skipped_arcs": 2, "text_disagreed": 1}
    assert sum(block["n"] for block in result["relations"].values()) == 6
    assert main(["probe", "--model", MINILM, "--conllu", str(path), "--sep", ""]) == 0
    out, err = capsys.readouterr()
    assert "2 arcs inside a multi-word token skipped" in out and "disagreed with the forms in 1" in out
    assert "--sep is no longer used" in err


def test_the_fixture_keeps_its_own_spacing():
    read = conllu_reading(read_conllu_sentences(FIXTURES / "en_sample.conllu"))
    assert {item.text for item in read.items} >= {"My sister doesn't like coffee."}
    text, spans, disagreed = sentence_text(read_conllu_sentences(FIXTURES / "en_sample.conllu")[1])
    assert not disagreed and spans[2] == spans[3] == (10, 17)
