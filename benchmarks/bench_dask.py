"""Data-parallel training on Dask (``sklearn_secondorder.dask.ParameterMixing``).

Two measurements, each on local clusters of worker processes (one thread each):

1. **Linear, one pass, 1 worker against 2.** A binary task built from
   CoNLL-2000: every training token (the chunking template of ``_datasets.py``,
   hashed to ``2**20`` binary columns) labelled "inside a noun phrase" (B-NP /
   I-NP) or not, replicated ``--replicate`` times and shuffled, as a Dask array
   of CSR blocks. The blocks are generated on the workers (each worker hashes
   CoNLL-2000 once and cuts its blocks from the shuffled replication): the
   client never holds the training rows. With one worker, the mixed model *is*
   the estimator's own pass over all the rows (``tests/test_dask.py`` checks
   that bit for bit), so the 1-worker run is the single-machine reference, in
   the same run. Reported: rows/s of the pass, test accuracy on the CoNLL-2000
   test tokens, the pickled model size (what each worker sends and receives per
   pass) and the time of the mixing step.
2. **Taggers on CoNLL-2000 chunking**, 2 workers against the plain tagger
   fitted in this process with the same passes: chunk F1 (conlleval) on the
   test set, and seconds per pass.
3. **Regression, one pass, 1 worker against 2** (``--regression psa,sgd``):
   the NYC flights training rows (``_datasets.flights``: 8,375 one-hot
   columns, target ``arr_delay``) replicated ``--regression-replicate``
   times and shuffled, made on the workers as the linear task's; rows/s of
   the pass and test RMSE, beside ``PSARegressor()`` / ``PlainSGDRegressor(
   max_iter=1)`` fitted in this process on the same rows (the single-machine
   model).

Usage::

    python benchmarks/bench_dask.py [--replicate 15] [--block-rows 200000]
        [--linear psa,sgd,sgdqn] [--taggers sgd,asf,psa] [--tagger-passes 3]
        [--regression psa,sgd] [--regression-replicate 4]

Needs ``pip install ".[dask,benchmark]"`` and ``../shared/data``.
"""
import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
N_FEATURES = 2 ** 20
SEED = 0


# ---- data, made on the workers ------------------------------------------------------
_CACHE = {}


def _hashed_conll(split):
    """CoNLL-2000 tokens hashed to 2**20 columns; label 1 inside a noun phrase.
    Cached per process (each worker hashes the training split once)."""
    if split not in _CACHE:
        from _datasets import _csr32, chunking_token_features, read_conll2000
        from sklearn.feature_extraction import FeatureHasher
        hasher = FeatureHasher(n_features=N_FEATURES, input_type="string",
                               alternate_sign=False)
        sents = read_conll2000(split)
        feats = [chunking_token_features(s, i) for s in sents for i in range(len(s))]
        y = np.array([int(tok[2].endswith("-NP")) for s in sents for tok in s])
        _CACHE[split] = (_csr32(hasher.transform(feats)), y)
    return _CACHE[split]


def conll_block(i, block_rows, n_rows):
    """Rows ``[i * block_rows, ...)`` of the training tokens replicated to ``n_rows``
    and shuffled (one permutation, the same on every worker)."""
    X, y = _hashed_conll("train")
    perm = np.random.RandomState(SEED).permutation(n_rows)
    idx = perm[i * block_rows:min(n_rows, (i + 1) * block_rows)] % X.shape[0]
    return X[idx], y[idx]


def _flights():
    if "flights" not in _CACHE:
        from _datasets import flights
        _CACHE["flights"] = flights()
    return _CACHE["flights"]


def flights_block(i, block_rows, n_rows):
    """Rows ``[i * block_rows, ...)`` of flights' training rows replicated to
    ``n_rows`` and shuffled (one permutation, the same on every worker)."""
    X, y = _flights()[:2]
    perm = np.random.RandomState(SEED).permutation(n_rows)
    idx = perm[i * block_rows:min(n_rows, (i + 1) * block_rows)] % X.shape[0]
    return X[idx], y[idx]


def chunking_part(k, n_parts):
    """Partition ``k`` of CoNLL-2000 chunking's training sentences as
    ``(token feature dicts, chunk tags)`` pairs."""
    from bench_tagger import crfpp_chunking_features, load_conll2000
    sents = load_conll2000("train")[k::n_parts]
    return [(crfpp_chunking_features(s), [t[2] for t in s]) for s in sents]


# ---- runs ----------------------------------------------------------------------------
def cluster(n_workers):
    from distributed import Client, LocalCluster
    lc = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0")
    return lc, Client(lc)


