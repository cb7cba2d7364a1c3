"""Learn: the formulas, MHA vs MQA vs GQA run live, the original Transformer's configuration."""

import streamlit as st

from attnviz.ui.focus import linked
from attnviz.ui.guard import guarded
from attnviz.ui.learn import render

st.set_page_config(page_title="attnviz · Learn", layout="wide")
guarded(linked(render))()
