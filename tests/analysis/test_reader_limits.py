"""The readers' stated limits, their linear time, and lone surrogates (issue 16): every refusal is a
ValueError naming the file and the 1-based line; the command line prints `error: ...` and exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from attnviz.__main__ import main
from attnviz.analysis import blimp_jsonl, conllu, detect_format, items, parse_items
from attnviz.analysis.blimp_jsonl import parse_pairs
from attnviz.analysis.items import MAX_ITEM_WORDS, MAX_ITEMS, MAX_WORD_CHARS, ProbeItem, sentence_items
from tests.conftest import MINILM, ROOT, require_data


def conllu_sentence(n_words: int) -> bytes:
    """One sentence of n words, every word's head word 1 (so n - 1 arcs)."""
    rows = [f"{i}\tw{i}\t_\t_\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
            for i in range(1, n_words + 1)]
    return ("\n".join(rows) + "\n").encode()


def probe_line(words, source=0, target=1) -> str:
    return json.dumps({"relation": "r", "words": words, "source": source, "target": target})


def error_of(kind: str, data: bytes | str, name: str) -> str:
    with pytest.raises(ValueError) as caught:
        parse_items(kind, data, name)
    return str(caught.value)


# ---------------------------------------------------------------------------------------------
# Linear time


def test_a_30000_word_conllu_sentence_parses_in_linear_time(monkeypatch):
    # CPU seconds, not wall: on CI's shared 2 cores the 0.3 s parse took 1.02 s of wall time. The
    # bounds are ~10x the idle figures and far below the quadratic reader's 83 s.
    data = conllu_sentence(30_000)
    start = time.process_time()
    message = error_of("conllu", data, "long.conllu")  # the stated limit refuses it at once...
    assert time.process_time() - start < 1.0
    assert message == (f"long.conllu, line {MAX_ITEM_WORDS + 1}: a sentence of more than {MAX_ITEM_WORDS} words;"
                       " split it")
    # ...and without the limit the reader is linear: every arc no longer re-checks and re-joins the
    # sentence (it took 83 s, quadratic in the words).
    monkeypatch.setattr(items, "MAX_ITEM_WORDS", 100_000)
    start = time.process_time()
    parsed = parse_items("conllu", data, "long.conllu")
    assert time.process_time() - start < 4.0
    assert len(parsed) == 29_999
    assert parsed[5].text is parsed[0].text  # joined once, shared by the sentence's items
    assert parsed[5].word_spans == parsed[0].word_spans and parsed[5].words is parsed[0].words
    assert (parsed[5].source, parsed[5].target, parsed[5].relation, parsed[5].id) == (6, 0, "dep", "line1/7")


def test_sentence_items_check_what_probe_item_checks():
    words = ("The", "dog", "barks")
    made = sentence_items(words, [("nsubj", 1, 2, "s/2"), ("det", 0, 1, "s/1")], sep=" ", lang="en")
    assert made == [ProbeItem("nsubj", words, 1, 2, lang="en", id="s/2"),
                    ProbeItem("det", words, 0, 1, lang="en", id="s/1")]
    assert made[1].text == "The dog barks" and made[1].word_spans == [(0, 3), (4, 7), (8, 13)]
    for arc in [("r", 0, 0, None), ("r", 0, 3, None), ("r", True, 1, None), ("r", "0", 1, None)]:
        with pytest.raises(ValueError):
            sentence_items(words, [arc])
    with pytest.raises(ValueError, match="non-empty string"):
        sentence_items(("a", ""), [("r", 0, 1, None)])


def test_the_real_treebanks_pass_the_limits():
    for name in ("en_ewt-ud-dev.conllu", "zh_gsdsimp-ud-dev.conllu"):
        path = require_data(f"ud/{name}")
        start = time.perf_counter()
        parsed = conllu.read_conllu(path)
        assert len(parsed) > 10_000
        assert time.perf_counter() - start < 10
        assert max(len(item.words) for item in parsed) < MAX_ITEM_WORDS // 5


