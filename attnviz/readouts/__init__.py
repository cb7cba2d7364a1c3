"""Readouts: what one forward pass of a model says, read without changing the pass. The predictions
(continuation log-probabilities, next tokens, mask fills, under an optional head mask), one recorded run and
what reads it (logit lens, direct logit attribution, information-flow routes, query-key attribution), sink
anatomy and the corpus map of one head's queries and keys, retrieval heads over decoding, and which sentence of
a minimal pair a model prefers."""
