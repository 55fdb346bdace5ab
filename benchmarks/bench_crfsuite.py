"""sklearn_secondorder.crfsuite.CRF against sklearn_crfsuite.CRF, at the defaults, on four sets.

The default run: CoNLL-2000 chunking and base NP (NP chunks only) with the
sklearn-crfsuite tutorial's ``word2features``, CoNLL-2003 English NER
(train / testb) and BC2GM gene mentions (train / test) with a generic NER
template (``ner_features``), all from ``../shared/data``. On each set, in
one run: sklearn-crfsuite's ``CRF()`` (L-BFGS to CRFsuite's stopping rule,
``c1=0``, ``c2=1``), ours ``CRF()``, ``CRF(algorithm='lbfgs')``,
``ASFSequenceTagger()`` and ``PSASequenceTagger()`` at their defaults: test
F1 (conlleval), ``fit`` wall and CPU seconds (input conversion included; the
feature dicts are built before) and their ratios to sklearn-crfsuite's. Then
``CRF(algorithm='asf')`` scored after every pass (``--sweep`` passes,
``--sweep-seeds`` shuffles), on which the default's passes were chosen.

    python benchmarks/bench_crfsuite.py                 # the four sets (~25 min)
    python benchmarks/bench_crfsuite.py --quick         # 1500 / 500 sentences
    python benchmarks/bench_crfsuite.py per-pass --set bc2gm --passes 10
    python benchmarks/bench_crfsuite.py --tutorial      # the earlier run (below)

``per-pass``: F1 and objective after every pass on one set, CRFsuite's
objective and features: ASF with the period's average and the calibrated
step (now), with all iterates' average and half the step (before) and the
two mixed, PSA, and L-BFGS's objective by iteration.

``--tutorial``: the tutorial flow on CoNLL-2000 against the tutorial's
``sklearn_crfsuite.CRF(algorithm='lbfgs', c1=0.1, c2=0.1,
max_iterations=100, all_possible_transitions=True)``: chunk F1, non-zero
state / transition weights, model-file and pickle sizes and ``fit`` wall
time, then every algorithm's F1 after ``max_iterations = k`` passes
(``--rounds`` timing rounds; ``--psa-seeds N`` fits the one-pass ``psa``
with ``random_state`` 0..N-1).
"""
import argparse
import gzip
import pickle
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from sklearn_secondorder.crfsuite import CRF, DEFAULT_ALGORITHM, available_algorithms  # noqa: E402
from sklearn_secondorder.metrics import chunk_f1_score  # noqa: E402
from sklearn_secondorder.sequence import ASFSequenceTagger  # noqa: E402

SHARED = HERE.parent.parent / "shared" / "data"
DATA = SHARED / "conll2000"

# the tutorial's features, from the tutorial example itself (one copy)
sys.path.insert(0, str(HERE.parent / "examples"))
from crfsuite_tutorial import sent2features, sent2labels  # noqa: E402


def read(split):
    with gzip.open(DATA / f"{split}.txt.gz", "rt") as f:
        blocks = f.read().strip().split("\n\n")
    return [[tuple(line.split()) for line in b.splitlines()] for b in blocks]


# ---- the four sets of the default's choice -----------------------------------------
def _blocks(path, sep=None):
    with gzip.open(path, "rt") as f:
        blocks = f.read().strip().split("\n\n")
    return [[tuple(line.split(sep)) for line in b.splitlines()] for b in blocks]


def read_conll2003(split):
    """CoNLL-2003 English sentences of ``(word, pos, chunk, ner)`` tokens (the
    ``-DOCSTART-`` lines dropped); the tags are IOB1, as distributed."""
    sents = _blocks(SHARED / "conll2003" / f"eng.{split}.gz")
    return [s for s in sents if s and s[0][0] != "-DOCSTART-"]


def read_bc2gm(split):
    """BC2GM sentences of ``(word, tag)`` tokens, tags ``B-GENE`` / ``I-GENE`` / ``O``."""
    return _blocks(SHARED / "bc2gm" / f"{split}.tsv.gz", "\t")


