"""
One pass over real data: the package's estimators against scikit-learn's
========================================================================

The README's demonstration, ``python examples/demo.py`` (not run at
documentation build time).

Part 1 (linear classifiers) uses a9a from ``../shared/data`` when present,
else scikit-learn's bundled breast-cancer data (standardized, 70/30 split),
and prints the test accuracy and fit time of one pass for each estimator.
Part 2 (sequence tagging) runs when ``../shared/data/conll2000`` is present:
PSA (one pass) and ASF taggers on CoNLL-2000 chunking with word/POS window
features, scored by conlleval chunk F1.
"""
# sphinx_gallery_thumbnail_path = "_static/thumbnails/demo.png"
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_svmlight_file
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import sklearn_secondorder as sso
from sklearn_secondorder.metrics import chunk_f1_score

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = SHARED / "a9a"


def load():
    if (DATA / "a9a.gz").exists():
        Xtr, ytr = load_svmlight_file(str(DATA / "a9a.gz"), n_features=123)
        Xte, yte = load_svmlight_file(str(DATA / "a9a.t.gz"), n_features=123)
        for X in (Xtr, Xte):
            X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
        return "a9a (LIBSVM, sparse)", Xtr, ytr, Xte, yte
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    scaler = StandardScaler().fit(Xtr)
    return "breast cancer (scikit-learn)", scaler.transform(Xtr), ytr, scaler.transform(Xte), yte


def main():
    name, Xtr, ytr, Xte, yte = load()
    alpha = 1.0 / Xtr.shape[0]
    print(f"{name}: {Xtr.shape[0]} train rows, {Xte.shape[0]} test rows, "
          f"{Xtr.shape[1]} features, alpha = 1/n = {alpha:.3g}\n")
    models = {
        name: est for name, est in [
            ("PSAClassifier (1 pass)", getattr(sso, "PSAClassifier", None)),
            ("SGDQNLinearSVC (1 pass)", getattr(sso, "SGDQNLinearSVC", None)),
            ("SBMLogisticRegression (1 pass)", getattr(sso, "SBMLogisticRegression", None)),
        ] if est is not None
    }
    models = {k: v(alpha=alpha, max_iter=1, random_state=0) for k, v in models.items()}
    models["PlainSGDClassifier (1 pass)"] = sso.PlainSGDClassifier(
        alpha=alpha, max_iter=1, random_state=0)
    models["sklearn SGDClassifier (1 pass)"] = SGDClassifier(
        loss="log_loss", alpha=alpha, max_iter=1, tol=None, random_state=0)
    models["sklearn SGDClassifier averaged (1 pass)"] = SGDClassifier(
        loss="log_loss", alpha=alpha, max_iter=1, tol=None, average=True, random_state=0)
    models["sklearn LogisticRegression (converged)"] = LogisticRegression(
        C=1.0 / (alpha * Xtr.shape[0]), max_iter=1000)
    print(f"{'model':42s} {'test acc':>9s} {'fit s':>8s}")
    for label, est in models.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            est.fit(Xtr, ytr)
            dt = time.perf_counter() - t
        print(f"{label:42s} {est.score(Xte, yte):9.4f} {dt:8.3f}")


def token_features(sent, i):
    """Words and POS tags in a +-2 window, plus the POS bigram at the token."""
    def get(k, col):
        j = i + k
        return sent[j][col] if 0 <= j < len(sent) else "<pad>"
    feats = {f"w[{k}]": get(k, 0).lower() for k in range(-2, 3)}
    feats.update({f"p[{k}]": get(k, 1) for k in range(-2, 3)})
    feats["p[-1]|p[0]"] = get(-1, 1) + "|" + get(0, 1)
    return feats


def tagging_demo():
    import gzip
    path = SHARED / "conll2000"
    if not (path / "train.txt.gz").exists():
        print("\n(../shared/data/conll2000 not found: skipping the tagging demo)")
        return
    data = {}
    for split in ("train", "test"):
        with gzip.open(path / f"{split}.txt.gz", "rt") as f:
            sents = [[line.split() for line in block.splitlines()]
                     for block in f.read().strip().split("\n\n")]
        data[split] = ([[token_features(s, i) for i in range(len(s))] for s in sents],
                       [[tok[2] for tok in s] for s in sents])
    (Xtr, ytr), (Xte, yte) = data["train"], data["test"]
    print(f"\nCoNLL-2000 chunking: {len(Xtr)} train / {len(Xte)} test sentences")
    print(f"{'tagger':42s} {'chunk F1':>9s} {'fit s':>8s}")
    for label, est in [
        ("PSASequenceTagger (1 pass)",
         sso.PSASequenceTagger(alpha=1.0 / len(Xtr), random_state=0)),
        ("ASFSequenceTagger (3 passes)",
         sso.ASFSequenceTagger(alpha=1.0 / len(Xtr), max_iter=3, random_state=0)),
    ]:
        t = time.perf_counter()
        est.fit(Xtr, ytr)
        dt = time.perf_counter() - t
        print(f"{label:42s} {100 * chunk_f1_score(yte, est.predict(Xte)):9.2f} {dt:8.2f}")


if __name__ == "__main__":
    main()
    tagging_demo()
