"""Helpers shared by the benchmarks: timing, peers, tables and plots."""
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import SGDClassifier

RESULTS = Path(__file__).resolve().parent / "results"


def best_time(fn, repeats=3):
    """Minimum wall time of ``fn()`` over ``repeats`` runs, and its last result."""
    best, out = np.inf, None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def sgdclassifier_epoch_time(X, y, loss, alpha, repeats=3, n_epochs=5, **kw):
    """Seconds per epoch of scikit-learn's SGDClassifier on (X, y), measured now.

    Timed over ``n_epochs`` epochs (tol=None) so fixed costs are amortised.
    """
    def fit():
        return SGDClassifier(loss=loss, alpha=alpha, max_iter=n_epochs, tol=None,
                             random_state=0, **kw).fit(X, y)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, _ = best_time(fit, repeats)
    return t / n_epochs


def print_table(rows, columns):
    """Print a list of dicts as an aligned text table."""
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def save_curves(filename, curves, xlabel, ylabel, title):
    """Plot ``{label: (xs, ys)}`` to ``results/filename`` (PNG, Agg backend)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    RESULTS.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for label, (xs, ys) in curves.items():
        ax.plot(xs, ys, marker="o", ms=3, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = RESULTS / filename
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def epoch_time(make, n_extra=5, repeats=3):
    """Seconds per pass of ``make(max_iter).fit`` without the fixed costs:
    ``(t(1 + n_extra passes) - t(1 pass)) / n_extra``, each the best of
    ``repeats`` (more for fits under 0.1 s, up to 15, so that millisecond
    fits are not decided by one noisy run); also returns ``t(1 pass)``.
    ``make(k)`` returns a callable that fits with ``k`` passes."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t1, _ = best_time(make(1), repeats)
        repeats = max(repeats, min(15, int(0.3 / max(t1, 1e-9))))
        t1, _ = best_time(make(1), repeats)
        tn, _ = best_time(make(1 + n_extra), repeats)
    return max(tn - t1, 0.0) / n_extra, t1


def proba_of_scores(scores):
    """Class probabilities from linear scores ``(n, K)``: the logistic of one
    column for two classes, else the softmax."""
    scores = np.asarray(scores)
    if scores.shape[1] == 1:
        p1 = 1.0 / (1.0 + np.exp(-scores[:, 0]))
        return np.column_stack([1 - p1, p1])
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
