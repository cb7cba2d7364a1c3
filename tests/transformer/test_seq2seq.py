"""The encoder-decoder (attnviz.transformer.seq2seq) against Hugging Face's eager MarianMTModel on tiny random configs,
fed ids: the three attention kinds, logits, greedy decoding, and the KV cache against a full forward."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnviz.loading import build_module
from attnviz.transformer.seq2seq import EncoderDecoder, Seq2SeqConfig, sinusoidal_positions
from tests.helpers.decoding import decode_step_by_step

PAD, EOS = 58, 0


def hf_marian(seed: int = 0, **overrides):
    from transformers import MarianConfig, MarianMTModel

    settings = dict(
        vocab_size=59, d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48, max_position_embeddings=64,
        pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=EOS, forced_eos_token_id=EOS,
        activation_function="swish", scale_embedding=True,
    )
    settings.update(overrides)
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**settings))
    with torch.no_grad():  # HF initialises final_logits_bias to zero: make it count in the parity
        model.final_logits_bias.normal_(0, 0.5)
        for p in model.parameters():  # wider than init_std 0.02, so attention is far from uniform
            if p.dim() > 1 and p.requires_grad:  # the frozen sinusoid tables stay as they are
                p.normal_(0, 0.3)
    model.config._attn_implementation = "eager"
    return model.eval()


def ours_from(hf) -> EncoderDecoder:
    return build_module(hf.config.to_dict(), dict(hf.state_dict())).eval()


def ids_batch():
    """Two rows, the second padded on the right (source) / shorter target, like a real padded batch."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(1, PAD, (2, 9), generator=g)
    src[0, -1] = EOS
    src[1, 6], src[1, 7:] = EOS, PAD
    src_mask = (src != PAD).long()
    tgt = torch.randint(1, PAD, (2, 7), generator=g)
    tgt[:, 0] = PAD  # the decoder start token
    return src, src_mask, tgt


def test_sinusoids_match_hf_layout():
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    for dim in (32, 33):  # odd widths put the extra sin column in the first half
        hf = MarianSinusoidalPositionalEmbedding(50, dim)
        assert torch.equal(sinusoidal_positions(50, dim), hf.create_weight())
    table = sinusoidal_positions(4, 8)  # by hand: position 3, column 1 = sin(3 / 10000^(2/8)), column 5 = cos(...)
    assert math.isclose(table[3, 1].item(), math.sin(3 / 10000 ** 0.25), rel_tol=1e-6)
    assert math.isclose(table[3, 5].item(), math.cos(3 / 10000 ** 0.25), rel_tol=1e-6)


@pytest.mark.parametrize("shared", [True, False])
def test_parity_with_hf_eager(shared):
    extra = {} if shared else {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 59,
                               "tie_word_embeddings": False}
    hf = hf_marian(**extra)
    ours = ours_from(hf)
    src, src_mask, tgt = ids_batch()
    with torch.no_grad():
        ref = hf(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt, output_attentions=True)
        out = ours(src, tgt, attention_mask=src_mask)
    for name, theirs in (("encoder_attentions", ref.encoder_attentions), ("decoder_attentions", ref.decoder_attentions),
                         ("cross_attentions", ref.cross_attentions)):
        mine = getattr(out, name)
        assert mine.shape == torch.stack(theirs).shape, name
        assert (mine - torch.stack(theirs)).abs().max().item() <= 1e-5, name
    assert out.cross_attentions.shape[-2:] == (7, 9)  # T != S
    assert (out.logits - ref.logits).abs().max().item() <= 1e-4
    assert (out.encoder_hidden - ref.encoder_last_hidden_state).abs().max().item() <= 1e-4


def test_parity_fails_when_a_weight_differs():
    """The comparison can fail: noise on one cross-attention key projection moves the cross attentions
    (a key bias would not: it adds the same q.b to every key of a row, which softmax ignores)."""
    hf = hf_marian()
    ours = ours_from(hf)
    with torch.no_grad():
        weight = ours.decoder_blocks[1].cross_attn.k_proj.weight
        weight += 0.1 * torch.randn(weight.shape, generator=torch.Generator().manual_seed(0))
    src, src_mask, tgt = ids_batch()
    with torch.no_grad():
        ref = hf(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt, output_attentions=True)
        out = ours(src, tgt, attention_mask=src_mask)
    assert (out.cross_attentions[1] - ref.cross_attentions[1]).abs().max().item() > 1e-3


def test_every_checkpoint_tensor_is_accounted_for():
    hf = hf_marian()
    state = dict(hf.state_dict())
    state["model.encoder.layers.0.unknown.weight"] = torch.zeros(1)
    with pytest.raises(ValueError, match="not consumed"):
        build_module(hf.config.to_dict(), state)


