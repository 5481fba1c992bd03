"""Rendering: terminal tables, markdown, table writers and (optional) plotly figures."""
