"""Interventions: forward passes changed on purpose, compared with the plain one. Head ablation and the
importance scan (`ablation`), activation patching on a minimal pair (`patching`)."""
