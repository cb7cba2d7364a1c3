"""`python -m attnviz ...`: the command line (attnviz/cli/main.py)."""

import sys

from attnviz.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
