"""Replication cards: a published finding about heads, its paper's numbers, and the verdict on ours.

Each card is a small TOML file in attnviz/probesets/findings/ (docs/views/findings.md, "Findings"): the claim
(English and Chinese), the paper (authors, year, title, the table or figure cited, its model), the paper's
numbers, the data it needs, the rule that computes ours, and a tolerance. `findings.measures` holds
one function per card that computes our numbers; `report` puts the two side by side with a verdict, the
JSON of `python -m attnviz replicate CARD --json`."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from functools import cache

from attnviz.probesets import PROBESET_DIR

CARD_DIR = PROBESET_DIR / "findings"
# |ours - paper| <= tolerance; ours <= paper + tolerance; ours >= paper - tolerance
COMPARES = ("within", "at_most", "at_least")


@dataclass(frozen=True)
class Card:
    id: str
    order: int
    paper: dict  # authors, year, title, venue, cited, model
    paper_models: tuple[str, ...]  # hub ids of the paper's own model(s); empty when it was never released
    claim: dict  # language -> one sentence
    rule: dict
    data: dict
    numbers: dict  # the paper's numbers, under the keys `ours` uses
    checks: tuple[str, ...]  # dotted keys of `numbers` the verdict compares
    tolerance: float
    compare: str
    needs: str  # "conllu", "texts" or "none": what the command's --conllu / --texts may give
    verified: bool  # every number checked against the paper's own text
    verified_note: dict  # language -> what was and was not checked
    decoders_only: bool = False
    inputs: dict | None = None  # the card's own inputs (texts, lengths)
    labels: dict | None = None  # clark2019: Stanford label -> UD label ("" for none)
    labels_note: dict | None = None
    by_model: dict | None = None  # gu2024: hub id -> the paper's row for that model (the first checked key)
    same_tolerance: float | None = None  # ... compared "within" this on that model

    def citation(self) -> str:
        p = self.paper
        return f"{p['authors']} ({p['year']}). {p['title']}. {p['venue']}, {p['cited']}."

    def is_paper_model(self, source: str) -> bool:
        """Whether `source` names one of the paper's models (hub ids compare case-blind, a trailing / dropped)."""
        given = source.strip().rstrip("/").lower()
        return any(given == model.lower() for model in self.paper_models)

    def for_model(self, source: str) -> Card:
        """The card as it checks `source`: on one of the paper's models with a row of its own (by_model),
        that row's number, compared within same_tolerance; else the card as it is."""
        given = source.strip().rstrip("/").lower()
        row = next((value for model, value in (self.by_model or {}).items() if model.lower() == given), None)
        if row is None:
            return self
        return replace(self, numbers={**self.numbers, self.checks[0]: row}, compare="within",
                       tolerance=self.same_tolerance)


def _card(path) -> Card:
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    if raw["compare"] not in COMPARES:
        raise ValueError(f"{path.name}: compare must be one of {COMPARES}, got {raw['compare']!r}")
    return Card(id=path.stem, order=raw["order"], paper=raw["paper"], paper_models=tuple(raw["paper_models"]),
                claim=raw["claim"], rule=raw["rule"], data=raw["data"], numbers=raw["numbers"],
                checks=tuple(raw["checks"]), tolerance=float(raw["tolerance"]), compare=raw["compare"],
                needs=raw["needs"], verified=bool(raw["verified"]), verified_note=raw["verified_note"],
                decoders_only=bool(raw.get("decoders_only", False)), inputs=raw.get("inputs"),
                labels=raw.get("labels"), labels_note=raw.get("labels_note"), by_model=raw.get("by_model"),
                same_tolerance=raw.get("same_tolerance"))


@cache
def cards() -> tuple[Card, ...]:
    """Every card, in the order the Findings page shows them."""
    return tuple(sorted((_card(path) for path in CARD_DIR.glob("*.toml")), key=lambda card: card.order))


def card(card_id: str) -> Card:
    for found in cards():
        if found.id == card_id:
            return found
    raise ValueError(f"no card {card_id!r}; the cards are {', '.join(c.id for c in cards())}")


def lookup(numbers: dict, key: str):
    """numbers["det"]["accuracy"] for "det.accuracy"; None where a level is missing."""
    value = numbers
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def checks(card: Card, ours: dict) -> list[dict]:
    """One row per checked key: the paper's number, ours, their difference and whether they agree."""
    rows = []
    for key in card.checks:
        paper, mine = lookup(card.numbers, key), lookup(ours, key)
        if mine is None or paper is None or (isinstance(mine, float) and math.isnan(mine)):
            rows.append({"key": key, "paper": paper, "ours": mine, "difference": None, "agrees": None})
            continue
        difference = float(mine) - float(paper)
        agrees = {"within": abs(difference), "at_most": difference, "at_least": -difference}[card.compare] <= (
            card.tolerance + 1e-12)
        rows.append({"key": key, "paper": paper, "ours": mine, "difference": round(difference, 4),
                     "agrees": agrees})
    return rows


def verdict(card: Card, rows: list[dict]) -> str:
    """"agrees within ..." when every checked number agrees, else what differs and by how much."""
    measured = [row for row in rows if row["agrees"] is not None]
    if not measured:
        return "not measured: nothing the card checks could be computed on this model and data"
    differs = [row for row in measured if not row["agrees"]]
    bound = {"within": f"within {card.tolerance:g}", "at_most": "with ours at most the paper's bound",
             "at_least": "with ours at least the paper's lowest"}[card.compare]
    unmeasured = f" ({len(rows) - len(measured)} not measured)" if len(measured) < len(rows) else ""
    if not differs:
        return f"agrees {bound} on {len(measured)} of {len(rows)} checks{unmeasured}"
    return "differs: " + "; ".join(f"{row['key']} by {row['difference']:+.3f}" for row in differs) + (
        f" ({bound}; {len(measured) - len(differs)} of {len(measured)} agree){unmeasured}")


def report(card: Card, source: str, ours: dict, inputs: dict | None = None) -> dict:
    """The command's JSON: card, model, same_model, paper, ours, checks, verdict, and what the card ran on."""
    card = card.for_model(source)
    rows = checks(card, ours)
    return {"card": card.id, "model": source, "same_model": card.is_paper_model(source),
            "paper_model": list(card.paper_models), "citation": card.citation(), "paper": card.numbers,
            "ours": ours, "checks": rows, "verdict": verdict(card, rows), "verified": card.verified,
            "inputs": inputs or {}}
