"""Every UI string, one TOML file per language in `ui/locales/` (`en.toml`, `zh.toml`: `key = "text"`).
`t(key, **values)` picks the language chosen in the sidebar; a key missing from a language falls back to
English. English holds every key: a key another language has and English lacks is an error at import."""

from __future__ import annotations

import tomllib
from pathlib import Path

LANGUAGES = {"en": "English", "zh": "中文"}
LOCALE_DIR = Path(__file__).with_name("locales")


def load_strings(folder: Path = LOCALE_DIR, languages: dict[str, str] = LANGUAGES) -> dict[str, dict[str, str]]:
    """key -> {language: text}, keys in English's order, from `folder/<language>.toml` for each language."""
    tables: dict[str, dict] = {}
    for language in languages:
        path = folder / f"{language}.toml"
        with path.open("rb") as file:
            table = tomllib.load(file)
        not_text = [key for key, text in table.items() if not isinstance(text, str)]
        if not_text:
            raise ValueError(f"{path}: not a string: {', '.join(not_text)}")
        tables[language] = table
    english = tables["en"]
    for language, table in tables.items():
        unknown = [key for key in table if key not in english]
        if unknown:
            raise ValueError(f"{folder / f'{language}.toml'}: keys that en.toml lacks "
                             f"(a typo would never show): {', '.join(unknown)}")
    return {key: {language: table[key] for language, table in tables.items() if key in table} for key in english}


STRINGS: dict[str, dict[str, str]] = load_strings()


def translate(language: str, key: str, **values) -> str:
    table = STRINGS[key]
    text = table.get(language) or table["en"]
    return text.format(**values) if values else text