def word_shape(word):
    """``Xxdd``-style shape: upper ``X``, lower ``x``, digit ``d``, others kept."""
    return "".join("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit()
                   else c for c in word)


def ner_features(words):
    """The generic NER template of a sentence: every token's word, lowercase,
    shape, 2- and 3-letter prefixes and suffixes, the lowercase words and shapes
    at -2..+2, and ``bias``."""
    n = len(words)
    lower = [w.lower() for w in words]
    shape = [word_shape(w) for w in words]
    out = []
    for i, w in enumerate(words):
        d = {"bias": 1.0, "w": w, "lw": lower[i], "sh": shape[i], "p2": w[:2], "p3": w[:3],
             "s2": w[-2:], "s3": w[-3:]}
        for k in (-2, -1, 1, 2):
            j = i + k
            if 0 <= j < n:
                d[f"{k:+d}:lw"] = lower[j]
                d[f"{k:+d}:sh"] = shape[j]
            else:
                d[f"{k:+d}:lw"] = d[f"{k:+d}:sh"] = "BOS" if j < 0 else "EOS"
        out.append(d)
    return out


def base_np(tags):
    """Base NP: the NP chunks kept, every other chunk tag ``O``."""
    return [t if t.endswith("-NP") else "O" for t in tags]


def load_set(name, quick=False):
    """``(X_train, y_train, X_test, y_test)`` of ``'chunking'``, ``'basenp'``
    (CoNLL-2000 with the tutorial's features), ``'conll2003'`` (English NER,
    test set testb) or ``'bc2gm'`` (gene mentions, test set test), the last
    two with the generic NER template (``ner_features``)."""
    if name in ("chunking", "basenp"):
        train, test = read("train"), read("test")
        tags = (lambda s: [t[2] for t in s]) if name == "chunking" else \
            (lambda s: base_np([t[2] for t in s]))
        feats = sent2features
    elif name == "conll2003":
        train, test = read_conll2003("train"), read_conll2003("testb")
        tags = lambda s: [t[3] for t in s]  # noqa: E731
        feats = lambda s: ner_features([t[0] for t in s])  # noqa: E731
    elif name == "bc2gm":
        train, test = read_bc2gm("train"), read_bc2gm("test")
        tags = lambda s: [t[1] for t in s]  # noqa: E731
        feats = lambda s: ner_features([t[0] for t in s])  # noqa: E731
    else:
        raise ValueError(f"unknown set {name!r}")
    if quick:
        train, test = train[:1500], test[:500]
    return ([feats(s) for s in train], [tags(s) for s in train],
            [feats(s) for s in test], [tags(s) for s in test])


SETS = ("chunking", "basenp", "conll2003", "bc2gm")


def measure(name, crf, Xtr, ytr, Xte, yte):
    t0 = time.perf_counter()
    crf.fit(Xtr, ytr)
    wall = time.perf_counter() - t0
    pred = crf.predict(Xte)
    row = {"model": name, "f1": 100 * chunk_f1_score(yte, [list(p) for p in pred]),
           "fit_s": wall, "state_nz": len(crf.state_features_),
           "trans_nz": len(crf.transition_features_), "attrs": crf.num_attributes_,
           "size": crf.size_, "pickle": len(pickle.dumps(crf)),
           "passes": len(crf.training_log_.iterations),
           "train_s": float(sum(it["time"] for it in crf.training_log_.iterations))}
    print(f"  {name:<34} F1 {row['f1']:6.2f}  fit {wall:7.2f} s  state nz "
          f"{row['state_nz']:>8}  trans nz {row['trans_nz']:>4}  attrs {row['attrs']:>7}  "
          f"file {row['size']:>9} B  pickle {row['pickle']:>9} B  passes {row['passes']}  "
          f"(trainer {row['train_s']:.2f} s)",
          flush=True)
    return row


