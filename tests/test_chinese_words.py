"""Chinese words by jieba (issue 19, item 1): a run of Han characters is split by `jieba.lcut` with its
defaults; other scripts keep the old rule (whitespace, and every other CJK character and punctuation mark
a word of its own). Before, 小明告诉老师他生病了 was read as ten one-character words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import jieba
import numpy as np
import pytest

from attnviz.analysis import rank_heads
from attnviz.analysis.scoring import ScoreAccumulator
from attnviz.analysis.views import attention_view, word_runs
from attnviz.probesets import builtin_items
from attnviz.trace import split_words
from attnviz.trace import words as trace_module
from tests.conftest import ROOT

SENTENCE = "小明告诉老师他生病了"


@pytest.fixture(autouse=True, scope="module")
def _jieba_cache_in_a_temp_dir(tmp_path_factory):
    """jieba.lcut (the reference here) caches its dictionary in the system temp dir: keep it in the test's."""
    jieba.dt.tmp_dir = str(tmp_path_factory.mktemp("jieba"))
    yield


def words(text: str) -> list[str]:
    return [text[start:end] for start, end in split_words(text)]


def test_a_run_of_han_is_split_as_jieba_splits_it():
    assert words(SENTENCE) == jieba.lcut(SENTENCE) == ["小明", "告诉", "老师", "他", "生病", "了"]
    text = "我们明天去北京大学，你去不去？"
    assert words(text) == jieba.lcut(text)  # punctuation: jieba's words and ours agree on it too
    for text in ("他比我高", "他比我很高", "虽然下雨了但是我们还是去了公园"):
        assert words(text) == jieba.lcut(text)


def test_other_scripts_keep_the_old_rule():
    assert words("The cat's toy, again.") == ["The", "cat", "'", "s", "toy", ",", "again", "."]
    # Han runs are cut at Latin, digits, spaces and punctuation; kana and hangul stay one word a character
    assert words("我爱Python 3和NLP！") == ["我", "爱", "Python", "3", "和", "NLP", "！"]
    assert words("カタカナ한국") == ["カ", "タ", "カ", "ナ", "한", "국"]
    assert words("ひらがなと漢字") == ["ひ", "ら", "が", "な", "と", "漢字"]
    spans = split_words("  北京 大学 ")
    assert spans == [(2, 4), (5, 7)]


def test_the_segmenter_is_built_once_and_shared_by_threads():
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(trace_module.han_segmenter())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(s) for s in seen}) == 1 and trace_module.han_segmenter() is seen[0]


# A fresh interpreter with its own, empty temp directory: segmenting Chinese writes no file there and reads
# none (a planted jieba.cache, which jieba.initialize would load as its dictionary, is ignored).
NO_FILES = r"""
import json, os, sys, tempfile
from attnviz.trace import split_words
text = "小明告诉老师他生病了"
before = sorted(os.listdir(tempfile.gettempdir()))
print(json.dumps({"words": [text[a:b] for a, b in split_words(text)], "before": before,
                  "after": sorted(os.listdir(tempfile.gettempdir())), "jieba": "jieba" in sys.modules}))
"""


@pytest.mark.parametrize("planted", [False, True])
def test_segmenting_writes_and_reads_no_cache_file(tmp_path, planted):
    if planted:
        import marshal

        (tmp_path / "jieba.cache").write_bytes(marshal.dumps(({"小": 1, "小明告": 10**9}, 10**9)))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", NO_FILES], capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["words"] == ["小明", "告诉", "老师", "他", "生病", "了"]
    assert result["after"] == result["before"] == (["jieba.cache"] if planted else [])
    assert "Dumping model" not in done.stderr and "Loading model" not in done.stderr  # jieba's own log lines


def test_the_first_chinese_trace_reserves_the_segmenter(monkeypatch):
    from attnviz.workbench import traces

    monkeypatch.setattr(trace_module, "_segmenter", None)
    assert trace_module.han_segmenter_needed(SENTENCE) and not trace_module.han_segmenter_needed("The cat.")
    trace_module.han_segmenter()
    assert not trace_module.han_segmenter_needed(SENTENCE)
    assert traces.HAN_SEGMENTER_BYTES == trace_module.HAN_SEGMENTER_BYTES


def test_text_without_han_never_imports_jieba(tmp_path):
    script = ("import sys; from attnviz.trace import split_words; split_words('The cat. カナ'); "
              "print('jieba' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "False", done.stderr


def test_trace_words_word_view_and_ranking_follow_jieba(smollm):
    trace = smollm.run(SENTENCE)
    assert trace.words == jieba.lcut(SENTENCE)
    # every token lies inside the word it is given (byte-level BPE may split a character into pieces)
    for (start, end), word in zip(trace.offsets, trace.word_of_token):
        ws, we = trace.word_spans[word]
        assert ws <= start and end <= we or (start < we and ws < end)
    assert {w for w in trace.word_of_token} == set(range(len(trace.words)))
    view = attention_view(trace, "word")
    assert view.labels == trace.words and view.attentions.shape[-1] == 6
    assert [trace.words[w] for w, _, _ in word_runs(trace)] == trace.words  # one chip group a word
    ranking = rank_heads(trace, trace.words.index("他"), trace.words.index("小明"))
    assert len(ranking) == trace.n_layers * trace.n_heads
    # the word-level attention of "他" to "小明" is the sum over both characters' tokens
    tokens_of = [[t for t, w in enumerate(trace.word_of_token) if w == k] for k in range(6)]
    layer, head, weight = ranking[0]
    expected = np.asarray(trace.attentions[layer, head], np.float64)[tokens_of[3]][:, tokens_of[0]].sum(-1).mean()
    assert weight == pytest.approx(expected)


def test_probe_files_keep_the_words_they_are_given(smollm):
    item = next(i for i in builtin_items("builtin:zh") if len(i.words) != len(jieba.lcut(i.text)))
    accumulator = ScoreAccumulator()
    accumulator.add(smollm.run(item.text), [item])
    score = accumulator.result()[item.relation]
    assert score.n + score.n_skipped == 1  # scored on its own words: its source and target indices hold


def test_word_runs_group_consecutive_tokens_of_one_word():
    class Trace:
        word_of_token = [None, 0, 0, 1, None, 1, 2, 2]

    assert word_runs(Trace()) == [(None, 0, 1), (0, 1, 3), (1, 3, 4), (None, 4, 5), (1, 5, 6), (2, 6, 8)]