def test_hostile_lines_of_every_reader_take_linear_time():
    start = time.perf_counter()
    # format detection: r"\d+ .*\[.*\]" backtracked quadratically on a line of '['
    with pytest.raises(ValueError, match=r"^d\.txt, line 1: cannot tell the format"):
        detect_format("d.txt", b"1 " + b"[" * 1_000_000)
    assert detect_format("d.txt", b"1 " + b"[" * 1_000_000 + b"]") == "winobias"
    # one JSONL item of 100,000 words, one WinoBias line of 100,000 words: refused by the limit
    assert "at most 1000 words an item" in error_of("probes", probe_line(["w"] * 100_000).encode(), "p.jsonl")
    wino = b"1 [The cat] sat because [it] " + b"w " * 100_000 + b"\n"
    assert error_of("winobias", wino, "w.txt").startswith("w.txt, line 1: 100005 words; at most 1000")
    assert time.perf_counter() - start < 5


# ---------------------------------------------------------------------------------------------
# Stated limits


def test_words_per_item_and_characters_per_word():
    at_limit = probe_line(["w"] * MAX_ITEM_WORDS) + "\n"
    assert len(parse_items("probes", at_limit, "p.jsonl")[0].words) == MAX_ITEM_WORDS
    over = at_limit + probe_line(["w"] * (MAX_ITEM_WORDS + 1)) + "\n"
    assert error_of("probes", over, "p.jsonl") == (
        f"p.jsonl, line 2: {MAX_ITEM_WORDS + 1} words; at most {MAX_ITEM_WORDS} words an item are read")
    assert len(parse_items("conllu", conllu_sentence(MAX_ITEM_WORDS), "t.conllu")) == MAX_ITEM_WORDS - 1

    long_word = "x" * (MAX_WORD_CHARS + 1)
    assert error_of("probes", probe_line(["a", long_word]), "p.jsonl") == (
        f"p.jsonl, line 1: a word has {MAX_WORD_CHARS + 1} characters; at most {MAX_WORD_CHARS} are read")
    conllu = f"1\ta\t_\t_\t_\t_\t0\troot\t_\t_\n2\t{long_word}\t_\t_\t_\t_\t1\tdep\t_\t_\n"
    assert error_of("conllu", conllu, "t.conllu") == (
        f"t.conllu, line 2: FORM has {MAX_WORD_CHARS + 1} characters; at most {MAX_WORD_CHARS} are read")
    wino = f"1 [The {long_word}] sat because [it] was tired.\n"
    assert error_of("winobias", wino, "w.txt").startswith("w.txt, line 1: a word has 1001 characters")
    with pytest.raises(ValueError, match="at most 1000 words"):
        ProbeItem("r", ["w"] * (MAX_ITEM_WORDS + 1), 0, 1)  # the API too


def test_items_per_file(monkeypatch):
    monkeypatch.setattr(items, "MAX_ITEMS", 3)
    probes = (probe_line(["a", "b"]) + "\n") * 4
    assert len(parse_items("probes", (probe_line(["a", "b"]) + "\n") * 3, "p.jsonl")) == 3
    assert error_of("probes", "\n" + probes, "p.jsonl") == "p.jsonl, line 5: more than 3 items; split the file"
    assert len(parse_items("conllu", conllu_sentence(4), "t.conllu")) == 3
    # the 4th arc (word 5, line 6 after a comment) crosses the limit
    assert error_of("conllu", b"# c\n" + conllu_sentence(5), "t.conllu") == (
        "t.conllu, line 6: more than 3 arcs (items); split the file")
    wino = b"1 [The cat] sat because [it] was tired.\n" * 4
    assert error_of("winobias", wino, "w.txt") == "w.txt, line 4: more than 3 items; split the file"
    assert MAX_ITEMS == 250_000 and blimp_jsonl.MAX_PAIRS == 100_000


# ---------------------------------------------------------------------------------------------
# Lone surrogates


SURROGATE_PROBES = (probe_line(["a", "b"]) + "\n" + '{"relation": "r", "words": ["a", "\\ud800"], '
                    '"source": 0, "target": 1}\n').encode()
