"""An untrained translation model of the original Transformer's size (Marian layout: 512 / 8 heads of 64 /
6 + 6 layers, swish), with a SentencePiece tokenizer trained here, offline, on the built-in probe sentences
(English and Chinese). It stands in for a Helsinki-NLP opus-mt model where the hub cannot be reached, and is
labelled untrained wherever it appears: its attention shows the architecture's mechanics, not translation.

The tokenizer model is trained deterministically (one thread, fixed settings, the same sentences) and cached
under the system's temporary directory, keyed by a hash of its inputs.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import tempfile
from importlib import resources
from pathlib import Path

import torch

from attnviz.loading.random_model import untrained
from attnviz.loading.spm import MarianSentencePiece
from attnviz.models.loaded_seq2seq import LoadedSeq2Seq, seq2seq_info
from attnviz.transformer.seq2seq import EncoderDecoder, Seq2SeqConfig

log = logging.getLogger(__name__)

RANDOM_MARIAN_NAME = "random Marian-sized translation model (untrained)"
SPM_VOCAB = 1000
# Marian's vocabulary convention: </s> 0, <unk> 1, the pieces, <pad> last (also the decoder start token).
SPM_SETTINGS = dict(vocab_size=SPM_VOCAB, hard_vocab_limit=False, character_coverage=1.0, num_threads=1,
                    model_type="unigram", eos_id=0, unk_id=1, bos_id=-1, pad_id=-1, minloglevel=2)


def probe_sentences() -> list[str]:
    """The built-in probe sentences (attnviz/probesets), each as its text."""
    lines = []
    for name in ("en.jsonl", "zh.jsonl"):
        for line in resources.files("attnviz.probesets").joinpath(name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                lines.append(item.get("sep", " ").join(item["words"]))
    return lines


def spm_model(cache_dir: Path | None = None) -> bytes:
    """The serialized SentencePiece model, trained once and cached by the hash of sentences and settings."""
    import sentencepiece

    sentences = probe_sentences()
    key = hashlib.sha256(json.dumps([sentences, SPM_SETTINGS], sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_dir or Path(tempfile.gettempdir()) / "attnviz"
    path = folder / f"random-marian-{key}.spm"
    if path.is_file():
        return path.read_bytes()
    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=buffer, **SPM_SETTINGS)
    data = buffer.getvalue()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{id(buffer)}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    except OSError as error:  # a read-only temp dir only costs retraining (a fraction of a second)
        log.info("could not cache the SentencePiece model: %s", error)
    return data


def random_tokenizer(cache_dir: Path | None = None) -> MarianSentencePiece:
    import sentencepiece

    model = spm_model(cache_dir)
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    vocab = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}
    vocab["<pad>"] = len(vocab)
    return MarianSentencePiece(model, model, vocab, max_length=512)


def random_marian(seed: int = 0, max_tokens: int = 512, config: Seq2SeqConfig | None = None,
                  cache_dir: Path | None = None) -> LoadedSeq2Seq:
    tokenizer = random_tokenizer(cache_dir)
    pad = tokenizer.vocab["<pad>"]
    config = config or Seq2SeqConfig(
        vocab_size=len(tokenizer.vocab), pad_token_id=pad, decoder_start_token_id=pad,
        eos_token_id=tokenizer.eos_id, bad_token_ids=(pad,),
    )
    torch.manual_seed(seed)
    module = untrained(EncoderDecoder(config))
    info = seq2seq_info(module, RANDOM_MARIAN_NAME, "(random)", "marian", max_tokens)
    return LoadedSeq2Seq(module, tokenizer, info, untrained=True)
