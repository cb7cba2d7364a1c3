"""`python -m attnviz qk ... --json`: the interface docs/views/qk-attribution.md gives ("Query-key attribution")."""

from __future__ import annotations

import json

import attnviz
from attnviz.__main__ import main
from tests.conftest import MINILM


def test_qk_json_terms_sum_to_the_score_and_positions_count_special_tokens(minilm, capsys, monkeypatch):
    monkeypatch.setattr(attnviz, "load", lambda source: minilm)  # the session's copy, not three more loads
    text = "The keys to the cabinet are on the table."
    argv = ["qk", "--model", MINILM, "--text", text, "--layer", "2", "--head", "5", "--query", "6", "--key", "2"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == minilm.encode(text).tokens and out["tokens"][0] == "[CLS]"
    scores = minilm.record(text, names=("scores",), layer=2)["scores"][5, 6]  # S: query 6's row of head 5
    recorded = scores[2]
    assert abs(out["score"] - float(recorded)) <= 1e-4
    assert abs(sum(term["value"] for term in out["terms"]) - out["score"]) <= 1e-4
    assert abs(out["sum"] - out["score"]) <= 1e-4
    assert {"query": "embed", "key": "embed"} == {k: out["terms"][0][k] for k in ("query", "key")}
    assert main([*argv, "--key2", "9", "--json"]) == 0
    difference = json.loads(capsys.readouterr().out)
    assert abs(difference["sum"] - float(scores[2] - scores[9])) <= 1e-4
    assert main([*argv, "--key", "99"]) == 2
    assert "outside" in capsys.readouterr().err
