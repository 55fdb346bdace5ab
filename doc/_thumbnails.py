"""Gallery thumbnails for the examples that draw no figure.

sphinx-gallery makes a card's thumbnail from the example's first figure; the
examples that are rendered but not run (the sklearn-crfsuite tutorial on all
of CoNLL-2000, the Dask cluster, the demo) and those whose output is text
(the command line) would show its placeholder. Each gets a picture of what
it does instead: its key lines, drawn here at every build (``conf.py`` calls
``make_thumbnails``) and named by the example's
``# sphinx_gallery_thumbnail_path`` comment.
"""
from pathlib import Path

#: example -> (title, the lines that say what it does)
CARDS = {
    "crfsuite_tutorial": (
        "sklearn-crfsuite's tutorial",
        ["from sklearn_secondorder \\",
         "  import crfsuite",
         "CRF(algorithm='lbfgs')"]),
    "plot_command_line": (
        "skso, from files",
        ["$ skso train a9a.gz",
         "$ skso evaluate ...",
         "$ skso predict ..."]),
    "dask_parameter_mixing": (
        "Dask, data-parallel",
        ["ParameterMixing(",
         "  PSAClassifier())",
         ".fit(X_dask, y_dask)"]),
    "demo": (
        "One pass on real data",
        ["$ python examples/demo.py",
         "PSAClassifier()",
         "  .fit(X, y)  # 1 pass"]),
}


def make_thumbnails(out_dir, names=None):
    """Draw ``out_dir/<example>.png`` for each example of ``CARDS`` (or ``names``)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in names or CARDS:
        title, lines = CARDS[name]
        # (large type: the card shows the picture at about a third of its size)
        fig = plt.figure(figsize=(4.0, 2.8), dpi=100)
        fig.patch.set_facecolor("#f6f8fa")
        fig.text(0.05, 0.9, title, fontsize=19, weight="bold", color="#1f2328", va="top")
        fig.text(0.05, 0.64, "\n".join(lines), family="monospace", fontsize=16,
                 color="#0a3069", va="top", linespacing=1.4)
        fig.savefig(out_dir / f"{name}.png", facecolor=fig.get_facecolor())
        plt.close(fig)
