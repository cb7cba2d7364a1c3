"""Hugging Face as the reference: attention and hidden-state parity, and the side-by-side speed benchmark."""
