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
    recalled: bool = False  # the paper's number is recalled (a figure read from memory): shown, never judged
    paper_model_only: bool = False  # what it checks can be measured on the paper's own model only

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
                same_tolerance=raw.get("same_tolerance"), recalled=bool(raw.get("recalled", False)),
                paper_model_only=bool(raw.get("paper_model_only", False)))


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
    """One row per checked key: the paper's number, ours, their difference, whether they agree by the card's
    rule (None: not measured, or the paper's number only recalled), and the rule in words (`reads`)."""
    rows = []
    for key in card.checks:
        paper, mine = lookup(card.numbers, key), lookup(ours, key)
        if mine is None or paper is None or (isinstance(mine, float) and math.isnan(mine)):
            rows.append({"key": key, "paper": paper, "ours": mine, "difference": None, "agrees": None,
                         "reads": "not measured"})
            continue
        difference = float(mine) - float(paper)
        agrees = {"within": abs(difference), "at_most": difference, "at_least": -difference}[card.compare] <= (
            card.tolerance + 1e-12)
        rows.append({"key": key, "paper": paper, "ours": mine, "difference": round(difference, 4),
                     "agrees": None if card.recalled else agrees, "reads": reads(card, paper, mine, agrees)})
    return rows


def bound(card: Card, paper: float) -> str:
    """The card's rule as a bound on our number: "at most 0.05", "at least 0.77", "within 0.15 of -0.4"."""
    if card.compare == "at_most":
        return f"at most {paper + card.tolerance:g}"
    if card.compare == "at_least":
        return f"at least {paper - card.tolerance:g}"
    return f"within {card.tolerance:g} of {paper:g}"


def reads(card: Card, paper: float, ours: float, agrees: bool) -> str:
    """One check in words, by the card's own rule: "at most 0.05: ours 0.026, holds"; a recalled number
    gets no verdict."""
    if card.recalled:
        return f"no verdict: the paper's {paper:g} is recalled, not read from the paper (ours {ours:.3f})"
    if card.compare == "within":
        return f"{bound(card, paper)}: ours {ours:.3f}, " + ("agrees" if agrees else f"differs by {ours - paper:+.3f}")
    return f"{bound(card, paper)}: ours {ours:.3f}, " + ("holds" if agrees else "does not hold")


def cannot_measure(card: Card, source: str) -> str | None:
    """Why the card's checks cannot be measured on `source` at all (said before it runs), else None."""
    if card.paper_model_only and not card.is_paper_model(source):
        return (f"{', '.join(card.checks)} can be measured on the paper's model only "
                f"({', '.join(card.paper_models)}): here the card shows its other numbers, with no verdict")
    return None


def verdict(card: Card, rows: list[dict]) -> str:
    """Each check by the card's rule (`reads`), led by "agrees" / "holds" when all pass, else "differs"; "no
    verdict" for a recalled number, "not measured" when nothing could be computed."""
    if card.recalled:
        return "; ".join(row["reads"] for row in rows)
    measured = [row for row in rows if row["agrees"] is not None]
    if not measured:
        return "not measured: nothing the card checks could be computed on this model and data"
    unmeasured = f" ({len(rows) - len(measured)} not measured)" if len(measured) < len(rows) else ""
    lead = "agrees" if all(row["agrees"] for row in measured) else "differs"
    return f"{lead}: " + "; ".join(f"{row['key']} {row['reads']}" for row in measured) + unmeasured


def report(card: Card, source: str, ours: dict, inputs: dict | None = None) -> dict:
    """The command's JSON: card, model, same_model, paper, ours, checks, verdict, and what the card ran on."""
    card = card.for_model(source)
    rows = checks(card, ours)
    return {"card": card.id, "model": source, "same_model": card.is_paper_model(source),
            "paper_model": list(card.paper_models), "citation": card.citation(), "paper": card.numbers,
            "ours": ours, "checks": rows, "verdict": verdict(card, rows), "verified": card.verified,
            "inputs": inputs or {}}
