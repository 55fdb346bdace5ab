"""``n_jobs``: threads on one model, against one thread, in the same run.

One part per estimator that takes an ``n_jobs`` of threads working on one
model (``sklearn_secondorder/_threads.py``); ``--parts`` picks them (all by
default):

* ``lbfgs`` -- ``LBFGSSequenceTagger`` on CoNLL-2000 chunking
  (``../shared/data/conll2000``, or ``$SKSO_DATA``) with the sklearn-crfsuite
  tutorial's features and CRFsuite's objective of the tutorial (``c1=0.1``,
  ``c2=0.1``, all possible transitions, no bias: OWL-QN), ``n_jobs=1`` then
  ``n_jobs=2``, the same ``--max-iterations`` (50). For each: the wall and
  CPU seconds of ``fit`` (the input conversion included, one thread in both)
  and of its L-BFGS iterations alone (``pass_seconds_``), the speed-up of
  each, the final objective and its relative difference to one thread's
  (target <= 1e-9), and the conlleval chunk F1 on the test set. The issue's
  target is a speed-up >= 1.7x at ``n_jobs=2`` on a quiet 2-core machine.

    python benchmarks/bench_jobs.py                      # every part
    python benchmarks/bench_jobs.py --parts lbfgs --max-iterations 50

Without the data set a part prints that it is skipped and the script exits 0.
"""
import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "examples"))

from _datasets import DATA, read_conll2000  # noqa: E402

from sklearn_secondorder import LBFGSSequenceTagger  # noqa: E402
from sklearn_secondorder.metrics import chunk_f1_score  # noqa: E402


def timed_fit(est, X, y):
    """``est.fit(X, y)``: the fitted estimator, wall and CPU seconds (CPU of
    the whole process, so every thread's time counts)."""
    wall, cpu = time.perf_counter(), time.process_time()
    est.fit(X, y)
    return est, time.perf_counter() - wall, time.process_time() - cpu


def part_lbfgs(args):
    """LBFGSSequenceTagger, n_jobs=1 against n_jobs=2 (module docstring)."""
    if not (DATA / "conll2000" / "train.txt.gz").exists():
        print(f"lbfgs: skipped, {DATA / 'conll2000'} is absent")
        return None
    from crfsuite_tutorial import sent2features, sent2labels

    train, test = read_conll2000("train"), read_conll2000("test")
    if args.n_train:
        train = train[:args.n_train]
    Xtr, ytr = [sent2features(s) for s in train], [sent2labels(s) for s in train]
    Xte, yte = [sent2features(s) for s in test], [sent2labels(s) for s in test]
    n, c1, c2 = len(Xtr), 0.1, 0.1
    params = dict(alpha=(c1 + 2 * c2) / n, penalty="elasticnet", l1_ratio=c1 / (c1 + 2 * c2),
                  max_iter=args.max_iterations, fit_intercept=False,
                  all_possible_transitions=True)
    print(f"lbfgs: CoNLL-2000, {n} training / {len(Xte)} test sentences, c1={c1} c2={c2}, "
          f"{args.max_iterations} iterations; {os.cpu_count()} cores, load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    rows = []
    for n_jobs in args.n_jobs:
        est, wall, cpu = timed_fit(LBFGSSequenceTagger(n_jobs=n_jobs, **params), Xtr, ytr)
        f1 = 100 * chunk_f1_score(yte, est.predict(Xte))
        train_s = float(sum(est.pass_seconds_))
        rows.append({"n_jobs": n_jobs, "wall": wall, "cpu": cpu, "train": train_s,
                     "objective": est.objective_, "f1": f1, "iter": est.n_iter_,
                     "evals": est.n_evals_})
        print(f"  n_jobs={n_jobs}: fit {wall:7.2f} s wall {cpu:7.2f} s CPU, iterations "
              f"{train_s:7.2f} s ({est.n_iter_} iterations, {est.n_evals_} evaluations), "
              f"objective {est.objective_:.12g}, F1 {f1:.2f}", flush=True)
    base = rows[0]
    for row in rows[1:]:
        rel = abs(row["objective"] - base["objective"]) / abs(base["objective"])
        print(f"  n_jobs={row['n_jobs']} vs {base['n_jobs']}: speed-up fit "
              f"{base['wall'] / row['wall']:.2f}x, iterations "
              f"{base['train'] / row['train']:.2f}x (target >= 1.7x at 2 threads, quiet "
              f"machine); objective rel. diff {rel:.2e} (target <= 1e-9); F1 "
              f"{row['f1'] - base['f1']:+.2f}")
    return rows


PARTS = {"lbfgs": part_lbfgs}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS),
                    help=f"comma-separated parts to run, of {', '.join(PARTS)} (all)")
    ap.add_argument("--max-iterations", type=int, default=50,
                    help="L-BFGS iterations, the same for every n_jobs (50)")
    ap.add_argument("--n-jobs", type=lambda s: [int(v) for v in s.split(",")],
                    default=[1, 2], help="the n_jobs values, the first the baseline (1,2)")
    ap.add_argument("--n-train", type=int, default=0,
                    help="the first N training sentences only (0: all)")
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; the parts are {', '.join(PARTS)}")
    for name in parts:
        PARTS[name](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
