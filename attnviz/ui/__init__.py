"""Streamlit pages' logic: the only package code that imports streamlit."""
