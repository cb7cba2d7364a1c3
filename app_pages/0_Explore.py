"""Explore: type a sentence, see every layer and head at once, zoom into one head (the default page)."""

import streamlit as st

from attnviz.ui.explore import render
from attnviz.ui.focus import linked
from attnviz.ui.guard import guarded

st.set_page_config(page_title="attnviz", layout="wide")
guarded(linked(render))()
