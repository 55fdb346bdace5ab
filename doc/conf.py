"""Sphinx configuration of the sklearn-secondorder documentation.

Build (after ``pip install -e ".[doc]"``, from the repository root)::

    python -m sphinx -W -b html doc doc/_build/html

Math is rendered by MathJax 3 served from the built site itself (no network):
the ``django-static-mathjax`` wheel ships MathJax's ``es5`` build as plain
files (it has no dependencies, Django included), and ``_mathjax_static``
below copies that directory next to the pages.
"""
import os
import shutil
import sys
from pathlib import Path

import mathjax

DOC = Path(__file__).resolve().parent
ROOT = DOC.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOC))       # doc/_ext

# the gallery runs without a display
os.environ.setdefault("MPLBACKEND", "Agg")

import sklearn_secondorder  # noqa: E402

project = "sklearn-secondorder"
author = "the sklearn-secondorder developers"
copyright = "the sklearn-secondorder developers, BSD-3-Clause"
release = sklearn_secondorder.__version__ if hasattr(sklearn_secondorder, "__version__") else "0.1"
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "sphinx_design",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_mathjax", "Thumbs.db", ".DS_Store",
                    "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.md5"]
templates_path = ["_templates"]

# ---- API reference -----------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {}     # the class template lists the members
autodoc_typehints = "none"
numpydoc_show_class_members = False     # autosummary lists the members
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()      # tests/test_docstrings.py validates them

# ---- Markdown (the internals pages, RESULTS.md) ------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

# ---- math without network ----------------------------------------------------------
_MATHJAX_ES5 = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"
_MATHJAX_STATIC = DOC / "_mathjax"


def _copy_mathjax():
    """Copy MathJax's es5 build (tex-svg.js and its components) to ``doc/_mathjax/mathjax``."""
    target = _MATHJAX_STATIC / "mathjax"
    if not (target / "tex-svg.js").exists():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(_MATHJAX_ES5, target)


_copy_mathjax()
# SVG output: every glyph is drawn as a path in the page, so symbols such as
# \top render the same in every browser and from file:// URLs, where the
# CHTML output's web fonts may not load and a system font stands in (its
# thin ⊤ read as a bar)
mathjax_path = "mathjax/tex-svg.js"     # relative: served from _static/

# ---- HTML ----------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "sklearn-secondorder"
html_static_path = ["_static", str(_MATHJAX_STATIC)]
html_css_files = ["custom.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "navbar_end": ["navbar-icon-links"],
}
html_sidebars = {"index": [], "getting_started": [], "choosing": [], "results": [], "api": []}
html_show_sourcelink = False

# ---- gallery -------------------------------------------------------------------------
# the thumbnails of the examples that draw no figure (``_thumbnails.py``)
from _thumbnails import make_thumbnails  # noqa: E402

make_thumbnails(DOC / "_static" / "thumbnails")

# Examples whose name starts with ``plot_`` run at every build (each in seconds);
# the others (the full sklearn-crfsuite tutorial, the Dask cluster, the PSA
# paper's CRF table on all of CoNLL-2000, the demo) are rendered, not run.
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py|/_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "_gallery_order.GalleryOrder",
    "image_scrapers": ("matplotlib",),
    "show_memory": False,
    "min_reported_time": 1,
    "doc_module": ("sklearn_secondorder",),
    "backreferences_dir": None,
    "matplotlib_animations": False,
    "abort_on_example_error": True,
}


# ---- scikit-learn's inherited docstrings -------------------------------------------
# The estimators inherit ``score``, ``get_metadata_routing`` and the
# ``set_*_request`` methods from scikit-learn, whose docstrings point into
# scikit-learn's own site (``:ref:`metadata_routing```, ``:term:`estimator```).
# Those labels do not exist here: keep the text, drop the link.
import re  # noqa: E402

_FOREIGN_ROLE = re.compile(r":(?:ref|term):`([^`<]*?)(?:\s*<[^>]*>)?`")


# A bare ``n_features_in_`` in a shape, ``(n_features_in_,)``, reads as a
# reST link target: quote it as code.
_BARE_TRAILING_UNDERSCORE = re.compile(r"(?<![`\w])(n_features_in_)(?=,)")


def _drop_foreign_links(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        lines[i] = _BARE_TRAILING_UNDERSCORE.sub(r"``\1``", line)
    module = getattr(obj, "__module__", "") or ""
    if module.startswith("sklearn_secondorder") and ".<locals>" not in getattr(
            obj, "__qualname__", ""):
        return
    for i, line in enumerate(lines):
        lines[i] = _FOREIGN_ROLE.sub(lambda m: f"*{m.group(1).strip()}*", line)


def setup(app):
    app.connect("autodoc-process-docstring", _drop_foreign_links)
