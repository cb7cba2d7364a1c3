"""attnviz: the entry point (streamlit run app.py). It names the pages, in the visitor's language, and
runs the chosen one; Explore is the default."""

import streamlit as st

from attnviz.ui.explore import render as explore
from attnviz.ui.guard import guarded
from attnviz.ui.language import t
from attnviz.ui.url_state import restore_from_url

st.set_page_config(page_title="attnviz", page_icon="🔍", layout="wide")
restore_from_url()  # a link's language (?lang=zh) names the pages too
st.navigation([
    st.Page(guarded(explore), title=t("page_explore"), icon="🔍", url_path="explore", default=True),
    st.Page("app_pages/1_Head_Finder.py", title=t("page_head_finder"), icon="🎯"),
    st.Page("app_pages/2_Learn.py", title=t("page_learn"), icon="📖"),
    st.Page("app_pages/3_Translate.py", title=t("page_translate"), icon="🌐"),
    st.Page("app_pages/4_Findings.py", title=t("page_findings"), icon="📑"),
]).run()
