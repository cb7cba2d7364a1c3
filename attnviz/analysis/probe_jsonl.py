"""The probe JSONL reader: one JSON object a line with `relation`, `words`, `source`, `target` and
optional `sep`, `lang`, `id` (kept as a string). Blank lines are skipped; unknown keys are ignored."""

from __future__ import annotations

from os import PathLike

from attnviz.analysis import items
from attnviz.analysis.items import ProbeItem
from attnviz.analysis.lines import base_name, json_object, line_records, opened, require, shown


def _probe_item(line: str, where: str) -> ProbeItem:
    record = json_object(line, where, ("relation", "words", "source", "target"))
    relation, words, sep = record["relation"], record["words"], record.get("sep", " ")
    lang, item_id = record.get("lang"), record.get("id")
    if not isinstance(relation, str) or not relation:
        raise ValueError(f"{where}: relation must be a non-empty string, got {shown(relation)}")
    require(isinstance(words, list), f"{where}: words must be a list of strings, got {shown(words)}")
    require(isinstance(sep, str), f"{where}: sep must be a string, got {shown(sep)}")
    require(lang is None or isinstance(lang, str), f"{where}: lang must be a string, got {shown(lang)}")
    # ProbeItem's own refusals name no line: the line reader gives them this one
    return ProbeItem(relation=relation, words=tuple(words), source=record["source"], target=record["target"],
                     sep=sep, lang=lang, id=None if item_id is None else str(item_id))


def parse_probes(text: str | bytes, name: str = "<probes>") -> list[ProbeItem]:
    return line_records(text, name, _probe_item, most=items.MAX_ITEMS, what="items")


def read_probes(path: str | PathLike) -> list[ProbeItem]:
    with opened(path) as f:
        return parse_probes(f, name=base_name(path))
