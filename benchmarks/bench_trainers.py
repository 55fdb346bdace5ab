"""CRFsuite's trainers on our CRF core against CRFsuite's own, same run.

CoNLL-2000 chunking with the CRF++ chunking template (``bench_tagger.py``'s
``crfpp_chunking_features``; its ``U..`` attributes play the tutorial's role,
and there is no extra bias attribute, so both sides fit no intercept).
Rows:

* ``lbfgs`` c1=0.1, c2=0.1, 100 iterations: ``LBFGSSequenceTagger(alpha=(c1 +
  2 c2) / n, penalty='elasticnet', l1_ratio=c1 / (c1 + 2 c2))`` (OWL-QN) vs
  ``sklearn_crfsuite.CRF(algorithm='lbfgs')``. The objectives are compared in
  CRFsuite's scaling (``-sum log p + c1 |w|_1 + c2 |w|^2``): CRFsuite's from its
  training log, ours ``n * objective_``, and both re-evaluated by our objective
  at CRFsuite's weights (mapped into our layout) as a cross-check.
* ``lbfgs-l2``: CRFsuite's defaults c1=0, c2=1 (plain L-BFGS, More-Thuente
  line search), 100 iterations (not in the default run: ``--only lbfgs-l2``).
* ``ap``, ``pa``, ``arow``, 10 passes: ``AveragedPerceptronSequenceTagger``,
  ``PassiveAggressiveSequenceTagger``, ``AROWSequenceTagger`` vs CRFsuite's.

Times, all measured in this process: ``fit`` is the end-to-end ``fit`` wall
time and ``fit CPU`` its process CPU time (input conversion included on both
sides: sklearn-crfsuite's item building, our feature-dict vectorisation);
``train CPU`` is the trainer loop's CPU time: CRFsuite's per-iteration
seconds from its log (``clock()``, CPU time), ours ``fit CPU`` minus the CPU
time of our input conversion measured alone. On a shared machine wall times
include waiting for a core, so the CPU columns are the fair trainer-to-trainer
comparison; the wall columns are what a user waits, in the same conditions.

Run ``python benchmarks/bench_trainers.py`` (``--quick``: 1500 training
sentences; ``--only lbfgs,ap``).
"""
import argparse
import json
import time

import numpy as np
from bench_tagger import RESULTS, make_task
from bench_tagger import f1 as chunk_f1
from sklearn.base import clone

from sklearn_secondorder import (
    AROWSequenceTagger,
    AveragedPerceptronSequenceTagger,
    LBFGSSequenceTagger,
    PassiveAggressiveSequenceTagger,
)
from sklearn_secondorder._core._crf_infer import objective
from sklearn_secondorder._core._weights import ScaledWeights


def run_crfsuite(algorithm, Xtr, ytr, Xte, yte, **params):
    import sklearn_crfsuite
    crf = sklearn_crfsuite.CRF(algorithm=algorithm, **params)
    t0, c0 = time.perf_counter(), time.process_time()
    crf.fit(Xtr, ytr)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    its = crf.training_log_.iterations
    return {"f1": chunk_f1(yte, crf.predict(Xte)), "fit": wall, "fit_cpu": cpu,
            "train_cpu": float(sum(it["time"] for it in its)),
            "train": float(sum(it["time"] for it in its)), "iterations": len(its),
            "loss": float(its[-1]["loss"]) if its else float("nan"),
            "n_params": len(crf.state_features_) + len(crf.transition_features_),
            "crf": crf}


def run_ours(est, Xtr, ytr, Xte, yte):
    c0 = time.process_time()
    clone(est)._to_data(Xtr, ytr, fitting=True, first=True)
    conversion_cpu = time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(Xtr, ytr)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"f1": chunk_f1(yte, est.predict(Xte)), "fit": wall, "fit_cpu": cpu,
            "train_cpu": cpu - conversion_cpu,
            "train": float(np.sum(est.pass_seconds_)), "iterations": est.n_iter_,
            "n_params": int(np.count_nonzero(est._model)), "est": est}


def crfsuite_weights_in_our_layout(crf, est):
    """CRFsuite's weights as our flat vector (pairs CRFsuite lacks are 0)."""
    col = {a: j for j, a in enumerate(est.attributes_)}
    lab = {c: i for i, c in enumerate(est.classes_.tolist())}
    A, H = len(col), len(lab)
    w = np.zeros((A + H + 1) * H)
    for (attr, label), v in crf.state_features_.items():
        attr = attr.replace(":", "=", 1)   # sklearn-crfsuite's "key:value", ours "key=value"
        if attr in col:
            w[col[attr] * H + lab[label]] = v
    for (a, b), v in crf.transition_features_.items():
        w[A * H + lab[a] * H + lab[b]] = v
    return w


def our_objective(est, Xtr, ytr, w, c1, c2):
    """``-sum log p + c1 |w|_1 + c2 |w|^2`` by our Cython pass."""
    batch = est._to_data(Xtr)
    labels = np.searchsorted(est.classes_, np.concatenate([np.asarray(s) for s in ytr]))
    ds = batch.sequence_data(est._state.crf.n_attributes, labels.astype(np.int32))
    n = len(ytr)
    # (the core's dense pass: mean -log p + alpha/2 |w|^2 with alpha = 2 c2 / n)
    f = n * objective(ds, ScaledWeights(np.ascontiguousarray(w), est.classes_.size),
                      2 * c2 / n)
    return f + c1 * np.abs(w).sum()


