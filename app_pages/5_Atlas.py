"""Atlas: every head of the model over a corpus (HeadVis's metrics), a head's dashboard, the seed's table."""

import streamlit as st

from attnviz.ui.atlas import render
from attnviz.ui.focus import linked
from attnviz.ui.guard import guarded

st.set_page_config(page_title="attnviz · Atlas", layout="wide")
guarded(linked(render))()
