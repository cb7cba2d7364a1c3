"""Translate: an encoder-decoder's encoder, decoder and cross-attention on a sentence and its translation."""

import streamlit as st

from attnviz.ui.focus import linked
from attnviz.ui.guard import guarded
from attnviz.ui.translate import render

st.set_page_config(page_title="attnviz · Translate", layout="wide")
guarded(linked(render))()
