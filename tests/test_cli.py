"""The ``skso`` command line (``sklearn_secondorder.cli``).

References: scikit-learn's ``load_svmlight_file`` and ``murmurhash3_32``
(parsing, hashing), hand-written CSR and feature dicts (VW, CRF++
templates), the same estimator's ``partial_fit`` over the same chunks
(training), ``sklearn.metrics`` and ``sklearn_secondorder.metrics``
(evaluation).
"""
import gzip
import io
import json
import os
import struct
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import dump_svmlight_file, load_svmlight_file
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    log_loss,
    mean_absolute_error,
    mean_squared_error,
    r2_score,
)
from sklearn.utils import murmurhash3_32

from sklearn_secondorder import (
    PlainSGDClassifier,
    PlainSGDRegressor,
    PSAClassifier,
    PSARegressor,
    PSASequenceTagger,
)
from sklearn_secondorder._core._hashing import hash_strings, murmurhash3_bytes
from sklearn_secondorder._core._text_readers import parse_svmlight, parse_vw, scan_svmlight
from sklearn_secondorder.cli import MODEL_FORMAT_VERSION, load_model, main, save_model
from sklearn_secondorder.cli._featurizers import ConllFeaturizer, SvmlightFeaturizer
from sklearn_secondorder.cli._files import Block, DataError, iter_blocks
from sklearn_secondorder.cli._parser import MODEL_KINDS, model_class
from sklearn_secondorder.cli._stream import ReadAhead
from sklearn_secondorder.cli._templates import (
    CHUNKING_TEMPLATE,
    feature_strings,
    parse_template,
)
from sklearn_secondorder.cli._train import READ_AHEAD
from sklearn_secondorder.metrics import chunk_precision_recall_fscore

ROOT = Path(__file__).resolve().parents[1]


