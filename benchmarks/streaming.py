"""Streaming vs fit: each linear estimator trained by ``fit`` (one pass, or
``max_iter`` passes) and by ``partial_fit`` over the same rows in chunks
(2,000 rows by default), test accuracy of both (a9a).

Issue 13: the first-chunk choices (PSA's ``period`` and ``eta0``, SGD-QN's
``t0``, SBM's ``n``) must not cost more than 0.3 points against ``fit``.
Each estimator sees the rows in one fixed random order (shuffle=False for
``partial_fit``; ``fit`` makes one pass with shuffle=False over the same
order), so the comparison isolates the choices made on the first chunk.

    python benchmarks/streaming.py [--chunk 2000] [--seeds 0 1 2]
"""
import argparse
import time

import numpy as np
from _datasets import a9a

from sklearn_secondorder import (
    PlainSGDClassifier,
    PSAClassifier,
    SBMLogisticRegression,
    SGDQNLinearSVC,
)


def estimators(seed):
    return {
        "PSAClassifier": PSAClassifier(random_state=seed, shuffle=False),
        "PlainSGDClassifier": PlainSGDClassifier(max_iter=1, random_state=seed,
                                                 shuffle=False),
        "SGDQNLinearSVC": SGDQNLinearSVC(max_iter=1, random_state=seed, shuffle=False),
        "SBMLogisticRegression": SBMLogisticRegression(max_iter=1, random_state=seed,
                                                       shuffle=False),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk", type=int, default=2000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    Xtr, ytr, Xte, yte = a9a()
    classes = np.unique(ytr)
    rows = []
    for name in estimators(0):
        if args.only and name not in args.only:
            continue
        acc_fit, acc_stream, secs = [], [], []
        for seed in args.seeds:
            order = np.random.RandomState(seed).permutation(Xtr.shape[0])
            X, y = Xtr[order], ytr[order]
            t = time.perf_counter()
            fitted = estimators(seed)[name].fit(X, y)
            acc_fit.append(fitted.score(Xte, yte))
            streamed = estimators(seed)[name]
            for start in range(0, X.shape[0], args.chunk):
                streamed.partial_fit(X[start:start + args.chunk], y[start:start + args.chunk],
                                     classes=classes)
            acc_stream.append(streamed.score(Xte, yte))
            secs.append(time.perf_counter() - t)
        f, s = np.mean(acc_fit), np.mean(acc_stream)
        rows.append((name, f, s, 100 * (f - s)))
        print(f"{name:22s} fit {f:.4f}  streamed {s:.4f}  gap {100 * (f - s):+.2f} points "
              f"(seeds {args.seeds}, {np.sum(secs):.1f} s)", flush=True)


if __name__ == "__main__":
    main()
