"""Issue 26, items 6-8 ("The person at their own machine"): the long page says at the top what it leaves out,
beside the lens switch it cannot offer; Chinese on SmolLM2 reads as characters (a character's byte pieces one
chip, its pieces a click away; a predicted piece of a character with the character(s) the model completes it
to); a download that cannot be made is a message on the page, never a file of text."""

from __future__ import annotations

import html
import re

import torch
from streamlit.testing.v1 import AppTest

from attnviz.analysis.views import completed_text
from attnviz.attention_kinds.decoding import greedy_decode
from attnviz.ui import long_explore
from attnviz.workbench import OverBudget, completion, shelf, traces
from tests.conftest import SMOLLM, require_offline
from tests.helpers.jobs import finish_jobs
from tests.helpers.pages import APP, TIMEOUT, assert_clean

SENTENCE = "小明告诉老师他生病了。"
LONG = ("The keys to the old cabinet are on the table. The animal didn't cross the street because it was "
        "too tired, and the author that the critics praise writes beautiful books.")
LONG_NOTE = "For long texts this page shows"
BYTES = re.compile(r"⟨([0-9a-f ]+)⟩")


def explore(**params) -> AppTest:
    require_offline(SMOLLM)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"model": SMOLLM, **params})
    finish_jobs(at.run())
    assert_clean(at)
    return at


def exports(at: AppTest) -> list[str]:
    """The labels of the download buttons of built exports (not the head's CSV, built as the page draws)."""
    return [b.proto.label for b in at.get("download_button") if b.proto.label.startswith("Download ")]


def chips_html(at: AppTest) -> str:
    return " ".join(e.proto.body for e in at.get("html") if "monospace" in e.proto.body)


def test_a_characters_byte_pieces_are_one_chip_with_the_pieces_a_click_away(smollm):
    at = explore(text=SENTENCE)
    body = chips_html(at)
    trace = smollm.run(SENTENCE)
    split = [c for c in SENTENCE if trace.tokens.count(c) > 1]  # characters byte-level BPE cut in pieces
    assert split, trace.tokens
    groups = re.findall(r'<details class="attnviz-pieces".*?</details>', body)
    assert len(groups) == len(split)
    for character, group in zip(split, groups):
        summary = html.unescape(re.search(r"<summary.*?>(.*?)</summary>", group).group(1))
        assert re.sub(r"<.*?>", "", summary).split()[0].removeprefix("##") == character
        pieces = [bytes.fromhex(hexes) for hexes in BYTES.findall(html.unescape(group.split("</summary>")[1]))]
        assert len(pieces) == trace.tokens.count(character) and b"".join(pieces) == character.encode()
    assert "[1/" not in body  # no "明[1/2]" chips left
    # every other token still has its own chip: one chip a token outside the groups, one a group
    outside = re.sub(r'<details class="attnviz-pieces".*?</details>', "", body)
    assert outside.count("<sub") == len(trace.tokens) - sum(trace.tokens.count(c) for c in split)


def test_a_predicted_piece_of_a_character_shows_what_it_completes_to(smollm):
    at = explore(text=SENTENCE, view="writes")
    table = next(d.value for d in at.dataframe if list(d.value.columns) == ["token", "probability"])
    cells = list(table["token"])
    trace = smollm.run(SENTENCE)
    rows = smollm.next_tokens(trace, len(trace.tokens) - 1)
    partial = [k for k, (text, _, _) in enumerate(rows) if "\ufffd" in text]
    assert partial, rows  # after "。" SmolLM2 predicts pieces of 他 and 你 among its top five
    completed = 0
    for k, cell in enumerate(cells):
        hexes = BYTES.findall(cell)
        if k not in partial:
            assert not hexes and cell == rows[k][0].strip() or cell.startswith(("␣", "⏎")), cell
            continue
        pieces = [bytes.fromhex(h) for h in hexes]
        assert pieces[0] == smollm.token_bytes(rows[k][2])  # the exact bytes stay
        if cell.startswith("⟨"):  # not completed in three steps
            continue
        characters = cell.split(" ")[0]
        assert completed_text(pieces) == characters, cell
        completed += 1
    assert completed > 0, cells
    assert any("Before it: the character(s) it makes with the model's own next tokens" in c.value for c in at.caption)


