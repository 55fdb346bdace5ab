"""L1 penalty: sparsity, test accuracy and epoch time against scikit-learn's
``SGDClassifier(penalty='l1')`` at the same ``alpha`` after the same passes,
and a CRF row against CRFsuite's L1 (``c1``).

Usage::

    python benchmarks/bench_l1.py [--datasets a9a,conll_tokens] [--passes 5]
        [--seeds 0,1,2] [--crf] [--crf-passes 10]

Linear rows (log loss, ``penalty='l1'``, the same ``alpha`` and passes; every
estimator at its defaults otherwise): scikit-learn's ``SGDClassifier`` (its
``'optimal'`` schedule, one-vs-rest for several classes), this package's
``PlainSGDClassifier`` (calibrated ``eta0``, multinomial for several classes),
the same averaged (``average=True``: the average on the last iterate's
support) and ``PSAClassifier``. Both peers implement Tsuruoka et al.'s
cumulative penalty; ours also applies the penalty owed by the weights not seen
since their last update at the end of ``fit`` (``coef_`` is read then), which
scikit-learn's does not. ``nnz`` counts the non-zero coefficients (the
intercepts excluded), the epoch time is the fit's wall time over the passes
(input checks and, for ours, the step-size calibration included), each fit
timed once in the same run; ``--epoch-time`` measures instead
``(t(1 + 5 passes) - t(1 pass)) / 5``, best of several runs, without the fixed
costs (``_common.epoch_time``; for the small data sets). Several seeds
(shuffles) are run because the sparsity of an SGD iterate depends on them.

CRF row (``--crf``): CoNLL-2000 chunking, the CRF++ template of
``bench_tagger.py``; CRFsuite L-BFGS with ``c1 = c2 = 0.1`` (sklearn-crfsuite,
100 iterations, all possible transitions) against ``ASFSequenceTagger`` and
``PSASequenceTagger`` with the same objective divided by the number of
sequences ``n``: ``alpha = (c1 + 2 c2) / n``, ``l1_ratio = c1 / (c1 + 2 c2)``.
Non-zero state weights (CRFsuite's ``state_features_``), chunk F1, fit time.

Data under ``../shared/data`` (``benchmarks/_datasets.py``); the script exits
cleanly without it.
"""
import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _datasets  # noqa: E402
from _common import epoch_time, print_table  # noqa: E402

ALPHA = {"a9a": 1e-4, "conll_tokens": 1e-5}


def _linear_rows(name, data, alpha, passes, seed, pure_epoch=False):
    from sklearn.linear_model import SGDClassifier

    from sklearn_secondorder import PlainSGDClassifier, PSAClassifier
    Xtr, ytr, Xte, yte = data
    makers = {
        "sklearn SGDClassifier": lambda: SGDClassifier(
            loss="log_loss", penalty="l1", alpha=alpha, max_iter=passes, tol=None,
            random_state=seed),
        "PlainSGDClassifier": lambda: PlainSGDClassifier(
            penalty="l1", alpha=alpha, max_iter=passes, random_state=seed),
        "PlainSGDClassifier avg": lambda: PlainSGDClassifier(
            penalty="l1", alpha=alpha, max_iter=passes, random_state=seed, average=True),
        "PSAClassifier": lambda: PSAClassifier(
            penalty="l1", alpha=alpha, max_iter=passes, random_state=seed),
    }
    rows = []
    for label, make in makers.items():
        est = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            est.fit(Xtr, ytr)
            t = time.perf_counter() - t
        if pure_epoch:
            def make(k, make=make):
                return lambda: make().set_params(max_iter=k).fit(Xtr, ytr)
            t = epoch_time(make)[0] * passes
        nnz = int(np.sum(est.coef_ != 0))
        rows.append({"data": name, "seed": seed, "estimator": label, "nnz": nnz,
                     "nnz %": 100.0 * nnz / est.coef_.size, "test acc": est.score(Xte, yte),
                     "s/epoch": t / passes})
        print(f"  {label:<24} seed {seed}: nnz {nnz}, acc {rows[-1]['test acc']:.4f}, "
              f"{t / passes:.3f} s/epoch", flush=True)
    ref = rows[0]["s/epoch"]
    for r in rows:
        r["time / sklearn"] = r["s/epoch"] / ref
    return rows


def _crf_rows(passes):
    import sklearn_crfsuite
    from bench_tagger import f1, make_task

    from sklearn_secondorder import ASFSequenceTagger, PSASequenceTagger
    Xtr, ytr, Xte, yte = make_task("chunking", quick=False)
    n = len(Xtr)
    c1, c2 = 0.1, 0.1
    alpha, l1_ratio = (c1 + 2 * c2) / n, c1 / (c1 + 2 * c2)
    rows = []
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=100,
                               all_possible_transitions=True)
    t = time.perf_counter()
    crf.fit(Xtr, ytr)
    t = time.perf_counter() - t
    rows.append({"model": "CRFsuite lbfgs c1=c2=0.1", "non-zero state weights":
                 sum(v != 0 for v in crf.state_features_.values()),
                 "F1": f1(yte, crf.predict(Xte)), "fit s": t})
    print(f"  {rows[-1]}", flush=True)
    for label, est in [
            (f"ASF elasticnet, {passes} passes", ASFSequenceTagger(
                penalty="elasticnet", alpha=alpha, l1_ratio=l1_ratio, max_iter=passes,
                random_state=0)),
            (f"ASF l2 (alpha=2 c2/n), {passes} passes", ASFSequenceTagger(
                alpha=2 * c2 / n, max_iter=passes, random_state=0)),
            ("PSA elasticnet, 1 pass", PSASequenceTagger(
                penalty="elasticnet", alpha=alpha, l1_ratio=l1_ratio, random_state=0)),
            ("PSA elasticnet, 3 passes", PSASequenceTagger(
                penalty="elasticnet", alpha=alpha, l1_ratio=l1_ratio, max_iter=3,
                random_state=0))]:
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        t = time.perf_counter() - t
        rows.append({"model": label, "non-zero state weights": int(np.sum(est.coef_ != 0)),
                     "F1": f1(yte, est.predict(Xte)), "fit s": t})
        print(f"  {rows[-1]}", flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="a9a,conll_tokens")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epoch-time", action="store_true")
    parser.add_argument("--crf", action="store_true")
    parser.add_argument("--crf-passes", type=int, default=10)
    args = parser.parse_args(argv)
    if not _datasets.available():
        print(f"[skip] benchmark data not found under {_datasets.DATA}")
        return
    rows = []
    for name in [d for d in args.datasets.split(",") if d]:
        data = _datasets.LOADERS[name]()
        alpha = ALPHA.get(name, 1.0 / data[0].shape[0])
        print(f"\n=== {name}: n_train={data[0].shape[0]}, n_features={data[0].shape[1]}, "
              f"alpha={alpha:g}, {args.passes} passes", flush=True)
        for seed in map(int, args.seeds.split(",")):
            rows += _linear_rows(name, data, alpha, args.passes, seed, args.epoch_time)
    if rows:
        print()
        print_table(rows, ["data", "seed", "estimator", "nnz", "nnz %", "test acc", "s/epoch",
                           "time / sklearn"])
    if args.crf:
        print("\n=== CRF: CoNLL-2000 chunking", flush=True)
        crf_rows = _crf_rows(args.crf_passes)
        print()
        print_table(crf_rows, ["model", "non-zero state weights", "F1", "fit s"])


if __name__ == "__main__":
    main()
