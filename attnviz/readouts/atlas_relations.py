"""The head atlas's relations (issue 37, items 1 and 6): Clark et al.'s accuracy per relation and direction for
every head, from a treebank (CoNLL-U), WinoBias-format files or probe JSONL (the built-in sets included), kept in
the atlas's DuckDB file beside HeadVis's metrics, and the seed's table (主谓, 指代, 修饰, 语义关联) as data.

Nothing is re-implemented: a file is read by the bounded readers of attnviz.analysis (`read_item_file`, as
`probe` reads it), scored by one call of `score_model` (batched, sized by the memory ceiling), and the JSON is
`to_json`'s, so `atlas metrics --json`'s "relations" is `probe --json`'s "relations", number for number. It is
not a streamed sum: each file's scores are stored when its call is done, with the SHA-256 of the file's bytes, and
a later build given a file with the same hash (and the same `sink_aware`) does not score it again.

Tables (in `DIR/atlas.duckdb`):

- `relation_sources`: one row per file kind (`conllu`, `winobias`, `probes`): `position` (its order in the
  JSON), `kind`, `file` (as given; `builtin[:en|:zh]` for the shipped sets), `sha256`, `sink_aware`, `model`,
  `n_layers`, `n_heads`, `n_items`, and for a treebank what reading it left out (`sentences`, `skipped_arcs`,
  `text_disagreed`, as `probe --conllu`'s "treebank"), `computed` (ISO time, UTC);
- `relations`: one row per (relation, direction, layer, head): `kind`, `position` (the relation's order in its
  file's JSON), `relation`, `direction`, `layer`, `head`, `accuracy` (hits / n_scorable, float64, NULL where the
  direction has no scorable item), `correct` (hits), `best` (the JSON's best head of that direction), and the
  relation's `n`, `n_skipped`, that direction's `n_scorable`, `best_offset`, `best_offset_accuracy`,
  `first_word_accuracy` and `sink_aware`, repeated on each of its rows: every number `to_json` needs;
- `relation_examples`: for each seed relation present, the seed table's best head and one item whose sentence
  that head gets right (its argmax over the read word's row is the gold word), or none found.

The scoring result holds counts per head, not which items a head got right, so the example is found afterwards:
the items of that relation are taken in file order, a distinct sentence at a time (at most `EXAMPLE_TEXTS`), each
run once and its items scored alone by the same `ScoreAccumulator`; the first item the head gets right is kept.

This module does not import attnviz.readouts.atlas (which imports it, for `metrics`): it takes the database's path.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from attnviz.analysis import (
    DIRECTIONS,
    Baseline,
    BestHead,
    ProbeItem,
    RelationScore,
    ScoreAccumulator,
    read_item_file,
    score_model,
    to_json,
)
from attnviz.probesets import LANGUAGES, builtin_items, builtin_path
from attnviz.readouts.atlas_causal import causal as stored_causal
from attnviz.readouts.atlas_causal import seed_causal

ATLAS_FILE = "atlas.duckdb"  # attnviz.readouts.atlas.ATLAS_FILE (that module imports this one, not the reverse)
KINDS = ("conllu", "winobias", "probes")  # the order of the files' relations in the JSON
BATCH_SIZE = 32  # `probe --batch-size`'s default: the same batches, so the same numbers
EXAMPLE_TEXTS = 16  # sentences tried, at most, for one seed relation's example
TOP = 3  # runner-up heads in a seed row

# The seed's table (the tutorial's Head 1-4): each relation's key, names, and the stored relations that measure
# it, the first one present taken. Treebank and WinoBias relations come before the probe sets' where both
# measure the same thing (real annotated text, many more items: Clark et al.'s own measure); for semantic
# association the probe sets' `semantic` (a later word and an earlier word of one semantic field, written for it)
# comes first, and UD `obj` (a verb and its direct object: the predicate-argument pair whose words select each
# other, drink -> tea) stands in where only a treebank was given, since UD annotates no lexical association.
SEED = (
    {"key": "subject-verb", "en": "subject-verb", "zh": "主谓", "relations": ("nsubj", "subject-verb")},
    {"key": "coreference", "en": "coreference", "zh": "指代", "relations": ("coreference",)},
    {"key": "modification", "en": "modification", "zh": "修饰", "relations": ("amod", "modifier")},
    {"key": "semantic-association", "en": "semantic association", "zh": "语义关联", "relations": ("semantic", "obj")},
)
SEED_RELATIONS = tuple(name for row in SEED for name in row["relations"])

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS relation_sources (position INTEGER, kind VARCHAR, file VARCHAR, sha256 VARCHAR,
       sink_aware BOOLEAN, model VARCHAR, n_layers INTEGER, n_heads INTEGER, n_items BIGINT, sentences BIGINT,
       skipped_arcs BIGINT, text_disagreed BIGINT, computed VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS relations (kind VARCHAR, position INTEGER, relation VARCHAR, direction VARCHAR,
       layer INTEGER, head INTEGER, accuracy DOUBLE, correct BIGINT, best BOOLEAN, n BIGINT, n_skipped BIGINT,
       n_scorable BIGINT, best_offset INTEGER, best_offset_accuracy DOUBLE, first_word_accuracy DOUBLE,
       sink_aware BOOLEAN)""",
    """CREATE TABLE IF NOT EXISTS relation_examples (kind VARCHAR, relation VARCHAR, direction VARCHAR,
       layer INTEGER, head INTEGER, found BOOLEAN, tried INTEGER, item_id VARCHAR, text VARCHAR, source INTEGER,
       target INTEGER, source_word VARCHAR, target_word VARCHAR)""",
]
_TABLES = ("relation_sources", "relations", "relation_examples")


