"""Everything the app computes or caches, with no Streamlit in it: the memory budget and byte-bounded
stores, the heavy-work slots, model loading under the budget, and one function per cached result."""
