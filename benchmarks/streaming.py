"""Streaming vs fit on a9a: each linear estimator trained by ``fit`` and by
``partial_fit`` over the same rows in 2,000-row chunks; test accuracy of both.

Issue 13: the choices made on the first ``partial_fit`` chunk (PSA's
``period`` and ``eta0``, plain SGD's ``eta0``, SGD-QN's ``t0``, SBM's ``n``)
must not cost more than 0.3 points against ``fit``. scikit-learn's
``SGDClassifier`` (log loss) runs the same flows as the peer. Two settings:

- ``user``: defaults, rows in the file's order; ``fit`` makes its default
  passes (``max_iter``: 1 for PSA, 5 for the others), ``partial_fit`` one
  pass over the chunks (each chunk shuffled, as by default).
- ``same``: one pass each, ``shuffle=False``, the rows in one random order
  per seed: both see the same rows in the same order, so the gap is the
  first-chunk choices alone (0 when nothing depends on the first chunk).

    python benchmarks/streaming.py [--chunk 2000] [--seeds 0 1 2 3 4] [--only NAME ...]
"""
import argparse
import time
import warnings

import numpy as np
from _datasets import a9a
from sklearn.linear_model import SGDClassifier

from sklearn_secondorder import (
    PlainSGDClassifier,
    PSAClassifier,
    SBMLogisticRegression,
    SGDQNLinearSVC,
)

ESTIMATORS = {
    "PSAClassifier": PSAClassifier,
    "PlainSGDClassifier": PlainSGDClassifier,
    "SGDQNLinearSVC": SGDQNLinearSVC,
    "SBMLogisticRegression": SBMLogisticRegression,
    # the peer: scikit-learn's own gap between fit and partial_fit, same chunks
    "SGDClassifier (peer)": lambda **kw: SGDClassifier(loss="log_loss", **kw),
}


def run(Est, X, y, Xte, yte, chunk, seed, setting):
    kw = dict(random_state=seed)
    if setting == "same":
        order = np.random.RandomState(seed).permutation(X.shape[0])
        X, y = X[order], y[order]
        kw.update(shuffle=False)
        fitted = Est(max_iter=1, **kw).fit(X, y)
    else:
        fitted = Est(**kw).fit(X, y)
    streamed = Est(**kw)
    classes = np.unique(y)
    for start in range(0, X.shape[0], chunk):
        streamed.partial_fit(X[start:start + chunk], y[start:start + chunk], classes=classes)
    return fitted.score(Xte, yte), streamed.score(Xte, yte)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk", type=int, default=2000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    Xtr, ytr, Xte, yte = a9a()
    print(f"a9a: {Xtr.shape[0]} training rows, chunks of {args.chunk}, seeds {args.seeds}")
    print(f"{'estimator':22s} {'setting':7s} {'fit':>7s} {'stream':>7s} {'gap':>6s} "
          f"{'max gap':>7s}  (points; gap = fit - streamed)")
    for name, Est in ESTIMATORS.items():
        if args.only and name not in args.only:
            continue
        for setting in ("user", "same"):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                res = np.array([run(Est, Xtr, ytr, Xte, yte, args.chunk, s, setting)
                                for s in args.seeds])
            gap = 100 * (res[:, 0] - res[:, 1])
            print(f"{name:22s} {setting:7s} {res[:, 0].mean():7.4f} {res[:, 1].mean():7.4f} "
                  f"{gap.mean():+6.2f} {gap.max():+7.2f}  ({time.perf_counter() - t:.1f} s)",
                  flush=True)


if __name__ == "__main__":
    main()
