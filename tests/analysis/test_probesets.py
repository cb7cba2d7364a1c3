"""Checks of the built-in, self-written probe sets in attnviz/probesets/ (and of tests/fixtures/)."""

from __future__ import annotations

import functools
import json
import re
from collections import Counter

import pytest

from attnviz.probesets import PROBESET_DIR, builtin_path
from tests.conftest import FIXTURES, require_data

RELATIONS = ("subject-verb", "coreference", "modifier", "semantic")
MINIMUM = {"en": 60, "zh": 30}
REQUIRED_KEYS = ("relation", "words", "source", "target", "lang", "id")


def load(lang: str) -> list[dict]:
    rows = []
    for number, line in enumerate(builtin_path(lang).read_text(encoding="utf-8").splitlines(), start=1):
        assert line.strip(), f"{lang}.jsonl line {number} is blank"
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            pytest.fail(f"{lang}.jsonl line {number} is not JSON: {error}")
    return rows


def text_of(row: dict) -> str:
    return row.get("sep", " ").join(row["words"])


def bucket(distance: int) -> str:
    distance = abs(distance)
    return "1" if distance == 1 else "2-3" if distance <= 3 else "4-6" if distance <= 6 else "7+"


@pytest.fixture(scope="module", params=sorted(MINIMUM))
def lang_rows(request) -> tuple[str, list[dict]]:
    return request.param, load(request.param)


def test_builtin_path():
    assert builtin_path("en") == PROBESET_DIR / "en.jsonl"
    assert builtin_path("zh") == PROBESET_DIR / "zh.jsonl"
    assert builtin_path("en").is_file() and builtin_path("zh").is_file()
    with pytest.raises(ValueError):
        builtin_path("de")


def test_items_are_well_formed(lang_rows):
    lang, rows = lang_rows
    for row in rows:
        where = row.get("id", row)
        for key in REQUIRED_KEYS:
            assert key in row, f"{where}: missing {key}"
        assert row["relation"] in RELATIONS, where
        assert row["lang"] == lang, where
        words = row["words"]
        assert isinstance(words, list) and words, where
        assert all(isinstance(word, str) and word and word == word.strip() for word in words), where
        for key in ("source", "target"):
            value = row[key]
            assert isinstance(value, int) and not isinstance(value, bool), where
            assert 0 <= value < len(words), where
        assert row["source"] != row["target"], where
        if lang == "zh":
            assert row.get("sep") == "", where
            assert all(" " not in word for word in words), where
        else:
            assert row.get("sep", " ") == " ", where
            assert all(" " not in word for word in words), where


def test_ids_unique(lang_rows):
    _, rows = lang_rows
    ids = Counter(row["id"] for row in rows)
    assert not [i for i, count in ids.items() if count > 1]


def test_counts_meet_minimum(lang_rows):
    lang, rows = lang_rows
    counts = Counter(row["relation"] for row in rows)
    for relation in RELATIONS:
        assert counts[relation] >= MINIMUM[lang], (lang, relation, counts[relation])


def test_sentence_reused_at_most_twice(lang_rows):
    _, rows = lang_rows
    texts = Counter(text_of(row) for row in rows)
    assert not {text: count for text, count in texts.items() if count > 2}


def test_best_offset_baseline_below_threshold(lang_rows):
    lang, rows = lang_rows
    for relation in RELATIONS:
        items = [row for row in rows if row["relation"] == relation]
        forward = Counter(row["target"] - row["source"] for row in items)
        backward = Counter(row["source"] - row["target"] for row in items)
        for name, offsets in (("source_to_target", forward), ("target_to_source", backward)):
            best = offsets.most_common(1)[0][1] / len(items)
            assert best < 0.6, (lang, relation, name, best)


def first_word_rows(lang: str, rows: list[dict]) -> list[str]:
    """The README's first-word table rows: per relation and direction, the first-word baseline over all
    items, then the number of items a causal model can score (gold word before the read word) and the
    first-word and best-offset baselines over those (ties: smallest |k|, then negative, as the scorer)."""
    lines = []
    for relation in RELATIONS:
        items = [row for row in rows if row["relation"] == relation]
        cells = [lang, relation]
        for read_key, gold_key in (("source", "target"), ("target", "source")):
            cells.append(f"{sum(row[gold_key] == 0 for row in items) / len(items):.2f}")
            causal = [row for row in items if row[gold_key] < row[read_key]]
            cells.append(str(len(causal)))
            if not causal:
                cells += ["-", "-"]
                continue
            cells.append(f"{sum(row[gold_key] == 0 for row in causal) / len(causal):.2f}")
            offsets = Counter(row[gold_key] - row[read_key] for row in causal)
            k, count = min(offsets.items(), key=lambda kc: (-kc[1], abs(kc[0]), kc[0]))
            cells.append(f"{count / len(causal):.2f} (k={k:+d})".replace("-", "\u2212"))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def test_first_word_baseline_below_threshold_and_documented(lang_rows):
    """A set that always-first-word solves teaches little (the attention sink of decoders): every
    relation and direction stays <= 0.5, over all items and over the items a causal model can score,
    and the README's table holds these figures."""
    lang, rows = lang_rows
    readme = (PROBESET_DIR / "README.md").read_text(encoding="utf-8")
    for line in first_word_rows(lang, rows):
        assert line in readme, line
        for cell in line.strip("| ").split(" | ")[2:]:
            if "." in cell and "k=" not in cell:
                assert float(cell) <= 0.5, (line, cell)

def test_distance_buckets_are_spread(lang_rows):
    lang, rows = lang_rows
    for relation in RELATIONS:
        buckets = {bucket(row["target"] - row["source"]) for row in rows if row["relation"] == relation}
        assert len(buckets) >= 3, (lang, relation, buckets)


@functools.cache
def _shared_texts() -> str:
    # Reference data: skipped where the folder is absent, failed where CI is set (conftest.py).
    folders = (require_data("ud"), require_data("winobias"), require_data() / "blimp")
    files = [
        path
        for folder in folders
        for path in sorted(folder.glob("*"))
        if path.is_file() and not path.name.startswith("LICENSE")
    ]
    assert any(path.suffix == ".conllu" for path in files), "no treebank files found"
    assert any(path.parent.name == "winobias" for path in files), "no WinoBias files found"
    return "\n".join(path.read_text(encoding="utf-8", errors="replace") for path in files)


def test_no_sentence_copied_from_shared_data():
    shared_texts = _shared_texts()
    copied = []
    for lang in MINIMUM:
        for row in load(lang):
            text = text_of(row)
            # also the form with no space before punctuation, as in `# text =` lines
            detokenized = re.sub(r" ([.,?!;:])", r"\1", text)
            if text in shared_texts or detokenized in shared_texts:
                copied.append((row["id"], text))
    assert not copied, copied


def test_no_fixture_sentence_copied_from_shared_data():
    shared_texts = _shared_texts()
    # tests/fixtures/ is self-written too: its `# text =` lines and WinoBias-style lines
    sentences = [
        line.split("=", 1)[1].strip()
        for path in sorted(FIXTURES.glob("*.conllu"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("# text =")
    ]
    for line in (FIXTURES / "winobias_sample.txt").read_text(encoding="utf-8").splitlines():
        bracketed = line.split(" ", 1)[1]
        sentences += [bracketed, " ".join(bracketed.replace("[", "").replace("]", "").split())]
    assert len(sentences) >= 10
    assert not [sentence for sentence in sentences if sentence in shared_texts]
