"""Probe items and their readers: JSONL, CoNLL-U (UD EWT and Chinese GSD), WinoBias."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnviz.analysis.items import (
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

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
EWT = DATA / "ud" / "en_ewt-ud-dev.conllu"
GSD = DATA / "ud" / "zh_gsdsimp-ud-dev.conllu"
WINOBIAS = [
    DATA / "winobias" / f"{kind}_stereotyped_type{n}.txt.dev" for kind in ("pro", "anti") for n in (1, 2)
]


def need(path: Path) -> Path:
    # Reference data is part of the workspace: a missing file is a failure, not a skip.
    assert path.is_file(), f"missing reference data {path}"
    return path


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


def test_ewt_sentences_and_arcs():
    path = need(EWT)
    sentences = read_conllu_sentences(path)
    assert len(sentences) == 2001
    items = read_conllu(path)
    raw_rows = [row for sentence in raw_conllu_sentences(path) for row in sentence]
    assert sum(row[7] == "nsubj" for row in raw_rows) == 1958  # the figure in shared/data/README.md
    assert sum(item.relation == "nsubj" for item in items) == sum(row[7] == "nsubj" for row in raw_rows)
    assert sum(item.relation == "nsubj:pass" for item in items) == sum(
        row[7] == "nsubj:pass" for row in raw_rows
    )
    arcs = [row for row in raw_rows if row[0].isdigit() and row[6] != "0"]
    assert len(items) == len(arcs)
    for item, row in zip(items, arcs):
        assert item.relation == row[7]
        assert item.words[item.source] == row[1]
        assert item.source == int(row[0]) - 1
        assert item.target == int(row[6]) - 1
        assert item.sep == " "


def test_ewt_first_sentence_by_hand():
    items = read_conllu(need(EWT))
    first_id = items[0].id.rsplit("/", 1)[0]
    first = [item for item in items if item.id.startswith(first_id + "/")]
    words = first[0].words
    raw = raw_conllu_sentences(EWT)[0]
    assert list(words) == [row[1] for row in raw if row[0].isdigit()]
    # every non-root word is the source of exactly one item
    assert sorted(item.source for item in first) == [
        int(r[0]) - 1 for r in raw if r[0].isdigit() and r[6] != "0"
    ]


def test_multiword_ranges_are_skipped():
    path = need(EWT)
    raw = raw_conllu_sentences(path)
    index = next(k for k, sentence in enumerate(raw) if any("-" in row[0] for row in sentence))
    sentence = read_conllu_sentences(path)[index]
    rows = raw[index]
    syntactic = [row for row in rows if row[0].isdigit()]
    ranges = [row for row in rows if "-" in row[0]]
    assert len(sentence.words) == len(syntactic) == len(rows) - len(ranges)
    assert list(sentence.words) == [row[1] for row in syntactic]
    start, end = (int(x) for x in ranges[0][0].split("-"))
    assert ranges[0][1] not in sentence.words[start - 1 : end]  # "don't" is read as "do" + "n't"


def test_empty_nodes_are_skipped():
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


def test_chinese_gsd_with_empty_separator():
    path = need(GSD)
    assert len(read_conllu_sentences(path)) == 500
    items = read_conllu(path, sep="")
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


@pytest.mark.parametrize("path", WINOBIAS, ids=lambda p: p.name)
def test_winobias_files(path):
    items = read_winobias(need(path))
    assert len(items) == 396
    assert [item.id for item in items] == [str(k) for k in range(1, 397)]
    for item in items:
        assert item.relation == "coreference"
        assert item.words[item.source].lower() in PRONOUNS
        assert item.words[item.target].lower() not in PRONOUNS
        assert all("[" not in word and "]" not in word for word in item.words)


def test_winobias_first_line_by_hand():
    # "1 [The developer] argued with the designer because [he] did not like the design."
    item = read_winobias(need(WINOBIAS[0]))[0]
    expected = "The developer argued with the designer because he did not like the design ."
    assert len(item.words) == 14 and " ".join(item.words) == expected  # "design." is "design", "."
    assert (item.source, item.target) == (7, 1)  # "he" -> "developer", the last word of the mention
    assert item.text == expected


def test_winobias_tokenisation_cases():
    items = parse_winobias(
        "162 The mechanic fixed [the housekeeper] 's car and then [she] wrote a thankful note.\n"
        "22 The farmer offered apples to [the housekeeper], because [she] might like them.\n"
        "27 [The developer] visited the hairdresser because [he] needed to cut [his] hair.\n"
        "176 The teacher asked the [ physician] about the best course of action and believed [him].\n"
    )
    possessive, comma, two_pronouns, odd_bracket = items
    assert possessive.words[4:6] == ("housekeeper", "'s")
    assert (possessive.words[possessive.source], possessive.target) == ("she", 4)
    assert comma.words[5:8] == ("the", "housekeeper", ",")
    assert (comma.source, comma.target) == (9, 6)
    assert (two_pronouns.words[two_pronouns.source], two_pronouns.source, two_pronouns.target) == ("he", 6, 1)
    assert odd_bracket.words[-2:] == ("him", ".")
    assert (odd_bracket.words[odd_bracket.target], odd_bracket.source) == (
        "physician",
        len(odd_bracket.words) - 2,
    )


@pytest.mark.parametrize(
    "bad",
    [
        "[The developer] argued with the designer because [he] left.",  # no index
        "2 [The developer] argued with [the designer] because he left.",  # no pronoun mention
        "2 [The developer] argued with the designer because [he left.",  # unclosed bracket
        "2 The developer argued with the designer because [he] left.",  # one mention only
    ],
)
def test_malformed_winobias_names_its_line(bad):
    text = "1 [The developer] argued with the designer because [he] did not like the design.\n" + bad + "\n"
    with pytest.raises(ValueError, match=r"<winobias>, line 2\b"):
        parse_winobias(text)


def test_parse_items_dispatches_every_format():
    from attnviz.analysis import parse_items

    probes = '{"relation": "r", "words": ["a", "b"], "source": 0, "target": 1}\n'
    conllu = "1\t猫\t_\t_\t_\t_\t2\tnsubj\t_\t_\n2\t叫\t_\t_\t_\t_\t0\troot\t_\t_\n\n"
    wino = "1 [The cat] sat because [it] was tired.\n"
    assert parse_items("probes", probes, "p")[0].words == ("a", "b")
    assert parse_items("conllu", conllu, "c", sep="")[0].text == "猫叫"
    assert parse_items("winobias", wino, "w")[0].relation == "coreference"
    with pytest.raises(ValueError, match="unknown item format"):
        parse_items("csv", "", "x")
