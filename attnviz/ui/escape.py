"""One escaping rule per output kind, for every text a visitor or a file supplies.

- Markdown (st.markdown, st.error/warning/info/success, st.caption, st.status and expander labels):
  `md`. Streamlit's Markdown also reads LaTeX ($...$), HTML, emoji and icon codes (:material/home:),
  coloured text (:red[...]) and bare links; CommonMark lets a backslash escape any ASCII punctuation, so
  escaping every one of them leaves no character that can start any of these.
- HTML (st.html): `html.escape`, once.
- Plotly labels, ticks and hovers: `attnviz.plots.escape_label`.
"""

from __future__ import annotations

import string

_MARKDOWN_ESCAPES = str.maketrans({c: "\\" + c for c in string.punctuation} | {"\n": " ", "\r": " "})


def md(text: object) -> str:
    """`text` as literal Markdown: shown exactly as typed, line breaks as spaces."""
    return str(text).translate(_MARKDOWN_ESCAPES)