def tutorial_main(argv=None):
    ap = argparse.ArgumentParser(description="the tutorial flow on CoNLL-2000")
    ap.add_argument("--quick", action="store_true", help="2000 training sentences")
    ap.add_argument("--rounds", type=int, default=2, help="timing rounds of the sweep")
    ap.add_argument("--psa-seeds", type=int, default=10,
                    help="one-pass psa fits over random_state 0..N-1 (its shuffle): the "
                         "spread of its F1")
    ap.add_argument("--no-l2-peer", action="store_true",
                    help="skip CRFsuite lbfgs with c1=0 (the L2-only peer)")
    args = ap.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: {DATA} is absent")
        return 0
    import sklearn_crfsuite

    train, test = read("train"), read("test")
    if args.quick:
        train = train[:2000]
    Xtr, ytr = [sent2features(s) for s in train], [sent2labels(s) for s in train]
    Xte, yte = [sent2features(s) for s in test], [sent2labels(s) for s in test]
    l1 = "penalty" in ASFSequenceTagger().get_params()
    c1 = 0.1 if l1 else 0.0
    print(f"CoNLL-2000: {len(Xtr)} training / {len(Xte)} test sentences; algorithms "
          f"{available_algorithms()}, default {DEFAULT_ALGORITHM!r}; L1 in the taggers: {l1}"
          + ("" if l1 else " (ours run with c1=0)"))
    rows = []
    peer = measure("crfsuite lbfgs c1=0.1 c2=0.1 100 it", sklearn_crfsuite.CRF(
        algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100,
        all_possible_transitions=True), Xtr, ytr, Xte, yte)
    rows.append(peer)
    if not args.no_l2_peer:
        rows.append(measure("crfsuite lbfgs c1=0 c2=0.1 100 it", sklearn_crfsuite.CRF(
            algorithm="lbfgs", c1=0.0, c2=0.1, max_iterations=100,
            all_possible_transitions=True), Xtr, ytr, Xte, yte))
    ours = measure(f"ours default ({DEFAULT_ALGORITHM}) c1={c1:g} c2=0.1", CRF(
        c1=c1, c2=0.1, all_possible_transitions=True), Xtr, ytr, Xte, yte)
    rows.append(ours)
    if "lbfgs" in available_algorithms():
        rows.append(measure("ours lbfgs c1=0.1 c2=0.1 100 it", CRF(
            algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100,
            all_possible_transitions=True), Xtr, ytr, Xte, yte))
    psa = measure(f"ours psa (1 pass) c1={c1:g} c2=0.1", CRF(
        algorithm="psa", c1=c1, c2=0.1, all_possible_transitions=True), Xtr, ytr, Xte, yte)
    rows.append(psa)
    psa_f1 = [psa["f1"]] + [measure(f"ours psa (1 pass) random_state={seed}", CRF(
        algorithm="psa", c1=c1, c2=0.1, all_possible_transitions=True, random_state=seed),
        Xtr, ytr, Xte, yte)["f1"] for seed in range(1, args.psa_seeds)]

    print("\nTargets (against the tutorial's CRFsuite in this run):")
    print(f"  default: F1 {ours['f1'] - peer['f1']:+.2f} (target >= -0.3), state nz "
          f"{ours['state_nz'] / peer['state_nz']:.2f}x (target <= 2x), fit time "
          f"{ours['fit_s'] / peer['fit_s']:.3f}x (target <= 0.2x)")
    print(f"  psa:     F1 {psa['f1'] - peer['f1']:+.2f} (target >= -0.8), fit time "
          f"{psa['fit_s'] / peer['fit_s']:.3f}x (target <= 1/15 = 0.067x)")
    if len(psa_f1) > 1:
        gaps = [f - peer["f1"] for f in psa_f1]
        mean = sum(gaps) / len(gaps)
        sd = (sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1)) ** 0.5
        print(f"  psa over random_state 0..{len(gaps) - 1}: F1 gap mean {mean:+.2f} (sd "
              f"{sd:.2f}, min {min(gaps):+.2f}, max {max(gaps):+.2f}); "
              f"{sum(g >= -0.8 for g in gaps)} of {len(gaps)} within 0.8")

    print("\nPasses to CRFsuite L-BFGS's F1 (within 0.3), each fit from scratch; "
          f"fit time the best of {args.rounds} interleaved rounds:")
    ks = {"psa": (1, 2), "asf": (3, 6, 10), "l2sgd": (6, 10, 15), "lbfgs": (50, 100),
          "ap": (3, 10), "pa": (3, 10), "arow": (3, 10)}
    runs = {}
    for rnd in range(args.rounds):
        for alg in available_algorithms():
            for k in ks.get(alg, (3, 6, 10)):
                reg = {} if alg in ("ap", "pa", "arow") else {"c1": c1, "c2": 0.1}
                r = measure(f"  {alg} max_iterations={k} (round {rnd + 1})", CRF(
                    algorithm=alg, max_iterations=k, all_possible_transitions=True, **reg),
                    Xtr, ytr, Xte, yte)
                best = runs.setdefault((alg, k), r)
                for key in ("fit_s", "train_s"):
                    best[key] = min(best[key], r[key])
    for alg in available_algorithms() if args.rounds else ():
        hit = next(((k, runs[alg, k]) for k in ks.get(alg, (3, 6, 10))
                    if runs[alg, k]["f1"] >= peer["f1"] - 0.3), None)
        if hit is None:
            print(f"  {alg:<6} does not reach it in {max(ks.get(alg, (10,)))} passes")
            continue
        k, r = hit
        print(f"  {alg:<6} reaches it after {k} passes (F1 {r['f1']:.2f}, state nz "
              f"{r['state_nz']}): fit {r['fit_s']:.2f} s = {r['fit_s'] / peer['fit_s']:.3f}x "
              f"CRFsuite's (trainer passes {r['train_s']:.2f} s = "
              f"{r['train_s'] / peer['train_s']:.3f}x CRFsuite's iterations)")
    return 0


