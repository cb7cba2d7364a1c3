"""`python -m attnviz parity` and `bench`, as the README shows them; every preset id reaches the hub."""

from __future__ import annotations

import pytest

from attnviz.__main__ import main
from tests.conftest import MINILM


def test_parity_command_passes_on_the_offline_model(minilm, capsys):
    assert main(["parity", "--model", MINILM, "--text", "Emoji 😀 and <b>tags</b> and 中文."]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "(bound 1e-5)" in out


def test_bench_command_prints_a_side_by_side_ratio(minilm, capsys):
    assert main(["bench", "--model", MINILM, "--lengths", "16", "--repeats", "2"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert row[0] == MINILM and row[1] == "16" and float(row[-1]) > 0


def test_every_preset_is_a_hub_id_or_offline_copy(monkeypatch):
    """Preset ids with dots (Qwen/Qwen2.5-0.5B) must go to the hub, not be mistaken for file paths."""
    from attnviz.loading import hf, resolve_source
    from attnviz.loading.random_model import RANDOM_MODEL_NAME
    from attnviz.loading.sources import is_hub_id
    from attnviz.workbench.shelf import PRESETS

    asked = []

    def fake_download(repo_id, progress):
        asked.append(repo_id)
        raise OSError("offline in this test")

    monkeypatch.setattr(hf, "_download", fake_download)
    for preset in PRESETS:
        source = resolve_source(preset)
        if preset == RANDOM_MODEL_NAME or source != preset:
            continue  # built in, or installed from the package index
        with pytest.raises(OSError, match="offline in this test"):
            hf.locate(source)
        assert is_hub_id(preset)  # the app accepts every preset by the hub's own rules
    assert "Qwen/Qwen2.5-0.5B" in asked and "bert-base-uncased" in asked


def test_help_speaks_to_users(capsys):
    """`--help` says what each command does for a person, with examples, and names no module of the code."""
    import re

    import pytest

    for argv in (["--help"], *([command, "--help"] for command in ("probe", "lens", "patch", "qk", "bench"))):
        with pytest.raises(SystemExit):
            main(argv)
        shown = capsys.readouterr().out
        assert not re.search(r"attnviz\.\w+|\w+\.py\b|architecture\.md", shown), (argv, shown)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "examples:" in capsys.readouterr().out
