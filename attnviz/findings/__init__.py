"""Replication cards of published findings about heads: each card's TOML read as a `Card` with its verdict
and JSON report (`cards`), and one function per card computing our numbers on a loaded model (`measures`)."""
