"""The figures of the documentation's "choosing an estimator" page.

Each of our linear estimators beside the scikit-learn estimator a user would
otherwise pick, in the same run, on

- **digits**, small dense many-class data (1,797 rows, 64 pixels, 10 classes;
  ``StandardScaler``, a stratified 75/25 split),
- **letter**, larger dense many-class data (16,000 training rows, 16
  features, 26 classes; scaled; the UCI split's last 4,000 rows for test), and
- **a9a**, sparse binary data (32,561 training rows, 123 binary columns; its
  own test file),

the last two when ``../shared/data`` is present.

Reported: test accuracy and the best wall time of ``fit`` over ``--repeats``
runs (the machine may be shared: quote ratios to a peer of the same run).

Usage::

    python benchmarks/bench_choosing.py [--repeats 3]
"""
import argparse
import os
import warnings

import numpy as np
from _common import best_time, print_table
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sklearn_secondorder import (
    PlainSGDClassifier,
    PSAClassifier,
    SBMLogisticRegression,
    SGDQNLinearSVC,
)


def models():
    """(name, estimator factory): defaults unless the name says otherwise."""
    return [
        ("LogisticRegression (lbfgs, C=1)", lambda: LogisticRegression(max_iter=1000)),
        ("SGDClassifier (hinge, tol=1e-3)", lambda: SGDClassifier(random_state=0)),
        ("SGDClassifier (log_loss, tol=1e-3)",
         lambda: SGDClassifier(loss="log_loss", random_state=0)),
        ("PSAClassifier (1 pass)", lambda: PSAClassifier(random_state=0)),
        ("PSAClassifier (5 passes)", lambda: PSAClassifier(max_iter=5, random_state=0)),
        ("PlainSGDClassifier (5 passes)",
         lambda: PlainSGDClassifier(max_iter=5, random_state=0)),
        ("SGDQNLinearSVC (5 passes)", lambda: SGDQNLinearSVC(random_state=0)),
        ("SBMLogisticRegression (1 pass)", lambda: SBMLogisticRegression(random_state=0)),
    ]


def digits():
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    scaler = StandardScaler().fit(Xtr)
    return scaler.transform(Xtr), scaler.transform(Xte), ytr, yte


def a9a():
    from _datasets import a9a as load
    Xtr, ytr, Xte, yte = load()
    return Xtr, Xte, ytr, yte


def letter():
    from _datasets import letter as load
    Xtr, ytr, Xte, yte = load()
    return Xtr, Xte, ytr, yte


def run(name, data, repeats):
    Xtr, Xte, ytr, yte = data
    rows = []
    for label, make in models():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            seconds, est = best_time(lambda: make().fit(Xtr, ytr), repeats)
        rows.append({"data": name, "estimator": label, "test_acc": est.score(Xte, yte),
                     "fit_s": seconds})
    ref = rows[0]["fit_s"]
    for r in rows:
        r["fit_vs_LR"] = r["fit_s"] / ref
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("load average:", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    rows = run("digits", digits(), args.repeats)
    for name, load in (("letter", letter), ("a9a", a9a)):
        try:
            rows += run(name, load(), args.repeats)
        except FileNotFoundError as exc:
            print(f"({name} skipped: {exc})")
    print_table(rows, ["data", "estimator", "test_acc", "fit_s", "fit_vs_LR"])
    print("load average:", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    return rows


if __name__ == "__main__":
    np.random.seed(0)
    main()
