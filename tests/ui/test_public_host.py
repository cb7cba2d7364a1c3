"""A public deployment, tried as an attacker would: model sources, shared links, oversized models,
Markdown in every text. (Hostile upload files: tests/cli/test_hostile_files_and_cli.py; the real browser:
tests/browser/test_e2e_browser.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest
import torch
import transformers as tf
from safetensors.torch import save_file
from streamlit.testing.v1 import AppTest

from attnviz.loading.sources import SourceRefused, allowed_model_dirs, app_source, is_hub_id
from attnviz.ui.escape import md
from attnviz.workbench.memory import ByteStore, budget_in_force, memory_budget
from tests.conftest import MINILM, ROOT, require_offline
from tests.helpers.pages import APP, TIMEOUT


def tiny_bert_folder(folder: Path) -> Path:
    model = tf.BertModel(tf.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=20))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(model.config.to_json_string())
    save_file(model.state_dict(), str(folder / "model.safetensors"))
    return folder


# ---------------------------------------------------------------------------------------------------
# which sources the app accepts


@pytest.mark.parametrize("hub_id", ["gpt2", "bert-base-uncased", "Qwen/Qwen2.5-0.5B", "a/b", "x_y.z"])
def test_hub_ids_by_the_hubs_rules_are_accepted(hub_id):
    source = app_source(hub_id, [])
    assert source.from_hub and source.location == hub_id


@pytest.mark.parametrize("text", ["a--b", "a..b", "-a", "a/b/c", "a b", "x.git", "ünï/côde", "a/" + "b" * 97])
def test_malformed_hub_ids_are_refused(text):
    assert not is_hub_id(text)
    with pytest.raises(SourceRefused):
        app_source(text, [])


def test_a_bare_name_is_a_hub_id_even_where_a_folder_of_that_name_exists(tmp_path, monkeypatch):
    tiny_bert_folder(tmp_path / "secret-model")
    monkeypatch.chdir(tmp_path)
    source = app_source("secret-model", [])
    assert source.from_hub and source.location == "secret-model"


def test_every_refused_or_missing_path_gets_the_same_answer(tmp_path, monkeypatch):
    allowed = tiny_bert_folder(tmp_path / "allowed" / "bert")
    outside = tiny_bert_folder(tmp_path / "outside" / "bert")
    (tmp_path / "allowed" / "link").symlink_to(outside)  # a symlink out of the allowed folder
    monkeypatch.chdir(tmp_path)
    dirs = [(tmp_path / "allowed").resolve()]
    messages = set()
    for text in ["/root", "/nonexistent", "~", "/", str(outside), str(tmp_path / "allowed" / "link"),
                 str(tmp_path / "allowed" / ".." / "outside" / "bert"), str(tmp_path / "allowed" / "missing"),
                 "./allowed/bert", "allowed/bert/", "../etc", "C:\\Windows", str(allowed / "config.json")]:
        with pytest.raises(SourceRefused) as refused:
            app_source(text, dirs)
        messages.add(str(refused.value))
    assert len(messages) == 1
    message = messages.pop()
    assert "/" + "root" not in message and str(tmp_path) not in message
    assert app_source(str(allowed), dirs).location == str(allowed.resolve())  # inside: accepted


def test_no_local_path_without_the_operators_setting(tmp_path, monkeypatch):
    folder = tiny_bert_folder(tmp_path / "bert")
    monkeypatch.delenv("ATTNVIZ_MODEL_DIRS", raising=False)
    with pytest.raises(SourceRefused):
        app_source(str(folder), allowed_model_dirs())
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(tmp_path))
    assert app_source(str(folder), allowed_model_dirs()).location == str(folder.resolve())


def test_the_api_still_loads_any_local_path(tmp_path):
    import attnviz

    model = attnviz.load(str(tiny_bert_folder(tmp_path / "bert")))
    assert model.info.n_layers == 1


# ---------------------------------------------------------------------------------------------------
# size before weights


def _llama_70b_folder(folder: Path) -> Path:
    """A config that claims Llama-2-70B, a one-tensor weight file and no tokenizer: only the size check
    stands between it and 280 GB of allocations."""
    config = tf.LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                            num_attention_heads=64, num_key_value_heads=8, vocab_size=32000)
    folder.mkdir()
    (folder / "config.json").write_text(config.to_json_string())
    save_file({"model.norm.weight": torch.ones(8192)}, str(folder / "model.safetensors"))
    return folder


REFUSE_70B = textwrap.dedent("""
    import json, sys
    import attnviz
    from attnviz.loading import ModelTooLarge
    try:
        {call}
        outcome = "loaded"
    except ModelTooLarge as error:
        outcome = f"refused: needs {{error.need / 1e9:.0f}} GB"
    # VmHWM, not getrusage's ru_maxrss: that one keeps the parent's peak across fork and exec.
    peak_kb = int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])
    print(json.dumps({{"outcome": outcome, "max_rss_mb": peak_kb / 1024}}))
