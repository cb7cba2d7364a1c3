"""Replication cards (attnviz.findings.cards, findings) against what else computes the same numbers: the
Head Finder's probe command on a real treebank (clark2019), the sinks command (gu2024), Hugging Face's own
eager logits (olsson2022's losses), the head detectors and the importance scan; and the verdict rule."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

import attnviz
from attnviz.analysis import DIRECTIONS, score_model, to_json
from attnviz.analysis.conllu import parse_conllu
from attnviz.analysis.detectors import detect_heads
from attnviz.cli.main import main
from attnviz.findings import cards
from attnviz.findings import measures as findings
from attnviz.interventions import ablation, patching
from attnviz.readouts import predictions
from attnviz.readouts.retrieval import RetrievalResult
from attnviz.workbench import findings as work
from attnviz.workbench.shared import Workbench
from tests.conftest import MINILM, require_data
from tests.helpers import tiny_hf
from tests.helpers.tiny_tokenizers import bpe_tokenizer

LONG = ("the cat sat on the mat and the dog sat on the rug while the bird sang in the tree "
        "and the fish swam in the pond near the old house by the river")


@pytest.fixture(scope="module")
def tiny():
    """(our tiny random Llama, HF's eager twin on the same weights)."""
    return tiny_hf.tiny_decoder("llama", bpe_tokenizer(True), seed=0, intermediate_size=37,
                                max_position_embeddings=128)


def cli_json(argv, capsys) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_every_card_states_its_claim_rule_and_data_in_both_languages():
    assert [card.id for card in cards.cards()] == ["clark2019", "michel2019", "wu2024", "olsson2022", "gu2024",
                                                   "wang2022"]
    for card in cards.cards():
        for text in (card.claim, card.rule, card.data, card.verified_note):
            assert set(text) == {"en", "zh"} and all(text.values()), card.id
        for key in card.checks:
            assert isinstance(cards.lookup(card.numbers, key), float), (card.id, key)
    labels = cards.card("clark2019").labels  # Stanford -> UD, and the one UD lacks
    assert (labels["dobj"], labels["auxpass"], labels["prt"], labels["pobj"]) == ("obj", "aux:pass", "compound:prt", "")


def test_the_verdict_reads_each_check_by_the_cards_rule():
    """Issue 35, item 8: a bound reads as a bound, a recalled number gets no verdict, and a card that cannot
    measure on a model says so before it runs."""
    olsson = cards.card("olsson2022")  # within 0.15 of -0.4
    assert cards.report(olsson, "m", {"icl_score": -0.3})["verdict"] == (
        "agrees: icl_score within 0.15 of -0.4: ours -0.300, agrees")
    differs = cards.report(olsson, "m", {"icl_score": -1.0})
    assert differs["checks"][0]["difference"] == -0.6 and "ours -1.000, differs by -0.600" in differs["verdict"]
    assert cards.report(olsson, "m", {"icl_score": None})["verdict"].startswith("not measured")
    wu = cards.card("wu2024")  # at most 5%
    assert [cards.report(wu, "m", {"share": s})["checks"][0]["agrees"] for s in (0.03, 0.07)] == [True, False]
    assert cards.report(wu, "m", {"share": 0.026})["checks"][0]["reads"] == "at most 0.05: ours 0.026, holds"
    michel = cards.report(cards.card("michel2019"), "m", {"share_prunable": 0.6})  # recalled: no verdict
    assert michel["checks"][0]["agrees"] is None and michel["verdict"].startswith("no verdict")
    wang = cards.card("wang2022")
    assert cards.cannot_measure(wang, "HuggingFaceTB/SmolLM2-135M") and not cards.cannot_measure(wang, "gpt2")
    gu = cards.card("gu2024")  # another model: at least the table's lowest (0.77); the paper's own: its row
    assert [cards.report(gu, "m", {"ratio": r})["checks"][0]["agrees"] for r in (0.8, 0.7)] == [True, False]
    llama = cards.report(gu, "meta-llama/Llama-2-7b-hf", {"ratio": 0.8})
    assert llama["same_model"] and llama["checks"][0]["paper"] == 0.9247 and not llama["checks"][0]["agrees"]


def test_clark_card_on_minilm_equals_the_head_finders_scores(minilm, tmp_path, monkeypatch, capsys):
    text = require_data("ud/en_ewt-ud-dev.conllu").read_text(encoding="utf-8")
    treebank = tmp_path / "sample.conllu"
    treebank.write_text("\n\n".join(text.split("\n\n")[:40]) + "\n\n", encoding="utf-8")
    monkeypatch.setattr(attnviz, "load", lambda source: minilm)
    probe = cli_json(["probe", "--model", MINILM, "--conllu", str(treebank), "--json"], capsys)["relations"]
    card = cli_json(["replicate", "clark2019", "--model", MINILM, "--conllu", str(treebank), "--json"], capsys)
    assert card["card"] == "clark2019" and card["same_model"] is False and set(card["paper"]) <= set(card["ours"])
    assert card["ours"]["pobj"] is None
    compared = 0
    for stanford, ud in cards.card("clark2019").labels.items():
        if not ud or ud not in probe:
            continue
        block = probe[ud]
        direction = max(DIRECTIONS, key=lambda d: (block["best"][d]["accuracy"], -DIRECTIONS.index(d)))
        ours = card["ours"][stanford]
        assert ours["best_head"] == [block["best"][direction]["layer"], block["best"][direction]["head"]]
        assert ours["accuracy"] == block["best"][direction]["accuracy"]
        assert ours["baseline"] == block["baselines"][direction]["best_offset_accuracy"]
        compared += 1
    assert compared >= 4  # det, obj, nsubj, nmod:poss at least occur in 40 sentences


def test_gu_card_equals_the_sinks_command(tiny, monkeypatch, capsys):
    monkeypatch.setattr(attnviz, "load", lambda source: tiny[0])
    sinks = cli_json(["sinks", "--model", "tiny", "--json"], capsys)
    card = cli_json(["replicate", "gu2024", "--model", "tiny", "--json"], capsys)
    assert card["ours"]["ratio"] == sinks["ratio"] and card["ours"]["n_texts"] == sinks["n_texts"]
    assert card["paper"]["ratio"] == 0.77 and card["same_model"] is False


def test_olsson_card_reads_hf_eager_losses_and_the_detectors_induction_score(tiny):
    model, hf = tiny
    card = replace(cards.card("olsson2022"), inputs={**cards.card("olsson2022").inputs, "early": [3, 6],
                                                     "late": [12, 16], "random_tokens": 5, "sequences": 2})
    ours = findings.olsson2022(card, model, [LONG, "too short"])
    ids = model.encode(LONG, max_tokens=16).ids
    with torch.no_grad():
        logprobs = torch.log_softmax(hf(input_ids=torch.tensor([ids])).logits[0].double(), dim=-1)
    loss = [-float(logprobs[p - 1, ids[p]]) for p in range(len(ids))]
    assert ours["texts_used"] == 1 and ours["texts_given"] == 2
    assert ours["icl_score"] == pytest.approx(np.mean(loss[12:16]) - np.mean(loss[3:6]), abs=1e-4)
    induction = detect_heads(model, n=5, sequences=2, seed=0)["induction"]
    assert ours["prefix_matching_max"] == pytest.approx(induction.max(), abs=1e-4)


def test_michel_card_switches_heads_off_least_important_first(tiny):
    model, _ = tiny
    card = cards.card("michel2019")
    texts = ["the cat sat on the", "the dog sat on the"]
    ours = findings.michel2019(card, model, texts)
    importance = np.mean([ablation.importance_scan(model, text, quantity="next_token") for text in texts], axis=0)
    assert ours["importance_max"] == pytest.approx(importance.max(), abs=1e-4)
    shares = [share for share, _ in ours["curve"]]
    assert shares[0] == 0.0 and shares[-1] == 1.0 and ours["curve"][0][1] == 1.0  # nothing off: nothing changed
    first_drop = next((share for share, metric in ours["curve"] if metric < 0.9), None)
    assert ours["share_prunable"] == (shares[shares.index(first_drop) - 1] if first_drop is not None else 1.0)
    everything_off = np.zeros(importance.shape)  # the curve's last step, as the ablation API says it
    top = [predictions.next_token_top_k(model, text, k=1)[0].id for text in texts]
    kept = [predictions.next_token_top_k(model, text, everything_off, k=1)[0].id == i for text, i in zip(texts, top)]
    assert ours["curve"][-1][1] == np.mean(kept)


def test_wu_card_counts_the_head_finders_grid_and_refuses_encoders(tiny, minilm):
    card = cards.card("wu2024")
    grid = np.zeros((2, 4))
    grid[0, 1], grid[1, 3] = 0.1, 0.5
    asked = []
    ours = findings.wu2024(card, tiny[0], grid_of=lambda *args: asked.append(args[:2]) or RetrievalResult(grid, []))
    assert asked == [(200, 3)] and ours["share"] == 0.25 and ours["n_retrieval"] == 2
    assert findings.wu2024(card, tiny[0], grid_of=lambda *args: RetrievalResult(None, []))["share"] is None
    with pytest.raises(ValueError, match="decoder"):
        findings.compute(card, minilm, MINILM)


def test_a_card_is_computed_once_shared_and_refused_before_it_starts_when_too_large(tiny):
    model, _ = tiny
    card = cards.card("gu2024")
    bench = Workbench(budget=8 * 2**30)
    first = work.run(bench, card, model, "tiny")
    assert work.shared_report(bench, card, "tiny") is first and work.run(bench, card, model, "tiny") is first
    assert work.too_large(bench, card, model) is None
    assert work.too_large(Workbench(budget=1_000), card, model) == work.need_bytes(card, model)


def test_wang_card_is_the_patch_commands_head_patching(tiny):
    model, _ = tiny
    card = cards.card("wang2022")
    prompts = [("when the cat and the dog sat on the mat the dog gave it to the", "when the dog and the cat sat "
                "on the mat the cat gave it to the", " cat", " dog")]
    ours = findings.wang2022(card, model, "tiny", prompts)
    runs = patching.prepare(model.module, patching.patch_pair(model, *prompts[0]))
    grid = patching.heads(runs)
    assert [(layer, head) for layer, head, _ in ours["strongest"]][:3] == [
        (int(i // grid.shape[1]), int(i % grid.shape[1])) for i in np.argsort(-np.abs(grid), axis=None)[:3]]
    assert ours["strongest"][0][2] == pytest.approx(grid[ours["strongest"][0][0], ours["strongest"][0][1]], abs=1e-4)
    assert findings._patched_together(runs, [(1, 2)]) == pytest.approx(grid[1, 2], abs=1e-4)  # one head alone
    assert ours["overlap"] is None and ours["recovered_by"] == "our strongest heads"  # not GPT-2 small


def _passive(words: list[str], heads: list[int], relations: list[str]) -> str:
    rows = [f"{i}\t{w}\t{w.lower()}\t_\t_\t_\t{h}\t{r}\t_\t_" for i, (w, h, r) in
            enumerate(zip(words, heads, relations), start=1)]
    return f"# text = {' '.join(words)}\n" + "\n".join(rows) + "\n\n"


# Six passives with the auxiliary before its verb (aux:pass read from the verb, looking back) and one
# with the verb first: a decoder can read that one arc only from the auxiliary.
PASSIVES = "".join(
    _passive(["The", noun, "was", verb], [2, 4, 4, 0], ["det", "nsubj:pass", "aux:pass", "root"])
    for noun, verb in (("cake", "eaten"), ("door", "opened"), ("letter", "sent"), ("car", "sold"),
                       ("song", "sung"), ("house", "built"))
) + _passive(["Gone", "was", "the", "cat"], [0, 1, 4, 1], ["root", "aux:pass", "det", "nsubj:pass"])


def test_clark_card_on_a_decoder_reads_each_relation_the_way_most_of_its_arcs_can_be_read(tiny):
    model = tiny[0]
    items = parse_conllu(PASSIVES)
    ours = findings.clark2019(cards.card("clark2019"), model, "tiny", items)
    block = to_json("tiny", score_model(model, [i for i in items if i.relation == "aux:pass"]))["relations"]
    block = block["aux:pass"]
    assert block["n"] == 7 and block["n_scorable"] == {"source_to_target": 1, "target_to_source": 6}
    passive = ours["auxpass"]
    assert passive["direction"] == "target_to_source" and passive["n"] == 7 and passive["n_scored"] == 6
    best = block["best"]["target_to_source"]
    assert passive["best_head"] == [best["layer"], best["head"]] and passive["accuracy"] == best["accuracy"]
    assert passive["baseline"] == block["baselines"]["target_to_source"]["best_offset_accuracy"]
