"""PSAClassifier rows of bench_linear.py.

For one data set: test accuracy after passes 1..5 of PSAClassifier,
SGDClassifier (plain and ``average=True``), all with the log loss and the
same ``alpha``, and converged LogisticRegression (``C = 1 / (alpha n)``, the
same objective); the epoch time of PSA (and of the package's plain SGD)
divided by SGDClassifier's epoch time measured in the same run; plots of
accuracy against passes and against seconds in ``benchmarks/results/``.
"""
import time
import warnings

import numpy as np
from _common import best_time, epoch_time, print_table, save_curves
from sklearn.linear_model import LogisticRegression, SGDClassifier

from sklearn_secondorder import PlainSGDClassifier, PSAClassifier

PASSES = 5


def _curve(make, Xtr, ytr, Xte, yte, classes):
    """Accuracy and cumulative seconds after each partial_fit pass."""
    est, acc, secs, total = make(), [], [], 0.0
    for _ in range(PASSES):
        t = time.perf_counter()
        est.partial_fit(Xtr, ytr, classes=classes)
        total += time.perf_counter() - t
        acc.append(est.score(Xte, yte))
        secs.append(total)
    return est, acc, secs


def run(name, data, alpha):
    Xtr, ytr, Xte, yte = data
    classes = np.unique(ytr)
    warnings.simplefilter("ignore")
    makers = {
        "PSAClassifier": lambda: PSAClassifier(alpha=alpha, random_state=0),
        "SGDClassifier": lambda: SGDClassifier(loss="log_loss", alpha=alpha, random_state=0),
        "SGDClassifier(average)": lambda: SGDClassifier(
            loss="log_loss", alpha=alpha, average=True, random_state=0),
        "PlainSGDClassifier(average)": lambda: PlainSGDClassifier(
            alpha=alpha, average=True, random_state=0),
    }
    curves = {label: _curve(make, Xtr, ytr, Xte, yte, classes)
              for label, make in makers.items()}
    psa = curves["PSAClassifier"][0]
    eta0 = psa._states[0].kernel.eta0

    # epoch times, measured now, one after the other, without fixed costs
    def fitter(cls, **kw):
        return lambda k: (lambda: cls(max_iter=k, random_state=0, **kw).fit(Xtr, ytr))
    sgd_epoch, sgd_fit1 = epoch_time(fitter(SGDClassifier, loss="log_loss", alpha=alpha, tol=None))
    psa_epoch, psa_fit1 = epoch_time(fitter(PSAClassifier, alpha=alpha, eta0=eta0))
    psa_auto, _ = best_time(lambda: PSAClassifier(alpha=alpha, random_state=0).fit(Xtr, ytr), 3)
    plain_epoch, _ = epoch_time(fitter(PlainSGDClassifier, alpha=alpha, eta0=eta0))

    t = time.perf_counter()
    lr = LogisticRegression(C=1.0 / (alpha * Xtr.shape[0]), max_iter=1000, tol=1e-6)
    lr.fit(Xtr, ytr)
    lr_time, lr_acc = time.perf_counter() - t, lr.score(Xte, yte)

    rows = []
    for label, (_, acc, secs) in curves.items():
        rows.append({"model": label, **{f"acc@{p + 1}": acc[p] for p in range(PASSES)},
                     "s@1": secs[0]})
    rows.append({"model": "LogisticRegression (converged)", "acc@1": lr_acc, "s@1": lr_time})
    print_table(rows, ["model"] + [f"acc@{p + 1}" for p in range(PASSES)] + ["s@1"])
    print(f"\nPSA one pass: {curves['PSAClassifier'][1][0]:.4f}  (converged LR {lr_acc:.4f}, "
          f"gap {100 * (lr_acc - curves['PSAClassifier'][1][0]):+.2f} points; averaged "
          f"SGDClassifier one pass {curves['SGDClassifier(average)'][1][0]:.4f})")
    print(f"epoch seconds (t(6 passes) - t(1 pass)) / 5: SGDClassifier {sgd_epoch:.4f}, "
          f"PSA {psa_epoch:.4f}, PlainSGDClassifier {plain_epoch:.4f}")
    print(f"ratios to SGDClassifier's epoch: PSA {psa_epoch / sgd_epoch:.2f}, "
          f"plain SGD {plain_epoch / sgd_epoch:.2f}  (b = {psa.period_}, eta0 = {eta0:.3g})")
    print(f"one-pass fit wall time: SGDClassifier {sgd_fit1:.4f}, PSA (eta0 given) {psa_fit1:.4f},"
          f" PSA eta0='auto' {psa_auto:.4f}; ratio {psa_fit1 / sgd_fit1:.2f} "
          f"({psa_auto / sgd_fit1:.2f} with calibration)\n")

    passes = np.arange(1, PASSES + 1)
    save_curves(f"psa_{name}_passes.png",
                {k: (passes, v[1]) for k, v in curves.items()} | {
                    "LogisticRegression": (passes, [lr_acc] * PASSES)},
                "passes", "test accuracy", f"{name}: accuracy per pass")
    save_curves(f"psa_{name}_seconds.png", {k: (v[2], v[1]) for k, v in curves.items()},
                "seconds", "test accuracy", f"{name}: accuracy against time")