def test_the_long_page_says_at_the_top_what_it_leaves_out(monkeypatch):
    monkeypatch.setattr(shelf, "FULL_MAPS_TOKENS", 16)
    at = explore(text=LONG)
    lens = at.radio(key="lens_unavailable")
    assert lens.disabled and lens.value == "raw" and lens.options == ["raw weights"]
    assert LONG_NOTE in lens.help
    shown = [(e.type if hasattr(e, "type") else "", str(getattr(e, "value", ""))) for e in at.main]
    notes = [k for k, (_, value) in enumerate(shown) if LONG_NOTE in value]
    mosaic = [k for k, (kind, _) in enumerate(shown) if kind == "plotly_chart"]
    assert len(notes) == 1 and mosaic and notes[0] < mosaic[0], shown  # said once, above the mosaic
    assert any("A long text:" in i.value for i in at.info)  # why, on top, also once the views are drawn


def test_a_refused_export_is_a_message_on_the_page_not_a_file(monkeypatch):
    at = explore(text="The keys to the cabinet are on the table.", view="check")
    assert not exports(at)  # nothing is built before it is asked for
    at.button(key="npz_prepare").click().run()
    assert_clean(at)
    assert exports(at) == ["Download Trace (NPZ, full precision)"]

    def refuse(*args, **kwargs):
        raise OverBudget(3_000_000_000, 2_500_000_000, 2_000_000_000)

    monkeypatch.setattr(traces, "export", refuse)
    at.button(key="json_prepare").click().run()
    assert_clean(at)
    assert not exports(at)
    assert any("could not build this export: it needs 3.00 GB" in w.value for w in at.warning)


def test_the_reduced_download_of_an_evicted_trace_says_so(monkeypatch):
    monkeypatch.setattr(shelf, "FULL_MAPS_TOKENS", 16)
    at = explore(text=LONG)
    at.button(key="reduced_npz_prepare").click().run()
    assert_clean(at)
    assert exports(at) == ["Download Reduced views (NPZ)"]
    build = long_explore.reduced_npz_of

    def evicted_as_it_is_built(bench, key):
        # The store lets the trace go as the file is built, after the page drew. (Gone from the start, the page
        # would start the long run again and the click would race that run: two test workers lost the race.)
        monkeypatch.setattr(traces, "held_reduced", lambda *args: None)
        return build(bench, key)

    monkeypatch.setattr(long_explore, "reduced_npz_of", evicted_as_it_is_built)
    at.button(key="reduced_npz_prepare").click().run()
    assert_clean(at)
    assert not exports(at)
    assert any(w.value.startswith("The long text's views were computed but") for w in at.warning)


def test_completed_text_waits_for_the_first_pieces_character():
    assert completed_text([b"\xe4\xbb"]) is None
    assert completed_text([b"\xe4\xbb", b"\x96"]) == "他"
    assert completed_text([b"\xe4\xbb", b"\x96\xe7"]) == "他"  # e7 still waits for its character
    assert completed_text([b"\xe4\xbb", b"\x96\xe7\x94\x9f"]) == "他生"
    assert completed_text([b"\xe4\xbb", b"a"]) is None  # not UTF-8


def test_a_completion_is_the_models_own_greedy_continuation(smollm):
    """workbench.completion shares one KV cache of the prefix between the rows: each row's tokens are those
    greedy decoding of the prefix and that row's piece gives on its own."""
    trace = smollm.run(SENTENCE)
    prefix = list(trace.input_ids)
    pieces = [i for text, _, i in smollm.next_tokens(trace, len(prefix) - 1) if "\ufffd" in text]
    done = completion.complete(smollm, prefix, pieces)
    assert any(done.values())
    for piece in pieces:
        alone = greedy_decode(smollm.module, torch.tensor([prefix + [piece]]), completion.COMPLETION_STEPS)
        tokens = alone[0, len(prefix) + 1:].tolist()
        if done[piece] is not None:
            text, after = done[piece]
            assert after == tokens[: len(after)]
            assert text == completed_text([smollm.token_bytes(i) for i in (piece, *after)])
