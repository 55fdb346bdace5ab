"""Sequence taggers on CoNLL-2000 chunking and base NP, against CRFsuite.

Features: the CRF++ chunking template (``CRF++-0.58/example/chunking/template``):
words at offsets -2..2, the word bigrams w[-1]/w[0] and w[0]/w[1], POS tags at
-2..2, the POS bigrams (-2,-1), (-1,0), (0,1), (1,2) and trigrams (-2,-1,0),
(-1,0,1), (0,1,2), with CRF++'s boundary symbols ``_B-1``, ``_B+1``, ... and
label-bigram transitions. Base NP keeps the NP chunks only (other tags -> O).

Rows (all on the same features and the same L2 objective):

* ``ASF``, ``SGD``, ``ASGD`` -- ``ASFSequenceTagger`` and
  ``SGDSequenceTagger(average=False/True)`` on this package's Cython CRF core,
  evaluated after every pass (the averaged model for ASF and ASGD);
* ``PSA`` -- ``PSASequenceTagger`` (paper defaults: b=10, eta0=0.1), one pass;
* ``ASF latent`` -- ``ASFSequenceTagger(n_latent=2)`` (DPLVM, two hidden
  states per label);
* ``crfsuite l2sgd`` and ``crfsuite lbfgs`` -- sklearn-crfsuite 0.5 (CRFsuite).

A second table follows Table 2 of the PSA paper (Hsu et al. 2009): SGD
(1 pass), PSA (1 pass), ASF (passes until within 0.2 F1 of L-BFGS, or all
passes), CRFsuite L-BFGS (to convergence): training seconds and F1. Tasks:
``chunking``, ``basenp`` (CoNLL-2000) and ``bc2gm`` (BioCreative II gene
mention, entity F1 with a word/orthographic feature set).

The L2 strengths match: CRFsuite minimises ``-sum_i log p(y_i|x_i) + c2 ||w||^2``
(``crf1de_objective_and_gradients`` + ``lbfgs``'s ``c2 * norm2``; l2sgd uses
``lambda = 2 c2 / N`` per instance), ours ``alpha/2 ||w||^2 + mean_i -log p``;
dividing CRFsuite's by N gives ``alpha = 2 c2 / N``.

Seconds per pass are the trainers' own timings of the training loop only
(our ``pass_seconds_``; CRFsuite's per-iteration ``time`` in the training log),
measured in the same run on the same machine. End-to-end ``fit`` times (input
conversion and step-size calibration included) are reported separately.

Run ``python benchmarks/bench_tagger.py`` (``--quick`` for a small subset).
Results (table, JSON, plots) go to ``benchmarks/results/``.
"""
import argparse
import gzip
import json
import os
import time
from pathlib import Path

import numpy as np

from sklearn_secondorder import ASFSequenceTagger, PSASequenceTagger, SGDSequenceTagger
from sklearn_secondorder.metrics import chunk_f1_score

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SKSO_DATA", ROOT.parent / "shared" / "data"))
RESULTS = Path(os.environ.get("SKSO_RESULTS", ROOT / "benchmarks" / "results"))


# ---- data ------------------------------------------------------------------------
def load_conll2000(split):
    with gzip.open(DATA / "conll2000" / f"{split}.txt.gz", "rt") as f:
        blocks = f.read().strip().split("\n\n")
    return [[line.split() for line in b.splitlines()] for b in blocks]


def load_bc2gm(split):
    with gzip.open(DATA / "bc2gm" / f"{split}.tsv.gz", "rt") as f:
        blocks = f.read().strip().split("\n\n")
    return [[line.split("\t") for line in b.splitlines()] for b in blocks]


def base_np(tags):
    return [t if t.endswith("-NP") else "O" for t in tags]


