"""Shared-core benchmark: plain SGD epoch time against scikit-learn's SGDClassifier.

Usage::

    python benchmarks/bench_core.py [--epochs 5] [--repeats 5]

On a9a and w8a (binary, sparse), with the same loss (log), the same L2
strength (alpha = 1/n) and the same number of epochs, prints:

- our plain-SGD epoch time / SGDClassifier's epoch time, measured in the same
  run (goal <= 1.0);
- our epoch time / the time to stream the CSR arrays once (the memory floor);
- the one-off cost of ``eta0='auto'`` calibration, and test accuracies.
"""
import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import SGDClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _datasets  # noqa: E402
from _common import best_time, print_table  # noqa: E402

from sklearn_secondorder import PlainSGDClassifier  # noqa: E402
from sklearn_secondorder._core._dataset import RowDataset, stream_rows  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if not _datasets.available():
        sys.exit(f"benchmark data not found under {_datasets.DATA}")
    rows = []
    for name in ("a9a", "w8a"):
        Xtr, ytr, Xte, yte = _datasets.LOADERS[name]()
        alpha, E = 1.0 / Xtr.shape[0], args.epochs
        calib_t, calibrated = best_time(
            lambda: PlainSGDClassifier(alpha=alpha, max_iter=1, random_state=0).fit(Xtr, ytr),
            args.repeats)
        eta0 = calibrated._states[0].eta0
        ours_t, ours = best_time(lambda: PlainSGDClassifier(
            alpha=alpha, max_iter=E, eta0=eta0, random_state=0).fit(Xtr, ytr), args.repeats)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peer_t, peer = best_time(lambda: SGDClassifier(
                loss="log_loss", alpha=alpha, max_iter=E, tol=None, random_state=0
            ).fit(Xtr, ytr), args.repeats)
        ds = RowDataset(Xtr, np.where(ytr > 0, 1.0, -1.0), np.ones(Xtr.shape[0]))
        stream_t, _ = best_time(lambda: stream_rows(ds, E), args.repeats)
        rows.append({
            "data": name, "n": Xtr.shape[0], "nnz/row": round(Xtr.nnz / Xtr.shape[0], 1),
            "ours s/epoch": ours_t / E, "SGDClassifier s/epoch": peer_t / E,
            "ratio vs SGDClassifier": ours_t / peer_t,
            "ratio vs stream": ours_t / stream_t,
            "calibration s": max(calib_t - ours_t / E, 0.0),
            "ours acc": ours.score(Xte, yte), "SGDClassifier acc": peer.score(Xte, yte),
        })
    print(f"plain SGD, log loss, {args.epochs} epochs, best of {args.repeats} runs\n")
    print_table(rows, list(rows[0]))


if __name__ == "__main__":
    main()