# ---- the four sets: sklearn-crfsuite's CRF() beside ours ---------------------------
def _f1(yte, pred):
    return 100 * chunk_f1_score(yte, [list(p) for p in pred])


def timed_fit(est, Xtr, ytr):
    """``est.fit``: its wall and CPU seconds (input conversion included)."""
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(Xtr, ytr)
    return time.perf_counter() - t0, time.process_time() - c0


def four_sets_row(label, est, data, peer=None):
    Xtr, ytr, Xte, yte = data
    wall, cpu = timed_fit(est, Xtr, ytr)
    row = {"model": label, "f1": _f1(yte, est.predict(Xte)), "wall": wall, "cpu": cpu}
    log = getattr(est, "training_log_", None)
    kept = getattr(est, "estimator_", None)
    row["iters"] = (getattr(kept, "n_iter_", None) if kept is not None
                    else getattr(est, "n_iter_", None) or (len(log.iterations) if log else None))
    ratio = ""
    if peer is not None:
        ratio = (f"  F1 {row['f1'] - peer['f1']:+6.2f}  wall {wall / peer['wall']:.3f}x  "
                 f"CPU {cpu / peer['cpu']:.3f}x")
    print(f"  {label:<44} F1 {row['f1']:6.2f}  fit {wall:7.1f} s wall {cpu:7.1f} s CPU  "
          f"iterations {row['iters']}{ratio}", flush=True)
    return row