@dataclass(frozen=True)
class RelationSource:
    """One file's items, read before the model loads: its kind, the file as given, the SHA-256 of its bytes,
    and for a treebank what reading it left out (`probe --conllu`'s "treebank")."""

    kind: str
    file: str
    sha256: str
    items: list[ProbeItem]
    treebank: dict | None = None


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_source(kind: str, file: str) -> RelationSource:
    """The items of one file, read as `probe --conllu | --winobias | --probes` reads it; `probes` may be
    `builtin`, `builtin:en` or `builtin:zh` (hashed over the shipped files' bytes)."""
    if kind not in KINDS:
        raise ValueError(f"unknown relation source {kind!r}; known: {', '.join(KINDS)}")
    if kind == "probes" and file.split(":")[0] == "builtin":
        _, _, lang = file.partition(":")
        digest = hashlib.sha256(file.encode("utf-8"))
        for code in [lang] if lang else list(LANGUAGES):
            digest.update(builtin_path(code).read_bytes())
        return RelationSource(kind, file, digest.hexdigest(), builtin_items(file))
    sha = file_sha256(file)
    read = read_item_file(kind, file)
    treebank = None
    if kind == "conllu":
        treebank = {"sentences": read.sentences, "skipped_arcs": read.skipped_arcs,
                    "text_disagreed": read.disagreed}
    return RelationSource(kind, file, sha, read.items, treebank)


def read_sources(conllu: str | None = None, winobias: str | None = None,
                 probes: str | None = None) -> list[RelationSource]:
    """The files given, in KINDS order. Two files that name one relation (WinoBias's and the probe sets'
    `coreference`) are refused: the atlas keeps one score per relation."""
    given = {"conllu": conllu, "winobias": winobias, "probes": probes}
    sources = [read_source(kind, file) for kind, file in given.items() if file is not None]
    seen: dict[str, str] = {}
    for source in sources:
        for relation in dict.fromkeys(item.relation for item in source.items):
            if relation in seen:
                raise ValueError(f"relation {relation!r} is in both --{seen[relation]} and --{source.kind}: "
                                 "give one of them (the atlas keeps one score per relation)")
            seen[relation] = source.kind
    return sources


def item_texts(sources: Sequence[RelationSource]) -> list[str]:
    """The distinct sentences of the sources' items, in order: the corpus of the six metrics when no --texts
    is given."""
    return list(dict.fromkeys(item.text for source in sources for item in source.items))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _has_tables(con) -> bool:
    names = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    return set(_TABLES) <= names


