"""One escaping rule per output kind, for every text a visitor or a file supplies.

- Markdown (st.markdown, st.error/warning/info/success, st.caption, st.status and expander labels):
  `md`. Streamlit's Markdown also reads LaTeX ($...$), HTML, emoji and icon codes (:material/home:),
  coloured text (:red[...]) and bare links; CommonMark lets a backslash escape any ASCII punctuation, so
  escaping every one of them leaves no character that can start any of these. GitHub's autolinks are the
  exception: `www.x.y`, `https://x` and `a@x.y` become links in the text after the escapes are read, so a zero
  width space goes where each would start (after `www`, after the scheme's colon, after `@`): shown the same,
  never a link.
- HTML (st.html): `html.escape`, once.
- Plotly labels, ticks and hovers: `attnviz.plots.escape_label`.
"""

from __future__ import annotations

import re
import string

# Where GitHub-flavoured Markdown's autolink literals start: "www." (the dot), a scheme's "://" and an e-mail's "@".
_AUTOLINK_STARTS = re.compile(r"(?i)(?<=www)(?=\.)|(?<=https:)(?=//)|(?<=http:)(?=//)|(?<=@)")
_BREAK = "\u200b"  # zero width space: invisible, and no part of a link
_MARKDOWN_ESCAPES = str.maketrans({c: "\\" + c for c in string.punctuation} | {"\n": " ", "\r": " "})


def md(text: object) -> str:
    """`text` as literal Markdown: shown exactly as typed, line breaks as spaces."""
    return _AUTOLINK_STARTS.sub(_BREAK, str(text)).translate(_MARKDOWN_ESCAPES)