def crfpp_chunking_features(sent):
    """CRF++'s chunking template on ``[word, pos, ...]`` tokens."""
    n = len(sent)

    def col(i, c):
        if i < 0:
            return f"_B{i}"
        if i >= n:
            return f"_B+{i - n + 1}"
        return sent[i][c]

    feats = []
    for i in range(n):
        w = {k: col(i + k, 0) for k in (-2, -1, 0, 1, 2)}
        p = {k: col(i + k, 1) for k in (-2, -1, 0, 1, 2)}
        d = {f"U0{k + 2}": w[k] for k in (-2, -1, 0, 1, 2)}
        d["U05"] = f"{w[-1]}/{w[0]}"
        d["U06"] = f"{w[0]}/{w[1]}"
        for k in (-2, -1, 0, 1, 2):
            d[f"U1{k + 2}"] = p[k]
        d["U15"] = f"{p[-2]}/{p[-1]}"
        d["U16"] = f"{p[-1]}/{p[0]}"
        d["U17"] = f"{p[0]}/{p[1]}"
        d["U18"] = f"{p[1]}/{p[2]}"
        d["U20"] = f"{p[-2]}/{p[-1]}/{p[0]}"
        d["U21"] = f"{p[-1]}/{p[0]}/{p[1]}"
        d["U22"] = f"{p[0]}/{p[1]}/{p[2]}"
        feats.append(d)
    return feats


def bc2gm_features(sent):
    """Words in a +-2 window, word bigrams, and simple orthographic features
    (prefixes/suffixes, shape) of the current word, as in gene-mention taggers."""
    n = len(sent)
    words = [t[0] for t in sent]

    def word(i):
        if i < 0:
            return f"_B{i}"
        if i >= n:
            return f"_B+{i - n + 1}"
        return words[i].lower()

    def shape(wd):
        s = "".join("A" if c.isupper() else "a" if c.islower() else "0" if c.isdigit()
                    else c for c in wd)
        out = []
        for c in s:
            if not out or out[-1] != c:
                out.append(c)
        return "".join(out)

    feats = []
    for i in range(n):
        wd = words[i]
        d = {f"w[{k}]": word(i + k) for k in (-2, -1, 0, 1, 2)}
        d["w[-1]/w[0]"] = f"{word(i - 1)}/{word(i)}"
        d["w[0]/w[1]"] = f"{word(i)}/{word(i + 1)}"
        d["shape"] = shape(wd)
        d["shape[-1]"] = shape(words[i - 1]) if i > 0 else "_B"
        d["shape[1]"] = shape(words[i + 1]) if i + 1 < n else "_B"
        for k in (2, 3, 4):
            d[f"pre{k}"] = wd[:k]
            d[f"suf{k}"] = wd[-k:]
        d["has_digit"] = any(c.isdigit() for c in wd)
        d["has_upper"] = any(c.isupper() for c in wd[1:])
        d["has_dash"] = "-" in wd
        feats.append(d)
    return feats


def make_task(name, quick):
    if name in ("chunking", "basenp"):
        train, test = load_conll2000("train"), load_conll2000("test")
        feat = crfpp_chunking_features
        tags = (lambda s: [t[2] for t in s]) if name == "chunking" else \
            (lambda s: base_np([t[2] for t in s]))
    elif name == "bc2gm":
        train, test = load_bc2gm("train"), load_bc2gm("test")
        feat = bc2gm_features
        tags = lambda s: [t[1] for t in s]  # noqa: E731
    else:
        raise ValueError(name)
    if quick:
        train, test = train[:1500], test[:500]
    Xtr, ytr = [feat(s) for s in train], [tags(s) for s in train]
    Xte, yte = [feat(s) for s in test], [tags(s) for s in test]
    return Xtr, ytr, Xte, yte


# ---- runners -----------------------------------------------------------------------
def f1(y, pred):
    return 100.0 * chunk_f1_score(y, pred)


def run_ours(label, make, Xtr, ytr, Xte, yte, n_passes, classes):
    """Pass-by-pass training via partial_fit; F1 of the exposed model after each."""
    est = make()
    rows = []
    wall = 0.0
    for p in range(1, n_passes + 1):
        t0 = time.perf_counter()
        est.partial_fit(Xtr, ytr, classes=classes)
        wall += time.perf_counter() - t0
        rows.append({"pass": p, "seconds": float(np.sum(est.pass_seconds_)),
                     "f1": f1(yte, est.predict(Xte))})
        print(f"  {label:<14} pass {p:>3}  train {rows[-1]['seconds']:7.2f}s  "
              f"F1 {rows[-1]['f1']:.2f}", flush=True)
    sec = np.asarray(est.pass_seconds_)
    return {"name": label, "curve": rows, "sec_per_pass": float(sec.mean()),
            "f1": rows[-1]["f1"], "passes": n_passes, "eta0": est.eta0_,
            "n_params": int(est._model.size), "estimator": est}


