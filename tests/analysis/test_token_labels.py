"""How tokens read on the page (display only): byte pieces, word pieces, whitespace, partial bytes."""

from __future__ import annotations

from attnviz.analysis.views import attention_view, token_labels, visible_token
from tests.helpers.tiny_hf import tiny_decoder
from tests.helpers.tiny_tokenizers import sentencepiece_tokenizer


def test_byte_pieces_of_one_character_say_which_piece(smollm):
    trace = smollm.run("猫")  # byte-level BPE: the character's three UTF-8 bytes, one span
    labels = token_labels(trace)
    assert trace.tokens.count("猫") >= 2  # the contract's tokens: the same text each time
    pieces = [label for label in labels if label.startswith("猫")]
    n = len(pieces)
    assert pieces == [f"猫[{k}/{n}]" for k in range(1, n + 1)]
    assert attention_view(trace).labels == labels  # axes and hovers read the same labels


def test_word_pieces_read_as_their_text_with_no_vocabulary_marks(minilm):
    """One notation (the focus issue, item 4): a piece reads as the text it stands for, never with "##"."""
    trace = minilm.run("unbelievably good")
    labels = token_labels(trace)
    pieces = labels[1:-2]  # [CLS] ... good [SEP]
    assert len(pieces) > 1 and not any("##" in p for p in pieces)
    assert "".join(pieces) == "unbelievably"
    assert labels[-2] == "good" and trace.tokens == minilm.run("unbelievably good").tokens


def test_shown_tokens_join_byte_pieces_and_drop_vocabulary_marks(smollm, minilm):
    """The patching axis and the tables (ui/tokens.shown_tokens): "Ġkey" reads "␣key", 书's two byte-level
    pieces read 书[1/2] 书[2/2] (not 'ä¹', '¦'), an emoji as the emoji, WordPiece's "##bel" as "bel"."""
    from attnviz.ui.tokens import shown_tokens
    enc = smollm.encode("The key 书 🙂")
    assert "Ġkey" in enc.tokens
    shown = shown_tokens(smollm, enc.ids)
    assert "␣key" in shown and "书[1/2]" in shown and "书[2/2]" in shown and "␣🙂" in shown
    assert not any(mark in label for label in shown for mark in ("Ġ", "▁", "##", "\ufffd", "ä"))
    enc = minilm.encode("unbelievably")
    assert "".join(shown_tokens(minilm, enc.ids)[1:-1]) == "unbelievably"


def test_predicted_tokens_show_whitespace_and_bytes(smollm):
    assert visible_token(" the") == "␣the" and visible_token("\n") == "⏎" and visible_token("cat") == "cat"
    cat_bytes = "猫".encode()
    ids = smollm.encode("猫").ids
    pieces = [smollm.token_bytes(i) for i in ids]
    assert b"".join(pieces) == cat_bytes  # the byte map reverses the tokenizer's
    shown = visible_token(smollm.tokenizer.decode([ids[0]]), pieces[0])
    assert shown.startswith("⟨") and "\ufffd" not in shown


def test_sentencepiece_byte_fallback_tokens_stand_for_their_bytes():
    """Llama's and Gemma's vocabularies write a character they lack as its UTF-8 bytes, <0xE7> <0x8C> <0xAB>:
    those tokens stand for one byte each (not for the six characters of their name), any other for its text
    with ▁ as a space, so their bytes read back as tokenizers' own ByteFallback decoder reads them."""
    tokenizer = sentencepiece_tokenizer()
    model, _ = tiny_decoder("llama", tokenizer, seed=0)
    text = "The cat 猫 sat 😀 on ﷽ the mat"
    ids = model.encode(text).ids
    assert b"".join(model.token_bytes(i) for i in ids).decode() == tokenizer.decode(ids) == " " + text
    bytes_of_cat = [i for i in ids if tokenizer.id_to_token(i).startswith("<0x")][:3]
    assert [model.token_bytes(i) for i in bytes_of_cat] == [bytes([b]) for b in "猫".encode()]
    shown = visible_token(tokenizer.decode(bytes_of_cat[:1]), model.token_bytes(bytes_of_cat[0]))
    assert shown == "⟨e7⟩"  # a piece of a character, shown as its byte (was ⟨3c 30 78 45 37 3e⟩, "<0xE7>")


def test_a_wordpiece_token_has_no_bytes_of_its_own(minilm):
    assert minilm.token_bytes(minilm.encode("cat", add_special_tokens=False).ids[0]) is None
