"""attnviz: the entry point (streamlit run app.py). It names the pages, in the visitor's language, and runs
the chosen one; Explore is the default. Every page writes the focus into the link as it ends (ui/focus.py):
Streamlit clears the query string on a change of page."""

import streamlit as st

from attnviz.ui.focus import full_run_started
from attnviz.ui.language import t
from attnviz.ui.url_state import restore_from_url

st.set_page_config(page_title="attnviz", page_icon="🔍", layout="wide")
restore_from_url()  # a link's language (?lang=zh) names the pages too
full_run_started()
page = st.navigation([
    st.Page("app_pages/0_Explore.py", title=t("page_explore"), icon="🔍", url_path="explore", default=True),
    st.Page("app_pages/1_Head_Finder.py", title=t("page_head_finder"), icon="🎯"),
    st.Page("app_pages/2_Learn.py", title=t("page_learn"), icon="📖"),
    st.Page("app_pages/3_Translate.py", title=t("page_translate"), icon="🌐", url_path="Translate"),
    st.Page("app_pages/4_Findings.py", title=t("page_findings"), icon="📑"),
    st.Page("app_pages/5_Atlas.py", title=t("page_atlas"), icon="🗺️"),
])
st.session_state.setdefault("_landing_page", page.url_path)  # the page a link opened (ui/translate.py)
page.run()
