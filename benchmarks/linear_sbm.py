"""SBM benchmark rows: test log-loss / accuracy per pass, epoch time vs SGDClassifier.

Called by ``bench_linear.py --methods sbm``. For each data set:

- ``SBMLogisticRegression``: full rank on ``letter`` and ``a9a`` (``eta = 1/n``,
  the paper's setting, Algorithm 2; and ``update='surrogate'``); low rank
  ``k = 5`` on ``w8a`` and ``conll_tokens`` (Section 3.2).
- ``SGDClassifier(loss='log_loss')``, plain and averaged (``partial_fit``
  per pass, ``learning_rate='optimal'``).
- ``LogisticRegression`` run to convergence with ``C = 1 / (alpha n)``: the
  same objective, the reference optimum.
- Full rank only: batch bound majorization (``BBM``, the paper's Eq. 2 with
  ``eta = 1``, its Figure 2 comparator): "pass" ``p`` is ``p`` exact batch steps,
  each with fresh bounds at the current weights over all rows. It is the
  reference for what the bound's curvature allows: a stochastic pass built on
  the same bounds is not expected to beat many batch steps (on letter, 26
  classes, the bound is several times the Hessian and BBM itself needs tens of
  steps).

Every figure of a data set is measured in the same process: the epoch time
of each method is divided by ``SGDClassifier``'s epoch time measured right
before (``_common.sgdclassifier_epoch_time``), so the ratios, not the seconds,
are the figures to quote. Epochs are timed as SGDClassifier's are,
``fit(max_iter=p) / p`` (best of 3), with ``p = 5`` for the low-rank and SGD
rows and ``p = 1`` for full rank (a full-rank pass is long, its fixed costs
negligible). The curves (test log-likelihood and test error per
pass, the paper's Figure 3) are written to ``results/sbm_<data>_*.png``.
"""
import time
import warnings

import _common
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.metrics import accuracy_score, log_loss

from sklearn_secondorder import SBMLogisticRegression
from sklearn_secondorder._core._dataset import RowDataset
from sklearn_secondorder._core._sbm_bound import SBMOptions
from sklearn_secondorder._core._sbm_full import FullRankState, full_epochs
from sklearn_secondorder.linear._sbm import _one_blas_thread

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


def _bbm_per_pass(Xtr, ytr, Xte, yte, classes, alpha, n_passes=N_PASSES):
    """Batch bound majorization (Eq. 2, ``eta = 1``): each step is one full-rank
    pass of the kernel with ``eta = 0`` from a fresh ``M = I / lam``, ``mu = 0``
    (which gives ``phi = Sigma(theta)^-1 mu(theta)``, tested in
    ``test_eta_zero_gives_batch_majorization_step``), then ``theta -= phi``."""
    n, d = Xtr.shape
    K = 1 if classes.size == 2 else classes.size
    yk = (np.where(ytr == classes[1], 1.0, -1.0) if K == 1
          else np.searchsorted(classes, ytr).astype(np.float64))
    ds = RowDataset(Xtr, yk, np.ones(n))
    P = (d + 1) * K
    theta, lam = np.zeros(P), n * alpha
    out = []
    for _ in range(n_passes):
        t = time.perf_counter()
        state = FullRankState.zeros(d, K, True)      # M = I / lam, mu = 0 after start
        state.theta[:] = theta
        state.start(n, lam, 0.0)
        with _one_blas_thread():       # as the estimator runs the kernel
            full_epochs(ds, state, SBMOptions(alpha=alpha, eta=0.0), n_epochs=1, shuffle=False)
        theta -= state.phi
        dt = time.perf_counter() - t
        W = theta.reshape(d + 1, K)
        scores = np.asarray(Xte @ W[:d]) + W[d]
        proba = _common.proba_of_scores(scores)
        loss, acc = _scores(yte, proba, classes)
        out.append({"time": dt, "log_loss": loss, "accuracy": acc})
        print(f"  BBM step {len(out)}: {dt:.3g} s, test log-loss {loss:.4g}, accuracy {acc:.4f}",
              flush=True)
    return out


def _epoch_time(kw, Xtr, ytr, alpha):
    """Seconds per pass, timed like SGDClassifier's: ``fit(max_iter=p) / p``, best of 3."""
    p = 1 if kw.get("rank") is None else 5
    t, _ = _common.best_time(
        lambda: SBMLogisticRegression(alpha=alpha, max_iter=p, random_state=0,
                                      **kw).fit(Xtr, ytr), repeats=3)
    return t / p


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
    if any(kw.get("rank") is None for kw in (configs or CONFIGS.get(name, [dict(rank=None)]))):
        curves["BBM (Eq. 2, eta=1; pass = batch step)"] = _bbm_per_pass(
            Xtr, ytr, Xte, yte, classes, alpha, n_passes)
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

    # headline epoch ratio: fit(max_iter=p) / p, best of 3, over SGDClassifier's epoch
    # (fit(max_iter=5) / 5, best of 3) measured right before and right after (the
    # smaller of the two: the machine may be shared)
    epoch, sgd_ref = {}, {}
    for kw in (configs or CONFIGS.get(name, [dict(rank=None)])):
        before = _common.sgdclassifier_epoch_time(Xtr, ytr, "log_loss", alpha)
        epoch[_label(kw)] = _epoch_time(kw, Xtr, ytr, alpha)
        sgd_ref[_label(kw)] = min(before, _common.sgdclassifier_epoch_time(
            Xtr, ytr, "log_loss", alpha))
    for avg in (False, True):
        label = "SGDClassifier" + (" averaged" if avg else "")
        epoch[label] = _common.sgdclassifier_epoch_time(Xtr, ytr, "log_loss", alpha,
                                                        average=avg)
        sgd_ref[label] = sgd_epoch

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
                "SGD_epoch_s": sgd_ref[k], "epoch/SGDClassifier": v / sgd_ref[k]}
               for k, v in epoch.items()]
    _common.print_table(summary, ["data", "method", "epoch_s (best of 3)", "SGD_epoch_s",
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