def build_relations(model, path: str | Path, sources: Sequence[RelationSource], sink_aware: bool = False,
                    batch_size: int = BATCH_SIZE, progress: Callable[[str, int, int], None] | None = None,
                    examples: bool = True) -> list[str]:
    """Score `model`'s heads on each source's items (one `score_model` call per file) and store them in the
    atlas database at `path`, replacing that kind's earlier relations; a source stored with the same SHA-256,
    `sink_aware` and model is not scored again. `progress(kind, done, total)` counts distinct sentences.
    Returns the kinds scored."""
    import duckdb

    info = model.info
    scored = []
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    try:
        for statement in _SCHEMA:
            con.execute(statement)
        _check_model(con, info)
        for source in sources:
            stored = con.execute("SELECT sha256, sink_aware, model, n_layers, n_heads FROM relation_sources "
                                 "WHERE kind = ?", [source.kind]).fetchall()
            if stored and stored[0] == (source.sha256, bool(sink_aware), info.name, info.n_layers, info.n_heads):
                continue
            step = None if progress is None else (lambda done, total, kind=source.kind: progress(kind, done, total))
            scores = score_model(model, source.items, batch_size=batch_size, progress=step, sink_aware=sink_aware)
            found = _examples(model, source, scores, sink_aware) if examples else []
            _store(con, source, scores, found, info, sink_aware)
            scored.append(source.kind)
    finally:
        con.close()
    return scored


def _check_model(con, info) -> None:
    """The atlas's build row, where there is one, must be this model's."""
    names = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if "build" not in names:
        return
    row = con.execute("SELECT model, n_layers, n_heads FROM build").fetchall()
    asked = (info.name, info.n_layers, info.n_heads)
    if row and tuple(row[0]) != asked:
        raise ValueError(f"the atlas there is of another model {tuple(row[0])}, not {asked}: use another --out")


def _store(con, source: RelationSource, scores: Mapping[str, RelationScore], found: list[dict], info,
           sink_aware: bool) -> None:
    """One file's scores, examples and source row, in one transaction, in place of that kind's."""
    n_layers, n_heads = info.n_layers, info.n_heads
    layer, head = (a.ravel() for a in np.indices((n_layers, n_heads)))
    columns: dict[str, list] = {name: [] for name in (
        "position", "relation", "direction", "layer", "head", "accuracy", "correct", "best", "n", "n_skipped",
        "n_scorable", "best_offset", "best_offset_accuracy", "first_word_accuracy")}
    cells = n_layers * n_heads
    for position, (relation, score) in enumerate(scores.items()):
        for direction in DIRECTIONS:
            best, base = score.best[direction], score.baselines[direction]
            is_best = np.zeros(cells, dtype=bool)
            if best is not None:
                is_best[best.layer * n_heads + best.head] = True
            accuracy = np.asarray(score.accuracy[direction], dtype=np.float64).reshape(-1)
            if accuracy.size != cells:  # no trace was scored: a relation of skipped items only
                accuracy = np.full(cells, np.nan)
            correct = np.asarray(score.correct[direction], dtype=np.int64).reshape(-1)
            correct = correct if correct.size == cells else np.zeros(cells, dtype=np.int64)
            for name, value in (("position", position), ("relation", relation), ("direction", direction),
                                ("n", score.n), ("n_skipped", score.n_skipped),
                                ("n_scorable", score.n_scorable.get(direction, score.n)),
                                ("best_offset", _nan(base.best_offset)),
                                ("best_offset_accuracy", _nan(base.best_offset_accuracy)),
                                ("first_word_accuracy", _nan(base.first_word_accuracy))):
                columns[name].append(np.full(cells, value))
            columns["layer"].append(layer)
            columns["head"].append(head)
            columns["accuracy"].append(accuracy)
            columns["correct"].append(correct)
            columns["best"].append(is_best)
    table = {name: np.concatenate(parts) for name, parts in columns.items()} if scores else None
    examples = {name: [row[name] for row in found] for name in (
        "relation", "direction", "layer", "head", "found", "tried", "item_id", "text", "source", "target",
        "source_word", "target_word")}
    treebank = source.treebank or {}
    con.execute("BEGIN TRANSACTION")
    try:
        for name in _TABLES:
            con.execute(f"DELETE FROM {name} WHERE kind = ?", [source.kind])
        if table is not None:
            con.register("relations_in", table)
            null = "CASE WHEN isnan({0}) THEN NULL ELSE {0} END".format
            con.execute(
                f"""INSERT INTO relations SELECT ?, position, relation, direction, layer, head, {null('accuracy')},
                    correct, best, n, n_skipped, n_scorable, CAST({null('best_offset')} AS INTEGER),
                    {null('best_offset_accuracy')}, {null('first_word_accuracy')}, ? FROM relations_in""",
                [source.kind, bool(sink_aware)])
            con.unregister("relations_in")
        for k in range(len(found)):
            con.execute("INSERT INTO relation_examples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [source.kind, *(examples[name][k] for name in examples)])
        con.execute("INSERT INTO relation_sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [KINDS.index(source.kind), source.kind, source.file, source.sha256, bool(sink_aware), info.name,
                     n_layers, n_heads, len(source.items), treebank.get("sentences"), treebank.get("skipped_arcs"),
                     treebank.get("text_disagreed"), _now()])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _nan(value) -> float:
    return math.nan if value is None else float(value)


