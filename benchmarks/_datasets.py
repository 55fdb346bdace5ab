"""Benchmark data sets read from ``../shared/data`` (never copied here).

Each loader returns ``(X_train, y_train, X_test, y_test)`` with CSR (int32
indices) or dense float64 arrays:

- ``a9a``: the LIBSVM train/test files, 123 features.
- ``w8a``: the LIBSVM file, 300 features, 80/20 split with seed 0.
- ``letter``: first 16,000 rows train, last 4,000 test, standardized on train.
- ``conll_tokens``: CoNLL-2000 tokens with the chunking template (words and
  POS in a +-2 window, word bigrams around the token, POS bigrams and
  trigrams) hashed into 2**18 binary columns; 22 chunk tags as classes.

Regression (``regression/``; 80/20 ``train_test_split(random_state=0)``, as
the data's README protocol):

- ``diamonds``: the 6 numeric columns as they are (carat, depth, table, x,
  y, z: scales far apart, depth and table far from 0) and one-hot cut,
  color and clarity (26 dense columns); the target ``log(price)``, or
  ``price`` itself with ``target='price'``.
- ``flights``: NYC 2013 flights' ``arr_delay`` (minutes) from one-hot
  month, day, hour, carrier, flight, tailnum, origin, dest, route (origin +
  dest) and carrier x hour, and distance / 1000 (8,487 CSR columns).
"""
import gzip
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.feature_extraction import FeatureHasher
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

DATA = Path(os.environ.get("SKSO_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def _csr32(X):
    X = sp.csr_matrix(X, dtype=np.float64)
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int32)
    return X


def _svmlight(name, n_features):
    X, y = load_svmlight_file(str(DATA / name), n_features=n_features)
    return _csr32(X), y


def a9a():
    Xtr, ytr = _svmlight("a9a/a9a.gz", 123)
    Xte, yte = _svmlight("a9a/a9a.t.gz", 123)
    return Xtr, ytr, Xte, yte


def w8a():
    X, y = _svmlight("w8a/w8a.gz", 300)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0)
    return _csr32(Xtr), ytr, _csr32(Xte), yte


def letter():
    with gzip.open(DATA / "letter/letter-recognition.data.gz", "rt") as f:
        rows = [line.strip().split(",") for line in f if line.strip()]
    y = np.array([r[0] for r in rows])
    X = np.array([[float(v) for v in r[1:]] for r in rows])
    scaler = StandardScaler().fit(X[:16000])
    return scaler.transform(X[:16000]), y[:16000], scaler.transform(X[16000:]), y[16000:]


def read_conll2000(split):
    """Sentences of ``(word, pos, chunk)`` triples from CoNLL-2000 ``train`` / ``test``."""
    with gzip.open(DATA / f"conll2000/{split}.txt.gz", "rt") as f:
        blocks = f.read().strip().split("\n\n")
    return [[tuple(line.split()) for line in b.splitlines()] for b in blocks]


def chunking_token_features(sent, i):
    """CRF++ chunking template features of token ``i`` as strings."""
    def w(k):
        j = i + k
        return sent[j][0] if 0 <= j < len(sent) else ("<s>" if j < 0 else "</s>")

    def p(k):
        j = i + k
        return sent[j][1] if 0 <= j < len(sent) else ("<s>" if j < 0 else "</s>")

    feats = [f"w[{k}]={w(k)}" for k in range(-2, 3)]
    feats += [f"p[{k}]={p(k)}" for k in range(-2, 3)]
    feats += [f"w[{k}]|w[{k + 1}]={w(k)}|{w(k + 1)}" for k in (-1, 0)]
    feats += [f"p[{k}]|p[{k + 1}]={p(k)}|{p(k + 1)}" for k in range(-2, 2)]
    feats += [f"p[{k}]|p[{k + 1}]|p[{k + 2}]={p(k)}|{p(k + 1)}|{p(k + 2)}" for k in range(-2, 1)]
    return feats + ["bias"]


def conll_tokens(n_features=2 ** 18):
    hasher = FeatureHasher(n_features=n_features, input_type="string", alternate_sign=False)
    out = []
    for split in ("train", "test"):
        sents = read_conll2000(split)
        feats = [chunking_token_features(s, i) for s in sents for i in range(len(s))]
        labels = np.array([tok[2] for s in sents for tok in s])
        out += [_csr32(hasher.transform(feats)), labels]
    return tuple(out)


def diamonds(target="log"):
    import pandas as pd

    df = pd.read_csv(DATA / "regression" / "diamonds.csv.gz")
    y = np.log(df["price"].to_numpy(float)) if target == "log" else df["price"].to_numpy(float)
    numeric = df[["carat", "depth", "table", "x", "y", "z"]].to_numpy(float)
    onehot = pd.get_dummies(df[["cut", "color", "clarity"]]).to_numpy(float)
    Xtr, Xte, ytr, yte = train_test_split(np.hstack([numeric, onehot]), y, test_size=0.2,
                                          random_state=0)
    return Xtr, ytr, Xte, yte


def flights_frame():
    """The flights table with the route and carrier x hour columns (the
    categorical columns as strings)."""
    import pandas as pd

    df = pd.read_csv(DATA / "regression" / "flights.csv.gz")
    df["route"] = df["origin"] + df["dest"]
    df["carrier_hour"] = df["carrier"] + df["hour"].astype(str)
    return df


FLIGHTS_CATEGORIES = ["month", "day", "hour", "carrier", "flight", "tailnum", "origin", "dest",
                      "route", "carrier_hour"]


def flights():
    from sklearn.preprocessing import OneHotEncoder

    df = flights_frame()
    train, test = train_test_split(df, test_size=0.2, random_state=0)
    enc = OneHotEncoder(handle_unknown="ignore").fit(train[FLIGHTS_CATEGORIES].astype(str))

    def rows(part):
        onehot = enc.transform(part[FLIGHTS_CATEGORIES].astype(str))
        return _csr32(sp.hstack([onehot, sp.csr_matrix(part[["distance"]].to_numpy(float)
                                                        / 1000.0)]))

    return (rows(train), train["arr_delay"].to_numpy(float), rows(test),
            test["arr_delay"].to_numpy(float))


LOADERS = {"a9a": a9a, "w8a": w8a, "letter": letter, "conll_tokens": conll_tokens}


def available():
    """Whether ``../shared/data`` is present."""
    return (DATA / "a9a/a9a.gz").exists()
