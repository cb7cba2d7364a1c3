"""The bounded line reader (issue 36, item 3): bytes and streams are read a block at a time, a reader that has
what it needs stops there, and a line, a file, a treebank sentence and a card's arcs are refused where they
cross their limits, having read only a bounded number of bytes, never the whole."""

from __future__ import annotations

import io
import random

import pytest

from attnviz.analysis import conllu, lines
from attnviz.analysis.conllu import parse_card_treebank, parse_conllu_sentences
from attnviz.analysis.lines import MAX_TEXT_CHARS, Lines, as_text, text_lines
from tests.helpers.streams import SLACK, Endless


def refusal(read) -> str:
    with pytest.raises(ValueError) as caught:
        read()
    return str(caught.value)


def test_a_50_mb_line_is_refused_after_its_limit_not_read_whole():
    stream = Endless(b"x")
    message = refusal(lambda: text_lines(stream, "one.txt", max_line_chars=MAX_TEXT_CHARS))
    assert message == "one.txt, line 1: a line of more than 20,000 characters; at most 20,000 are read"
    assert stream.read_bytes < 4 * MAX_TEXT_CHARS + SLACK
    # a line that ends, but is too long, is named with its length
    data = b"short\n" + b"y" * 25_000 + b"\n"
    assert refusal(lambda: text_lines(data, "t.txt", max_line_chars=MAX_TEXT_CHARS)) == (
        "t.txt, line 2: a line of 25,000 characters; at most 20,000 are read")


def test_the_first_n_texts_of_millions_of_lines_are_read_without_the_rest():
    stream = Endless(b"A sentence of the corpus.\n\n")  # 50 MB: 1.9 million texts
    texts, more = text_lines(stream, "many.txt", most=400)
    assert texts == ["A sentence of the corpus."] * 400 and more
    assert stream.read_bytes < 401 * 27 + SLACK
    # exactly N texts: nothing more is claimed
    assert text_lines(b"a\n\n b \n", "two.txt", most=2) == (["a", "b"], False)


def test_a_stream_that_never_ends_is_refused_at_the_byte_limit(monkeypatch):
    monkeypatch.setattr(lines, "MAX_FILE_BYTES", 2**20)
    stream = Endless(b"a line\n")
    assert refusal(lambda: text_lines(stream, "long.txt")) == (
        "long.txt: larger than 1 MiB, the most a file may hold here")
    assert stream.read_bytes <= 2**20 + SLACK
    zeros = Endless(b"\0")  # /dev/zero as a stream: not text, refused in the first block
    assert refusal(lambda: text_lines(zeros, "zero.txt")) == (
        "zero.txt, line 1: not a text file (NUL character at column 1)")
    assert zeros.read_bytes <= SLACK


def test_streamed_lines_are_the_whole_files_lines_across_block_edges(monkeypatch):
    """Small blocks cut \\r\\n pairs, multi-byte characters and a BOM: the lines, and the place an error names,
    are those of the file decoded whole (`as_text`, then `splitlines`)."""
    pieces = ["a", "é", "中", "😀", " ", "\n", "\r", "\r\n", "\x0c", "\u2028"]
    rng = random.Random(0)
    for block in (3, 4, 5, 7):
        monkeypatch.setattr(lines, "BLOCK_BYTES", block)
        for _ in range(300):
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
            for data in (text.encode(), b"\xef\xbb\xbf" + text.encode()):
                assert [line for _, line in Lines(io.BytesIO(data), "f")] == text.splitlines(), (block, text)
        for data in [b"ok\r\nab\xffcd", "é\n\n—x".encode() + b"\xff", "中\r\n\r\x00".encode(), b"\xef\xbb\xbfa\xff"]:
            assert refusal(lambda data=data: list(Lines(data, "f"))) == refusal(lambda data=data: as_text(data, "f"))


def test_a_corpus_reads_only_its_first_sentences():
    sentence = b"# text = The dog barks\n1\tThe\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tdog\t_\tNOUN\t_\t_\t3\tnsubj\t_\t_\n" \
               b"3\tbarks\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n"
    stream = Endless(sentence)  # 50 MB of sentences, 4.5 million arcs: far past items.MAX_ITEMS
    read = parse_conllu_sentences(stream, "big.conllu", most=401)
    assert len(read) == 401 and read[0].words == ("The", "dog", "barks")
    assert stream.read_bytes < 401 * len(sentence) + SLACK


def test_a_cards_treebank_is_bounded_by_sentence_length_and_arcs(monkeypatch):
    def sentence(n_words: int) -> bytes:
        rows = [f"{i}\tw{i}\t_\t_\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
                for i in range(1, n_words + 1)]
        return ("\n".join(rows) + "\n\n").encode()

    longest = conllu.CARD_MAX_WORDS
    assert len(parse_card_treebank(sentence(longest), "t.conllu").items) == longest - 1
    stream = Endless(sentence(longest + 1))
    assert refusal(lambda: parse_card_treebank(stream, "t.conllu")) == (
        f"t.conllu, line {longest + 1}: a sentence of more than {longest} words; split it")
    assert stream.read_bytes < SLACK
    assert len(parse_conllu_sentences(sentence(longest + 1), "t.conllu")) == 1  # a probe file's limit is wider
    monkeypatch.setattr(conllu, "CARD_MAX_ARCS", 5)
    stream = Endless(sentence(4))  # 3 arcs a sentence of 5 lines: the 6th arc is the second sentence's last word
    assert refusal(lambda: parse_card_treebank(stream, "t.conllu")) == (
        "t.conllu, line 9: more than 5 arcs (items); split the file")
    assert stream.read_bytes < SLACK
    assert (conllu.CARD_MAX_WORDS, conllu.CARD_MAX_ARCS) == (200, 5)
