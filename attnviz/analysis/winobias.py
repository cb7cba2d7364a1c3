"""The WinoBias reader: `<index> <sentence>` with bracketed mentions, one `coreference` item a line.

The pronoun mention is the source and the last word of the other mention is the target; the id is
the line's index; lang `en`. Tokenisation: brackets are removed, the line is split on whitespace, and
trailing punctuation is peeled off each piece, one character a word (`"him]."` gives `him`, `.`);
leading and inner punctuation stays (`'s`, `didn't`). 30 of the 1,584 dev lines bracket a second
pronoun that refers to the same mention (`... because [he] needed to cut [his] hair.`): the first
pronoun is the source, so every line gives exactly one item.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from os import PathLike

from attnviz.analysis import items
from attnviz.analysis.items import ProbeItem
from attnviz.analysis.lines import base_name, line_records, opened, shown
from attnviz.trace import is_punctuation

PRONOUNS = frozenset(
    {
        "he", "she", "him", "her", "his", "hers", "himself", "herself",
        "they", "them", "their", "theirs", "themselves", "themself",
        "it", "its", "itself",
    }
)  # fmt: skip

_WINOBIAS_LINE = re.compile(r"^(\d+) (.*)$")


def _split_winobias_words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Words of bracket-free text and their character spans (see the module docstring)."""
    words, spans = [], []
    for match in re.finditer(r"\S+", text):
        piece, start = match.group(), match.start()
        end = len(piece)
        while end > 1 and is_punctuation(piece[end - 1]):
            end -= 1
        words.append(piece[:end])
        spans.append((start, start + end))
        for k in range(end, len(piece)):
            words.append(piece[k])
            spans.append((start + k, start + k + 1))
    return words, spans


def _mentions(sentence: str) -> tuple[str, list[tuple[int, int]]]:
    """The sentence without its brackets, and each bracketed mention's character span in it."""
    clean, mentions, opened = [], [], None
    for char in sentence:
        if char == "[":
            if opened is not None:
                raise ValueError("nested '['")
            opened = len(clean)
        elif char == "]":
            if opened is None:
                raise ValueError("']' without '['")
            mentions.append((opened, len(clean)))
            opened = None
        else:
            clean.append(char)
    if opened is not None:
        raise ValueError("'[' without ']'")
    return "".join(clean), mentions


def _winobias_item(line: str, where: str) -> ProbeItem:
    match = _WINOBIAS_LINE.match(line.strip())
    if not match:
        raise ValueError(f"{where}: expected '<index> <sentence>'")
    clean, mentions = _mentions(match.group(2))
    words, spans = _split_winobias_words(clean)
    # Spans are sorted and disjoint, so a mention's words are found by bisection: a line of
    # 100,000 mentions must not scan its words 100,000 times.
    starts, ends = [ws for ws, _ in spans], [we for _, we in spans]
    mention_words = []
    for start, end in mentions:
        inside = range(bisect_right(ends, start), bisect_left(starts, end))
        if not inside:
            raise ValueError("an empty bracketed mention")
        mention_words.append(list(inside))
    is_pronoun = [len(m) == 1 and words[m[0]].lower() in PRONOUNS for m in mention_words]
    pronouns = [m for m, yes in zip(mention_words, is_pronoun) if yes]
    others = [m for m, yes in zip(mention_words, is_pronoun) if not yes]
    if not pronouns or len(others) != 1:
        shown_mentions = [" ".join(words[w] for w in m) for m in mention_words]
        raise ValueError(f"expected one pronoun mention and one other mention, got {shown(shown_mentions)}")
    # the refusals here and ProbeItem's name no line: the line reader gives them this one
    return ProbeItem("coreference", tuple(words), pronouns[0][0], others[0][-1], lang="en", id=match.group(1))


def parse_winobias(text: str | bytes, name: str = "<winobias>") -> list[ProbeItem]:
    """One `coreference` item a non-blank line; `id` is the line's own index number."""
    return line_records(text, name, _winobias_item, most=items.MAX_ITEMS, what="items")


def read_winobias(path: str | PathLike) -> list[ProbeItem]:
    with opened(path) as f:
        return parse_winobias(f, name=base_name(path))
