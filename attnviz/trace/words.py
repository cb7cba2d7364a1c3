"""The word rule (docs/api.md, "Public API"): the words of free text and the word each token belongs to.

A word of free text is a whitespace-separated span, except that a run of Han characters is split into
words by jieba (`jieba.lcut` with its defaults: precise mode, HMM on, its default dictionary), and every
other CJK character (kana, hangul) and every punctuation character is a word of its own. A token belongs
to the first word whose character span overlaps the token's span as half-open intervals.
"""

from __future__ import annotations

import string
import threading
import unicodedata

# (start, end) code point ranges of the scripts written without spaces between words.
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xD7B0, 0xD7FF),  # Hangul Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFFDC),  # half-width Katakana and Hangul
    (0x1B000, 0x1B16F),  # Kana supplement and extended A
    (0x20000, 0x323AF),  # CJK extensions B-H
)


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


# Han ideographs (Unicode script Han): the CJK unified ideographs and their extensions, the compatibility
# ideographs, and the ideographic number zero 〇 (二〇二四年). Radicals, kana and hangul are not Han.
_HAN_RANGES = (
    (0x3007, 0x3007),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0x20000, 0x323AF),
)


def is_han(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _HAN_RANGES)


_segmenter = None
_segmenter_lock = threading.Lock()
# Resident bytes the segmenter adds once built (its prefix dictionary, ~500,000 Python strings: 70 MB
# measured with /proc/self/statm), for callers that reserve memory before a first Chinese text.
HAN_SEGMENTER_BYTES = 80_000_000


def han_segmenter_needed(text: str) -> bool:
    """True when splitting `text` would build the segmenter: it has Han characters and none was built yet."""
    return _segmenter is None and any(is_han(char) for char in text)


def han_segmenter():
    """jieba's segmenter with its default dictionary, built once per process, in memory, on the first run of
    Han characters (about 0.7 s of CPU and 70 MB resident; texts without Han never import jieba).

    `jieba.initialize` is not used: it loads a cache file from the system's temp directory
    (`/tmp/jieba.cache`) if one is there, and writes one otherwise. On a shared host that file is anyone's,
    and marshal data read from it would become our dictionary; building the prefix dictionary from the
    dictionary file in jieba's package gives the same dictionary and touches no file but that one."""
    global _segmenter
    if _segmenter is None:
        with _segmenter_lock:
            if _segmenter is None:
                import jieba

                segmenter = jieba.Tokenizer()  # the default dictionary (jieba/dict.txt)
                segmenter.FREQ, segmenter.total = segmenter.gen_pfdict(segmenter.get_dict_file())
                segmenter.initialized = True  # so `cut` never calls `initialize`
                _segmenter = segmenter
    return _segmenter


def split_han(run: str) -> list[str]:
    """The words of a run of Han characters: `jieba.lcut(run)` with its defaults (precise mode, HMM on).
    jieba keeps every character of such a run; should it not, each character is a word, as before."""
    words = han_segmenter().lcut(run)
    return words if "".join(words) == run else list(run)


def is_punctuation(char: str) -> bool:
    # Unicode punctuation (P*), plus ASCII symbols such as < > $ that Unicode files under S*.
    return unicodedata.category(char).startswith("P") or char in string.punctuation


def split_words(text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the words of free text, by the rule in the module docstring."""
    spans: list[tuple[int, int]] = []
    start = han = None  # where the open word, or the open run of Han characters, began

    def close_han(end: int) -> None:
        position = han
        for word in split_han(text[han:end]):
            spans.append((position, position + len(word)))
            position += len(word)

    for i, char in enumerate(text):
        if is_han(char):
            if start is not None:
                spans.append((start, i))
                start = None
            if han is None:
                han = i
            continue
        if han is not None:
            close_han(i)
            han = None
        if char.isspace():
            if start is not None:
                spans.append((start, i))
                start = None
        elif is_cjk(char) or is_punctuation(char):
            if start is not None:
                spans.append((start, i))
                start = None
            spans.append((i, i + 1))
        elif start is None:
            start = i
    if han is not None:
        close_han(len(text))
    if start is not None:
        spans.append((start, len(text)))
    return spans


def spans_of_joined_words(words: list[str], sep: str = " ") -> tuple[str, list[tuple[int, int]]]:
    """The text `sep.join(words)` and each word's span in it (probe files and treebanks bring words)."""
    spans, position = [], 0
    for word in words:
        spans.append((position, position + len(word)))
        position += len(word) + len(sep)
    return sep.join(words), spans


def align_tokens_to_words(
    offsets: list[tuple[int, int]],
    sequence_ids: list[int | None],
    word_spans: list[tuple[int, int]],
    word_sequence: list[int] | None = None,
) -> list[int | None]:
    """Index of the first word overlapping each token (half-open), or None.

    `word_sequence[w]` says which sentence (0 or 1) word w is in; tokens only match words of their
    own sentence, since offsets are relative to the token's own sentence.
    """
    if word_sequence is None:
        word_sequence = [0] * len(word_spans)
    result: list[int | None] = []
    for (ts, te), seq in zip(offsets, sequence_ids):
        match = None
        if seq is not None and ts < te:
            for w, (ws, we) in enumerate(word_spans):
                if word_sequence[w] == seq and ts < we and ws < te:
                    match = w
                    break
        result.append(match)
    return result
