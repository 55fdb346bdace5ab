"""One pass over real data: the package's estimators against scikit-learn's.

Uses a9a from ``../shared/data`` when present, else scikit-learn's bundled
breast-cancer data (standardized, 70/30 split). Prints test
accuracy and fit time of one pass for each estimator.
"""
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_svmlight_file
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import sklearn_secondorder as sso

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "a9a"


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


if __name__ == "__main__":
    main()