@pytest.mark.parametrize("seed", [0, 3])
def test_greedy_matches_hf_generate(seed):
    hf = hf_marian(seed=seed)
    ours = ours_from(hf)
    src, src_mask, _ = ids_batch()
    assert ours.config.forced_eos and ours.config.bad_token_ids == ()
    with torch.no_grad():
        theirs = hf.generate(input_ids=src, attention_mask=src_mask, num_beams=1, do_sample=False,
                             max_new_tokens=12)
    mine = ours.greedy(src, 12, attention_mask=src_mask)
    assert mine.tolist() == theirs.tolist()


def test_greedy_never_emits_a_banned_token_as_hf():
    """A bias that makes <pad> the argmax everywhere: both must skip it (bad_words_ids, which transformers 5
    keeps in the generation config, from where the loader reads it too)."""
    hf = hf_marian()
    with torch.no_grad():
        hf.final_logits_bias[0, PAD] = 50.0
    hf.generation_config.bad_words_ids = [[PAD]]
    ours = build_module({**hf.config.to_dict(), "bad_words_ids": [[PAD]]}, dict(hf.state_dict())).eval()
    src, src_mask, _ = ids_batch()
    with torch.no_grad():
        theirs = hf.generate(input_ids=src, attention_mask=src_mask, num_beams=1, do_sample=False, max_new_tokens=8)
    mine = ours.greedy(src, 8, attention_mask=src_mask)
    assert mine.tolist() == theirs.tolist()
    assert PAD not in mine[:, 1:].tolist()[0]
    unbanned = ours_from(hf).greedy(src, 8, attention_mask=src_mask)  # without the rule <pad> wins
    assert PAD in unbanned[0, 1:-1].tolist()


def test_kv_cache_decoding_equals_full_forward():
    hf = hf_marian()
    ours = ours_from(hf)
    src, src_mask, tgt = ids_batch()
    src, src_mask, tgt = src[1:], src_mask[1:], tgt[1:]  # one row: the cache takes no padding
    full, stepped, cache, _, _ = decode_step_by_step(ours, src, src_mask, tgt)
    assert (stepped - full.logits).abs().max().item() <= 1e-5
    d = ours.config.head_dim
    # self-attention: T positions per layer; cross: the S encoder positions once, not once per step
    assert cache.self_attention[0].keys.shape == (1, 4, tgt.shape[1], d)
    assert cache.cross_attention[0].keys.shape == (1, 4, src.shape[1], d)
    per_position = 2 * 4 * d * 4  # keys and values, 4 heads, float32
    assert cache.nbytes == ours.config.decoder_layers * per_position * (tgt.shape[1] + src.shape[1])


def test_default_config_is_the_original_transformer():
    c = Seq2SeqConfig(vocab_size=1000)
    assert (c.d_model, c.n_heads, c.head_dim, c.encoder_layers, c.decoder_layers, c.d_ff) == (512, 8, 64, 6, 6, 2048)
    with torch.device("meta"):
        model = EncoderDecoder(c)
    per_attention = 4 * (512 * 512 + 512)
    assert sum(p.numel() for p in model.encoder_blocks[0].self_attn.parameters()) == per_attention
    assert np.isclose(model.embed_scale, math.sqrt(512))


# --- Marian checkpoints through attnviz.load: a tiny random model saved as HF saves it, with real
# SentencePiece tokenizers (English source, Chinese target) and a multilingual-target vocabulary.

EN = ["The keys to the cabinet are on the table.", "A dog ran into the garden yesterday.",
      "She said that he would come back soon.", "The old man gave the children some apples."]
ZH = ["抽屉里的钥匙不见了。", "小狗跑进了院子。", "她说他很快就会回来。", "老人给了孩子们一些苹果。"]


def _train_spm(sentences, vocab_size):
    import io

    import sentencepiece

    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences * 3), model_writer=buffer, vocab_size=vocab_size, hard_vocab_limit=False,
        character_coverage=1.0, num_threads=1, eos_id=0, unk_id=1, bos_id=-1, pad_id=-1, minloglevel=2)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def marian_folder(tmp_path_factory):
    import json

    import sentencepiece

    folder = tmp_path_factory.mktemp("marian")
    source, target = _train_spm(EN, 60), _train_spm(ZH, 60)
    (folder / "source.spm").write_bytes(source)
    (folder / "target.spm").write_bytes(target)
    vocab = {"</s>": 0, "<unk>": 1, ">>cmn_Hans<<": 2, ">>yue_Hant<<": 3}
    for model in (source, target):
        processor = sentencepiece.SentencePieceProcessor(model_proto=model)
        for i in range(processor.get_piece_size()):
            vocab.setdefault(processor.id_to_piece(i), len(vocab))
    del vocab["e"]  # a piece the source model knows and the vocabulary does not: HF maps it to <unk>
    vocab = {piece: i for i, piece in enumerate(vocab)}
    vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "MarianTokenizer", "model_max_length": 512, "separate_vocabs": False,
         "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}))
    pad = vocab["<pad>"]
    hf = hf_marian(vocab_size=len(vocab), pad_token_id=pad, decoder_start_token_id=pad)
    hf.generation_config.bad_words_ids = [[pad]]  # as the opus-mt checkpoints' generation_config.json
    hf.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def hf_tokenizer(marian_folder):
    from transformers import MarianTokenizer

    return MarianTokenizer.from_pretrained(str(marian_folder))


