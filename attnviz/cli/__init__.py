"""The command line, `python -m attnviz {parity,bench,probe,heads,blimp}`."""
