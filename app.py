"""attnviz: the Explore page (streamlit run app.py)."""

import streamlit as st

from attnviz.ui.common import guarded
from attnviz.ui.explore import render

st.set_page_config(page_title="attnviz", page_icon="🔍", layout="wide")
guarded(render)()
