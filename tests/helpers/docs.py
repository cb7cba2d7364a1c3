"""What the README and docs tests read out of Markdown: its code fences and the commands it names, and the
subcommands the command line really has (from its argparse parser, not from a list kept here)."""

from __future__ import annotations

import argparse
import re

# A fence opens or closes a code block: three or more backticks or tildes, indented (a list item's) or not.
FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
# A command line that runs a subcommand: `python -m attnviz X`, `.venv/bin/attnviz X`, prose's `attnviz X`.
INVOCATION = re.compile(r"(?:python -m attnviz|/attnviz|`attnviz)[ \t]+([a-z][\w-]*)")


def fence_problems(text: str) -> list[str]:
    """What is wrong with the code fences of `text`, one line each; empty when every block closes.

    CommonMark's rule: a block closes at a fence of the same character, at least as long, with no info string.
    An opening fence with an info string (```python) inside an open block is only text to CommonMark, but in
    these files it means the block above lost its closing fence: everything after it renders inside out."""
    out, opened = [], None  # opened: (line number, fence) of the open block
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if not match:
            continue
        fence, info = match.group(1), match.group(2).strip()
        if opened is None:
            opened = (number, fence)
        elif fence[0] == opened[1][0] and len(fence) >= len(opened[1]) and not info:
            opened = None
        elif info:
            out.append(f"line {number}: {line.strip()!r} inside the block opened at line {opened[0]}: "
                       "a missing closing fence above it?")
    if opened is not None:
        out.append(f"line {opened[0]}: a code block that never closes")
    return out


def named_commands(text: str) -> set[str]:
    """The subcommands `text` runs or names as `attnviz X`."""
    return set(INVOCATION.findall(text))


def cli_subcommands() -> set[str]:
    """Every subcommand of `python -m attnviz`, read from the parser main() parses with."""
    from attnviz.cli.main import build_parser

    parser = build_parser("attnviz")
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(subparsers.choices)
