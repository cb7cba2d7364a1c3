"""Built-in, self-written relation probe sets (see README.md in this folder).

`en.jsonl` and `zh.jsonl` use the probe JSONL format of docs/formats.md ("Probe items and input formats") with the
relations `subject-verb`, `coreference`, `modifier` and `semantic`.
"""

from __future__ import annotations

import pathlib

PROBESET_DIR = pathlib.Path(__file__).parent

LANGUAGES = ("en", "zh")


def builtin_path(lang: str) -> pathlib.Path:
    """Path of the built-in probe file for `lang` ("en" or "zh")."""
    if lang not in LANGUAGES:
        raise ValueError(f"no built-in probe set for language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    return PROBESET_DIR / f"{lang}.jsonl"


def builtin_items(spec: str) -> list:
    """The items of `builtin` (en + zh), `builtin:en` or `builtin:zh`."""
    from attnviz.analysis.probe_jsonl import read_probes  # the readers import nothing from here; keep it that way

    _, _, lang = spec.partition(":")
    langs = [lang] if lang else list(LANGUAGES)
    return [item for code in langs for item in read_probes(builtin_path(code))]
