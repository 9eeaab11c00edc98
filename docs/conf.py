"""Sphinx configuration of the `belief` documentation site.

Build: ``uv run --group docs sphinx-build -W --keep-going -b html docs docs/_build/html``.
The notebooks are rendered without being executed (``nb_execution_mode = "off"``):
``tests/test_notebooks.py`` executes them.  The CLI reference and the input-table reference
are generated at build time from the code (``_ext/belief_docs.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import belief  # noqa: E402

project = "belief"
author = "the belief developers"
copyright = "the belief developers"
release = version = belief.__version__

extensions = [
    "myst_nb",  # MyST Markdown and the notebooks (it registers myst_parser itself)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "belief_docs",
]

# .rst first: autosummary writes its stub pages (reference/generated/) with the first suffix
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
smartquotes = False  # prose names CLI flags: "--overwrite" must not become an en dash
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath", "amsmath", "deflist", "colon_fence"]
myst_heading_anchors = 3
nb_execution_mode = "off"

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"  # the numpydoc sections state the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"belief {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