def bench_lbfgs(data, c1, c2, n_iter):
    Xtr, ytr, Xte, yte = data
    n = len(Xtr)
    ref = run_crfsuite("lbfgs", Xtr, ytr, Xte, yte, c1=c1, c2=c2, max_iterations=n_iter)
    est = LBFGSSequenceTagger(alpha=(c1 + 2 * c2) / n, penalty="elasticnet",
                              l1_ratio=c1 / (c1 + 2 * c2), max_iter=n_iter,
                              fit_intercept=False)
    ours = run_ours(est, Xtr, ytr, Xte, yte)
    ours["loss"] = n * est.objective_
    ours["stop"] = est.stop_reason_
    ours["n_evals"] = est.n_evals_
    ref["loss_by_ours"] = our_objective(est, Xtr, ytr,
                                        crfsuite_weights_in_our_layout(ref["crf"], est), c1, c2)
    return ours, ref


ONLINE = {
    "ap": (AveragedPerceptronSequenceTagger, {}),
    "pa": (PassiveAggressiveSequenceTagger, {}),
    "arow": (AROWSequenceTagger, {}),
}


def bench_online(name, data, n_passes):
    Xtr, ytr, Xte, yte = data
    ref = run_crfsuite(name, Xtr, ytr, Xte, yte, max_iterations=n_passes)
    cls, params = ONLINE[name]
    est = cls(max_iter=n_passes, fit_intercept=False, random_state=0, **params)
    return run_ours(est, Xtr, ytr, Xte, yte), ref


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="lbfgs,ap,pa,arow")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--passes", type=int, default=10)
    args = ap.parse_args(argv)
    data = make_task("chunking", args.quick)
    print(f"CoNLL-2000 chunking: {len(data[0])} training sentences, {len(data[2])} test")
    rows = []
    for name in args.only.split(","):
        if name == "lbfgs":
            ours, ref = bench_lbfgs(data, 0.1, 0.1, args.iterations)
        elif name == "lbfgs-l2":
            ours, ref = bench_lbfgs(data, 0.0, 1.0, args.iterations)
        else:
            ours, ref = bench_online(name, data, args.passes)
        row = {"trainer": name, "f1_ours": ours["f1"], "f1_crfsuite": ref["f1"],
               "train_cpu_ours": ours["train_cpu"], "train_cpu_crfsuite": ref["train_cpu"],
               "fit_ours": ours["fit"], "fit_crfsuite": ref["fit"],
               "fit_cpu_ours": ours["fit_cpu"], "fit_cpu_crfsuite": ref["fit_cpu"],
               "train_wall_ours": ours["train"],
               "iter_ours": ours["iterations"], "iter_crfsuite": ref["iterations"],
               "nonzero_ours": ours["n_params"], "features_crfsuite": ref["n_params"]}
        if name.startswith("lbfgs"):
            row.update(obj_ours=ours["loss"], obj_crfsuite=ref["loss"],
                       obj_crfsuite_by_ours=ref["loss_by_ours"],
                       obj_rel_diff=(ours["loss"] - ref["loss"]) / ref["loss"],
                       stop_ours=ours["stop"], evals_ours=ours["n_evals"])
        row["train_cpu_ratio"] = row["train_cpu_ours"] / row["train_cpu_crfsuite"]
        row["fit_ratio"] = row["fit_ours"] / row["fit_crfsuite"]
        row["fit_cpu_ratio"] = row["fit_cpu_ours"] / row["fit_cpu_crfsuite"]
        row["f1_diff"] = row["f1_ours"] - row["f1_crfsuite"]
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    print("\n| trainer | F1 ours | F1 CRFsuite | diff | train CPU s ours / CRFsuite | ratio "
          "| fit wall s ours / CRFsuite | ratio | fit CPU ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['trainer']} | {r['f1_ours']:.2f} | {r['f1_crfsuite']:.2f} | "
              f"{r['f1_diff']:+.2f} | {r['train_cpu_ours']:.1f} / {r['train_cpu_crfsuite']:.1f} | "
              f"{r['train_cpu_ratio']:.2f} | {r['fit_ours']:.1f} / {r['fit_crfsuite']:.1f} | "
              f"{r['fit_ratio']:.2f} | {r['fit_cpu_ratio']:.2f} |")
    for r in rows:
        if r["trainer"].startswith("lbfgs"):
            print(f"\n{r['trainer']} objective (CRFsuite's scaling): ours {r['obj_ours']:.4f}, "
                  f"CRFsuite "
                  f"{r['obj_crfsuite']:.4f} (our pass at CRFsuite's weights: "
                  f"{r['obj_crfsuite_by_ours']:.4f}); relative difference "
                  f"{100 * r['obj_rel_diff']:+.4f}%; ours stopped by {r['stop_ours']} after "
                  f"{r['iter_ours']} iterations, {r['evals_ours']} evaluations")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"bench_trainers_{'_'.join(r['trainer'] for r in rows)}.json").write_text(
        json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