# ---------------------------------------------------------------------------------------------
# Reading


def stored(con) -> dict:
    """{"relations": probe's "relations" JSON (every file's, in KINDS order), "relation_sources": [...],
    "relation_examples": [...]} from an open connection to an atlas database; all empty where none was built."""
    if not _has_tables(con):
        return {"relations": {}, "relation_sources": [], "relation_examples": []}
    sources = con.execute("SELECT kind, file, sha256, sink_aware, n_items, sentences, skipped_arcs, "
                          "text_disagreed, computed, n_layers, n_heads FROM relation_sources "
                          "ORDER BY position").fetchall()
    relations: dict = {}
    listed = []
    for kind, file, sha, sink_aware, n_items, sentences, skipped_arcs, disagreed, computed, n_layers, n_heads \
            in sources:
        scores = _scores(con, kind, n_layers, n_heads)
        relations.update(to_json("", scores, sink_aware=bool(sink_aware))["relations"])
        treebank = None if sentences is None else {"sentences": int(sentences), "skipped_arcs": int(skipped_arcs),
                                                   "text_disagreed": int(disagreed)}
        listed.append({"kind": kind, "file": file, "sha256": sha, "sink_aware": bool(sink_aware),
                       "n_items": int(n_items), "relations": list(scores), "treebank": treebank,
                       "computed": computed})
    names = ("relation", "direction", "layer", "head", "found", "tried", "id", "text", "source", "target",
             "source_word", "target_word")
    rows = con.execute("SELECT relation, direction, layer, head, found, tried, item_id, text, source, target, "
                       "source_word, target_word FROM relation_examples ORDER BY relation, direction").fetchall()
    return {"relations": relations, "relation_sources": listed,
            "relation_examples": [dict(zip(names, row)) for row in rows]}


def _scores(con, kind: str, n_layers: int, n_heads: int) -> dict[str, RelationScore]:
    """The RelationScores of one file, rebuilt from its rows (what `to_json` reads of them)."""
    table = con.execute(
        "SELECT position, relation, direction, layer, head, accuracy, correct, best, n, n_skipped, n_scorable, "
        "best_offset, best_offset_accuracy, first_word_accuracy, sink_aware FROM relations WHERE kind = ? "
        "ORDER BY position, direction, layer, head", [kind]).fetchall()
    blocks: dict[str, dict] = {}
    for (_, relation, direction, layer, head, accuracy, correct, best, n, n_skipped, n_scorable, offset,
         offset_accuracy, first_word, sink_aware) in table:
        block = blocks.setdefault(relation, {"n": n, "n_skipped": n_skipped, "sink_aware": bool(sink_aware),
                                             "accuracy": {}, "correct": {}, "best": {}, "baselines": {},
                                             "n_scorable": {}})
        if direction not in block["accuracy"]:
            block["accuracy"][direction] = np.full((n_layers, n_heads), np.nan)
            block["correct"][direction] = np.zeros((n_layers, n_heads), dtype=np.int64)
            block["best"][direction] = None
            block["baselines"][direction] = Baseline(offset, offset_accuracy, first_word)
            block["n_scorable"][direction] = int(n_scorable)
        if accuracy is not None:
            block["accuracy"][direction][layer, head] = accuracy
        block["correct"][direction][layer, head] = correct
        if best:
            block["best"][direction] = BestHead(int(layer), int(head), float(accuracy))
    return {relation: RelationScore(relation, int(b["n"]), int(b["n_skipped"]), b["accuracy"], b["correct"],
                                    b["best"], b["baselines"], n_scorable=b["n_scorable"], sink_aware=b["sink_aware"])
            for relation, b in blocks.items()}