def asf_passes(data, max_passes, random_state=0, feedback_average="period"):
    """Test F1 after every pass of ``CRF(algorithm='asf')`` (CRFsuite's objective
    and features, ``c2=1``): one fit, its model scored after each pass (the
    extension protocol's per-pass callback), as ``max_iterations=k`` gives."""
    from sklearn_secondorder.crfsuite._features import feature_mask
    from sklearn_secondorder.crfsuite._log import dev_set
    from sklearn_secondorder.crfsuite._params import tagger_params
    from sklearn_secondorder.crfsuite._registry import get_algorithm
    from sklearn_secondorder.sequence import viterbi_labels
    from sklearn_secondorder.sequence._input import read_sequences

    Xtr, ytr, Xte, yte = data
    crf = CRF(algorithm="asf", random_state=random_state)
    alg, cls = get_algorithm("asf")
    tagger = cls()
    batch = read_sequences(tagger, Xtr, ytr, fitting=True, first=True)
    tagger.set_params(**tagger_params(crf, alg, tagger, batch.n_sequences),
                      feedback_average=feedback_average)
    classes = np.unique(batch.labels)
    label_idx = np.searchsorted(classes, batch.labels).astype(np.int32)
    mask = feature_mask(batch, label_idx, classes.size, min_freq=0.0, all_states=False,
                        all_transitions=False)
    ds, _, offsets = dev_set(Xte, yte, tagger.vocabulary_, classes, batch.n_features)
    f1 = []

    def score(t):
        lab = classes[viterbi_labels(ds, t.flat_weights_, classes.size)]
        f1.append(_f1(yte, [lab[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]))
        return False

    tagger.fit_batch(batch, n_passes=max_passes, allowed=mask, callback=score)
    return f1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated: " + ", ".join(SETS))
    ap.add_argument("--quick", action="store_true", help="1500 training / 500 test sentences")
    ap.add_argument("--sweep", type=int, default=40,
                    help="passes of CRF(algorithm='asf') scored one by one (0: none)")
    ap.add_argument("--sweep-seeds", type=int, default=3,
                    help="random_state 0..N-1 of the sweep (the shuffles)")
    ap.add_argument("--tutorial", action="store_true",
                    help="the earlier run instead: the tutorial flow on CoNLL-2000 only")
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--tutorial" in argv:      # (the earlier run parses its own arguments)
        return tutorial_main([a for a in argv if a != "--tutorial"])
    args = ap.parse_args(argv)
    if not SHARED.exists():
        print(f"skipped: {SHARED} is absent")
        return 0
    import platform
    from importlib.metadata import version

    import sklearn_crfsuite

    from sklearn_secondorder.sequence import PSASequenceTagger
    print(f"sklearn-crfsuite {version('sklearn-crfsuite')}, python-crfsuite "
          f"{version('python-crfsuite')}, python {platform.python_version()}; "
          f"our CRF() trains {DEFAULT_ALGORITHM!r}; one thread each")
    summary = []
    for name in args.sets.split(","):
        data = load_set(name, args.quick)
        print(f"\n{name}: {len(data[0])} training / {len(data[2])} test sentences "
              "(features built before the timings)", flush=True)
        peer = four_sets_row("sklearn-crfsuite CRF()", sklearn_crfsuite.CRF(), data)
        rows = [peer,
                four_sets_row(f"ours CRF() ({DEFAULT_ALGORITHM})",
                              CRF(keep_training_state=True), data, peer),
                four_sets_row("ours CRF(algorithm='lbfgs')",
                              CRF(algorithm="lbfgs", keep_training_state=True), data, peer),
                four_sets_row("ASFSequenceTagger(random_state=0)",
                              ASFSequenceTagger(random_state=0), data, peer),
                four_sets_row("PSASequenceTagger(random_state=0)",
                              PSASequenceTagger(random_state=0), data, peer)]
        summary.append((name, rows))
        for seed in range(args.sweep_seeds if args.sweep else 0):
            f1 = asf_passes(data, args.sweep, random_state=seed)
            print(f"  CRF(algorithm='asf', random_state={seed}) F1 after passes 1..{args.sweep}: "
                  + " ".join(f"{v:.2f}" for v in f1), flush=True)

    print("\nTargets (against sklearn-crfsuite's CRF() in this run): ours CRF() within 0.3 F1 "
          "in <= 0.25x its fit time; ours lbfgs within 0.05 F1")
    print(f"  {'set':<10} {'peer F1':>8} {'peer s':>7} {'CRF() F1':>9} {'gap':>6} {'wall':>7} "
          f"{'CPU':>7} {'lbfgs F1':>9} {'gap':>6} {'wall':>7}")
    for name, rows in summary:
        peer, ours, lb = rows[0], rows[1], rows[2]
        print(f"  {name:<10} {peer['f1']:8.2f} {peer['wall']:7.1f} {ours['f1']:9.2f} "
              f"{ours['f1'] - peer['f1']:+6.2f} {ours['wall'] / peer['wall']:6.3f}x "
              f"{ours['cpu'] / peer['cpu']:6.3f}x {lb['f1']:9.2f} {lb['f1'] - peer['f1']:+6.2f} "
              f"{lb['wall'] / peer['wall']:6.3f}x")
    return 0


def per_pass(argv=None):
    """F1 and objective pass by pass on one set: ASF (the period's average and
    all iterates'), PSA, and L-BFGS's objective by iteration."""
    ap = argparse.ArgumentParser(description="per-pass F1 and objective of ASF, PSA, L-BFGS")
    ap.add_argument("--set", default="bc2gm")
    ap.add_argument("--passes", type=int, default=10)
    args = ap.parse_args(argv)
    from sklearn_secondorder._core._crf_infer import objective
    from sklearn_secondorder._core._weights import ScaledWeights
    from sklearn_secondorder.crfsuite._features import feature_mask
    from sklearn_secondorder.crfsuite._log import dev_set
    from sklearn_secondorder.crfsuite._params import tagger_params
    from sklearn_secondorder.crfsuite._registry import get_algorithm
    from sklearn_secondorder.sequence import viterbi_labels
    from sklearn_secondorder.sequence._input import read_sequences

    Xtr, ytr, Xte, yte = load_set(args.set)
    n = len(Xtr)
    print(f"{args.set}: {n} training sentences; CRFsuite's objective -sum log p + c2 ||w||^2, "
          "c2 = 1, CRFsuite's features (test F1, objective on the training set)")

    def run(alg_name, label, **extra):
        crf = CRF(algorithm=alg_name)
        alg, cls = get_algorithm(alg_name)
        tagger = cls()
        batch = read_sequences(tagger, Xtr, ytr, fitting=True, first=True)
        tagger.set_params(**tagger_params(crf, alg, tagger, batch.n_sequences), **extra)
        classes = np.unique(batch.labels)
        label_idx = np.searchsorted(classes, batch.labels).astype(np.int32)
        mask = feature_mask(batch, label_idx, classes.size, min_freq=0.0, all_states=False,
                            all_transitions=False)
        ds, _, offsets = dev_set(Xte, yte, tagger.vocabulary_, classes, batch.n_features)
        train = []
        out = []

        def score(t):
            w = t.flat_weights_
            if not train:
                train.append(batch.sequence_data(t.n_attributes_, label_idx))
            obj = n * objective(train[0], ScaledWeights(w.copy(), classes.size), t.alpha, 1)
            lab = classes[viterbi_labels(ds, w, classes.size)]
            out.append((_f1(yte, [lab[offsets[i]:offsets[i + 1]]
                                  for i in range(len(offsets) - 1)]), obj))
            return False

        tagger.fit_batch(batch, n_passes=args.passes, allowed=mask, callback=score)
        print(f"  {label:<44} eta0 {tagger.eta0_:.3g}")
        print("    F1        " + " ".join(f"{f:8.2f}" for f, _ in out))
        print("    objective " + " ".join(f"{o:8.0f}" for _, o in out), flush=True)
        return tagger

    print("  passes      " + " ".join(f"{k:8d}" for k in range(1, args.passes + 1)))
    eta0 = run("asf", "ASF: the period's average, best step (now)").eta0_
    run("asf", "ASF: all iterates' average, best step", feedback_average="all")
    run("asf", "ASF: the period's average, half step", eta0=eta0 / 2)
    run("asf", "ASF: all iterates' average, half step (before)", feedback_average="all",
        eta0=eta0 / 2)
    run("psa", "PSA")
    lb = CRF(algorithm="lbfgs", keep_training_state=True)
    wall, _ = timed_fit(lb, Xtr, ytr)
    loss = lb.estimator_.loss_
    marks = [k for k in (10, 20, 50, 100, 200, 300) if k <= len(loss)]
    print(f"  L-BFGS to CRFsuite's stopping rule: {len(loss)} iterations, F1 "
          f"{_f1(yte, lb.predict(Xte)):.2f}, objective {loss[-1]:.0f} ({wall:.0f} s); "
          "objective after " + ", ".join(f"{k}: {loss[k - 1]:.0f}" for k in marks))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "per-pass":
        sys.exit(per_pass(sys.argv[2:]))
    sys.exit(main())
