"""Head Finder: which heads track subject-verb, coreference, modification, semantic association?"""

import streamlit as st

from attnviz.ui.focus import linked
from attnviz.ui.guard import guarded
from attnviz.ui.head_finder import render

st.set_page_config(page_title="attnviz · Head Finder", layout="wide")
guarded(linked(render))()