def run(*argv):
    """``main(argv)`` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def skso(*argv, cwd=None, umask=None):
    """``python -m sklearn_secondorder ARGV`` in a subprocess, as a user runs
    ``skso`` (``umask``: the process's): the ``CompletedProcess``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                             ""))
    kw = {} if umask is None else {"preexec_fn": lambda: os.umask(umask)}
    return subprocess.run([sys.executable, "-m", "sklearn_secondorder", *map(str, argv)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=120, **kw)


def mh(data, seed=0):
    return murmurhash3_32(data, seed=seed, positive=True)


# ---- data --------------------------------------------------------------------------------
def make_rows(n=700, d=40, n_classes=2, seed=0):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.2, random_state=rng, format="csr")
    X.data = np.round(rng.uniform(-1, 1, X.data.shape), 3)
    W = rng.randn(d, n_classes)
    y = (X @ W + 0.3 * rng.randn(n, n_classes)).argmax(axis=1)
    if n_classes == 2:
        y = np.where(y == 1, 1, -1)
    return X, y.astype(np.float64)


@pytest.fixture
def binary_file(tmp_path):
    X, y = make_rows()
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return path, X, y


CONLL = """\
Confidence NN B-NP
in IN B-PP
the DT B-NP
pound NN I-NP

He PRP B-NP
reckons VBZ B-VP
the DT B-NP
deficit NN I-NP
. . O

Rockwell NNP B-NP
said VBD B-VP
"""


def conll_text(n_copies=40, seed=0):
    """Sentences of the three above, in a shuffled order."""
    sents = CONLL.strip("\n").split("\n\n")
    rng = np.random.RandomState(seed)
    order = rng.randint(0, len(sents), size=n_copies)
    return "\n\n".join(sents[i] for i in order) + "\n"


# ---- hashing and parsing -------------------------------------------------------------
def test_murmurhash_matches_scikit_learn():
    for key in [b"", b"a", b"ab", b"abc", b"abcd", b"hello world", b"\xff" * 37]:
        for seed in (0, 1, 2 ** 31 + 7):
            assert murmurhash3_bytes(key, seed) == mh(key, seed)
    items = np.array([b"ab", b"abcd", b"", b"x"], dtype="S4")
    assert_array_equal(hash_strings(items.view(np.uint8).reshape(4, 4), 3),
                       [mh(bytes(k), 3) for k in items])
    raw = np.frombuffer(b"ab\x00dxyzw", dtype=np.uint8).reshape(2, 4)
    assert_array_equal(hash_strings(raw, 0, False), [mh(b"ab\x00d"), mh(b"xyzw")])


@pytest.mark.parametrize("zero_based", [True, False])
def test_parse_svmlight_matches_load_svmlight_file(tmp_path, zero_based):
    X, y = make_rows(n=50, n_classes=3)
    path = tmp_path / "f.svm"
    dump_svmlight_file(X, y, str(path), zero_based=zero_based, comment="a comment")
    text = path.read_bytes() + b"# a comment line\n\n2 qid:4 3:0.5 7:-1e-3\n"
    path.write_bytes(text)
    X_ref, y_ref = load_svmlight_file(path, n_features=40, zero_based=zero_based)
    labels, indptr, indices, data = parse_svmlight(text, zero_based, 40)
    got = sp.csr_matrix((data, indices, indptr), shape=(labels.size, 40))
    assert_array_equal(labels, y_ref)
    assert_array_equal(got.toarray(), X_ref.toarray())
    # features beyond n_features are dropped (unseen by the model)
    labels, indptr, indices, data = parse_svmlight(text, zero_based, 5)
    assert_array_equal(sp.csr_matrix((data, indices, indptr), shape=(labels.size, 5))
                       .toarray(), X_ref[:, :5].toarray())
    lab, lo, hi = scan_svmlight(text)
    assert_array_equal(lab, y_ref)
    assert (lo, hi) == (X_ref.indices.min() + (not zero_based), 39 + (not zero_based))


@pytest.mark.parametrize("text, message", [
    (b"1 1:1\nx 2:1\n", "line 2: label 'x' is not a number"),
    (b"1 1:1\n1 a:1\n", "line 2: feature index 'a'"),
    (b"1 1:1 2:b\n", "line 1: feature value 'b'"),
    (b"1 1:1\n\n1 2\n", "line 3: '2' is not 'index:value'"),
    (b"1 0:1\n", "line 1: feature index 0 in a one-based file"),
])
def test_parse_svmlight_errors_name_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        parse_svmlight(text, False, 10)


def test_parse_vw_against_hand_written_csr():
    text = (b"1 2.5 'tag1|a:2 x y:3 |b z\n"
            b"\n"
            b"-1 |  q:0 r:-1.5\n"
            b"1 tag|c w w\n")
    labels, weights, indptr, indices, data = parse_vw(text, 8)
    assert_array_equal(labels, [1, -1, 1])
    assert_array_equal(weights, [2.5, 1, 1])
    ha, hb, hc, h0 = mh(b"a"), mh(b"b"), mh(b"c"), mh(b"")
    m = 255
    expected = [  # (row, column, value): namespace a scaled by 2
        (0, mh(b"x", ha) & m, 2.0), (0, mh(b"y", ha) & m, 6.0), (0, mh(b"z", hb) & m, 1.0),
        (1, mh(b"r", h0) & m, -1.5),                      # q:0 is dropped
        (2, mh(b"w", hc) & m, 1.0), (2, mh(b"w", hc) & m, 1.0),
    ]
    assert_array_equal(indptr, [0, 3, 4, 6])
    assert_array_equal(indices, [c for _, c, _ in expected])
    assert_array_equal(data, [v for _, _, v in expected])


@pytest.mark.parametrize("text, message", [
    (b"1 |a x\n1 a x\n", "line 2: no '|'"),
    (b"1 |a x\nfoo 1 |a x\n", "line 2: 'foo' is not a number"),
    (b"1 |a x:y\n", "line 1: feature value 'y'"),
    (b"1 |a:s x\n", "line 1: namespace scale 's'"),
])
def test_parse_vw_errors_name_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        parse_vw(text, 8)


def test_iter_blocks_cuts_lines_and_sentences(tmp_path):
    path = tmp_path / "f.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("".join(f"{i} 1:1\n" for i in range(25)))
    blocks = list(iter_blocks(str(path), 10, first_max_lines=4, block_bytes=16))
    assert [b.data.count(b"\n") for b in blocks] == [4, 10, 10, 1]
    assert [b.first_line for b in blocks] == [1, 5, 15, 25]
    assert b"".join(b.data for b in blocks) == gzip.decompress(path.read_bytes())
    path = tmp_path / "c.txt"
    path.write_text(conll_text(10))
    blocks = list(iter_blocks(str(path), 6, sentences=True, block_bytes=7))
    assert b"".join(b.data for b in blocks) == path.read_bytes()
    for b in blocks[:-1]:                  # whole sentences of >= 6 lines
        assert b.data.endswith(b"\n\n") and b.data.count(b"\n") >= 6


# ---- CRF++ templates ---------------------------------------------------------------------
def test_templates_against_expected_features():
    templates = parse_template("# c\nU00:%x[-1,0]\nU01:%x[0,0]/%x[1,1]\n\nB\n", 2)
    assert templates == [["U00:", (-1, 0)], ["U01:", (0, 0), "/", (1, 1)]]
    words = np.array(["He", "reckons", "the", "Rockwell", "said"])
    pos = np.array(["PRP", "VBZ", "DT", "NNP", "VBD"])
    sentence = np.array([0, 0, 0, 1, 1])
    feats = feature_strings(templates, [words, pos], sentence)
    assert feats == [
        ["U00:_B-1", "U01:He/VBZ"],
        ["U00:He", "U01:reckons/DT"],
        ["U00:reckons", "U01:the/_B+1"],
        ["U00:_B-1", "U01:Rockwell/VBD"],
        ["U00:Rockwell", "U01:said/_B+1"],
    ]
    assert feature_strings(parse_template("U:%x[-2,0]"), [words], sentence) == [
        ["U:_B-2"], ["U:_B-1"], ["U:He"], ["U:_B-2"], ["U:_B-1"]]


@pytest.mark.parametrize("text, message", [
    ("U00:%x[0,2]", "uses column 2, but the data have 2 feature column"),
    ("X00:%x[0,0]", "is not a CRF\\+\\+ template"),
    ("U00:hello", "has no %x"),
    ("B01:%x[0,0]", "observation bigram"),
    ("B\n# nothing else", "no U template"),
])
def test_template_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_template(text, 2)


def test_conll_featurizer_hashes_the_template_features():
    """Each column of X is the hash chain of the feature's pieces, computed
    here with scikit-learn's murmurhash3_32 from the expected strings."""
    text = CONLL.encode()
    fz = ConllFeaturizer(12, 3, "U00:%x[-1,0]\nU01:%x[0,0]/%x[1,1]\nB\n")
    chunk = fz.parse(Block(text, 1, "mem", 0))
    assert_array_equal(chunk.offsets, [0, 4, 9, 11])
    assert chunk.y.tolist()[:3] == ["B-NP", "B-PP", "B-NP"]
    rows = [ln.split() for ln in CONLL.splitlines() if ln.strip()]
    words, pos = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    sentence = np.repeat(np.arange(3), np.diff(chunk.offsets))
    expected = sp.lil_matrix((11, 4096))
    for i, (f0, f1) in enumerate(feature_strings(fz.templates, [words, pos], sentence)):
        # the pieces: the literal, the values (or CRF++'s padding), in order
        for feat, pieces in ((f0, ["U00:", f0[4:]]),
                             (f1, ["U01:", f1[4:].split("/")[0], "/",
                                   f1[4:].split("/")[1]])):
            assert "".join(pieces) == feat
            chained = b"".join(struct.pack("<I", mh(p.encode())) for p in pieces)
            expected[i, mh(chained) & 4095] += 1
    assert_array_equal(chunk.X.toarray(), expected.toarray())


# ---- train: the streamed model is the estimator's partial_fit over the same chunks -----
class Spy:
    """Records the rows of every partial_fit call of an estimator class."""

    def __init__(self, monkeypatch, cls):
        self.sizes, self.calls = [], []
        original = cls.partial_fit

        def partial_fit(est, X, y, **kw):
            self.sizes.append(X.shape[0] if hasattr(X, "shape") else len(X))
            self.calls.append((X, y, kw))
            return original(est, X, y, **kw)

        monkeypatch.setattr(cls, "partial_fit", partial_fit)


@pytest.mark.parametrize("model, cls, extra", [
    ("psa", PSAClassifier, []),
    ("sgd", PlainSGDClassifier, ["--loss", "hinge", "--param", "average=True"]),
])
def test_train_equals_partial_fit_over_the_same_chunks(tmp_path, binary_file, monkeypatch,
                                                       model, cls, extra):
    path, X, y = binary_file
    out = tmp_path / "m.skso"
    spy = Spy(monkeypatch, cls)
    code, _, err = run("train", path, "--model", model, "--out", out, "--chunk-size", 150,
                       "--first-chunk-size", 250, "--alpha", 1e-3, "--progress", "none",
                       *extra)
    assert code == 0, err
    assert spy.sizes == [250, 150, 150, 150]      # bounded chunks, in file order
    monkeypatch.undo()
    saved = load_model(out)
    ref = clone(saved.estimator)
    assert ref.get_params()["alpha"] == 1e-3
    X_ref, y_ref = load_svmlight_file(path, n_features=40)
    # (the reader keeps the rows' non-zeros only; a stored 0 would touch its
    # feature, splitting its lazy decay in two: the same model to rounding)
    X_ref.eliminate_zeros()
    bounds = [0, 250, 400, 550, 700]
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        ref.partial_fit(X_ref[a:b], y_ref[a:b], **({"classes": [-1.0, 1.0]} if k == 0 else {}))
    if model == "psa":
        # a stream of calls brings an idle weight to time at its next touch,
        # partial_fit at every call's end: one decay of n steps where
        # partial_fit makes two (the same model to rounding)
        assert_allclose(saved.estimator.coef_, ref.coef_, rtol=1e-12, atol=1e-14)
        assert_allclose(saved.estimator.intercept_, ref.intercept_, rtol=1e-12)
    else:
        assert_array_equal(saved.estimator.coef_, ref.coef_)
        assert_array_equal(saved.estimator.intercept_, ref.intercept_)
    if model == "psa":   # the paper's period from the whole file (700 rows): max(10, 0)
        assert saved.estimator.period == 10


def test_progressive_validation_is_the_loss_before_each_row(tmp_path, binary_file):
    # PSA streams its chunks (PSAClassifier.begin_stream): each row is scored
    # by the pass itself just before its own update, as Vowpal Wabbit's
    # progressive validation, the first chunk's rows too (the model before
    # the first row is the zero one); the reference replays the rows one by
    # one ('skso train' run as a user runs it)
    path, X, y = binary_file
    out = tmp_path / "m.skso"
    r = skso("train", path, "--model", "psa", "--out", out, "--chunk-size", 100,
             "--first-chunk-size", 200, "--progress", "lines", "--eta0", 0.05,
             "--param", "shuffle=False")
    assert r.returncode == 0, r.stderr
    saved = load_model(out)
    ref = clone(saved.estimator)
    # the zero model before the first row: p = 1/2, the first class predicted
    losses, errors = [np.log(2.0)], [float(y[0] != -1.0)]
    ref.partial_fit(X[:1], y[:1], classes=[-1.0, 1.0])
    for i in range(1, 700):
        P = ref.predict_proba(X[i:i + 1])
        losses.append(log_loss(y[i:i + 1], P, labels=ref.classes_, normalize=False))
        errors.append(np.sum(ref.classes_[P.argmax(1)] != y[i:i + 1]))
        ref.partial_fit(X[i:i + 1], y[i:i + 1])
    tr = saved.header["training"]
    assert tr["progressive_rows"] == 700 and tr["progressive_unscored_rows"] == 0
    assert_allclose(tr["progressive_loss"], sum(losses) / 700, rtol=1e-9)
    assert_allclose(tr["progressive_error"], sum(errors) / 700, rtol=1e-12)
    assert_allclose(saved.estimator.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    assert "each row scored just before its own update" in r.stderr
    assert "progressive validation (pass 1, 700 rows): " in r.stderr


def test_progressive_validation_is_the_loss_before_each_chunk(tmp_path, binary_file):
    # a model that does not stream: each chunk scored before training on it;
    # no model precedes the first chunk, which the table and the summary say
    path, X, y = binary_file
    out = tmp_path / "m.skso"
    r = skso("train", path, "--model", "sgd", "--out", out, "--chunk-size", 100,
             "--first-chunk-size", 200, "--progress", "lines")
    assert r.returncode == 0, r.stderr
    err = r.stderr
    saved = load_model(out)
    ref = clone(saved.estimator)
    losses, errors = [], []
    bounds = [0, 200, 300, 400, 500, 600, 700]
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        if k:
            P = ref.predict_proba(X[a:b])
            losses.append(log_loss(y[a:b], P, labels=ref.classes_, normalize=False))
            errors.append(np.sum(ref.classes_[P.argmax(1)] != y[a:b]))
        ref.partial_fit(X[a:b], y[a:b], **({"classes": [-1.0, 1.0]} if k == 0 else {}))
    tr = saved.header["training"]
    assert tr["progressive_rows"] == 500 and tr["progressive_unscored_rows"] == 200
    assert_allclose(tr["progressive_loss"], sum(losses) / 500, rtol=1e-10)
    assert_allclose(tr["progressive_error"], sum(errors) / 500, rtol=1e-12)
    # printed at doubling row counts and at every tenth of the 700 rows
    # (300 = 43%, 400 = 57%, ...), once validation has started
    lines = err.splitlines()
    note = "not the first chunk's 200 rows: no model precedes it"
    assert lines[1].startswith("loss: log-loss; each chunk scored before training on it")
    assert note in lines[1] and "avg loss" in lines[2]
    table = [ln.split() for ln in lines[3:] if ln.strip()[0].isdigit()]
    rows = [int(r[4].replace(",", "")) for r in table]
    assert rows == [300, 400, 500, 600, 700]
    assert f"progressive validation (pass 1, 500 rows; {note}" in err
    assert f"average loss {tr['progressive_loss']:.6f}" in err
    assert "finished: 700 rows in 1 pass(es)" in err


def test_train_multiclass_vw_with_weights_equals_partial_fit(tmp_path, monkeypatch):
    X, y = make_rows(n=400, d=12, n_classes=3, seed=1)
    rng = np.random.RandomState(0)
    w = rng.choice([0.5, 1.0, 2.0], size=400)
    lines = []
    for i in range(400):
        row = X[i]
        feats = " ".join(f"f{j}:{v:g}" for j, v in zip(row.indices, row.data))
        lines.append(f"{int(y[i]) + 1} {w[i]:g} 'r{i}|num {feats} |words w{i % 7}")
    path = tmp_path / "train.vw.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    out = tmp_path / "m.skso"
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--hash-bits", 10,
                       "--chunk-size", 100, "--first-chunk-size", 100, "--progress", "none",
                       "--keep-state")
    assert code == 0, err
    saved = load_model(out)
    assert saved.header["featurizer"] == {"format": "vw", "n_features": 1024,
                                          "hash_bits": 10}
    assert_array_equal(saved.estimator.classes_, [1.0, 2.0, 3.0])
    # the reference: the same rows hashed here, then partial_fit per 100 rows
    hn, hw = mh(b"num"), mh(b"words")
    Xh = sp.lil_matrix((400, 1024))
    for i in range(400):
        row = X[i]
        for j, v in zip(row.indices, row.data):
            Xh[i, mh(f"f{j}".encode(), hn) & 1023] += v
        Xh[i, mh(f"w{i % 7}".encode(), hw) & 1023] += 1
    Xh = Xh.tocsr()
    ref = clone(saved.estimator)
    for k in range(4):
        s = slice(100 * k, 100 * (k + 1))
        ref.partial_fit(Xh[s], y[s] + 1, sample_weight=w[s],
                        **({"classes": [1.0, 2.0, 3.0]} if k == 0 else {}))
    assert_allclose(saved.estimator.coef_, ref.coef_, rtol=1e-12, atol=1e-14)


def test_tagger_train_predict_evaluate(tmp_path, monkeypatch):
    path = tmp_path / "train.conll"
    path.write_text(conll_text(60))
    out = tmp_path / "t.skso"
    spy = Spy(monkeypatch, PSASequenceTagger)
    code, _, err = run("train", path, "--model", "psa-tagger", "--out", out,
                       "--chunk-size", 40, "--first-chunk-size", 80, "--hash-bits", 12,
                       "--progress", "none", "--param", "eta0=0.05", "--keep-state")
    assert code == 0, err
    calls = spy.calls
    monkeypatch.undo()
    assert sum(spy.sizes) == 60 and spy.sizes[0] * 4 >= 80 // 2
    saved = load_model(out)
    assert saved.header["featurizer"]["template"] == CHUNKING_TEMPLATE
    ref = clone(saved.estimator)
    for X, y, kw in calls:
        ref.partial_fit(X, y, **kw)
    assert_array_equal(saved.estimator.coef_, ref.coef_)
    assert_array_equal(saved.estimator.transition_features_.__len__(),
                       ref.transition_features_.__len__())
    # predict: a label per token, a blank line between sentences
    test = tmp_path / "test.conll"
    test.write_text(CONLL)
    code, text, err = run("predict", out, test)
    assert code == 0, err
    sents = text.rstrip("\n").split("\n\n")
    X_test = next(saved.iter_chunks(test))[0]
    assert [s.split("\n") for s in sents] == saved.estimator.predict(X_test)
    # evaluate: conlleval chunk figures and the flat accuracy
    code, text, err = run("evaluate", out, test, "--json")
    assert code == 0, err
    res = json.loads(text)
    gold = [[ln.split()[-1] for ln in s.splitlines()] for s in CONLL.strip().split("\n\n")]
    pred = saved.estimator.predict(X_test)
    p, r, f = chunk_precision_recall_fscore(gold, pred)
    assert_allclose([res["chunk_precision"], res["chunk_recall"], res["chunk_f1"]], [p, r, f])
    flat = accuracy_score(sum(gold, []), sum(pred, []))
    assert res["accuracy"] == pytest.approx(flat) and res["sentences"] == 3
    # --proba: the marginals of every label
    code, text, err = run("predict", out, test, "--proba")
    first = text.splitlines()[1].split()
    assert text.startswith("# labels: ") and len(first) == 1 + len(saved.estimator.classes_)
    marg = saved.estimator.predict_marginals(X_test)[0][0]
    assert_allclose([float(v) for v in first[1:]],
                    [marg[c] for c in saved.estimator.classes_], rtol=1e-5)


def test_sentences_through_the_shuffle_buffer(tmp_path, monkeypatch):
    path = tmp_path / "train.conll"
    path.write_text(conll_text(50, seed=3))
    spy = Spy(monkeypatch, PSASequenceTagger)
    code, _, err = run("train", path, "--model", "psa-tagger", "--out", tmp_path / "t.skso",
                       "--chunk-size", 30, "--first-chunk-size", 30, "--shuffle-buffer", 20,
                       "--hash-bits", 8, "--progress", "none", "--param", "eta0=0.05")
    assert code == 0, err
    # whole sentences, each once, their labels with them, in a new order
    sent = [tuple(s) for X, y, _ in spy.calls for s in y]
    expected = [tuple(ln.split()[-1] for ln in s.splitlines())
                for s in conll_text(50, seed=3).strip().split("\n\n")]
    assert sorted(sent) == sorted(expected) and sent != expected
    for X, y, _ in spy.calls:
        assert [x.shape[0] for x in X] == [len(s) for s in y]


def test_template_file_and_word_only_files(tmp_path):
    path = tmp_path / "train.conll.gz"
    with gzip.open(path, "wt") as f:          # word + label only: the 'words' template
        f.write("\n".join(" ".join((ln.split()[0], ln.split()[2])) if ln.strip() else ""
                          for ln in conll_text(20).splitlines()) + "\n")
    out = tmp_path / "t.skso"
    code, _, err = run("train", path, "--model", "sgd-tagger", "--out", out,
                       "--progress", "none", "--hash-bits", 10)
    assert code == 0, err
    assert load_model(out).header["featurizer"]["n_columns"] == 2
    tmpl = tmp_path / "template"
    tmpl.write_text("U00:%x[0,0]\nU01:%x[0,1]\n")
    code, _, err = run("train", path, "--model", "sgd-tagger", "--out", out,
                       "--template", tmpl, "--progress", "none")
    assert code == 2 and "uses column 1, but the data have 1 feature column" in err


# ---- predict / evaluate / info ---------------------------------------------------------
@pytest.fixture
def trained(tmp_path, binary_file):
    path, X, y = binary_file
    out = tmp_path / "m.skso"
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--progress", "none")
    assert code == 0, err
    return out, path, X, y


def test_predict_output(tmp_path, trained):
    out, path, X, y = trained
    est = load_model(out).estimator
    code, text, err = run("predict", out, path, "--chunk-size", 64)
    assert code == 0, err
    assert text.splitlines() == [str(int(v)) for v in est.predict(X)]
    target = tmp_path / "pred.txt"
    code, text, err = run("predict", out, path, "--proba", "--out", target)
    assert code == 0 and text == ""
    lines = target.read_text().splitlines()
    assert lines[0] == "# labels: -1 1" and len(lines) == 701
    P = np.array([[float(v) for v in ln.split()[1:]] for ln in lines[1:]])
    assert_allclose(P, est.predict_proba(X), rtol=1e-5, atol=1e-6)


def test_evaluate_matches_sklearn_metrics(trained):
    out, path, X, y = trained
    est = load_model(out).estimator
    code, text, err = run("evaluate", out, path, "--json", "--chunk-size", 128)
    assert code == 0, err
    res = json.loads(text)
    pred = est.predict(X)
    assert res["rows"] == 700
    assert res["accuracy"] == pytest.approx(accuracy_score(y, pred))
    assert res["log_loss"] == pytest.approx(log_loss(y, est.predict_proba(X)), rel=1e-10)
    assert res["f1"] == pytest.approx(f1_score(y, pred))
    assert res["f1_macro"] == pytest.approx(f1_score(y, pred, average="macro"))
    code, text, _ = run("evaluate", out, path)
    assert code == 0 and "accuracy" in text and "log_loss" in text


def test_evaluate_multiclass_and_unseen_labels(tmp_path):
    X, y = make_rows(n=300, n_classes=3, seed=2)
    path = tmp_path / "m.svm"
    dump_svmlight_file(X, y, str(path), zero_based=True)
    out = tmp_path / "m.skso"
    code, _, err = run("train", path, "--model", "sgdqn", "--out", out, "--progress", "none",
                       "--alpha", "0.01")
    assert code == 0, err
    est = load_model(out).estimator
    y_test = y.copy()
    y_test[:5] = 7.0                       # a label the model never saw
    test = tmp_path / "t.svm"
    dump_svmlight_file(X, y_test, str(test), zero_based=True)
    code, text, err = run("evaluate", out, test, "--json")
    assert code == 0, err
    res = json.loads(text)
    pred = est.predict(X)
    assert "log_loss" not in res              # squared hinge: no probabilities
    assert res["accuracy"] == pytest.approx(accuracy_score(y_test, pred))
    assert res["f1_macro"] == pytest.approx(f1_score(y_test, pred, average="macro"))
    code, _, err = run("predict", out, test, "--proba")
    assert code == 2 and "has no probabilities" in err


def test_info(trained):
    out, *_ = trained
    code, text, err = run("info", out)
    assert code == 0, err
    assert "PSAClassifier" in text and "classes          -1 1" in text
    assert "n_features       40" in text
    code, text, _ = run("info", out, "--json")
    res = json.loads(text)
    assert res["format_version"] == MODEL_FORMAT_VERSION
    assert res["params"]["alpha"] == 1 / 700 and res["training"]["rows"] == 700
    assert res["nonzero_weights"] == np.count_nonzero(load_model(out).estimator.coef_)


def test_zero_and_one_based_and_gzip_give_the_same_model(tmp_path):
    X, y = make_rows(n=300)
    paths = []
    for zb, name in ((True, "a.svm"), (False, "b.svm.gz")):
        buf = io.BytesIO()
        dump_svmlight_file(X, y, buf, zero_based=zb)
        data = buf.getvalue()
        (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        paths.append(tmp_path / name)
    coefs = []
    for p in paths:
        out = tmp_path / (p.name + ".skso")
        code, _, err = run("train", p, "--model", "psa", "--out", out, "--progress", "none")
        assert code == 0, err
        m = load_model(out)
        coefs.append(m.estimator.coef_)
    assert load_model(tmp_path / "a.svm.skso").header["featurizer"]["zero_based"]
    # (the zero-based file's column 0 exists if X has it; the one-based file shifts)
    d = X.shape[1]
    assert_array_equal(coefs[0][:, :d], coefs[1][:, :d])


def test_passes_and_shuffle_buffer(tmp_path, binary_file, monkeypatch):
    path, X, y = binary_file
    spy = Spy(monkeypatch, PSAClassifier)
    out = tmp_path / "m.skso"
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--passes", 2,
                       "--chunk-size", 100, "--first-chunk-size", 100, "--shuffle-buffer",
                       250, "--progress", "none")
    assert code == 0, err
    assert max(spy.sizes) <= 100 and sum(spy.sizes) == 1400
    seen = sp.vstack([c[0] for c in spy.calls[:len(spy.calls) // 2]]).toarray()
    labels = np.concatenate([c[1] for c in spy.calls[:len(spy.calls) // 2]])
    # every row once per pass, not in file order
    key = np.lexsort(seen.T)
    ref = np.lexsort(X.toarray().T)
    assert_array_equal(seen[key], X.toarray()[ref])
    assert_array_equal(labels[key], y[ref])
    assert not np.array_equal(seen, X.toarray())
    assert load_model(out).header["training"]["passes"] == 2


def test_classes_skip_the_scan_and_estimate_the_rows(tmp_path):
    X, y = make_rows(n=3000, d=30)
    path = tmp_path / "big.svm.gz"
    buf = io.BytesIO()
    dump_svmlight_file(X, y, buf, zero_based=False)
    path.write_bytes(gzip.compress(buf.getvalue()))
    models = []
    for extra in ([], ["--classes=-1,1", "--n-features", "30"]):
        out = tmp_path / f"m{len(models)}.skso"
        code, _, err = run("train", path, "--model", "psa", "--out", out, "--chunk-size",
                           200, "--first-chunk-size", 400, "--alpha", "1e-4", *extra)
        assert code == 0, err
        models.append(load_model(out))
    assert "(about 3,0" in err and "rows not scanned" in err   # ~3000 rows from 400
    assert not models[1].header["training"]["scanned"]
    assert_array_equal(models[0].estimator.coef_, models[1].estimator.coef_)
    code, _, err = run("train", path, "--model", "psa", "--out", tmp_path / "x",
                       "--classes=-1,1")
    assert code == 2 and "give --n-features too" in err
    code, _, err = run("train", path, "--model", "psa", "--out", tmp_path / "x",
                       "--classes=-1", "--n-features", "30")
    assert code == 2 and "single label" in err
    code, _, err = run("train", path, "--model", "psa", "--out", tmp_path / "x",
                       "--classes=-1,2", "--n-features", "30")
    assert code == 2 and "y contains labels not in classes_" in err


# ---- errors: a clear message, exit code 2, nothing written ------------------------------
@pytest.mark.parametrize("content, message", [
    ("1 1:1\n-1 2:1\n1 3:x\n", "line 3: feature value 'x'"),
    ("1 1:1\n-1 2:1\n1 3\n", "line 3: '3' is not 'index:value'"),
    ("1 |a x\n-1 |a y\n-1 a y\n", "line 3: no '|'"),
    ("w NN B-NP\nx VB\n", "line 2: 2 column"),
    ("1 1:1\n1 2:1\n", "single label"),
    ("", "empty file"),
])
def test_bad_data_exit_code_2_and_no_model(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    out = tmp_path / "m.skso"
    model = "psa-tagger" if "NN" in content else "psa"
    code, _, err = run("train", path, "--model", model, "--out", out, "--progress", "none")
    assert code == 2
    assert message in err and "skso train: error:" in err
    assert not out.exists() and list(tmp_path.iterdir()) == [path]


def test_usage_errors(tmp_path, trained):
    out, path, *_ = trained
    assert run("train", path, "--model", "psa", "--out", out, "--param", "nope=1")[0] == 2
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--param", "nope=1")
    assert "has no parameter(s) nope" in err
    # (the estimator is made once the reader thread has started: it stops too)
    assert not _reader_threads()
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--alpha", "-1")
    assert code == 2 and "alpha" in err
    code, _, err = run("train", path, "--model", "psa-tagger", "--out", out)
    assert code == 2 and "read CoNLL files (sentences), not svmlight rows" in err
    code, _, err = run("train", tmp_path / "missing", "--model", "psa", "--out", out)
    assert code == 2 and "no such file" in err
    code, _, err = run("train", path, "--model", "nope", "--out", out)
    assert code == 2 and "invalid choice" in err
    code, _, err = run("predict", path, path)
    assert code == 2 and "not an skso model file" in err
    code, text, _ = run("train", "--help")
    assert code == 0 and "--hash-bits" in text and "--shuffle-buffer" in text
    for cmd in ("predict", "evaluate", "info"):
        code, text, _ = run(cmd, "--help")
        assert code == 0 and "model" in text


def test_model_format(tmp_path, trained):
    out, *_ = trained
    saved = load_model(out)
    h = saved.header
    assert h["format"] == "skso-model" and h["format_version"] == MODEL_FORMAT_VERSION
    assert h["estimator"] == "PSAClassifier" and h["featurizer"]["format"] == "svmlight"
    newer = tmp_path / "newer.skso"
    save_model(newer, saved.estimator, h)
    import joblib
    obj = joblib.load(newer)
    obj["header"]["format_version"] = MODEL_FORMAT_VERSION + 1
    joblib.dump(obj, newer)
    with pytest.raises(ValueError, match="newer than this package reads"):
        load_model(newer)


def test_progress_bar_and_its_absence(tmp_path, binary_file, monkeypatch):
    pytest.importorskip("tqdm")
    path, *_ = binary_file
    out = tmp_path / "m.skso"
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--progress", "bar",
                       "--chunk-size", 100, "--first-chunk-size", 100)
    assert code == 0 and "rows_s=" in err and "finished" in err
    monkeypatch.setitem(sys.modules, "tqdm", None)        # not installed
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--progress", "bar",
                       "--chunk-size", 100, "--first-chunk-size", 100)
    assert code == 0 and "tqdm is not installed" in err and "rows/s" in err


def test_subprocess_entry_point(tmp_path, binary_file):
    path, *_ = binary_file
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                             ""))
    out = tmp_path / "m.skso"
    r = subprocess.run([sys.executable, "-m", "sklearn_secondorder", "train", str(path),
                        "--model", "psa", "--out", str(out)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "finished: 700 rows" in r.stderr and out.exists()
    r = subprocess.run([sys.executable, "-m", "sklearn_secondorder", "evaluate", str(out),
                        str(tmp_path / "nope")], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 2 and "no such file" in r.stderr



def test_program_run_returns_mains_code_and_freezes_the_heap(monkeypatch, capsys):
    """``run`` (the ``skso`` script, ``python -m``) is ``main`` on the
    process's arguments, then ``gc.freeze``; ``main`` leaves the collector
    alone."""
    import gc

    from sklearn_secondorder.cli import main, run
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    calls = []
    monkeypatch.setattr(sys, "argv", ["skso", "evaluate", "nope.skso", "nope.svm"])
    assert run() == 2 and calls == ["freeze"]
    assert "no such model file" in capsys.readouterr().err
    assert main(["evaluate", "nope.skso", "nope.svm"]) == 2 and calls == ["freeze"]

def test_public_docstrings():
    validate = pytest.importorskip("numpydoc.validate").validate
    for name in ("main", "run", "load_model", "save_model", "build_parser", "SavedModel",
                 "SavedModel.iter_chunks", "SavedModel.featurizer"):
        errors = [(c, m) for c, m in validate(f"sklearn_secondorder.cli.{name}")["errors"]
                  if c not in {"EX01", "SA01", "ES01", "RT02"}]
        assert not errors, (name, errors)


# ---- the reader thread: the same model, its errors, its end ---------------------------
def _reader_threads():
    return [t for t in threading.enumerate() if t.name == "skso-reader" and t.is_alive()]


def _vw_file(path, X, y):
    lines = [f"{int(y[i])} |f " + " ".join(f"x{j}:{v:g}" for j, v in
                                         zip(X[i].indices, X[i].data)) for i in range(X.shape[0])]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("fmt, model, extra", [
    ("svmlight", "psa", ["--passes", 2, "--shuffle-buffer", 250]),
    ("svmlight", "sgdqn", []),
    ("vw", "psa", ["--hash-bits", 9, "--classes=-1,1"]),
])
def test_reader_thread_gives_the_same_model(tmp_path, fmt, model, extra):
    X, y = make_rows(n=1500, d=40, seed=2)
    path = tmp_path / f"train.{fmt}"
    if fmt == "vw":
        _vw_file(path, X, y)
    else:
        dump_svmlight_file(X, y, str(path), zero_based=False)
    models, logs = [], []
    for reader in (True, False):
        out = tmp_path / f"m{reader}.skso"
        code, _, err = run("train", path, "--model", model, "--out", out, "--keep-state",
                           "--chunk-size", 100, "--first-chunk-size", 150, "--progress",
                           "lines", *extra, *([] if reader else ["--no-reader-thread"]))
        assert code == 0, err
        models.append(load_model(out))
        logs.append([ln for ln in err.splitlines() if ln.startswith("progressive")])
    a, b = (m.estimator for m in models)
    assert_array_equal(a.coef_, b.coef_)
    assert_array_equal(a.intercept_, b.intercept_)
    assert a.t_ == b.t_
    ta, tb = (m.header["training"] for m in models)
    assert ta["rows"] == tb["rows"] == 1500 * (2 if "--passes" in extra else 1)
    assert ta["progressive_loss"] == tb["progressive_loss"]
    assert logs[0] == logs[1] and len(logs[0]) == 1
    # --resume continues with the reader thread as without it
    for reader in (True, False):
        out = tmp_path / f"r{reader}.skso"
        code, _, err = run("train", path, "--resume", tmp_path / f"m{reader}.skso", "--out",
                           out, "--chunk-size", 100, "--progress", "none", "--keep-state",
                           *([] if reader else ["--no-reader-thread"]))
        assert code == 0, err
    a, b = (load_model(tmp_path / f"r{r}.skso").estimator for r in (True, False))
    assert_array_equal(a.coef_, b.coef_)
    assert not _reader_threads()


@pytest.mark.parametrize("reader", [True, False])
@pytest.mark.parametrize("scan", [True, False])
@pytest.mark.parametrize("bad, message", [
    ("value", "line 2500: feature value 'x' is not a number"),     # (the scan skips values)
    ("label", "line 2500: label 'x' is not a number"),             # (the scan's error)
    # an unordered line whose largest index lies between its first and last
    # (the scan reads the ends; the training parse refuses the index)
    ("order", "line 2500: feature index 25 is beyond the training's features"),
])
def test_bad_line_in_the_middle_names_it_and_writes_no_model(tmp_path, reader, scan, bad,
                                                             message):
    X, y = make_rows(n=3000, d=20, seed=4)
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    lines = path.read_text().splitlines()
    if bad == "value":
        lines[2499] = lines[2499].rsplit(":", 1)[0] + ":x"
    elif bad == "order":
        label, first, rest = lines[2499].split(" ", 2)
        lines[2499] = f"{label} {first} 25:1 {rest}"
    else:
        lines[2499] = "x " + lines[2499].split(" ", 1)[1]
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "m.skso"
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--chunk-size", 100,
                       "--first-chunk-size", 100, "--progress", "lines",
                       *([] if scan else ["--classes=-1,1", "--n-features", 20]),
                       *([] if reader else ["--no-reader-thread"]))
    assert code == 2
    assert f"skso train: error: {path}, {message}" in err
    if not scan or bad != "label":      # the chunks before it were trained on
        assert "avg loss" in err
    assert not out.exists() and list(tmp_path.iterdir()) == [path]
    assert not _reader_threads()


@pytest.mark.parametrize("fmt", ["svmlight", "vw"])
def test_scan_of_two_blocks_at_once_is_the_scan_in_order(tmp_path, fmt, monkeypatch):
    """The pre-scan scans two blocks at once on two threads: over many
    blocks its totals are those of the scan one block after the other, and a
    bad label in a middle block is the error of its line, raised after the
    blocks before it, with no scanning thread left."""
    from sklearn_secondorder.cli import _stream
    from sklearn_secondorder.cli._files import DataError, iter_blocks
    from sklearn_secondorder.cli._stream import _scan_blocks, scan
    X, y = make_rows(n=3000, d=40, seed=6)
    path = tmp_path / ("train.svm" if fmt == "svmlight" else "train.vw")
    if fmt == "svmlight":
        dump_svmlight_file(X, y, str(path), zero_based=False)
    else:
        _vw_file(path, sp.csr_matrix(X), y)

    def totals(concurrent):
        return _scan_blocks(iter_blocks(path, None, block_bytes=1 << 12), path, fmt, None,
                            0, 0, -1, -1, None, concurrent=concurrent)

    def mapped(concurrent):
        # (a plain file is scanned in a mapping of it, in pieces: small ones here)
        monkeypatch.setattr(_stream, "MAPPED_PIECE_BYTES", 1 << 12)
        results = _stream._mapped_scans(path, _stream._SCANNERS[fmt], concurrent)
        try:
            return _scan_blocks(None, path, fmt, None, 0, 0, -1, -1, None, results=results)
        finally:
            results.close()

    one, two = totals(False), totals(True)
    assert one[:4] == two[:4] and one[0] == 3000
    assert_array_equal(one[4], two[4])
    for concurrent in (False, True):
        three = mapped(concurrent)
        assert one[:4] == three[:4]
        assert_array_equal(one[4], three[4])
    assert scan([str(path)], fmt, read_ahead=True).n_rows == 3000
    lines = path.read_text().splitlines()
    lines[2499] = "x " + lines[2499].split(" ", 1)[1]
    path.write_text("\n".join(lines) + "\n")
    for run in (lambda: totals(True), lambda: mapped(True), lambda: mapped(False)):
        with pytest.raises(DataError, match=f"{path}, line 2500: (label )?'x' is not a number"):
            run()
    assert not [t for t in threading.enumerate() if t.name.startswith("skso-scan")]


def test_error_in_training_stops_the_reader(tmp_path, binary_file, monkeypatch):
    X, y = make_rows(n=6000, d=20, seed=5)
    path = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    calls, parsed = [], []
    original_parse, original_fit = SvmlightFeaturizer.parse, PSAClassifier.partial_fit

    def parse(self, block):
        parsed.append(block.first_line)
        return original_parse(self, block)

    def partial_fit(est, X, y, **kw):
        calls.append(X.shape[0])
        if len(calls) == 3:
            raise ValueError("training failed here")
        return original_fit(est, X, y, **kw)

    monkeypatch.setattr(SvmlightFeaturizer, "parse", parse)
    monkeypatch.setattr(PSAClassifier, "partial_fit", partial_fit)
    out = tmp_path / "m.skso"
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--chunk-size", 100,
                       "--first-chunk-size", 100, "--progress", "none")
    assert code == 2 and "skso train: error: training failed here" in err
    assert not out.exists()
    # the reader stopped a few chunks ahead (the queue, the one it was
    # parsing), not at the end of the file's 60 chunks, and is gone
    assert len(parsed) <= 3 + READ_AHEAD + 2
    assert not _reader_threads()


def test_read_ahead_order_errors_and_close():
    def items(n, fail_at=None, log=None):
        try:
            for i in range(n):
                if i == fail_at:
                    raise DataError(f"bad item {i}")
                yield i
        finally:
            if log is not None:
                log.append(threading.current_thread().name)

    assert list(ReadAhead(items(50), depth=3)) == list(range(50))
    got = []
    with pytest.raises(DataError, match="bad item 7"):
        for i in ReadAhead(items(50, fail_at=7)):
            got.append(i)
    assert got == list(range(7))            # the items before the error, then the error
    # closed early: the reader stops and closes the generator (its files) itself
    log = []
    reader = ReadAhead(items(10 ** 9, log=log), depth=2)
    assert [next(reader) for _ in range(5)] == [0, 1, 2, 3, 4]
    reader.close()
    assert log == ["skso-reader"] and not _reader_threads()
    with pytest.raises(StopIteration):
        next(reader)


# ---- --jobs: the estimator's n_jobs -----------------------------------------------------
def test_jobs_is_the_estimators_n_jobs(tmp_path, binary_file):
    path, X, y = binary_file
    with_jobs = [m for m in sorted(MODEL_KINDS) if "n_jobs" in model_class(m)().get_params()]
    assert {"psa", "sgdqn", "sgd"} <= set(with_jobs)
    for value, model in (("2", "psa"), ("-1", "sgdqn"), ("3", "sgd")):
        out = tmp_path / f"{model}.skso"
        code, _, err = run("train", path, "--model", model, "--out", out, "--jobs", value,
                           "--progress", "none", "--keep-state")
        assert code == 0, err
        assert load_model(out).estimator.n_jobs == int(value)
        assert load_model(out).header["params"]["n_jobs"] == int(value)
    out = tmp_path / "m.skso"
    code, _, err = run("train", path, "--model", "psa", "--out", out, "--progress", "none")
    assert code == 0 and load_model(out).header["params"]["n_jobs"] is None
    for bad in ("0", "-2", "two", "1.5"):
        code, _, err = run("train", path, "--model", "psa", "--out", out, "--jobs", bad)
        assert code == 2
        assert (f"argument --jobs/-j: {bad!r}: expected a positive number of threads, "
                "or -1 for all the cores") in err
    # a multi-class model learns with its threads
    X3, y3 = make_rows(n=600, d=30, n_classes=3, seed=6)
    path3 = tmp_path / "multi.svm"
    dump_svmlight_file(X3, y3, str(path3), zero_based=False)
    code, _, err = run("train", path3, "--model", "psa", "--out", out, "-j", "2",
                       "--chunk-size", 200, "--first-chunk-size", 200, "--progress", "none")
    assert code == 0, err
    assert load_model(out).estimator.n_jobs == 2
    assert load_model(out).estimator.coef_.shape == (3, 30)
    if "sbm" not in with_jobs:
        code, _, err = run("train", path, "--model", "sbm", "--out", tmp_path / "s.skso",
                           "--jobs", "2")
        assert code == 2 and not (tmp_path / "s.skso").exists()
        assert ("--jobs 2: --model sbm (SBMLogisticRegression) learns on one thread (no "
                f"n_jobs parameter); the models with n_jobs: {', '.join(with_jobs)}") in err
    code, text, _ = run("train", "--help")
    assert "--jobs N" in text and "--no-reader-thread" in text


# ---- files as users have them: directories, permissions, byte-order marks --------------
def test_a_directory_is_said_to_be_one(tmp_path, trained):
    model, path, *_ = trained
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "a9a").write_bytes(path.read_bytes())
    (folder / "a9a.t").write_bytes(path.read_bytes())
    r = skso("train", folder, "--model", "psa", "--out", tmp_path / "d.skso")
    assert r.returncode == 2 and not (tmp_path / "d.skso").exists()
    assert (f"skso train: error: {folder}: is a directory, not a data file (it holds a9a, "
            f"a9a.t): name the files themselves, e.g. {folder / 'a9a'}") in r.stderr
    r = skso("evaluate", model, folder)
    assert r.returncode == 2 and f"{folder}: is a directory, not a data file" in r.stderr
    r = skso("predict", folder, path)
    assert r.returncode == 2
    assert f"{folder}: is a directory, not a model file (it holds a9a, a9a.t)" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = skso("train", empty, "--model", "psa", "--out", tmp_path / "d.skso")
    assert r.returncode == 2 and f"{empty}: is a directory, not a data file (it is empty)" \
        in r.stderr
    r = skso("train", tmp_path / "nope", "--model", "psa", "--out", tmp_path / "d.skso")
    assert r.returncode == 2 and f"{tmp_path / 'nope'}: no such file" in r.stderr


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions and umask")
@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_written_files_get_the_umasks_permissions(tmp_path, binary_file, umask):
    path, *_ = binary_file
    model, pred = tmp_path / "m.skso", tmp_path / "pred.txt"
    r = skso("train", path, "--model", "psa", "--out", model, "--progress", "none",
             umask=umask)
    assert r.returncode == 0, r.stderr
    r = skso("predict", model, path, "--out", pred, umask=umask)
    assert r.returncode == 0, r.stderr
    # what any new file gets under that umask (the shell's '>' too)
    assert (model.stat().st_mode & 0o777) == 0o666 & ~umask
    assert (pred.stat().st_mode & 0o777) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.skso", "pred.txt", "train.svm"]


def _bom_files(tmp_path, fmt, gz):
    """A file of ``fmt`` as written, and the same with a UTF-8 byte-order mark."""
    if fmt == "conll":
        text = conll_text(60).encode()
    else:
        X, y = make_rows(n=400, d=30, seed=3)
        plain = tmp_path / "plain.txt"
        if fmt == "vw":
            _vw_file(plain, X, y)
        else:
            dump_svmlight_file(X, y, str(plain), zero_based=False)
        text = plain.read_bytes()
    paths = []
    for name, data in (("plain", text), ("bom", b"\xef\xbb\xbf" + text)):
        p = tmp_path / (f"{name}.{fmt}" + (".gz" if gz else ""))
        p.write_bytes(gzip.compress(data) if gz else data)
        paths.append(p)
    return paths


@pytest.mark.parametrize("fmt", ["svmlight", "vw", "conll"])
@pytest.mark.parametrize("gz", [False, True])
def test_a_utf8_byte_order_mark_is_accepted(tmp_path, fmt, gz):
    plain, bom = _bom_files(tmp_path, fmt, gz)
    model = "psa-tagger" if fmt == "conll" else "psa"
    extra = ["--hash-bits", 12] if fmt != "svmlight" else []
    code, _, err = run("train", plain, "--model", model, "--out", tmp_path / "ref.skso",
                       "--progress", "none", "--keep-state", *extra)
    assert code == 0, err
    r = skso("train", bom, "--model", model, "--out", tmp_path / "bom.skso",
             "--progress", "none", "--keep-state", *extra)
    assert r.returncode == 0, r.stderr
    ref, got = load_model(tmp_path / "ref.skso"), load_model(tmp_path / "bom.skso")
    assert got.header["featurizer"] == ref.header["featurizer"]
    assert got.header["training"]["rows"] == ref.header["training"]["rows"]
    assert_array_equal(got.estimator.classes_, ref.estimator.classes_)
    assert_array_equal(got.estimator.coef_, ref.estimator.coef_)
    # (evaluate reads the file as train does: in-process, to keep the test short)
    scores = [run("evaluate", tmp_path / m, p, "--json") for m, p in
              (("bom.skso", bom), ("ref.skso", plain))]
    assert scores[0][0] == 0, scores[0][2]
    assert json.loads(scores[0][1]) == json.loads(scores[1][1])


def test_a_utf16_file_is_named_as_such(tmp_path):
    path = tmp_path / "win.svm"
    path.write_bytes("1 1:1\n-1 2:1\n".encode("utf-16"))
    r = skso("train", path, "--model", "psa", "--out", tmp_path / "m.skso")
    assert r.returncode == 2
    assert f"{path}: UTF-16 text (its byte-order mark): skso reads UTF-8" in r.stderr


def test_evaluate_prints_the_positive_class_as_a_label(trained):
    model, path, *_ = trained
    r = skso("evaluate", model, path)
    assert r.returncode == 0, r.stderr
    lines = dict(ln.split(None, 1) for ln in r.stdout.splitlines())
    assert lines["positive_class"] == "1"           # the label as the file has it
    assert lines["accuracy"] == f"{float(lines['accuracy']):.6f}"


def test_train_help_explains_the_progress_table():
    r = skso("train", "--help")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    header = ["avg loss", "since last", "avg err", "since last", "rows", "rows/s", "done",
              "left"]
    at = text.index("the progress table")
    explained = [ln[2:].split("  ")[0] for ln in text[at:].splitlines()[2:]
                 if ln.startswith("  ") and not ln.startswith("   ")]
    assert explained == header
    assert "leaves out the first chunk" in text


# ---- memory: what the training holds -------------------------------------------------
@pytest.mark.parametrize("text", [
    b"1 1:1 3:2\n-1 2:1\n\n1 4:0.5\n-1 1:1\n1 2:2 4:1\n-1 3:1",        # no last newline
    b"\xef\xbb\xbf1 1:1 3:2\n-1 2:1\n1 4:0.5\n-1 1:1\n1 2:2 4:1\n-1 3:1\n",
])
@pytest.mark.parametrize("window", [3, 7, 1 << 22])
def test_mapped_blocks_are_the_read_blocks(tmp_path, monkeypatch, text, window):
    # training maps a plain file (its blocks parsed in place, their text not
    # kept): the same chunks, lines and offsets as read into memory, whatever
    # the window searched for newlines (smaller than a line too)
    from sklearn_secondorder.cli import _stream
    monkeypatch.setattr(_stream, "MAPPED_WINDOW_BYTES", window)
    path = tmp_path / "f.svm"
    path.write_bytes(text)
    fz = SvmlightFeaturizer(4, False, training=True)
    for size, first in ((2, None), (2, 3), (4, 1), (100, None)):
        read = list(_stream.iter_chunks([str(path)], fz, size, first_chunk_size=first))
        mapped = list(_stream.iter_chunks([str(path)], fz, size, first_chunk_size=first,
                                          keep_text=False))
        assert len(read) == len(mapped) >= 1
        for (c1, b1), (c2, b2) in zip(read, mapped):
            assert_array_equal(c1.X.toarray(), c2.X.toarray())
            assert_array_equal(c1.y, c2.y)
            assert (b1.first_line, b1.end) == (b2.first_line, b2.end)
            assert b2.data == b""


def test_bad_line_of_a_mapped_file_is_named(tmp_path):
    X, y = make_rows(n=300)
    path = tmp_path / "bad.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[233] = b"1 3:x\n"
    path.write_bytes(b"".join(lines))
    for extra in ([], ["--no-reader-thread"], ["--classes=-1,1", "--n-features", 40]):
        code, _, err = run("train", path, "--model", "psa", "--out", tmp_path / "m.skso",
                           "--chunk-size", 100, *extra)
        assert code == 2 and "line 234: feature value 'x'" in err, err


def test_the_skso_program_does_not_import_pandas(tmp_path, binary_file):
    # scikit-learn imports pandas (and pandas pyarrow) when installed: 63 MB
    # of the process's memory that no command needs
    path, *_ = binary_file
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                             ""))
    code = ("import sys; from sklearn_secondorder.cli import run; "
            f"sys.argv = ['skso', 'train', {str(path)!r}, '--model', 'psa', '--out', "
            f"{str(tmp_path / 'm.skso')!r}, '--progress', 'none']; c = run(); "
            "import sklearn.utils.fixes as f; "
            "print(c, [m for m in ('pandas', 'pyarrow') if m in sys.modules], f.pd)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "[]", "None"]
    assert load_model(tmp_path / "m.skso").header["training"]["rows"] == 700


# ---- regression: psa-regressor and sgd-regressor ----------------------------------------
def make_regression_rows(n=600, d=20, seed=0):
    """Sparse rows with one dense column far from 0 (the regressors centre
    it) and a real target far from 0, rounded so that the files' text holds
    them exactly."""
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=0.25, random_state=rng, format="csr").tolil()
    X[:, 0] = np.round(100 + 5 * rng.randn(n), 2)[:, None]
    X = X.tocsr()
    X.data = np.where(X.indices == 0, X.data, np.round(X.data * 2 - 1, 3))
    X.eliminate_zeros()
    coef = np.append(0.5, 10 * rng.randn(d - 1))
    y = np.round(X @ coef + rng.randn(n), 3)
    return X, y


@pytest.fixture
def regression_file(tmp_path):
    X, y = make_regression_rows()
    path = tmp_path / "reg.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    return path, X, y


def _replay_chunks(ref, X, y, bounds, w=None):
    for a, b in zip(bounds[:-1], bounds[1:]):
        ref.partial_fit(X[a:b], y[a:b], sample_weight=None if w is None else w[a:b])
    return ref


@pytest.mark.parametrize("model, cls, extra", [
    ("psa-regressor", PSARegressor, []),
    ("sgd-regressor", PlainSGDRegressor, ["--loss", "huber", "--param", "epsilon=2.5",
                                          "--param", "average=True"]),
])
def test_regressor_train_equals_partial_fit_over_the_same_chunks(tmp_path, regression_file,
                                                                 model, cls, extra):
    path, X, y = regression_file
    out = tmp_path / "m.skso"
    r = skso("train", path, "--model", model, "--out", out, "--chunk-size", 150,
             "--first-chunk-size", 150, "--progress", "none", "--keep-state", *extra)
    assert r.returncode == 0, r.stderr
    saved = load_model(out)
    est = saved.estimator
    assert type(est) is cls and saved.header["kind"] == "regressor"
    assert saved.header["classes"] == []
    # the classifiers' size-dependent defaults: alpha = 1/n, PSA's period
    # max(10, 0.5 n / 1000) from the scanned 600 rows
    assert est.alpha == 1 / 600
    if model == "psa-regressor":
        assert est.period == 10
    else:
        assert (est.loss, est.epsilon, est.average) == ("huber", 2.5, True)
    ref = _replay_chunks(clone(est), X, y, [0, 150, 300, 450, 600])
    assert_allclose(est.coef_, ref.coef_, rtol=1e-12, atol=1e-12)
    assert_allclose(est.intercept_, ref.intercept_, rtol=1e-12)
    if model == "psa-regressor":
        assert est.score(X, y) > 0.9


def test_psa_regressor_progressive_loss_is_each_rows_before_its_update(tmp_path,
                                                                      regression_file):
    # the stream records each row's prediction before its update: the
    # reference starts the model on the first chunk as its first partial_fit
    # does (centring, step sizes), then replays the rows one by one,
    # predicting each before training on it
    path, X, y = regression_file
    out = tmp_path / "m.skso"
    r = skso("train", path, "--model", "psa-regressor", "--out", out, "--chunk-size", 100,
             "--first-chunk-size", 200, "--progress", "lines", "--param", "shuffle=False")
    assert r.returncode == 0, r.stderr
    saved = load_model(out)
    ref = clone(saved.estimator).start_model(X[:200], y[:200])
    errors = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (one row's plausibility check)
        for i in range(600):
            errors.append(ref.predict(X[i:i + 1])[0] - y[i])
            ref.partial_fit(X[i:i + 1], y[i:i + 1])
    mse = float(np.mean(np.square(errors)))
    tr = saved.header["training"]
    assert tr["progressive_rows"] == 600 and tr["progressive_unscored_rows"] == 0
    assert_allclose(tr["progressive_loss"], mse, rtol=1e-9)
    assert tr["progressive_error"] is None
    assert_allclose(saved.estimator.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    lines = r.stderr.splitlines()
    assert lines[1] == "loss: squared error (p - y)^2; each row scored just before its own update"
    assert lines[2].split() == ["avg", "loss", "since", "last", "rows", "rows/s", "done", "left"]
    table = [ln.split() for ln in lines[3:] if ln.strip()[0].isdigit()]
    assert float(table[-1][0]) == pytest.approx(mse, rel=1e-5) and len(table[-1]) == 6
    assert (f"progressive validation (pass 1, 600 rows): average loss {mse:.6g} (squared "
            f"error; RMSE {np.sqrt(mse):.6g})") in r.stderr


def test_sgd_regressor_progressive_loss_is_the_trained_loss_before_each_chunk(
        tmp_path, regression_file):
    path, X, y = regression_file
    out = tmp_path / "m.skso"
    r = skso("train", path, "--model", "sgd-regressor", "--out", out, "--chunk-size", 100,
             "--first-chunk-size", 200, "--progress", "lines", "--loss", "quantile",
             "--param", "quantile=0.8")
    assert r.returncode == 0, r.stderr
    saved = load_model(out)
    ref = clone(saved.estimator)
    losses = []
    bounds = [0, 200, 300, 400, 500, 600]
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        if k:
            res = y[a:b] - ref.predict(X[a:b])      # the pinball loss at 0.8
            losses.append(np.where(res >= 0, 0.8 * res, -0.2 * res))
        ref.partial_fit(X[a:b], y[a:b])
    tr = saved.header["training"]
    assert tr["progressive_rows"] == 400 and tr["progressive_unscored_rows"] == 200
    assert_allclose(tr["progressive_loss"], np.concatenate(losses).mean(), rtol=1e-10)
    assert "loss: quantile (pinball) loss at quantile=0.8; each chunk scored" in r.stderr
    assert "avg err" not in r.stderr and "error" not in r.stderr.lower()
    assert "partial_fit starts the model: centred columns, step sizes" in r.stderr
    assert (f"average loss {tr['progressive_loss']:.6g} (quantile)") in r.stderr


def _regression_vw(path, X, y, w):
    """Rows of ``X`` in a 'num' namespace, a word in a 'cat' namespace,
    weights and tags; the reference hashes them as Vowpal Wabbit does."""
    lines = []
    for i in range(X.shape[0]):
        row = X[i]
        feats = " ".join(f"f{j}:{v:g}" for j, v in zip(row.indices, row.data))
        lines.append(f"{y[i]:g} {w[i]:g} 'r{i}|num {feats} |cat c{i % 5}")
    path.write_text("\n".join(lines) + "\n")
    hn, hc = mh(b"num"), mh(b"cat")
    Xh = sp.lil_matrix((X.shape[0], 1024))
    for i in range(X.shape[0]):
        row = X[i]
        for j, v in zip(row.indices, row.data):
            Xh[i, mh(f"f{j}".encode(), hn) & 1023] += v
        Xh[i, mh(f"c{i % 5}".encode(), hc) & 1023] += 1
    return Xh.tocsr()


@pytest.mark.parametrize("model", ["psa-regressor", "sgd-regressor"])
def test_regressor_on_vw_with_weights_and_its_deployment_model(tmp_path, model):
    X, y = make_regression_rows(n=400, d=12, seed=1)
    w = np.random.RandomState(0).choice([0.5, 1.0, 2.0], size=400)
    path = tmp_path / "train.vw"
    Xh = _regression_vw(path, X, y, w)
    full, small = tmp_path / "full.skso", tmp_path / "small.skso"
    common = ("--model", model, "--hash-bits", 10, "--chunk-size", 100, "--first-chunk-size",
              100, "--progress", "none")
    code, _, err = run("train", path, "--out", full, "--keep-state", *common)
    assert code == 0, err
    r = skso("train", path, "--out", small, *common)
    assert r.returncode == 0, r.stderr
    saved = load_model(full)
    assert saved.header["featurizer"] == {"format": "vw", "n_features": 1024, "hash_bits": 10}
    ref = _replay_chunks(clone(saved.estimator), Xh, y, [0, 100, 200, 300, 400], w)
    assert_allclose(saved.estimator.coef_, ref.coef_, rtol=1e-12, atol=1e-12)
    # the deployment model: no training state, sparse weights (17 of 1024
    # hashed columns), the same predictions, a smaller file
    dep = load_model(small)
    assert dep.contents == "deployment" and not hasattr(dep.estimator, "_states")
    assert sp.issparse(dep.estimator.coef_)
    assert dep.estimator.coef_.nnz == np.count_nonzero(saved.estimator.coef_) <= 17
    assert_allclose(dep.estimator.predict(Xh), saved.estimator.predict(Xh), rtol=1e-12)
    assert small.stat().st_size < full.stat().st_size / 2
    r = skso("predict", small, path)
    assert r.returncode == 0, r.stderr
    assert_array_equal(np.array(r.stdout.split(), dtype=float), dep.estimator.predict(Xh))


def test_regressor_predict_evaluate_info(tmp_path, regression_file):
    path, X, y = regression_file
    out = tmp_path / "m.skso"
    r = skso("train", path, "--model", "psa-regressor", "--out", out, "--progress", "none")
    assert r.returncode == 0, r.stderr
    est = load_model(out).estimator
    test = tmp_path / "test.svm"
    X_test, y_test = make_regression_rows(n=300, seed=5)
    dump_svmlight_file(X_test, y_test, str(test), zero_based=False)
    # predict: the loaded model's values, one per line, read back exactly
    r = skso("predict", out, test, "--chunk-size", 64)
    assert r.returncode == 0, r.stderr
    pred = np.array(r.stdout.splitlines(), dtype=float)
    assert_array_equal(pred, est.predict(X_test))
    # evaluate: RMSE, MAE, R^2 of those values
    r = skso("evaluate", out, test, "--json", "--chunk-size", 128)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert set(res) == {"rows", "rmse", "mae", "r2"} and res["rows"] == 300
    assert res["rmse"] == pytest.approx(np.sqrt(mean_squared_error(y_test, pred)), rel=1e-12)
    assert res["mae"] == pytest.approx(mean_absolute_error(y_test, pred), rel=1e-12)
    assert res["r2"] == pytest.approx(r2_score(y_test, pred), rel=1e-12)
    code, text, _ = run("evaluate", out, test)
    assert [ln.split()[0] for ln in text.splitlines()] == ["rows", "rmse", "mae", "r2"]
    assert float(text.splitlines()[1].split()[1]) == pytest.approx(res["rmse"], abs=1e-6)
    # info: a regressor, its loss
    r = skso("info", out)
    assert r.returncode == 0, r.stderr
    assert ("task             regression (a real-valued target), loss squared error "
            "(p - y)^2") in r.stdout
    assert "PSARegressor" in r.stdout and "classes" not in r.stdout
    info = json.loads(run("info", out, "--json")[1])
    assert (info["task"], info["loss"], info["model"]) == ("regression", "squared_error",
                                                           "psa-regressor")
    # no probabilities
    code, _, err = run("predict", out, test, "--proba")
    assert code == 2 and "is a regressor: it predicts values" in err


def test_regressor_evaluate_reports_the_trained_loss(tmp_path, regression_file):
    path, X, y = regression_file
    out = tmp_path / "m.skso"
    code, _, err = run("train", path, "--model", "sgd-regressor", "--out", out, "--progress",
                       "none", "--loss", "epsilon_insensitive", "--param", "epsilon=1.5")
    assert code == 0, err
    est = load_model(out).estimator
    code, text, err = run("evaluate", out, path, "--json")
    assert code == 0, err
    res = json.loads(text)
    pred = est.predict(X)
    assert res["loss"] == pytest.approx(np.maximum(np.abs(pred - y) - 1.5, 0).mean(),
                                        rel=1e-12)
    assert res["loss_name"] == "epsilon_insensitive loss (epsilon=1.5)"
    assert res["r2"] == pytest.approx(r2_score(y, pred), rel=1e-12)


@pytest.mark.parametrize("model", ["psa-regressor", "sgd-regressor"])
def test_regressor_resume_continues_the_model(tmp_path, model):
    X, y = make_regression_rows(n=600, seed=3)
    first, second = tmp_path / "a.svm", tmp_path / "b.svm"
    dump_svmlight_file(X[:400], y[:400], str(first), zero_based=False)
    dump_svmlight_file(X[400:], y[400:], str(second), zero_based=False)
    a, b = tmp_path / "a.skso", tmp_path / "b.skso"
    code, _, err = run("train", first, "--model", model, "--out", a, "--keep-state",
                       "--chunk-size", 200, "--first-chunk-size", 200, "--progress", "none")
    assert code == 0, err
    r = skso("train", second, "--resume", a, "--out", b, "--chunk-size", 100,
             "--progress", "lines")
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stderr and "(the resumed model's)" in r.stderr
    ref = _replay_chunks(load_model(a).estimator, X[400:], y[400:], [0, 100, 200])
    resumed = load_model(b)
    assert resumed.contents == "deployment"
    assert resumed.header["training"]["resumed_from"]["training"]["rows"] == 400
    assert_allclose(resumed.estimator.predict(X), ref.predict(X), rtol=1e-12)
    # a deployment model cannot be continued
    code, _, err = run("train", second, "--resume", b, "--out", tmp_path / "c.skso")
    assert code == 2 and "a deployment model" in err


@pytest.mark.parametrize("labels, argv, message", [
    ("classes", ["--model", "psa-regressor"],
     "reg.svm: the labels are only -1 and 1, class labels: --model psa-regressor learns a "
     "real-valued target; train a classifier (psa, sgdqn, sbm, sgd)"),
    ("real", ["--model", "psa"],
     "reg.svm: the labels are real numbers (e.g. {}), not classes: --model psa is a "
     "classifier; train a regressor (psa-regressor, sgd-regressor)"),
    ("real", ["--model", "sgd", "--classes", "1,2", "--n-features", "20"],
     "reg.svm: the labels are real numbers (e.g. {}), not classes: --model sgd is a "
     "classifier; train a regressor (psa-regressor, sgd-regressor)"),
    ("real", ["--model", "sgd-regressor", "--classes", "1,2"],
     "--classes: --model sgd-regressor learns a real-valued target, which has no classes "
     "(the files are scanned for their rows)"),
])
def test_labels_of_the_other_kind_are_said_in_one_line(tmp_path, labels, argv, message):
    X, y = make_regression_rows(n=300)
    if labels == "classes":
        y = np.where(y > np.median(y), 1.0, -1.0)
    path = tmp_path / "reg.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    out = tmp_path / "m.skso"
    r = skso("train", "reg.svm", *argv, "--out", out, "--progress", "none", cwd=tmp_path)
    assert r.returncode == 2
    # (the example is the smallest of the first block's non-integer labels)
    example = min((v for v in y if v != np.floor(v)), default=0)
    assert r.stderr.splitlines() == [f"skso train: error: {message.format(f'{example:g}')}"]
    assert not out.exists()


def test_a_resumed_regressor_refuses_class_labels(tmp_path, regression_file):
    path, X, y = regression_file
    a = tmp_path / "a.skso"
    code, _, err = run("train", path, "--model", "psa-regressor", "--out", a, "--keep-state",
                       "--progress", "none")
    assert code == 0, err
    classes = tmp_path / "classes.svm"
    dump_svmlight_file(X, (y > 50).astype(float), str(classes), zero_based=False)
    code, _, err = run("train", classes, "--resume", a, "--out", tmp_path / "b.skso")
    assert code == 2 and "the labels are only 0 and 1, class labels" in err