""")


@pytest.mark.parametrize("call", [
    "attnviz.load(sys.argv[1])",  # the API: refused because it exceeds the machine's memory
    "attnviz.load(sys.argv[1], memory_limit=int(2.5e9))",  # the app's budget
])
def test_a_70b_config_is_refused_before_any_allocation(tmp_path, call):
    folder = _llama_70b_folder(tmp_path / "llama70b")
    done = subprocess.run([sys.executable, "-c", REFUSE_70B.format(call=call), str(folder)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["outcome"].startswith("refused: needs"), done.stderr[-2000:]
    assert result["max_rss_mb"] < 1000, result


def test_weight_headers_count_even_when_the_config_is_small(tmp_path):
    from attnviz.loading import ModelTooLarge, load

    folder = tiny_bert_folder(tmp_path / "bert")
    # A second weight file as large as it says: its header alone must stop the load.
    save_file({"padding": torch.zeros(2_000_000)}, str(folder / "extra.safetensors"))
    with pytest.raises(ModelTooLarge) as refused:
        load(str(folder), memory_limit=4_000_000)
    assert refused.value.need >= 8_000_000


def test_gguf_header_gives_the_dequantised_size():
    from attnviz.loading.offline import offline_path
    from attnviz.loading.size import checkpoint_bytes
    from tests.conftest import SMOLLM

    require_offline(SMOLLM)
    from gguf import GGUFReader

    path = offline_path(SMOLLM)
    assert checkpoint_bytes(path) == 4 * sum(int(t.n_elements) for t in GGUFReader(str(path)).tensors)


# ---------------------------------------------------------------------------------------------------
# the budget and the byte-bounded store


def test_budget_setting(monkeypatch):
    monkeypatch.delenv("ATTNVIZ_MEMORY_BUDGET_GB", raising=False)
    assert budget_in_force().basis in ("container", "machine")  # no setting: the machine's (test_budget_rule.py)
    monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_GB", "1.5")
    assert memory_budget() == 1_500_000_000
    for bad in ("lots", "0", "-1"):
        monkeypatch.setenv("ATTNVIZ_MEMORY_BUDGET_GB", bad)
        with pytest.raises(ValueError, match="ATTNVIZ_MEMORY_BUDGET_GB"):
            memory_budget()


def test_store_is_bounded_by_bytes_and_evicts_the_oldest():
    store = ByteStore(100)
    assert store.put("a", 1, 40) and store.put("b", 2, 40)
    store.get("a")  # used: now b is the oldest
    assert store.put("c", 3, 40)
    assert "b" not in store and store.get("a") == 1 and store.get("c") == 3 and store.total_bytes == 82
    assert not store.put("huge", 4, 101) and "huge" not in store


def test_a_long_text_in_a_key_counts_against_the_store():
    """A visitor's 20,000-character sentence can key a value of a few bytes: the key's text is counted."""
    store = ByteStore(1000)
    assert store.put(("view", "short"), 1, 10) and store.total_bytes == 10 + len("view") + len("short")
    assert not store.put(("view", "é" * 600), 2, 10)  # 1,200 bytes of UTF-8 alone
    for i in range(50):  # many long-keyed tiny values: the total stays under the capacity
        store.put(("view", f"{i:03d}" + "x" * 200), i, 1)
    assert store.total_bytes <= 1000 and len(store) == 4
    store.discard(next(iter(store.keys())))
    assert store.total_bytes == sum(1 + 4 + 203 for _ in store.keys())


# ---------------------------------------------------------------------------------------------------
# shared links and typed text, through the real pages (AppTest)

MARKUP = "[click me](https://evil.example) **bold** :material/home: $$x^2$$ <b>x</b> & `c` _i_ ~~s~~ #h |t| https://e.example"


def _page(url_params: dict) -> AppTest:
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for key, value in url_params.items():
        at.query_params[key] = value
    return at.run()


def _texts(at: AppTest) -> str:
    return " ".join(str(e.value) for e in [*at.error, *at.warning, *at.info, *at.markdown, *at.caption])


def test_path_probing_through_the_model_link_learns_nothing():
    seen = []
    for path in ["/root", "/nonexistent", "~", "/etc/passwd", "."]:
        at = _page({"model": path})
        assert not at.exception
        errors = [e.value for e in at.sidebar.error]
        assert errors, path
        seen.append(errors[0])
        assert "/root" not in _texts(at) and "/etc" not in _texts(at)
    assert len(set(seen)) == 1, seen


def test_markdown_in_a_shared_link_is_escaped_everywhere():
    at = _page({"model": MARKUP, "text": MARKUP, "head": "²", "layer": "99999"})
    assert not at.exception
    error = " ".join(e.value for e in at.sidebar.error)
    assert "can load" in error and "click" not in error and "evil" not in error  # refused, not echoed
    assert at.session_state["head"] == 0 and at.session_state["layer"] == 0  # bad indices ignored
    html = " ".join(e.proto.body for e in at.get("html"))
    assert "&lt;" in html and "&amp;" in html and "<b>" not in html  # chips: HTML-escaped once


@pytest.mark.parametrize("value", ["²", "١", "-1", "1e3", "12345", "0x1", " 1"])
def test_url_indices_must_be_plain_digits(value):
    at = _page({"head": value, "layer": value})
    assert not at.exception
    assert at.session_state["head"] == 0 and at.session_state["layer"] == 0


def test_an_overlong_text_in_the_link_is_ignored():
    at = _page({"text": "x" * 20_001})
    assert not at.exception
    assert at.text_input(key="text").value != "x" * 20_001


def test_a_hub_id_is_echoed_escaped(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # fail fast: no hub here
    at = _page({"model": "a__b__c"})  # a valid hub id that Markdown would read as emphasis
    assert not at.exception
    assert md("a__b__c") in " ".join(e.value for e in at.sidebar.error)


def test_typed_words_reach_the_head_ranking_escaped():
    require_offline(MINILM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    at.text_input(key="text").input("$x$ [a](https://e.example) `c` ok").run()
    at.selectbox(key="explore_source").set_value(0).run()
    at.selectbox(key="explore_target").set_value(3).run()  # words: $ x $ [ a ] ...
    assert not at.exception
    ranking = [m.value for m in at.markdown if "ranked" in m.value]
    assert ranking and md("$") in ranking[0] and md("[") in ranking[0]


def test_config_hides_error_details_and_the_file_watcher():
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "none"
    assert config["server"]["fileWatcherType"] == "none"


def test_markdown_escape_leaves_nothing_to_interpret():
    import string

    escaped = md(string.punctuation + "\nline")
    assert all(f"\\{c}" in escaped for c in string.punctuation) and "\n" not in escaped
    assert quote(md("plain words 123")) == quote("plain words 123")


def test_an_unforeseen_error_shows_a_message_not_a_traceback():
    """Community Cloud overrides showErrorDetails with a setting that shows tracebacks: the pages guard
    themselves."""
    at = AppTest.from_string(textwrap.dedent("""
        import streamlit as st
        from attnviz.ui.guard import guarded

        @guarded
        def page():
            st.write("before")
            raise RuntimeError("secret detail at /srv/app/models")

        page()
        st.write("after")
    """)).run()
    assert not at.exception
    shown = " ".join(str(e.value) for e in [*at.error, *at.markdown])
    assert "Something went wrong" in shown and "secret" not in shown and "/srv" not in shown
    assert "after" in shown  # the rest of the page still runs


def test_every_text_box_has_a_length_limit():
    """A text box without max_chars took 4 MB of text (2.9 GB of server memory) from one visitor."""
    import ast

    package = Path(__file__).resolve().parents[2] / "attnviz" / "ui"
    unbounded = []
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("text_input", "text_area", "chat_input")
                    and "max_chars" not in {k.arg for k in node.keywords}):
                unbounded.append(f"{path.name}:{node.lineno}")
    assert not unbounded, unbounded


def test_word_pickers_offer_only_the_words_that_have_tokens():
    """A 20,000-character sentence in the Head Finder's own-sentence box, truncated to 512 tokens: the word
    pickers offer only the words that kept tokens (a 4 MB text once sent two million options, and the
    browser tab crashed)."""
    require_offline(MINILM)
    at = AppTest.from_file(str(ROOT / "app_pages" / "1_Head_Finder.py"), default_timeout=TIMEOUT).run()
    text = " ".join(f"w{i}" for i in range(4_000))[:20_000]
    at.text_input(key="finder_text").set_value(text).run()
    assert not at.exception
    options = at.selectbox(key="finder_source").options
    assert 2 <= len(options) <= 512 < len(text.split()), len(options)