def run_end_to_end(make, Xtr, ytr, n_passes):
    est = make().set_params(max_iter=n_passes)
    t0 = time.perf_counter()
    est.fit(Xtr, ytr)
    return time.perf_counter() - t0


def crfsuite_iteration_times(crf):
    return [it["time"] for it in crf.training_log_.iterations]


def run_crfsuite(algorithm, Xtr, ytr, Xte, yte, c2, max_iterations, **extra):
    import sklearn_crfsuite
    crf = sklearn_crfsuite.CRF(algorithm=algorithm, c2=c2, max_iterations=max_iterations,
                               **extra)
    t0 = time.perf_counter()
    crf.fit(Xtr, ytr)
    wall = time.perf_counter() - t0
    times = crfsuite_iteration_times(crf)
    return {"f1": f1(yte, crf.predict(Xte)), "iterations": len(times),
            "train_seconds": float(np.sum(times)),
            "sec_per_pass": float(np.mean(times)) if times else float("nan"),
            "wall": wall, "n_params": len(crf.state_features_) + len(crf.transition_features_)}


# ---- main --------------------------------------------------------------------------
def plot(task, curves, refs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, rows in curves.items():
        axes[0].plot([r["pass"] for r in rows], [r["f1"] for r in rows], "o-", label=name)
        axes[1].plot([r["seconds"] for r in rows], [r["f1"] for r in rows], "o-", label=name)
    for name, (_, x_sec, val) in refs.items():
        axes[0].axhline(val, ls="--", lw=1, color="gray")
        axes[0].annotate(name, (1, val), fontsize=8, va="bottom")
        if x_sec is not None:
            axes[1].plot(x_sec, [val] * len(x_sec) if isinstance(x_sec, list) else val,
                         "s", label=name)
    axes[0].set_xlabel("passes over the training data")
    axes[1].set_xlabel("training seconds (trainer loop only)")
    for ax in axes:
        ax.set_ylabel("chunk F1 (%)")
        ax.grid(alpha=0.3)
    lo = min(min(r["f1"] for r in rows) for rows in curves.values())
    for ax in axes:
        ax.set_ylim(max(lo - 0.5, 0), None)
    axes[1].legend(fontsize=8)
    fig.suptitle(f"CoNLL-2000 {task}" if task != "bc2gm" else "BC2GM gene mention")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default="chunking,basenp")
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--c2", type=float, default=1.0,
                    help="CRFsuite's c2; ours uses alpha = 2 c2 / n_train")
    ap.add_argument("--quick", action="store_true", help="subsets (1500 / 500 sentences)")
    ap.add_argument("--no-lbfgs", action="store_true")
    ap.add_argument("--lbfgs-max-iter", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--psa-passes", type=int, default=1)
    ap.add_argument("--timing-rounds", type=int, default=3,
                    help="interleaved ASF / SGD / PSA / l2sgd timing rounds (2 passes each)")
    ap.add_argument("--latent-passes", type=int, default=0,
                    help="passes of ASFSequenceTagger(n_latent=2) (0: skip)")
    args = ap.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary = {}
    for task in args.tasks.split(","):
        t0 = time.perf_counter()
        Xtr, ytr, Xte, yte = make_task(task, args.quick)
        n = len(Xtr)
        alpha = 2.0 * args.c2 / n
        classes = sorted({t for s in ytr for t in s})
        print(f"\n== {task}: {n} train / {len(Xte)} test sequences, {len(classes)} labels, "
              f"c2={args.c2} <-> alpha={alpha:.4g}; features built in "
              f"{time.perf_counter() - t0:.1f}s", flush=True)
        common = dict(alpha=alpha, random_state=args.seed)
        ours = {
            "ASF": (lambda: ASFSequenceTagger(**common), args.passes),
            "SGD": (lambda: SGDSequenceTagger(**common), args.passes),
            "ASGD": (lambda: SGDSequenceTagger(average=True, **common), args.passes),
            "PSA": (lambda: PSASequenceTagger(**common), args.psa_passes),
        }
        if args.latent_passes:
            ours["ASF latent=2"] = (lambda: ASFSequenceTagger(n_latent=2, **common),
                                    args.latent_passes)
        res = {name: run_ours(name, make, Xtr, ytr, Xte, yte, n_p, classes)
               for name, (make, n_p) in ours.items()}
        ours = {name: make for name, (make, _) in ours.items()}
        e2e = run_end_to_end(ours["ASF"], Xtr, ytr, args.passes)
        print(f"  ASF fit(max_iter={args.passes}) end to end: {e2e:.1f}s", flush=True)

        cs = {}
        sgd_curve = []
        for k in sorted({1, 2, 3, 5, args.passes}):
            r = run_crfsuite("l2sgd", Xtr, ytr, Xte, yte, args.c2, k)
            sgd_curve.append({"pass": k, "seconds": r["train_seconds"], "f1": r["f1"]})
            print(f"  crfsuite l2sgd  {k:>3} epochs  train {r['train_seconds']:7.2f}s  "
                  f"F1 {r['f1']:.2f}  (fit wall {r['wall']:.1f}s)", flush=True)
        cs["crfsuite l2sgd"] = dict(r, curve=sgd_curve)
        r_all = run_crfsuite("l2sgd", Xtr, ytr, Xte, yte, args.c2, 2,
                             all_possible_states=True, all_possible_transitions=True)
        cs["crfsuite l2sgd (all states)"] = r_all
        print(f"  crfsuite l2sgd, all possible states: {r_all['sec_per_pass']:.3f}s/epoch, "
              f"{r_all['n_params']} weights", flush=True)
        if not args.no_lbfgs:
            r = run_crfsuite("lbfgs", Xtr, ytr, Xte, yte, args.c2, args.lbfgs_max_iter)
            cs["crfsuite lbfgs"] = r
            print(f"  crfsuite lbfgs  {r['iterations']} iterations  train "
                  f"{r['train_seconds']:.1f}s  F1 {r['f1']:.2f}", flush=True)

        # ---- interleaved timing rounds (robust to load drifting during the run)
        rounds = {"ASF": [], "SGD": [], "PSA": [], "crfsuite l2sgd": []}
        for _ in range(args.timing_rounds):
            for name in ("ASF", "SGD", "PSA"):
                est = ours[name]().set_params(max_iter=2).fit(Xtr, ytr)
                rounds[name].extend(est.pass_seconds_)
            r = run_crfsuite("l2sgd", Xtr, ytr, Xte[:1], yte[:1], args.c2, 2)
            rounds["crfsuite l2sgd"].append(r["sec_per_pass"])
        timing = {k: float(np.min(v)) for k, v in rounds.items() if v}
        print("  interleaved timing (min s/pass): " +
              ", ".join(f"{k} {v:.3f}" for k, v in timing.items()), flush=True)

        # ---- table
        ref_l2sgd = cs["crfsuite l2sgd"]["sec_per_pass"]
        lbfgs_f1 = cs.get("crfsuite lbfgs", {}).get("f1")
        lines = [f"\n{task}: F1 (%) and seconds per pass (same run, same features)",
                 f"{'method':<30}{'passes':>7}{'F1':>8}{'s/pass':>9}{'x l2sgd':>9}"
                 f"{'train s':>9}{'weights':>10}"]
        for name, r in res.items():
            lines.append(f"{name:<30}{r['passes']:>7}{r['f1']:>8.2f}{r['sec_per_pass']:>9.3f}"
                         f"{r['sec_per_pass'] / ref_l2sgd:>9.2f}"
                         f"{r['curve'][-1]['seconds']:>9.1f}{r['n_params']:>10}")
        for name, r in cs.items():
            f1s = f"{r['f1']:>8.2f}"
            lines.append(f"{name:<30}{r['iterations']:>7}{f1s}{r['sec_per_pass']:>9.3f}"
                         f"{r['sec_per_pass'] / ref_l2sgd:>9.2f}{r['train_seconds']:>9.1f}"
                         f"{r['n_params']:>10}")
        if timing:
            lines.append("interleaved rounds, min s/pass: " + ", ".join(
                f"{k} {v:.3f}" for k, v in timing.items()) +
                f"; ASF / l2sgd = {timing['ASF'] / timing['crfsuite l2sgd']:.2f}, "
                f"SGD / l2sgd = {timing['SGD'] / timing['crfsuite l2sgd']:.2f}, "
                f"PSA / SGD = {timing['PSA'] / timing['SGD']:.2f}")
        asf = res["ASF"]
        if lbfgs_f1 is not None:
            within = [row["pass"] for row in asf["curve"] if lbfgs_f1 - row["f1"] <= 0.2]
            lines.append(f"ASF within 0.2 F1 of L-BFGS ({lbfgs_f1:.2f}) after pass: "
                         f"{within[0] if within else 'not within ' + str(args.passes)}")
        lines.append(f"ASF fit(max_iter={args.passes}) end to end {e2e:.1f}s vs crfsuite l2sgd "
                     f"fit({args.passes} epochs) {cs['crfsuite l2sgd']['wall']:.1f}s "
                     "(input conversion and calibration included)")
        # PSA paper, Table 2 layout
        lines.append(f"\n{task}: PSA paper Table 2 layout (training seconds, F1 %)")
        lines.append(f"{'method (pass)':<30}{'time':>9}{'F1':>8}")
        sgd1 = res["SGD"]["curve"][0]
        lines.append(f"{'SGD (1)':<30}{sgd1['seconds']:>9.2f}{sgd1['f1']:>8.2f}")
        psa1 = res["PSA"]["curve"][0]
        lines.append(f"{'PSA (1)':<30}{psa1['seconds']:>9.2f}{psa1['f1']:>8.2f}")
        target = lbfgs_f1 - 0.2 if lbfgs_f1 is not None else max(r["f1"] for r in asf["curve"])
        conv = next((row for row in asf["curve"] if row["f1"] >= target), asf["curve"][-1])
        lines.append(f"{'ASF (' + str(conv['pass']) + ')':<30}{conv['seconds']:>9.2f}"
                     f"{conv['f1']:>8.2f}")
        if "ASF latent=2" in res:
            lat = res["ASF latent=2"]["curve"][-1]
            lines.append(f"{'ASF latent=2 (' + str(lat['pass']) + ')':<30}{lat['seconds']:>9.2f}"
                         f"{lat['f1']:>8.2f}")
            same = next(row for row in asf["curve"] if row["pass"] == lat["pass"])
            lines.append(f"{'ASF plain (' + str(lat['pass']) + ')':<30}{same['seconds']:>9.2f}"
                         f"{same['f1']:>8.2f}")
        if "crfsuite lbfgs" in cs:
            r = cs["crfsuite lbfgs"]
            lines.append(f"{'L-BFGS (' + str(r['iterations']) + ' it.)':<30}"
                         f"{r['train_seconds']:>9.2f}{r['f1']:>8.2f}")
        table = "\n".join(lines)
        print(table, flush=True)

        curves = {name: r["curve"] for name, r in res.items()}
        curves["crfsuite l2sgd"] = sgd_curve
        refs = {}
        if lbfgs_f1 is not None:
            refs["crfsuite lbfgs"] = (None, [cs["crfsuite lbfgs"]["train_seconds"]], lbfgs_f1)
        plot(task, curves, refs, RESULTS / f"tagger_{task}.png")
        summary[task] = {
            "alpha": alpha, "c2": args.c2, "n_train": n, "table": table,
            "ours": {k: {kk: vv for kk, vv in v.items() if kk != "estimator"}
                     for k, v in res.items()},
            "crfsuite": cs, "asf_end_to_end": e2e, "timing_rounds": rounds,
        }
    with open(RESULTS / "tagger.json", "w") as f:
        json.dump(summary, f, indent=1, default=float)
    with open(RESULTS / "tagger.txt", "w") as f:
        f.write("\n\n".join(v["table"] for v in summary.values()) + "\n")
    print(f"\nresults in {RESULTS}", flush=True)


if __name__ == "__main__":
    main()
