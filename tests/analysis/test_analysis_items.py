"""Probe items and their readers: JSONL, CoNLL-U, WinoBias.

Reader unit tests run on the self-written files in tests/fixtures/ with expected values worked out by
hand. The tests marked "reference data" check the real files (UD EWT and Chinese GSD dev, WinoBias
dev) in the reference-data folder: skipped where it is absent, failed where CI is set (conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnviz.analysis import (
    PRONOUNS,
    ProbeItem,
    parse_conllu,
    parse_probes,
    parse_winobias,
    read_conllu,
    read_conllu_sentences,
    read_probes,
    read_winobias,
)
from tests.conftest import FIXTURES, require_data

EN_FIXTURE = FIXTURES / "en_sample.conllu"
ZH_FIXTURE = FIXTURES / "zh_sample.conllu"
WINOBIAS_FIXTURE = FIXTURES / "winobias_sample.txt"
EWT = "ud/en_ewt-ud-dev.conllu"
GSD = "ud/zh_gsdsimp-ud-dev.conllu"
WINOBIAS = [f"winobias/{kind}_stereotyped_type{n}.txt.dev" for kind in ("pro", "anti") for n in (1, 2)]


# ---------------------------------------------------------------------------------------------
# ProbeItem


def test_item_text_and_word_spans():
    item = ProbeItem("subject-verb", ("The", "keys", "are", "here"), 1, 2)
    assert item.text == "The keys are here"
    assert [item.text[a:b] for a, b in item.word_spans] == list(item.words)
    chinese = ProbeItem("nsubj", ["我", "喜欢", "猫"], 0, 1, sep="")
    assert chinese.words == ("我", "喜欢", "猫")  # lists become tuples: items stay hashable
    assert chinese.text == "我喜欢猫"
    assert chinese.word_spans == [(0, 1), (1, 3), (3, 4)]


@pytest.mark.parametrize(("source", "target"), [(1, 1), (0, 4), (-1, 2), (True, 2), (1.0, 2)], ids=str)
def test_item_rejects_bad_indices(source, target):
    with pytest.raises(ValueError):
        ProbeItem("r", ("a", "b", "c", "d"), source, target)


# ---------------------------------------------------------------------------------------------
# JSONL


def test_parse_probes_reads_required_and_optional_keys(tmp_path):
    lines = [
        {"relation": "subject-verb", "words": ["The", "keys", "are", "here", "."], "source": 1, "target": 2},
        {"relation": "nsubj", "words": ["我", "喜欢", "猫"], "source": 0, "target": 1, "sep": "", "lang": "zh",
         "id": 7},
    ]  # fmt: skip
    path = tmp_path / "probes.jsonl"
    path.write_text(
        "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n\n", encoding="utf-8"
    )
    items = read_probes(path)
    assert items == [
        ProbeItem("subject-verb", ("The", "keys", "are", "here", "."), 1, 2),
        ProbeItem("nsubj", ("我", "喜欢", "猫"), 0, 1, sep="", lang="zh", id="7"),
    ]
    assert parse_probes(path.read_bytes()) == items


GOOD = '{"relation": "r", "words": ["a", "b", "c"], "source": 0, "target": 2}'


@pytest.mark.parametrize(
    "bad",
    [
        '{"relation": "r", "words": ["a", "b", "c"], "source": 1, "target": 1}',  # source == target
        '{"relation": "r", "words": ["a", "b", "c"], "source": 0, "target": 3}',  # out of range
        '{"relation": "r", "words": ["a", "b", "c"], "source": 0}',  # missing key
        '{"relation": "r", "words": ["a", "b", "c"], "source": 0, "target": 2',  # not JSON
        '{"relation": "r", "words": "a b c", "source": 0, "target": 2}',  # words not a list
        '{"relation": "r", "words": ["a", "", "c"], "source": 0, "target": 2}',  # empty word
        '{"relation": "r", "words": ["a", "b", "c"], "source": false, "target": 2}',  # bool index
        '["r", ["a", "b"], 0, 1]',  # not an object
    ],
)
def test_malformed_probe_line_names_its_line(bad, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{GOOD}\n\n{bad}\n{GOOD}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 3\b"):
        read_probes(path)


# ---------------------------------------------------------------------------------------------
# CoNLL-U


def raw_conllu_sentences(path: Path) -> list[list[list[str]]]:
    """Independent reading: the 10-column rows of each sentence, comments dropped."""
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if current:
                sentences.append(current)
            current = []
        elif not line.startswith("#"):
            current.append(line.split("\t"))
    if current:
        sentences.append(current)
    return sentences


EN_WORDS = [
    ("The", "old", "bridge", "was", "repaired", "by", "the", "town", "last", "spring", "."),
    ("My", "sister", "does", "n't", "like", "coffee", "."),
    ("My", "little", "brother", "ordered", "soup", "and", "my", "sister", "salad", "."),
]
# (id, relation, source, target) of every head != 0 arc, worked out from the fixture by hand
EN_ARCS = [
    ("fixture-en-1/1", "det", 0, 2),
    ("fixture-en-1/2", "amod", 1, 2),
    ("fixture-en-1/3", "nsubj:pass", 2, 4),
    ("fixture-en-1/4", "aux:pass", 3, 4),
    ("fixture-en-1/6", "case", 5, 7),
    ("fixture-en-1/7", "det", 6, 7),
    ("fixture-en-1/8", "obl:agent", 7, 4),
    ("fixture-en-1/9", "amod", 8, 9),
    ("fixture-en-1/10", "obl:tmod", 9, 4),
    ("fixture-en-1/11", "punct", 10, 4),
    ("fixture-en-2/1", "nmod:poss", 0, 1),
    ("fixture-en-2/2", "nsubj", 1, 4),
    ("fixture-en-2/3", "aux", 2, 4),
    ("fixture-en-2/4", "advmod", 3, 4),
    ("fixture-en-2/6", "obj", 5, 4),
    ("fixture-en-2/7", "punct", 6, 4),
    ("fixture-en-3/1", "nmod:poss", 0, 2),
    ("fixture-en-3/2", "amod", 1, 2),
    ("fixture-en-3/3", "nsubj", 2, 3),
    ("fixture-en-3/5", "obj", 4, 3),
    ("fixture-en-3/6", "cc", 5, 7),
    ("fixture-en-3/7", "nmod:poss", 6, 7),
    ("fixture-en-3/8", "conj", 7, 3),
    ("fixture-en-3/9", "orphan", 8, 7),
    ("fixture-en-3/10", "punct", 9, 3),
]


def test_conllu_fixture_sentences():
    sentences = read_conllu_sentences(EN_FIXTURE)
    assert [s.id for s in sentences] == ["fixture-en-1", "fixture-en-2", "fixture-en-3"]
    assert [s.words for s in sentences] == EN_WORDS
    assert sentences[0].heads == (3, 3, 5, 5, 0, 8, 8, 5, 10, 5, 5)
    assert sentences[0].deprels[2] == "nsubj:pass"  # subtypes are kept as written


def test_conllu_fixture_items_by_hand():
    items = read_conllu(EN_FIXTURE, lang="en")
    assert [(i.id, i.relation, i.source, i.target) for i in items] == EN_ARCS
    sentence_of = {f"fixture-en-{k + 1}": words for k, words in enumerate(EN_WORDS)}
    for item in items:
        assert item.words == sentence_of[item.id.rsplit("/", 1)[0]]
        assert item.sep == " " and item.lang == "en"
    assert items[0].text == "The old bridge was repaired by the town last spring."  # its own # text
    passive = items[2]
    assert (passive.words[passive.source], passive.words[passive.target]) == ("bridge", "repaired")


def test_multiword_ranges_are_skipped():
    # fixture-en-2 has the range line "3-4 doesn't" over the syntactic words 3 "does" and 4 "n't"
    raw = raw_conllu_sentences(EN_FIXTURE)[1]
    assert [row[0] for row in raw] == ["1", "2", "3-4", "3", "4", "5", "6", "7"]
    sentence = read_conllu_sentences(EN_FIXTURE)[1]
    assert sentence.words == ("My", "sister", "does", "n't", "like", "coffee", ".")
    assert "doesn't" not in sentence.words
    assert sentence.heads == (2, 5, 5, 5, 0, 5, 5)


def test_empty_nodes_are_skipped():
    # fixture-en-3 has the empty node "8.1 ordered" (the elided verb), HEAD and DEPREL "_"
    raw = raw_conllu_sentences(EN_FIXTURE)[2]
    assert [row[0] for row in raw][7:10] == ["8", "8.1", "9"]
    sentence = read_conllu_sentences(EN_FIXTURE)[2]
    assert len(sentence.words) == 10 and sentence.words.count("ordered") == 1
    assert sentence.heads == (3, 3, 4, 0, 4, 8, 8, 4, 8, 4)
    text = (
        "# sent_id = x\n"
        "1\tSue\tSue\tPROPN\t_\t_\t2\tnsubj\t_\t_\n"
        "2\tlikes\tlike\tVERB\t_\t_\t0\troot\t_\t_\n"
        "3\tcoffee\tcoffee\tNOUN\t_\t_\t2\tobj\t_\t_\n"
        "3.1\tlikes\tlike\tVERB\t_\t_\t_\t_\t2:conj\t_\n"
        "4\ttea\ttea\tNOUN\t_\t_\t3\tconj\t_\t_\n"
    )
    items = parse_conllu(text)
    assert [(i.relation, i.source, i.target, i.id) for i in items] == [
        ("nsubj", 0, 1, "x/1"),
        ("obj", 2, 1, "x/3"),
        ("conj", 3, 2, "x/4"),
    ]
    assert items[0].words == ("Sue", "likes", "coffee", "tea")


def test_sentence_without_sent_id_is_named_by_its_line():
    text = "# text = Dogs bark\n1\tDogs\t_\t_\t_\t_\t2\tnsubj\t_\t_\n2\tbark\t_\t_\t_\t_\t0\troot\t_\t_\n"
    assert [item.id for item in parse_conllu(text)] == ["line2/1"]


def test_chinese_fixture_reads_its_own_text():
    items = read_conllu(ZH_FIXTURE)
    assert [(i.id, i.relation, i.source, i.target) for i in items] == [
        ("fixture-zh-1/1", "nsubj", 0, 1),
        ("fixture-zh-1/3", "xcomp", 2, 1),
        ("fixture-zh-1/4", "obj", 3, 2),
        ("fixture-zh-1/5", "punct", 4, 1),
        ("fixture-zh-2/1", "det", 0, 2),
        ("fixture-zh-2/2", "clf", 1, 2),
        ("fixture-zh-2/3", "nsubj", 2, 4),
        ("fixture-zh-2/4", "advmod", 3, 4),
        ("fixture-zh-2/6", "punct", 5, 4),
    ]
    first, second = items[0], items[4]
    assert first.words == ("我", "喜欢", "喝", "茶", "。") and first.text == "我喜欢喝茶。"
    assert second.text == "这本书很有意思。"
    assert second.word_spans == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 7), (7, 8)]


def test_ewt_sentences_and_arcs():
    # reference data: the counts of UD English EWT dev (shared/data/README.md)
    path = require_data(EWT)
    sentences = read_conllu_sentences(path)
    assert len(sentences) == 2001
    items = read_conllu(path)
    raw_rows = [row for sentence in raw_conllu_sentences(path) for row in sentence]
    assert sum(row[7] == "nsubj" for row in raw_rows) == 1958  # the figure in shared/data/README.md
    assert sum(item.relation == "nsubj" for item in items) == sum(row[7] == "nsubj" for row in raw_rows)
    assert sum(item.relation == "nsubj:pass" for item in items) == sum(
        row[7] == "nsubj:pass" for row in raw_rows
    )
    assert any("-" in row[0] for row in raw_rows) and any("." in row[0] for row in raw_rows)
    arcs = [row for row in raw_rows if row[0].isdigit() and row[6] != "0"]
    # arcs inside a multi-word token ("did n't": n't -> did) are skipped (tests/analysis/test_treebank_text.py)
    assert 0 < len(arcs) - len(items) < 200
    for item in items:
        assert item.words[item.source] and item.sep == " "
    first = items[0]
    assert first.text == sentences[0].text


def test_chinese_gsd_reads_its_own_text():
    # reference data: UD Chinese GSDSimp dev
    path = require_data(GSD)
    assert len(read_conllu_sentences(path)) == 500
    items = read_conllu(path)
    assert len({item.id.rsplit("/", 1)[0] for item in items}) == 500
    for item in items[:200]:
        assert item.text == "".join(item.words)
        assert [item.text[a:b] for a, b in item.word_spans] == list(item.words)
    assert " " not in items[0].text


@pytest.mark.parametrize(
    ("bad", "line"),
    [
        ("1\tSue\tSue\tPROPN\t_\t_\t2\tnsubj\t_", 3),  # 9 columns
        ("1\tSue\tSue\tPROPN\t_\t_\t7\tnsubj\t_\t_", 3),  # head out of range
        ("1\tSue\tSue\tPROPN\t_\t_\tx\tnsubj\t_\t_", 3),  # head not an integer
        ("1\tSue\tSue\tPROPN\t_\t_\t1\tnsubj\t_\t_", 3),  # own head
        ("2\tSue\tSue\tPROPN\t_\t_\t0\tnsubj\t_\t_", 3),  # ids must count 1, 2, ...
    ],
)
def test_malformed_conllu_names_its_line(bad, line):
    text = "# sent_id = a\n# text = Sue likes\n" + bad + "\n2\tlikes\tlike\tVERB\t_\t_\t0\troot\t_\t_\n\n"
    with pytest.raises(ValueError, match=rf"<conllu>, line {line}\b"):
        parse_conllu(text)


# ---------------------------------------------------------------------------------------------
# WinoBias


def test_winobias_fixture_by_hand():
    items = read_winobias(WINOBIAS_FIXTURE)
    assert [item.id for item in items] == ["1", "2", "3", "4", "5"]
    assert all(item.relation == "coreference" and item.lang == "en" for item in items)
    nurse, driver, farmer, cashier, librarian = items

    # a three-word antecedent: the target is its last word; "opinion." is "opinion", "."
    assert nurse.words == tuple("The night nurse called the surgeon because she needed a second opinion .".split())
    assert (nurse.source, nurse.target) == (7, 2)
    assert nurse.text == "The night nurse called the surgeon because she needed a second opinion ."

    # "[the delivery driver]," : the comma is a word of its own, outside the mention
    assert driver.words[3:8] == ("the", "delivery", "driver", ",", "because")
    assert (driver.source, driver.target) == (8, 5)
    assert len(driver.words) == 12

    # "[the old farmer] 's": leading punctuation stays on its word
    assert farmer.words[5:8] == ("farmer", "'s", "coat")
    assert (farmer.words[farmer.source], farmer.source, farmer.target) == ("he", 10, 5)

    # a second pronoun of the same mention ("[her] keys"): the first pronoun is the source
    assert (cashier.words[cashier.source], cashier.source, cashier.target) == ("she", 7, 2)
    assert cashier.words[10] == "her"

    # "the [ old librarian]": the space inside the bracket changes nothing; "[him]." gives "him", "."
    assert librarian.words == tuple("The student asked the old librarian for help and thanked him .".split())
    assert (librarian.source, librarian.target) == (10, 5)


@pytest.mark.parametrize("name", WINOBIAS, ids=lambda name: name.rsplit("/", 1)[-1])
def test_winobias_files(name):
    # reference data: the four WinoBias dev files, 396 lines each
    items = read_winobias(require_data(name))
    assert len(items) == 396
    assert [item.id for item in items] == [str(k) for k in range(1, 397)]
    for item in items:
        assert item.relation == "coreference"
        assert item.words[item.source].lower() in PRONOUNS
        assert item.words[item.target].lower() not in PRONOUNS
        assert all("[" not in word and "]" not in word for word in item.words)


@pytest.mark.parametrize(
    "bad",
    [
        "[The night nurse] called the surgeon because [she] was tired.",  # no index
        "2 [The night nurse] called [the surgeon] because she was tired.",  # no pronoun mention
        "2 [The night nurse] called the surgeon because [she was tired.",  # unclosed bracket
        "2 The night nurse called the surgeon because [she] was tired.",  # one mention only
        "2 [The night nurse] called [the surgeon] because [she] was tired.",  # two other mentions
        "2 [The [night] nurse] called the surgeon because [she] was tired.",  # nested brackets
    ],
)
def test_malformed_winobias_names_its_line(bad):
    text = WINOBIAS_FIXTURE.read_text(encoding="utf-8").splitlines()[0] + "\n" + bad + "\n"
    with pytest.raises(ValueError, match=r"<winobias>, line 2\b"):
        parse_winobias(text)


def test_parse_items_dispatches_every_format():
    from attnviz.analysis import parse_items

    probes = '{"relation": "r", "words": ["a", "b"], "source": 0, "target": 1}\n'
    conllu = "1\t猫\t_\t_\t_\t_\t2\tnsubj\t_\t_\n2\t叫\t_\t_\t_\t_\t0\troot\t_\t_\n\n"
    wino = "1 [The cat] sat because [it] was tired.\n"
    assert parse_items("probes", probes, "p")[0].words == ("a", "b")
    assert parse_items("conllu", conllu, "c")[0].text == "猫 叫"  # no # text, no SpaceAfter=No: a space
    assert parse_items("winobias", wino, "w")[0].relation == "coreference"
    with pytest.raises(ValueError, match="unknown item format"):
        parse_items("csv", "", "x")
