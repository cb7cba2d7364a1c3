"""Texts the atlas's readout tests share: lengths from 2 tokens to about 20, repeats for the induction score."""

TEXTS = [
    "The cat sat on the mat. The cat sat on the mat. The cat",
    "Hi there",  # shorter than 8 keys
    "The keys to the cabinet are on the table.",
    "the the the the the",
    "A dog ran in the park, and the cat watched the dog from the wall.",
    "Ok",
    "Colorless green ideas sleep furiously, and the ideas sleep.",
    "Birds fly south in winter; the birds return in spring.",
]
