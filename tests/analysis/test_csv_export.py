"""One head as CSV: token labels that a spreadsheet would run as formulas are neutralised (CSV
injection, OWASP: a leading ' before = + - @ tab and carriage return); the numbers stay numbers."""

from __future__ import annotations

import csv
import io

import numpy as np

from attnviz.analysis import export


def rows_of(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_formula_labels_are_neutralised_in_header_and_first_column():
    labels = ["=HYPERLINK(\"http://x\",\"y\")", "+1", "-2", "@SUM(A1)", "\tcmd", "\rcmd", "plain", "a=b", "'q"]
    n = len(labels)
    rows = rows_of(export.head_csv(np.full((n, n), 0.125), labels))
    expected = ["'=HYPERLINK(\"http://x\",\"y\")", "'+1", "'-2", "'@SUM(A1)", "'\tcmd", "'\rcmd", "plain", "a=b", "'q"]
    assert rows[0] == ["from \\ to", *expected]
    assert [row[0] for row in rows[1:]] == expected
    assert all(v == "0.125" for row in rows[1:] for v in row[1:])


def test_the_exporters_own_numbers_stay_numeric_cells():
    # a difference matrix (minimal pairs) has negative entries: -0.5 is a number, not a formula
    matrix = np.array([[-0.5, 0.25], [1e-7, -3.0]])
    rows = rows_of(export.head_csv(matrix, ["-", "x"]))
    assert rows[1] == ["'-", "-0.5", "0.25"]
    assert rows[2] == ["x", "1e-07", "-3"]
    assert [float(v) for v in rows[1][1:] + rows[2][1:]] == [-0.5, 0.25, 1e-7, -3.0]


def test_csv_text():
    assert export.csv_text("=1+1") == "'=1+1"
    assert export.csv_text("") == ""
    assert export.csv_text(" =x") == " =x"  # not at the start: a spreadsheet reads it as text
    assert export.FORMULA_STARTS == ("=", "+", "-", "@", "\t", "\r")
