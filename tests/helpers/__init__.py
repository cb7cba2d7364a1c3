"""Helpers the tests share: tiny models and tokenizers, the app's pages, a real server and browser.
No test module imports another (tests/contract/test_test_imports.py)."""