SURROGATE_PAIRS = (b'{"sentence_good": "The cat runs.", "sentence_bad": "The cat run."}\n'
                   b'{"sentence_good": "The cat \\udfff runs.", "sentence_bad": "The cat run."}\n')


def test_a_lone_surrogate_escape_is_a_located_value_error():
    assert json.loads('"\\ud800"') == "\ud800"  # json.loads accepts it
    message = error_of("probes", SURROGATE_PROBES, "s.jsonl")
    assert message == "s.jsonl, line 2: a lone surrogate escape (\\ud800-\\udfff without its pair) is not text"
    for field in ('"relation": "\\uDBFF"', '"sep": "\\ud800"', '"lang": "\\ud800"', '"id": "\\ud800"'):
        line = '{"relation": "r", "words": ["a", "b"], "source": 0, "target": 1, ' + field + "}"  # last key wins
        assert error_of("probes", line, "s.jsonl").startswith("s.jsonl, line 1: a lone surrogate escape")
    with pytest.raises(ValueError) as caught:
        parse_pairs(SURROGATE_PAIRS, "p.jsonl")
    assert str(caught.value).startswith("p.jsonl, line 2: a lone surrogate escape")
    # a surrogate pair is one character and fine; an escaped backslash before "ud800" is no escape
    pair = parse_items("probes", probe_line(["a", "\U0001F600"]) + "\n" + r'{"relation": "r", "words": '
                       r'["a", "\\ud800"], "source": 0, "target": 1}', "s.jsonl")
    assert pair[0].words[1] == "\U0001F600" and pair[1].words[1] == "\\ud800"


def test_surrogates_in_text_or_bytes_are_located_value_errors():
    # a str upload can hold a raw surrogate; UTF-8 bytes cannot (the encoded form is not UTF-8)
    for kind, text in [("probes", probe_line(["a", "b"]) + "\n" + probe_line(["a", "b"]).replace("b", "\ud800")),
                       ("conllu", "1\ta\t_\t_\t_\t_\t0\troot\t_\t_\n2\t\ud800\t_\t_\t_\t_\t1\tdep\t_\t_\n"),
                       ("winobias", "1 [The cat] sat because [it] was tired.\n2 [The \udc00] sat because [it] was.\n")]:
        assert error_of(kind, text, "u.txt").startswith("u.txt, line 2: not text (a lone surrogate at column ")
        data = text.encode("utf-8", "surrogatepass")
        assert error_of(kind, data, "u.txt").startswith("u.txt, line 2: not UTF-8 text (byte 0xed at column ")
    with pytest.raises(ValueError, match="lone surrogate"):
        ProbeItem("r", ["a", "\ud800"], 0, 1)
    with pytest.raises(ValueError, match="lone surrogate"):
        blimp_jsonl.MinimalPair("good \ud800", "bad")


def test_cli_refuses_lone_surrogates_with_exit_2(tmp_path, capsys):
    probes, pairs = tmp_path / "s.jsonl", tmp_path / "p.jsonl"
    probes.write_bytes(SURROGATE_PROBES)
    pairs.write_bytes(SURROGATE_PAIRS)
    # both files are read before any model is loaded
    assert main(["probe", "--model", MINILM, "--probes", str(probes)]) == 2
    assert capsys.readouterr().err == (
        "error: s.jsonl, line 2: a lone surrogate escape (\\ud800-\\udfff without its pair) is not text\n")
    assert main(["blimp", "--model", MINILM, "--data", str(pairs)]) == 2
    assert capsys.readouterr().err == (
        "error: p.jsonl, line 2: a lone surrogate escape (\\ud800-\\udfff without its pair) is not text\n")


def test_blimp_cli_process_prints_no_traceback_for_a_lone_surrogate(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(SURROGATE_PAIRS)
    done = subprocess.run([sys.executable, "-m", "attnviz", "blimp", "--model", MINILM, "--data", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.startswith("error: p.jsonl, line 2: a lone surrogate escape")
    assert "Traceback" not in done.stderr and str(tmp_path) not in done.stderr
