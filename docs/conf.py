"""Sphinx configuration of the documentation site: MyST Markdown pages, the furo theme.

Built by tests/test_docs.py with warnings as errors (`python -m sphinx -W -b html docs docs/_build/html`),
so a dead link or anchor, a page missing from the table of contents or a docstring autodoc cannot read
fails the test suite.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # autodoc imports `recommender` from this checkout

import recommender  # noqa: E402

project = "papers"
author = "the papers developers"
copyright = "2026, the papers developers"
version = release = recommender.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Every heading down to ### gets an anchor (`page.md#a-heading`), as GitHub makes them, so links
# work the same on GitHub and in the built site, and Sphinx warns (an error with -W) on a dead one.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# Signatures as written in the code; docstrings are read from the source, nothing is imported twice.
autodoc_member_order = "bysource"
# The docstrings are written for reading in the code: `name` is code, as in Markdown.
default_role = "code"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": False}

html_theme = "furo"
html_title = f"papers {release}"
html_static_path = ["_static"]
