"""Files from anonymous visitors and bad command lines: a clear ValueError or argparse error naming
the file and line, never a traceback, never a server path, never minutes of work."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from attnviz.__main__ import main
from attnviz.analysis import detect_format, parse_items, read_items, winobias
from tests.conftest import MINILM, ROOT, require_data

DEEP = b"[" * 100_000
# Two valid lines of each format (a CoNLL-U sentence's first two words, their heads in range).
GOOD = {
    "probes": [b'{"relation": "r", "words": ["a", "b"], "source": 0, "target": 1}'] * 2,
    "conllu": [b"1\tDogs\tdog\tNOUN\t_\t_\t2\tnsubj\t_\t_", b"2\tbark\tbark\tVERB\t_\t_\t0\troot\t_\t_"],
    "winobias": [b"1 [The cat] sat because [it] was tired.", b"2 [The dog] barked because [he] was hungry."],
}
KINDS = list(GOOD)


def lines(*rows: bytes) -> bytes:
    return b"\n".join(rows) + b"\n"


def error_of(kind: str, data: bytes, name: str) -> str:
    with pytest.raises(ValueError) as caught:
        parse_items(kind, data, name)
    return str(caught.value)


# ---------------------------------------------------------------------------------------------
# The readers


@pytest.mark.parametrize("kind", KINDS)
def test_deep_nesting_is_a_located_value_error(kind):
    message = error_of(kind, DEEP, "deep.jsonl")
    assert message.startswith("deep.jsonl, line 1: ")
    if kind == "probes":
        assert message == "deep.jsonl, line 1: nested too deeply"


def test_deep_nesting_in_the_middle_of_a_valid_file_names_its_line():
    good = GOOD["probes"][0]
    message = error_of("probes", lines(good, good, DEEP, good), "probes.jsonl")
    assert message == "probes.jsonl, line 3: nested too deeply"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_utf16_is_named_with_the_fix(kind, encoding):
    data = lines(*GOOD[kind]).decode().encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data  # Python writes a BOM only for "utf-16"
    message = error_of(kind, data, "upload.txt")
    assert message == "upload.txt, line 1: the file is UTF-16 text; save it as UTF-8"


@pytest.mark.parametrize("kind", KINDS)
def test_utf16_without_a_bom_is_not_text(kind):
    data = lines(*GOOD[kind]).decode().encode("utf-16-le")
    assert error_of(kind, data, "upload.txt") == "upload.txt, line 1: not a text file (NUL character at column 2)"


@pytest.mark.parametrize("kind", KINDS)
def test_binary_file_is_named_with_its_line(kind):
    message = error_of(kind, bytes(range(256)), "blob.bin")
    assert re.fullmatch(r"blob\.bin, line \d+: not UTF-8 text \(byte 0x80 at column \d+\)", message), message


@pytest.mark.parametrize("kind", KINDS)
def test_one_undecodable_line_in_a_valid_file_names_line_and_column(kind):
    first, second = GOOD[kind]
    data = lines(first, second, b"ab\xffcd", first)
    assert error_of(kind, data, "mixed.txt") == "mixed.txt, line 3: not UTF-8 text (byte 0xff at column 3)"
    # Lines after a multi-byte character are counted right, and columns count characters.
    data = lines("é".encode(), b"", "—x".encode() + b"\xff")
    assert error_of(kind, data, "m.txt") == "m.txt, line 3: not UTF-8 text (byte 0xff at column 3)"


@pytest.mark.parametrize("kind", KINDS)
def test_utf8_bom_is_accepted(kind):
    data = lines(*GOOD[kind])
    assert parse_items(kind, b"\xef\xbb\xbf" + data, "bom.txt") == parse_items(kind, data, "bom.txt")
    assert parse_items(kind, data, "bom.txt")


def test_read_items_names_the_base_name_only(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_bytes(DEEP)
    with pytest.raises(ValueError) as caught:
        read_items("probes", path)
    assert str(caught.value) == "deep.jsonl, line 1: nested too deeply"
    assert str(tmp_path) not in str(caught.value)


def test_an_unexpected_exception_while_parsing_is_a_located_value_error(monkeypatch):
    def broken(text):
        raise RuntimeError("internal detail /srv/secret")

    monkeypatch.setattr(winobias, "_split_winobias_words", broken)
    message = error_of("winobias", lines(b"", *GOOD["winobias"]), "wino.txt.dev")
    assert message == "wino.txt.dev, line 2: could not be read (RuntimeError)"


def test_a_huge_bad_value_is_quoted_short():
    data = b'{"relation": "r", "words": "' + b"x" * 1_000_000 + b'", "source": 0, "target": 1}\n'
    message = error_of("probes", data, "big.jsonl")
    assert message.startswith("big.jsonl, line 1: words must be a list of strings, got 'xxx")
    assert len(message) < 200


def test_unicode_digits_in_conllu_are_a_located_error():
    # str.isdigit accepts '²'; int() does not
    message = error_of("conllu", "1\tDogs\t_\t_\t_\t_\t²\tnsubj\t_\t_\n".encode(), "t.conllu")
    assert message == "t.conllu, line 1: HEAD must be an integer, got '²'"


def test_hostile_lines_take_linear_time():
    start = time.perf_counter()
    # `# sent_id =` and spaces backtracked quadratically; 100,000 spaces took minutes.
    conllu = b"# sent_id =" + b" " * 100_000 + b"\n" + lines(*GOOD["conllu"])
    assert [item.id for item in parse_items("conllu", conllu, "t.conllu")] == ["line2/1"]  # an empty sent_id
    # 20,000 bracketed pronouns scanned every word for every mention.
    with pytest.raises(ValueError, match=r"^w\.txt, line 1: expected one pronoun mention"):
        parse_items("winobias", b"1 " + b"[he] " * 20_000 + b"\n", "w.txt")
    assert time.perf_counter() - start < 10


# ---------------------------------------------------------------------------------------------
# Format detection


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("probes.jsonl", "probes"),
        ("probes.JSON", "probes"),
        ("en_ewt-ud-dev.conllu", "conllu"),
        ("pro_stereotyped_type1.txt.dev", "winobias"),
        ("anti_stereotyped_type2.txt.test", "winobias"),
    ],
)
def test_detect_format_by_extension_beats_content(name, kind):
    other = next(k for k in KINDS if k != kind)
    assert detect_format(name, lines(*GOOD[other])) == kind


@pytest.mark.parametrize("name", ["upload.txt", "upload", "README.TXT"])
@pytest.mark.parametrize("kind", KINDS)
def test_detect_format_by_content(name, kind):
    data = lines(*GOOD[kind])
    assert detect_format(name, data) == kind
    # a BOM, blank lines and comments before the first line that tells
    assert detect_format(name, b"\xef\xbb\xbf\n# a comment\n  \n" + data) == kind


@pytest.mark.parametrize(
    ("relative", "kind"),
    [("ud/en_ewt-ud-dev.conllu", "conllu"), ("winobias/pro_stereotyped_type1.txt.dev", "winobias")],
)
def test_detect_format_on_real_files_by_content(relative, kind):
    assert detect_format("upload", require_data(relative).read_bytes()) == kind


def test_detect_format_refuses_what_it_cannot_tell():
    with pytest.raises(ValueError, match=r"^notes\.txt, line 2: cannot tell the format; expected .*JSONL"):
        detect_format("notes.txt", b"\nhello world\n")
    with pytest.raises(ValueError, match=r"^empty\.txt: no content"):
        detect_format("empty.txt", b"\n# only a comment\n")
    with pytest.raises(ValueError, match=r"^deep\.txt, line 1: cannot tell the format"):
        detect_format("deep.txt", DEEP)
    with pytest.raises(ValueError, match=r"^u\.txt, line 1: the file is UTF-16"):
        detect_format("u.txt", "{}".encode("utf-16"))


# ---------------------------------------------------------------------------------------------
# The command line


def test_probe_cli_reports_a_hostile_file_without_traceback(capsys, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_bytes(DEEP)
    assert main(["probe", "--model", MINILM, "--probes", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == "error: deep.jsonl, line 1: nested too deeply\n"

    path = tmp_path / "bin.conllu"
    path.write_bytes(bytes(range(256)))
    assert main(["probe", "--model", MINILM, "--conllu", str(path)]) == 2
    assert re.fullmatch(r"error: bin\.conllu, line \d+: not UTF-8 text \(byte 0x80 at column \d+\)\n",
                        capsys.readouterr().err)


def test_probe_cli_reports_an_unexpected_parsing_exception(capsys, tmp_path, monkeypatch):
    def broken(text):
        raise RuntimeError("internal detail")

    monkeypatch.setattr(winobias, "_split_winobias_words", broken)
    path = tmp_path / "w.txt.dev"
    path.write_bytes(lines(*GOOD["winobias"]))
    assert main(["probe", "--model", MINILM, "--winobias", str(path)]) == 2
    assert capsys.readouterr().err == "error: w.txt.dev, line 1: could not be read (RuntimeError)\n"


def test_probe_cli_process_prints_no_traceback(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_bytes(DEEP)
    done = subprocess.run(
        [sys.executable, "-m", "attnviz", "probe", "--model", MINILM, "--probes", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 2
    assert "error: deep.jsonl, line 1: nested too deeply" in done.stderr
    assert "Traceback" not in done.stderr and str(tmp_path) not in done.stderr


def test_bench_refuses_lengths_over_the_model_limit_before_any_work(minilm, capsys):
    start = time.perf_counter()
    assert main(["bench", "--model", MINILM, "--lengths", "16,100000"]) == 2
    elapsed = time.perf_counter() - start
    captured = capsys.readouterr()
    assert captured.err.startswith("error: length 100000 ")
    assert f"{minilm.info.max_tokens}, the token limit of {MINILM}" in captured.err
    assert captured.out == ""  # no table started
    assert elapsed < 60  # a load, no benchmark


@pytest.mark.parametrize(
    "argv",
    [
        ["--repeats", "0"],
        ["--repeats", "-3"],
        ["--repeats", "x"],
        ["--lengths", "a,b"],
        ["--lengths", "16,0"],
        ["--lengths", "-5"],
        ["--lengths", ""],
    ],
)
def test_bench_arguments_are_checked_by_argparse(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["bench", "--model", MINILM, *argv])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[0]}: expected a positive integer" in err and "Traceback" not in err


def test_probe_batch_size_must_be_positive(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["probe", "--model", MINILM, "--probes", "builtin:en", "--batch-size", "0"])
    assert caught.value.code == 2
    assert "argument --batch-size: expected a positive integer, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["sinks", "--model", "x", "--texts", "/dev/zero"],
                                     ["qkmap", "--model", "x", "--layer", "0", "--head", "0", "--corpus", "/dev/zero"],
                                     ["probe", "--model", "x", "--conllu", "/dev/zero"]])
def test_a_file_that_never_ends_is_refused_before_it_is_read(command, capsys):
    """/dev/zero would be read until the kernel stops the process (16.5 GB, issue 36's F5): a file the CLI reads
    must be a regular file, and is read at most to its limit, never whole."""
    import resource
    import time

    started, peak_before = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert main(command) != 0
    assert "not a regular file" in capsys.readouterr().err
    assert time.monotonic() - started < 30
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 200_000  # KiB: nothing was read


def test_a_file_past_the_limit_is_refused_after_the_limit(tmp_path, monkeypatch):
    from attnviz.analysis import lines

    big = tmp_path / "texts.txt"
    big.write_bytes(b"a line\n" * 100)
    monkeypatch.setattr(lines, "MAX_FILE_BYTES", 64)
    with pytest.raises(ValueError, match="texts.txt: larger than"):
        lines.read_bytes(big, lines.MAX_FILE_BYTES)
    assert lines.read_bytes(big, limit=700) == b"a line\n" * 100  # at the limit: read
