"""Preferences that say what they compare (issue 19, item 5): when the two scored spans differ in token count,
the verdict compares the mean log-probability per token, shown beside the sum; BLiMP keeps its own metric,
the sum, and says so. Before, 他比我高 against 他比我很高 was judged by the sums alone, which reward the
shorter sentence for its length."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.analysis.blimp_jsonl import MinimalPair
from attnviz.cli.main import main
from attnviz.readouts import preference
from attnviz.readouts.preference import Preference, pair_from_texts, pair_preference
from tests.conftest import SMOLLM, require_offline
from tests.helpers.pages import APP, TIMEOUT, assert_clean

SHORT, LONG = "他比我高", "他比我很高"


def test_the_verdict_compares_means_when_the_token_counts_differ():
    # the longer side has the higher mean but the lower sum: the sum alone would pick the shorter side
    result = Preference("sentence", good=-6.0, bad=-4.0, tokens_good=[("a", -2.0)] * 3, tokens_bad=[("b", -4.0)])
    assert result.compares == "mean" and (result.n_good, result.n_bad) == (3, 1)
    assert (result.mean_good, result.mean_bad) == (-2.0, -4.0)
    assert result.margin == -2.0 and result.verdict_margin == 2.0 and result.prefers_good
    same = Preference("sentence", good=-6.0, bad=-4.0, tokens_good=[("a", -3.0)] * 2, tokens_bad=[("b", -2.0)] * 2)
    assert same.compares == "sum" and same.verdict_margin == same.margin == -2.0 and not same.prefers_good


def test_a_decoder_on_an_insertion_pair(smollm):
    result = pair_preference(smollm, pair_from_texts(SHORT, LONG))
    assert result.method == "sentence" and result.n_good < result.n_bad and result.compares == "mean"
    assert result.verdict_margin == pytest.approx(result.good / result.n_good - result.bad / result.n_bad)
    assert result.mean_good == pytest.approx(sum(lp for _, lp in result.tokens_good) / result.n_good)


def test_blimp_keeps_the_sum_and_says_so(smollm, tmp_path, capsys):
    pair = MinimalPair(SHORT, LONG)
    scored = preference.score_pairs(smollm, "x", [pair])
    expected = pair_preference(smollm, pair)
    assert expected.compares == "mean"
    assert scored.margins[0] == pytest.approx(expected.margin, abs=1e-4)  # the sum, not the means
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"sentence_good": SHORT, "sentence_bad": LONG}, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    assert main(["blimp", "--model", SMOLLM, "--data", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metric"] == "sum"
    assert main(["blimp", "--model", SMOLLM, "--data", str(path)]) == 0
    assert "summed log-probability" in capsys.readouterr().out


def test_the_page_shows_the_mean_beside_the_sum_and_names_what_it_compares(smollm):
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": SMOLLM, "text": SHORT, "compare": LONG, "view": "matters"})
    at.run()
    assert_clean(at)
    expected = pair_preference(smollm, pair_from_texts(SHORT, LONG))
    table = next(d.value for d in at.dataframe if "log-probability" in d.value.columns)
    assert table["mean per token"].tolist() == pytest.approx([expected.mean_good, expected.mean_bad], abs=1e-3)
    assert table["tokens scored"].tolist() == [expected.n_good, expected.n_bad]
    verdict = "prefers the Sentence" if expected.verdict_margin > 0 else "prefers the second sentence"
    assert any(verdict in m.value and "per token" in m.value for m in at.markdown)
    assert any("compares the mean log-probability per token" in c.value for c in at.caption)
