"""Findings: published findings about heads (replication cards), the paper's numbers beside ours."""

import streamlit as st

from attnviz.ui.common import guarded
from attnviz.ui.findings import render

st.set_page_config(page_title="attnviz · Findings", layout="wide")
guarded(render)()
