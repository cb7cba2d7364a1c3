"""The Explore page's uploads (issue 36, F2): a ~20 MB text file of one sentence a line parsed the old way (the
whole file decoded and split on every rerun: workbench.qkmap.uploaded_corpus before, the corpus map's file; the
sink anatomy's `_visitor_texts` before) against the bounded reader (workbench.qkmap.uploaded_corpus,
workbench.sinks.uploaded_texts: read as a stream until the first MAX_SENTENCES / MAX_TEXTS, parsed once per file by
ui/widgets.parsed_upload). A benchmark, not a test.

Two files, written to a temp folder: the red team's (6,633,333 lines of 3 bytes, 19.9 MB) and one of real-length
sentences. Each case runs in a fresh process holding the file's bytes (as Streamlit holds an upload), `--reruns`
page runs with the file in the uploader; printed side by side: wall and CPU seconds for all the runs, and the
peak resident memory over what the process held before (VmHWM, reset through /proc/self/clear_refs).

    .venv/bin/python benchmarks/bench_upload_parse.py [--reruns 3]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIZE = 19_900_000  # bytes, the red team's upload (the host takes 20 MB)
FILES = {"red team's (3-byte lines)": b"ab\n",
         "sentences (45-byte lines)": b"The keys to the cabinet are on the old table.\n"}


def old_qkmap(name: str, data: bytes):
    """HEAD's workbench.qkmap.uploaded_corpus and upload_key, as ui/qkmap._corpus called them on every run."""
    from attnviz.readouts import qkmap

    sentences = qkmap.text_corpus(data.decode("utf-8"))
    key = "upload:" + hashlib.sha256(name.encode("utf-8") + b"\0" + data).hexdigest()[:32]
    return key, sentences


def old_sinks(name: str, data: bytes):
    """HEAD's ui/sinks._visitor_texts: every line, then refused for holding more than MAX_TEXTS."""
    lines = data.decode("utf-8").splitlines()
    return [line.strip() for line in lines if line.strip()]


def new_qkmap(name: str, data: bytes):
    from attnviz.workbench import qkmap

    return qkmap.uploaded_corpus(name, io.BytesIO(data))  # an UploadedFile is a BytesIO


def new_sinks(name: str, data: bytes):
    from attnviz.workbench import sinks

    return sinks.uploaded_texts(name, io.BytesIO(data))


# each case: its parse, and the number of items (sentences, texts) it kept
CASES = {"qkmap old": (old_qkmap, lambda result: len(result[1])),
         "qkmap new": (new_qkmap, lambda result: len(result.sentences)),
         "sinks old": (old_sinks, len),
         "sinks new": (new_sinks, lambda result: len(result[0]))}


def rss() -> int:
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def child(case: str, path: str, reruns: int) -> None:
    import attnviz.readouts.qkmap  # noqa: F401  imported before the measure, as the app has it
    import attnviz.workbench.qkmap  # noqa: F401
    import attnviz.workbench.sinks  # noqa: F401

    data = Path(path).read_bytes()
    (parse, count), held = CASES[case], {}
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before, _ = rss()
    cpu, wall = time.process_time(), time.perf_counter()
    result = None
    for _ in range(reruns):
        if case.endswith("old"):
            result = None  # the last run's parse is let go before the next (else the peak would hold both)
            result = parse(Path(path).name, data)  # every run parsed the file again
        else:
            file_id = "one upload"  # ui/widgets.parsed_upload: once per file_id, then the session's copy
            if file_id not in held:
                held[file_id] = parse(Path(path).name, data)
            result = held[file_id]
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    _, peak = rss()
    print(json.dumps({"wall": wall, "cpu": cpu, "peak": peak - before, "items": count(result)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reruns", type=int, default=3, help="page runs with the file in the uploader")
    parser.add_argument("--child", nargs=3, metavar=("CASE", "FILE", "RERUNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    print(f"{'file':27} {'case':10} {'items':>9} {'wall s':>8} {'CPU s':>8} {'peak +MB':>9}   ({args.reruns} runs)")
    with tempfile.TemporaryDirectory() as folder:
        for label, line in FILES.items():
            path = Path(folder) / "upload.txt"
            path.write_bytes(line * (SIZE // len(line)))
            for case in CASES:
                done = subprocess.run([sys.executable, __file__, "--child", case, str(path), str(args.reruns)],
                                      capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{case} failed:\n{done.stderr}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"{label:27} {case:10} {row['items']:>9,} {row['wall']:>8.2f} {row['cpu']:>8.2f} "
                      f"{row['peak'] / 1e6:>9.1f}")


if __name__ == "__main__":
    main()