def relations(path: str | Path) -> dict:
    """`stored` of the atlas database at `path` (a file, or its folder), opened read-only."""
    import duckdb

    path = Path(path)
    path = path / ATLAS_FILE if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"{path}: no atlas there (build one with `atlas build`)")
    con = duckdb.connect(str(path), read_only=True)
    try:
        return stored(con)
    finally:
        con.close()


# ---------------------------------------------------------------------------------------------
# The seed's table


def _ranked(block: Mapping) -> list[dict]:
    """Every (head, direction) of one relation's JSON block with an accuracy, best first: accuracy, then
    source_to_target before target_to_source, then layer, head."""
    heads = []
    for order, direction in enumerate(DIRECTIONS):
        grid = block.get(direction)
        for layer, row in enumerate(grid or []):
            for head, value in enumerate(row):
                if value is not None:
                    heads.append((-value, order, layer, head, direction))
    heads.sort()
    return [{"layer": layer, "head": head, "accuracy": -value, "direction": direction}
            for value, _, layer, head, direction in heads]


def seed_head(block: Mapping) -> dict | None:
    """The best head of one relation's JSON block over both directions: the JSON's own best of the direction
    whose best is higher (source_to_target on a tie), with that direction; None where neither has one."""
    best = None
    for direction in DIRECTIONS:
        head = (block.get("best") or {}).get(direction)
        if head is not None and (best is None or head["accuracy"] > best["accuracy"]):
            best = {**head, "direction": direction}
    return best


def _example_of(examples: Sequence[Mapping], relation: str, head: Mapping) -> tuple[dict | None, str | None]:
    for row in examples:
        if (row["relation"], row["direction"], row["layer"], row["head"]) == (
                relation, head["direction"], head["layer"], head["head"]):
            if not row["found"]:
                return None, (f"none of the first {row['tried']} sentences of {relation} is one this head gets "
                              "right")
            return {key: row[key] for key in ("id", "text", "source", "target", "source_word", "target_word")}, None
    return None, "no example stored for this head (the relations were given as JSON, or built without examples)"


