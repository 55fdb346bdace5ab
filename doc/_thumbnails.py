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
        "sklearn-crfsuite's tutorial, one import changed",
        ["from sklearn_secondorder import crfsuite \\",
         "    as sklearn_crfsuite",
         "crf = sklearn_crfsuite.CRF(",
         "    algorithm='lbfgs', c1=0.1, c2=0.1)",
         "crf.fit(X_train, y_train)",
         "metrics.flat_f1_score(y_test, y_pred)"]),
    "plot_command_line": (
        "skso: train, evaluate, predict from files",
        ["$ skso train a9a.gz --model psa \\",
         "      --out a9a.skso",
         "$ skso evaluate a9a.skso a9a.t.gz",
         "$ skso predict a9a.skso a9a.t.gz \\",
         "      --proba --out pred.txt"]),
    "dask_parameter_mixing": (
        "Data-parallel passes on a Dask cluster",
        ["from sklearn_secondorder.dask import \\",
         "    ParameterMixing",
         "model = ParameterMixing(",
         "    PSAClassifier(), max_iter=1)",
         "model.fit(X_dask, y_dask, classes=[0, 1])"]),
    "demo": (
        "One pass on real data",
        ["$ pip install '.[benchmark]'",
         "$ python examples/demo.py",
         "",
         "PSAClassifier().fit(X, y)   # one pass",
         "model.score(X_test, y_test)"]),
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
        fig = plt.figure(figsize=(4.0, 3.0), dpi=100)
        fig.patch.set_facecolor("#f6f8fa")
        fig.text(0.05, 0.9, title, fontsize=10.5, weight="bold", color="#1f2328",
                 va="top", wrap=True)
        fig.text(0.05, 0.72, "\n".join(lines), family="monospace", fontsize=8.6,
                 color="#0a3069", va="top", linespacing=1.5)
        fig.savefig(out_dir / f"{name}.png", facecolor=fig.get_facecolor())
        plt.close(fig)
