"""Findings: published findings about heads (replication cards), the paper's numbers beside ours."""

import streamlit as st

from attnviz.ui.findings import render
from attnviz.ui.focus import linked
from attnviz.ui.guard import guarded

st.set_page_config(page_title="attnviz · Findings", layout="wide")
guarded(linked(render))()
