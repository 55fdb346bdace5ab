"""SBM benchmark rows: test log-loss / accuracy per pass, epoch time vs SGDClassifier.

Called by ``bench_linear.py --methods sbm``. For each data set:

- ``SBMLogisticRegression``: full rank on ``letter`` and ``a9a`` (``eta = 1/n``,
  the paper's setting, Algorithm 2; and ``update='surrogate'``); low rank
  ``k = 5`` on ``w8a`` and ``conll_tokens`` (Section 3.2).
- ``SGDClassifier(loss='log_loss')``, plain and averaged (``partial_fit``
  per pass, ``learning_rate='optimal'``).
- ``LogisticRegression`` run to convergence with ``C = 1 / (alpha n)``: the
  same objective, the reference optimum.

Every figure of a data set is measured in the same process: the epoch time
of each method is divided by ``SGDClassifier``'s epoch time measured right
before (``_common.sgdclassifier_epoch_time``), so the ratios, not the seconds,
are the figures to quote. The curves (test log-likelihood and test error per
pass, the paper's Figure 3) are written to ``results/sbm_<data>_*.png``.
"""
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.metrics import accuracy_score, log_loss

import _common
from sklearn_secondorder import SBMLogisticRegression

N_PASSES = 5

#: SBM settings per data set (rank=None: full rank, Algorithm 2).
CONFIGS = {
    "letter": [dict(rank=None), dict(rank=None, update="surrogate")],
    "a9a": [dict(rank=None), dict(rank=None, update="surrogate")],
    "w8a": [dict(rank=5, rank_features=16)],
    "conll_tokens": [dict(rank=5, rank_features=16)],
}


def _label(kw):
    extra = "".join(f", {k}={v}" for k, v in kw.items() if k != "rank")
    if kw.get("rank") is None:
        return "SBM full" + extra
    return f"SBM k={kw['rank']}{extra}"


def _scores(yte, proba, classes):
    """Test log-loss over the test rows whose label was seen in training (CoNLL-2000's
    test set has one ``I-LST`` token absent from training), accuracy over all rows."""
    seen = np.isin(yte, classes)
    return (log_loss(yte[seen], proba[seen], labels=classes),
            accuracy_score(yte, classes[proba.argmax(axis=1)]))


def _per_pass(make, Xtr, ytr, Xte, yte, classes, n_passes=N_PASSES):
    """Fit pass by pass with partial_fit; test metrics and the time of each pass."""
    clf = make()
    out = []
    for _ in range(n_passes):
        t = time.perf_counter()
        clf.partial_fit(Xtr, ytr, classes=classes)
        dt = time.perf_counter() - t
        loss, acc = _scores(yte, clf.predict_proba(Xte), classes)
        out.append({"time": dt, "log_loss": loss, "accuracy": acc})
        print(f"  {type(clf).__name__} pass {len(out)}: {dt:.3g} s, test log-loss {loss:.4g},"
              f" accuracy {acc:.4f}", flush=True)
    return out


def run(name, data, alpha, configs=None, n_passes=N_PASSES):
    """Benchmark SBM and its peers on one data set; prints a table, saves plots.

    Parameters
    ----------
    name : str
    data : tuple
        ``(X_train, y_train, X_test, y_test)``.
    alpha : float
        L2 strength of ``mean loss + alpha/2 ||w||^2`` (``1 / n_train``).

    Returns
    -------
    rows : list of dict
    """
    Xtr, ytr, Xte, yte = data
    classes = np.unique(ytr)
    n = Xtr.shape[0]
    warnings.filterwarnings("ignore", category=UserWarning,
                            message="The number of unique classes")
    sgd_epoch = _common.sgdclassifier_epoch_time(Xtr, ytr, "log_loss", alpha)
    print(f"SGDClassifier(log_loss) epoch, this run: {sgd_epoch:.4g} s")

    curves = {}
    for kw in (configs or CONFIGS.get(name, [dict(rank=None)])):
        label = _label(kw)
        curves[label] = _per_pass(
            lambda kw=kw: SBMLogisticRegression(alpha=alpha, random_state=0, **kw),
            Xtr, ytr, Xte, yte, classes, n_passes)
    for avg in (False, True):
        label = "SGDClassifier" + (" averaged" if avg else "")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            curves[label] = _per_pass(
                lambda avg=avg: SGDClassifier(loss="log_loss", alpha=alpha, average=avg,
                                              random_state=0),
                Xtr, ytr, Xte, yte, classes, n_passes)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t = time.perf_counter()
        lr = LogisticRegression(C=1.0 / (alpha * n), tol=1e-8, max_iter=1000).fit(Xtr, ytr)
        lr_time = time.perf_counter() - t
    print(f"LogisticRegression: {int(np.max(lr.n_iter_))} lbfgs iterations (max 1000), "
          f"{lr_time:.3g} s")
    lr_loss, lr_acc = _scores(yte, lr.predict_proba(Xte), classes)

    # headline epoch ratio: best of 3 one-pass fits (fresh state) / SGDClassifier's epoch
    epoch = {}
    for kw in (configs or CONFIGS.get(name, [dict(rank=None)])):
        epoch[_label(kw)], _ = _common.best_time(
            lambda kw=kw: SBMLogisticRegression(alpha=alpha, max_iter=1, random_state=0,
                                                **kw).fit(Xtr, ytr), repeats=3)
    for avg in (False, True):
        epoch["SGDClassifier" + (" averaged" if avg else "")] = _common.sgdclassifier_epoch_time(
            Xtr, ytr, "log_loss", alpha, average=avg)

    rows = []
    for label, res in curves.items():
        for p, r in enumerate(res, 1):
            rows.append({"data": name, "method": label, "pass": p,
                         "test_log_loss": r["log_loss"],
                         "vs_LR": r["log_loss"] / lr_loss,
                         "accuracy": r["accuracy"], "pass_s": r["time"],
                         "pass/SGD": r["time"] / sgd_epoch})
    rows.append({"data": name, "method": "LogisticRegression (converged)", "pass": "-",
                 "test_log_loss": lr_loss, "vs_LR": 1.0, "accuracy": lr_acc,
                 "pass_s": lr_time, "pass/SGD": lr_time / sgd_epoch})
    _common.print_table(rows, ["data", "method", "pass", "test_log_loss", "vs_LR", "accuracy",
                               "pass_s", "pass/SGD"])
    print()
    summary = [{"data": name, "method": k, "epoch_s (best of 3)": v,
                "epoch/SGDClassifier": v / sgd_epoch} for k, v in epoch.items()]
    _common.print_table(summary, ["data", "method", "epoch_s (best of 3)",
                                  "epoch/SGDClassifier"])
    rows += summary

    xs = list(range(1, n_passes + 1))
    ll = {k: (xs, [-r["log_loss"] for r in v]) for k, v in curves.items()}
    ll["LogisticRegression (converged)"] = (xs, [-lr_loss] * len(xs))
    err = {k: (xs, [1 - r["accuracy"] for r in v]) for k, v in curves.items()}
    err["LogisticRegression (converged)"] = (xs, [1 - lr_acc] * len(xs))
    _common.save_curves(f"sbm_{name}_loglik.png", ll, "passes", "test log-likelihood (mean)",
                        f"{name}: test log-likelihood")
    _common.save_curves(f"sbm_{name}_error.png", err, "passes", "test error",
                        f"{name}: test error")
    return rows