def seed_table(atlas: str | Path | Mapping) -> list[dict]:
    """The seed's table as data, one row per seed relation (SEED's order): an atlas folder (or its database
    file), or a dict with "relations" (`atlas.metrics(dir)`, `probe --json`'s output) or a bare relations dict.

    A row: `key`, `en`, `zh`, `available`; where available, `relation` (the stored relation that measures it),
    `direction`, `best` ({layer, head, accuracy}), `n`, `n_scorable` (of that direction), `baseline` (that
    direction's {best_offset, best_offset_accuracy, first_word_accuracy}), `runner_up` (the next TOP heads, each
    at its better direction: {layer, head, accuracy, direction}), `example` ({id, text, source, target,
    source_word, target_word}: an item whose gold word is that head's argmax; None with `example_note` saying
    why), `candidates` (the relations that could measure it, in order); where not, `reason`. Every row: `causal`,
    the best head's causal weight ({effect, relation, n_pairs}: its mean patching effect over the minimal pairs of
    the matching relation, atlas_causal.seed_causal) where the atlas has it, else None with `causal_note`."""
    if isinstance(atlas, Mapping):
        inner = atlas.get("relations")
        data = atlas if isinstance(inner, Mapping) else {"relations": atlas}
        weights = data.get("causal") or {}
    else:
        data = relations(atlas)
        weights = stored_causal(atlas)
    blocks, examples = data["relations"], data.get("relation_examples") or []
    rows = []
    for seed in SEED:
        row = {"key": seed["key"], "en": seed["en"], "zh": seed["zh"], "candidates": list(seed["relations"])}
        present = [name for name in seed["relations"] if name in blocks]
        chosen = next(((name, head) for name in present if (head := seed_head(blocks[name])) is not None), None)
        if chosen is None:
            row["available"] = False
            row["reason"] = _absent(seed, present)
            row["causal"], row["causal_note"] = seed_causal(weights, seed["key"], None)
            rows.append(row)
            continue
        relation, best = chosen
        block = blocks[relation]
        direction = best["direction"]
        runner_up, seen = [], {(best["layer"], best["head"])}
        for head in _ranked(block):
            if (head["layer"], head["head"]) not in seen:
                seen.add((head["layer"], head["head"]))
                runner_up.append(head)
            if len(runner_up) == TOP:
                break
        example, note = _example_of(examples, relation, best)
        row.update({"available": True, "relation": relation, "direction": direction,
                    "best": {key: best[key] for key in ("layer", "head", "accuracy")}, "n": block["n"],
                    "n_scorable": (block.get("n_scorable") or {}).get(direction, block["n"]),
                    "baseline": block["baselines"][direction], "runner_up": runner_up, "example": example})
        if note is not None:
            row["example_note"] = note
        row["causal"], causal_note = seed_causal(weights, seed["key"], best)
        if causal_note is not None:
            row["causal_note"] = causal_note
        rows.append(row)
    return rows


def _absent(seed: Mapping, present: list[str]) -> str:
    names = " or ".join(seed["relations"])
    if present:
        return f"{', '.join(present)} has no scored item (every item skipped, or none a causal model can score)"
    if seed["key"] == "coreference":
        return ("no coreference items in this atlas: build it with --winobias FILE (WinoBias format) or "
                "--probes builtin")
    return f"no {names} items in this atlas: build it with --conllu FILE or --probes builtin"


# ---------------------------------------------------------------------------------------------
# Examples


def _examples(model, source: RelationSource, scores: Mapping[str, RelationScore], sink_aware: bool) -> list[dict]:
    """For each seed relation of `source` with a best head (seed_head of its JSON), the first item, in file
    order, that head gets right, found by scoring items alone with the same rule."""
    blocks = to_json("", dict(scores), sink_aware=sink_aware)["relations"]
    found = []
    for relation in SEED_RELATIONS:
        if relation not in blocks or (head := seed_head(blocks[relation])) is None:
            continue
        by_text: dict[str, list[ProbeItem]] = {}
        for item in source.items:
            if item.relation == relation:
                by_text.setdefault(item.text, []).append(item)
        row = {"relation": relation, "direction": head["direction"], "layer": head["layer"], "head": head["head"],
               "found": False, "tried": 0, "item_id": None, "text": None, "source": None, "target": None,
               "source_word": None, "target_word": None}
        for text, items in list(by_text.items())[:EXAMPLE_TEXTS]:
            row["tried"] += 1
            trace = model.run(text)
            hit = next((item for item in items if _hits(trace, item, head, sink_aware)), None)
            del trace
            if hit is not None:
                row.update({"found": True, "item_id": hit.id, "text": hit.text, "source": hit.source,
                            "target": hit.target, "source_word": hit.words[hit.source],
                            "target_word": hit.words[hit.target]})
                break
        found.append(row)
    return found


def _hits(trace, item: ProbeItem, head: Mapping, sink_aware: bool) -> bool:
    accumulator = ScoreAccumulator([item.relation], sink_aware=sink_aware)
    accumulator.add(trace, [item])
    score = accumulator.result()[item.relation]
    correct = score.correct[head["direction"]]
    return bool(score.n and correct.size and correct[head["layer"], head["head"]] > 0)
