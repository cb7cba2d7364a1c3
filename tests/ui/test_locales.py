"""The UI strings' TOML files (attnviz/ui/locales/): every language's keys are English keys."""

from __future__ import annotations

import pytest

from attnviz.ui.strings import LANGUAGES, LOCALE_DIR, STRINGS, load_strings, translate


def test_real_locale_files_load_and_use_only_english_keys():
    assert load_strings() == STRINGS
    assert all("en" in table for table in STRINGS.values())
    for language in LANGUAGES:
        assert (LOCALE_DIR / f"{language}.toml").is_file()
        assert any(language in table for table in STRINGS.values())


def write(folder, name, text):
    (folder / name).write_text(text, encoding="utf-8")


def test_a_key_english_lacks_is_an_error(tmp_path):
    write(tmp_path, "en.toml", 'greeting = "Hello, {name}"\n')
    write(tmp_path, "zh.toml", 'greeting = "你好，{name}"\ngreetting = "错字"\n')
    with pytest.raises(ValueError, match=r"zh\.toml.*en\.toml lacks.*greetting"):
        load_strings(tmp_path, {"en": "English", "zh": "中文"})


def test_a_key_missing_from_a_language_falls_back_to_english(tmp_path):
    write(tmp_path, "en.toml", 'greeting = "Hello, {name}"\nbye = "Bye"\n')
    write(tmp_path, "zh.toml", 'greeting = "你好，{name}"\n')
    strings = load_strings(tmp_path, {"en": "English", "zh": "中文"})
    assert strings == {"greeting": {"en": "Hello, {name}", "zh": "你好，{name}"}, "bye": {"en": "Bye"}}


def test_a_value_that_is_not_text_is_an_error(tmp_path):
    write(tmp_path, "en.toml", 'greeting = 3\n')
    with pytest.raises(ValueError, match="not a string: greeting"):
        load_strings(tmp_path, {"en": "English"})


def test_translate_formats_and_falls_back():
    key = "detectors_progress"
    assert translate("zh", key, done=1, total=4) == STRINGS[key]["zh"].format(done=1, total=4)
    assert translate("fr", key, done=1, total=4) == "Running sequence 1 of 4"