TEXTS = ["The keys to the cabinet are on the table.", ">>cmn_Hans<< A dog ran into the garden.",
         "She  said,\tthat he would come back soon!", "Zebras quickly vexed Jim's wizard.", "老人给了孩子们苹果。"]


def test_tokenizer_ids_match_hf_marian(marian_folder, hf_tokenizer):
    from attnviz.loading.spm import MarianSentencePiece

    ours = MarianSentencePiece.from_folder(marian_folder)
    assert ours.language_codes == [">>cmn_Hans<<", ">>yue_Hant<<"]
    for text in TEXTS:
        assert ours.encode(text).ids == hf_tokenizer(text)["input_ids"], text
        assert ours.encode(text, target=True).ids == hf_tokenizer(text_target=text)["input_ids"], text
    # a code given apart is the same token HF reads from the front of the text
    assert ours.encode("A dog.", language_code=">>cmn_Hans<<").ids == hf_tokenizer(">>cmn_Hans<< A dog.")["input_ids"]
    with pytest.raises(ValueError, match="target-language"):
        ours.encode("A dog.", language_code=">>xx<<")


def test_sentencepiece_offsets_map_back_to_the_text(marian_folder):
    from attnviz.loading.spm import MarianSentencePiece

    ours = MarianSentencePiece.from_folder(marian_folder)
    for text in TEXTS:
        enc = ours.encode(text)
        covered = []
        for token, (s, e), special in zip(enc.tokens, enc.offsets, enc.special):
            if special or s == e:
                continue
            assert token == text[s:e] and not text[s].isspace(), (text, token, s, e)
            covered.extend(range(s, e))
        # every non-space character of the text lies in exactly one token's span
        assert covered == [i for i, c in enumerate(text) if not c.isspace()], text
        assert enc.special[-1] and enc.tokens[-1] == "</s>"
    # a decoded translation: every piece's span holds that piece's text
    ids = ours.encode("小狗跑进了院子。", target=True).ids
    dec = ours.decode(ids)
    assert dec.text == "小狗跑进了院子。"
    assert "".join(dec.text[s:e] for (s, e), sp in zip(dec.offsets, dec.special) if not sp) == dec.text


def test_load_marian_folder_matches_hf(marian_folder, hf_tokenizer):
    from transformers import MarianMTModel

    import attnviz

    model = attnviz.load(str(marian_folder), device="cpu")
    source, target = ">>cmn_Hans<< The keys to the cabinet are on the table.", "抽屉里的钥匙不见了。"
    trace = model.run(source, target)
    batch = hf_tokenizer(source, text_target=target, return_tensors="pt")
    hf = MarianMTModel.from_pretrained(str(marian_folder), attn_implementation="eager", dtype=torch.float32).eval()
    with torch.no_grad():
        ref = hf(input_ids=batch["input_ids"], labels=batch["labels"], output_attentions=True)
    labels = batch["labels"][0].tolist()
    assert trace.labels == labels
    assert trace.target_input_ids == [model.config.decoder_start_token_id, *labels[:-1]]
    assert trace.input_ids == batch["input_ids"][0].tolist()
    for name, theirs in (("encoder_attentions", ref.encoder_attentions),
                         ("decoder_attentions", ref.decoder_attentions), ("cross_attentions", ref.cross_attentions)):
        mine = getattr(trace, name)
        assert mine.dtype == np.float32
        assert np.abs(mine - torch.stack(theirs)[:, 0].numpy()).max() <= 1e-5, name
    s, t = len(trace.tokens), len(trace.target_tokens)
    assert trace.attentions.shape[2:] == (s, s) and trace.cross_attentions.shape[2:] == (t, s)
    assert trace.tokens[0] == ">>cmn_Hans<<" and trace.offsets[0] == (0, 12)  # the code typed in the text: one token
    assert trace.words[-3:] == ["the", "table", "."]
    # the word rule: jieba's words of the Han run, the full stop a word of its own
    assert trace.target_words == ["抽屉", "里", "的", "钥匙", "不见", "了", "。"]
    assert trace.target_tokens[0] == "<pad>" and trace.target_special_mask[0]


