"""AppTest and heavy actions: AppTest does not run the progress fragment's timed reruns (ui/heavy.py), so a
test reruns the page itself, as the poll would, until every job has finished, then once more to draw it."""

from __future__ import annotations

import time

POLL_S = 0.5


def finish_jobs(at, timeout: float = 300.0):
    from attnviz.ui.guard import workbench

    deadline = time.monotonic() + timeout
    while workbench().jobs.running():
        assert time.monotonic() < deadline, "a heavy action did not finish in time"
        time.sleep(POLL_S)
        at.run()
    return at.run()
