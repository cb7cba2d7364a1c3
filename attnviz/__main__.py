"""`python -m attnviz ...` and the `attnviz` console script: the command line (attnviz/cli/main.py).

A Python without the project's requirements (the system's, outside `.venv`) gets one line saying which
module it lacks and what to run instead, not a traceback from deep inside a subcommand."""

import sys

from attnviz.cli.main import main  # argparse and `attnviz` only: each subcommand imports torch when it runs


def run(argv: list[str] | None = None) -> int:
    try:
        return main(argv)
    except ModuleNotFoundError as error:
        if not error.name or error.name.split(".")[0] == "attnviz":
            raise  # our own module missing is a bug, not an environment to fix
        print(f"error: this Python ({sys.executable}) has no module {error.name!r}, which attnviz needs: run "
              "`bash scripts/setup.sh` in the checkout, then `.venv/bin/attnviz ...` or "
              "`.venv/bin/python -m attnviz ...` (or install requirements.txt into this Python)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run())