def test_run_without_target_translates_greedily_like_hf(marian_folder, hf_tokenizer):
    from transformers import MarianMTModel

    import attnviz

    model = attnviz.load(str(marian_folder), device="cpu")
    source = "A dog ran into the garden yesterday."
    trace = model.run(source, max_new_tokens=10)
    hf = MarianMTModel.from_pretrained(str(marian_folder), attn_implementation="eager", dtype=torch.float32).eval()
    batch = hf_tokenizer(source, return_tensors="pt")
    with torch.no_grad():
        generated = hf.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=10)[0].tolist()
    assert trace.generated and model.config.bad_token_ids == (model.config.pad_token_id,)
    assert [model.config.decoder_start_token_id, *trace.labels] == generated
    assert trace.target_text == hf_tokenizer.decode(generated, skip_special_tokens=True)
    # the source side is an ordinary trace: what the probe and the Head Finder read
    [plain] = model.run_batch([source])
    assert np.array_equal(plain.attentions, trace.attentions) and plain.tokens == trace.tokens


def test_random_marian_is_original_size_labelled_and_deterministic(tmp_path):
    from attnviz.loading.random_marian import RANDOM_MARIAN_NAME, random_marian, spm_model

    assert spm_model(tmp_path / "a") == spm_model(tmp_path / "b")  # trained twice, byte-identical
    assert "untrained" in RANDOM_MARIAN_NAME
    model = random_marian(cache_dir=tmp_path / "a")
    c = model.config
    assert (c.d_model, c.n_heads, c.encoder_layers, c.decoder_layers, c.activation) == (512, 8, 6, 6, "silu")
    assert model.untrained and model.info.name == RANDOM_MARIAN_NAME
    trace = model.run("钥匙不见了。", "The keys are gone.")
    assert trace.metadata["untrained"] is True
    assert trace.cross_attentions.shape == (6, 8, len(trace.target_tokens), len(trace.tokens))
    assert np.allclose(trace.cross_attentions.sum(-1), 1, atol=1e-5)


def test_word_alignment_by_hand():
    from attnviz.analysis.alignment import best_source_words, word_matrix

    # 3 decoder positions predicting: target word 0, word 0 again (a second piece), </s> (no word);
    # 4 source tokens: word 0, word 1, word 1, </s>
    cross = np.array([[0.1, 0.2, 0.3, 0.4],
                      [0.5, 0.1, 0.1, 0.3],
                      [0.0, 0.0, 0.0, 1.0]])
    matrix = word_matrix(cross, [0, 0, None], [0, 1, 1, None], n_target_words=2, n_source_words=2)
    # word 0 -> word 0: mean(0.1, 0.5) = 0.3; word 0 -> word 1: mean(0.2 + 0.3, 0.1 + 0.1) = 0.35
    assert np.allclose(matrix, [[0.3, 0.35], [0.0, 0.0]])
    assert best_source_words(matrix) == [(0, 1, pytest.approx(0.35))]  # word 1 has no position: no row
    with pytest.raises(ValueError, match="does not match"):
        word_matrix(cross, [0, 0], [0, 1, 1, None], 1, 2)


def test_explore_sends_a_translation_model_to_the_translate_page(marian_folder, monkeypatch):
    """A Marian folder typed on the Explore page (allowed by the operator) is refused there with a pointer
    to the Translate page, and the page falls back to the default model instead of half-working."""
    from streamlit.testing.v1 import AppTest

    from tests.conftest import MINILM, require_offline

    require_offline(MINILM)
    monkeypatch.setenv("ATTNVIZ_MODEL_DIRS", str(marian_folder.parent))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=300)
    at.run()
    at.text_input(key="model_custom").input(str(marian_folder)).run()
    assert not at.exception, [e.value for e in at.exception]
    errors = " ".join(e.value for e in at.sidebar.error)
    assert "translation (encoder-decoder) model" in errors and "Translate page" in errors


def test_a_translation_cut_off_without_eos_keeps_one_label_per_decoder_position(marian_folder):
    """A model without forced EOS, stopped by the length limit: the appended </s> label has no span in the
    text, and every per-position list still has one entry per decoder row."""
    import dataclasses

    import attnviz

    model = attnviz.load(str(marian_folder))
    model.module.config = dataclasses.replace(model.module.config, forced_eos=False, bad_token_ids=(
        *model.module.config.bad_token_ids, model.module.config.eos_token_id))  # never stops by itself
    trace = model.run("The keys to the cabinet are on the table.", max_new_tokens=4)
    rows = trace.cross_attentions.shape[2]
    assert trace.generated and trace.labels[-1] == model.config.eos_token_id
    assert len(trace.labels) == len(trace.label_word_of_token) == len(trace.target_tokens) == rows
