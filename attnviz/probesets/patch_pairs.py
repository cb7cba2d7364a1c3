"""The built-in minimal pairs of activation patching (`patch_pairs.jsonl`, self-written): per line `id`, `lang`
("en", "zh"), `relation` (the Head Finder's `subject-verb` or `coreference`), the `clean` and `corrupt`
prefixes, and the `target` and `contrast` next tokens (the clean prefix should prefer the target)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from attnviz.probesets import PROBESET_DIR

FIELDS = ("id", "lang", "relation", "clean", "corrupt", "target", "contrast")


@dataclass(frozen=True)
class PatchPairSpec:
    id: str
    lang: str
    relation: str
    clean: str
    corrupt: str
    target: str
    contrast: str


def builtin_patch_pairs(relation: str | None = None) -> list[PatchPairSpec]:
    """Every built-in pair, or those of one relation, in file order."""
    pairs = []
    for line in (PROBESET_DIR / "patch_pairs.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            pairs.append(PatchPairSpec(**{name: record[name] for name in FIELDS}))
    return [p for p in pairs if relation is None or p.relation == relation]