def linear_rows(me, n_rows, block_rows, make=None, n_features=N_FEATURES, y_dtype=np.int64):
    import dask
    import dask.array as da
    import scipy.sparse as sp
    make = me.conll_block if make is None else make
    n_blocks = -(-n_rows // block_rows)
    blocks = [dask.delayed(make, nout=2)(i, block_rows, n_rows) for i in range(n_blocks)]
    sizes = [min(block_rows, n_rows - i * block_rows) for i in range(n_blocks)]
    Xd = da.concatenate([da.from_delayed(b[0], shape=(n, n_features), dtype=np.float64,
                                         meta=sp.csr_matrix((0, n_features)))
                         for b, n in zip(blocks, sizes)])
    yd = da.concatenate([da.from_delayed(b[1], shape=(n,), dtype=y_dtype)
                         for b, n in zip(blocks, sizes)])
    return Xd, yd


REGRESSORS = {
    "psa": lambda: __import__("sklearn_secondorder").PSARegressor(random_state=0),
    "sgd": lambda: __import__("sklearn_secondorder").PlainSGDRegressor(
        max_iter=1, random_state=0),
}


def run_regression(me, names, n_rows, block_rows):
    """Regression part: the single-machine fit here, then 1 and 2 workers."""
    import scipy.sparse as sp

    from sklearn_secondorder.dask import ParameterMixing
    Xtr, _, Xte, yte = _flights()
    d = Xtr.shape[1]
    blocks = [flights_block(i, block_rows, n_rows) for i in range(-(-n_rows // block_rows))]
    X_all = sp.vstack([b[0] for b in blocks], format="csr")
    y_all = np.concatenate([b[1] for b in blocks])
    del blocks
    out = []
    for name in names:
        tic, cpu = time.perf_counter(), time.process_time()
        alone = REGRESSORS[name]().fit(X_all, y_all)
        out.append({"method": name, "workers": "this process", "rows_per_s":
                    n_rows / (time.perf_counter() - tic), "cpu_s": time.process_time() - cpu,
                    "test_rmse": float(np.sqrt(np.mean((alone.predict(Xte) - yte) ** 2)))})
        print(out[-1], flush=True)
    del X_all, y_all
    for n_workers in (1, 2):
        lc, client = cluster(n_workers)
        try:
            Xd, yd = linear_rows(me, n_rows, block_rows, me.flights_block, d, np.float64)
            for name in names:
                model = ParameterMixing(REGRESSORS[name](), max_iter=1).fit(Xd, yd)
                pred = model.estimator_.predict(Xte)
                out.append({"method": name, "workers": model.n_workers_,
                            "rows_per_s": n_rows / model.pass_seconds_[0],
                            "cpu_s": max(model.worker_cpu_seconds_[0]),
                            "test_rmse": float(np.sqrt(np.mean((pred - yte) ** 2)))})
                print(out[-1], flush=True)
        finally:
            client.close()
            lc.close()
    return out


LINEAR = {
    "psa": lambda: __import__("sklearn_secondorder").PSAClassifier(random_state=0),
    "sgd": lambda: __import__("sklearn_secondorder").PlainSGDClassifier(
        max_iter=1, random_state=0),
    "sgdqn": lambda: __import__("sklearn_secondorder").SGDQNLinearSVC(
        max_iter=1, random_state=0),
}


def run_linear(me, names, n_rows, block_rows):
    from sklearn_secondorder.dask import ParameterMixing
    Xte, yte = _hashed_conll("test")
    out = []
    for n_workers in (1, 2):
        lc, client = cluster(n_workers)
        try:
            Xd, yd = linear_rows(me, n_rows, block_rows)
            for name in names:
                tic = time.perf_counter()
                model = ParameterMixing(LINEAR[name](), max_iter=1).fit(Xd, yd, classes=[0, 1])
                wall = time.perf_counter() - tic
                row = {"method": name, "workers": model.n_workers_, "rows": n_rows,
                       "pass_s": model.pass_seconds_[0],
                       "rows_per_s": n_rows / model.pass_seconds_[0], "fit_s": wall,
                       "worker_s": max(model.worker_seconds_[0]),
                       "worker_cpu_s": max(model.worker_cpu_seconds_[0]),
                       "transfer_s": model.pass_seconds_[0] - max(model.worker_seconds_[0]),
                       "mix_s": model.mix_seconds_[0] if n_workers > 1 else 0.0,
                       "model_MB": model.model_bytes_ / 2 ** 20,
                       "test_acc": 100 * model.estimator_.score(Xte, yte),
                       "resolved": model.resolved_params_}
                print(row, flush=True)
                out.append(row)
        finally:
            client.close()
            lc.close()
    return out


TAGGERS = {
    "sgd": lambda n: __import__("sklearn_secondorder").SGDSequenceTagger(
        max_iter=n, random_state=0),
    "asf": lambda n: __import__("sklearn_secondorder").ASFSequenceTagger(
        max_iter=n, random_state=0),
    "psa": lambda n: __import__("sklearn_secondorder").PSASequenceTagger(
        max_iter=n, random_state=0),
}


def run_taggers(me, names, n_passes, n_parts=4):
    import dask
    import dask.bag as db
    from bench_tagger import crfpp_chunking_features, load_conll2000

    from sklearn_secondorder.dask import ParameterMixing
    from sklearn_secondorder.metrics import chunk_f1_score
    train, test = load_conll2000("train"), load_conll2000("test")
    Xtr, ytr = [crfpp_chunking_features(s) for s in train], [[t[2] for t in s] for s in train]
    Xte, yte = [crfpp_chunking_features(s) for s in test], [[t[2] for t in s] for s in test]
    out = []
    lc, client = cluster(2)
    try:
        bag = db.from_delayed([dask.delayed(me.chunking_part)(k, n_parts)
                               for k in range(n_parts)])
        for name in names:
            tic = time.perf_counter()
            model = ParameterMixing(TAGGERS[name](n_passes)).fit(bag)
            wall = time.perf_counter() - tic
            tic = time.perf_counter()
            single = TAGGERS[name](n_passes).fit(Xtr, ytr)
            single_fit = time.perf_counter() - tic
            row = {"method": name, "passes": n_passes, "workers": model.n_workers_,
                   "f1_mixed": 100 * chunk_f1_score(yte, model.estimator_.predict(Xte)),
                   "f1_single": 100 * chunk_f1_score(yte, single.predict(Xte)),
                   "s_per_pass_mixed": float(np.mean(model.pass_seconds_)),
                   "worker_s": float(np.mean([max(w) for w in model.worker_seconds_])),
                   "worker_cpu_s": float(np.mean([max(w) for w in model.worker_cpu_seconds_])),
                   "s_per_pass_single": float(np.mean(single.pass_seconds_)),
                   "mix_s": float(np.mean(model.mix_seconds_)),
                   "model_MB": model.model_bytes_ / 2 ** 20, "fit_s": wall,
                   "single_fit_s": single_fit, "eta0_mixed": model.estimator_.eta0_,
                   "eta0_single": single.eta0_}
            print(row, flush=True)
            out.append(row)
    finally:
        client.close()
        lc.close()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicate", type=int, default=15,
                        help="copies of the 211,727 training tokens (15: 3.18M rows)")
    parser.add_argument("--block-rows", type=int, default=200_000)
    parser.add_argument("--linear", default="psa,sgd,sgdqn")
    parser.add_argument("--taggers", default="sgd,asf,psa")
    parser.add_argument("--tagger-passes", type=int, default=3)
    parser.add_argument("--regression", default="",
                        help="regressors of the regression part (psa,sgd; default: none)")
    parser.add_argument("--regression-replicate", type=int, default=4,
                        help="copies of flights' 261,876 training rows (4: 1.05M rows)")
    args = parser.parse_args()
    # the workers import this module (and _datasets, bench_tagger) by name
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    sys.path.insert(0, str(HERE))
    import bench_dask as me
    from _common import print_table
    if args.linear:
        n_rows = 211_727 * args.replicate
        rows = run_linear(me, args.linear.split(","), n_rows, args.block_rows)
        print(f"\nLinear, one pass over {n_rows:,} rows (2**20 hashed columns):")
        for r in rows:
            # the pass if each worker had its core: its CPU time, plus the
            # transfers and the mixing step as measured
            r["cpu_rows_per_s"] = n_rows / (r["worker_cpu_s"] + r["transfer_s"] + r["mix_s"])
        print_table(rows, ["method", "workers", "pass_s", "worker_s", "worker_cpu_s",
                           "transfer_s", "mix_s", "rows_per_s", "cpu_rows_per_s", "test_acc",
                           "model_MB", "fit_s"])
        for name in args.linear.split(","):
            r1, r2 = [r for r in rows if r["method"] == name]
            print(f"  {name}: 2 workers / 1 worker rows/s = "
                  f"{r2['rows_per_s'] / r1['rows_per_s']:.2f}x (wall), "
                  f"{r2['cpu_rows_per_s'] / r1['cpu_rows_per_s']:.2f}x (CPU), test accuracy "
                  f"{r2['test_acc'] - r1['test_acc']:+.2f} points")
    if args.regression:
        n_rows = 261_876 * args.regression_replicate
        rows = run_regression(me, args.regression.split(","), n_rows, args.block_rows)
        print(f"\nRegression, one pass over {n_rows:,} flights rows:")
        print_table(rows, ["method", "workers", "rows_per_s", "cpu_s", "test_rmse"])
        for name in args.regression.split(","):
            alone, r1, r2 = [r for r in rows if r["method"] == name]
            print(f"  {name}: 2 workers / 1 worker rows/s = "
                  f"{r2['rows_per_s'] / r1['rows_per_s']:.2f}x; test RMSE 2 workers / "
                  f"single machine = {r2['test_rmse'] / alone['test_rmse']:.4f}")
    if args.taggers:
        rows = run_taggers(me, args.taggers.split(","), args.tagger_passes)
        print(f"\nTaggers on CoNLL-2000 chunking, {args.tagger_passes} passes:")
        print_table(rows, ["method", "workers", "f1_mixed", "f1_single", "s_per_pass_mixed",
                           "worker_s", "worker_cpu_s", "s_per_pass_single", "mix_s",
                           "model_MB"])


if __name__ == "__main__":
    main()
