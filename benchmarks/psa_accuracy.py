"""PSA's one-pass results on every benchmark set, against a stored reference.

The lazy core's arithmetic may change (float32 state, the closed form of
idle windows, fewer exp calls) as long as the one-pass result does not: this
script fits one pass on each set and compares with ``psa_accuracy.json``,
the figures of the core before the change (written by ``--write``).

- a9a, w8a, letter (multinomial, 26 outputs a feature) and the 2^20-column
  hashed CoNLL-2000 token task (I-NP against the rest): ``PSAClassifier``,
  ``alpha = 1/n``, one pass, ``random_state`` 0..2; test accuracy (points)
  and test log-loss. a9a also with ``penalty='elasticnet'`` (the L1 path).
  Tolerance: accuracy within 0.05 points, log-loss within 0.5% (means over
  the seeds).
- CoNLL-2000 chunking and base NP: ``PSASequenceTagger`` (CRF++ template,
  ``alpha = 2/n``), one pass, shuffle seeds 0..4; chunk F1. Tolerance: the
  mean within 0.1.

Run ``python benchmarks/psa_accuracy.py`` (``--write`` stores the figures as
the new reference; ``--sets a9a,letter`` a subset).
"""
import argparse
import json
import time
from pathlib import Path

import _datasets
import numpy as np
from sklearn.metrics import log_loss

from sklearn_secondorder import PSAClassifier, PSASequenceTagger
from sklearn_secondorder.metrics import chunk_f1_score

REFERENCE = Path(__file__).with_name("psa_accuracy.json")
LINEAR_SEEDS = (0, 1, 2)
TAGGER_SEEDS = (0, 1, 2, 3, 4)
TOLERANCE = {"accuracy": 0.05, "log_loss_rel": 0.005, "f1": 0.1}


def _linear(name, **params):
    if name == "conll_tokens":
        Xtr, ytr, Xte, yte = _datasets.conll_tokens(2 ** 20)
        ytr, yte = (ytr == "I-NP").astype(int), (yte == "I-NP").astype(int)
    else:
        Xtr, ytr, Xte, yte = _datasets.LOADERS[name]()
    acc, ll, sec = [], [], []
    for seed in LINEAR_SEEDS:
        t0 = time.process_time()
        clf = PSAClassifier(alpha=1.0 / Xtr.shape[0], random_state=seed, **params).fit(Xtr, ytr)
        sec.append(time.process_time() - t0)
        acc.append(100.0 * clf.score(Xte, yte))
        ll.append(log_loss(yte, clf.predict_proba(Xte), labels=clf.classes_))
    return {"accuracy": float(np.mean(acc)), "log_loss": float(np.mean(ll)),
            "cpu_seconds": float(np.min(sec))}


def _tagger(task):
    import bench_tagger
    Xtr, ytr, Xte, yte = bench_tagger.make_task(task, quick=False)
    f1, sec = [], []
    for seed in TAGGER_SEEDS:
        tagger = PSASequenceTagger(alpha=2.0 / len(Xtr), random_state=seed).fit(Xtr, ytr)
        sec.append(float(np.sum(tagger.pass_seconds_)))
        f1.append(100.0 * chunk_f1_score(yte, tagger.predict(Xte)))
    return {"f1": float(np.mean(f1)), "f1_seeds": f1, "pass_seconds": float(np.min(sec))}


SETS = {
    "a9a": lambda: _linear("a9a"),
    "a9a_elasticnet": lambda: _linear("a9a", penalty="elasticnet"),
    "w8a": lambda: _linear("w8a"),
    "letter": lambda: _linear("letter"),
    "conll_tokens_2_20": lambda: _linear("conll_tokens"),
    "chunking": lambda: _tagger("chunking"),
    "basenp": lambda: _tagger("basenp"),
}


def compare(name, now, ref):
    """Lines comparing ``now`` with ``ref``; whether every figure is within tolerance."""
    ok = True
    out = []
    if "accuracy" in now:
        d_acc = now["accuracy"] - ref["accuracy"]
        d_ll = now["log_loss"] / ref["log_loss"] - 1.0
        good = abs(d_acc) <= TOLERANCE["accuracy"] and abs(d_ll) <= TOLERANCE["log_loss_rel"]
        out.append(f"{name:<20} accuracy {ref['accuracy']:.3f} -> {now['accuracy']:.3f} "
                   f"({d_acc:+.3f} pt)  log-loss {ref['log_loss']:.5f} -> {now['log_loss']:.5f} "
                   f"({100 * d_ll:+.2f}%)  {'ok' if good else 'OUT OF TOLERANCE'}")
    else:
        d = now["f1"] - ref["f1"]
        good = abs(d) <= TOLERANCE["f1"]
        out.append(f"{name:<20} F1 (mean of {len(TAGGER_SEEDS)} seeds) {ref['f1']:.3f} -> "
                   f"{now['f1']:.3f} ({d:+.3f})  {'ok' if good else 'OUT OF TOLERANCE'}")
    ok &= good
    return out, ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--write", action="store_true", help="store the figures as the reference")
    args = ap.parse_args(argv)
    if not _datasets.available():
        print(f"skipped: the benchmark data ({_datasets.DATA}) is not present")
        return 0
    ref = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
    results, all_ok = {}, True
    for name in args.sets.split(","):
        results[name] = SETS[name]()
        print(json.dumps({name: results[name]}), flush=True)
        if not args.write and name in ref:
            lines, ok = compare(name, results[name], ref[name])
            print("\n".join(lines), flush=True)
            all_ok &= ok
    if args.write:
        ref.update(results)
        REFERENCE.write_text(json.dumps(ref, indent=1) + "\n")
    print("all within tolerance" if all_ok else "SOME OUT OF TOLERANCE")
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
