"""``skso`` run as a user runs it: a subprocess per command.

Model files of deployment size (and ``--keep-state`` / ``--resume``), the
progress table, the L2 default, and errors that name their cause. The
references: the trained estimator itself (``--keep-state``) and its
``partial_fit`` over the same chunks, the rows of the file, the sizes of the
weights.
"""
import gzip
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from sklearn_secondorder.cli import load_model, main
from sklearn_secondorder.cli._deployed import CompactTagger
from sklearn_secondorder.cli._parser import TEMPLATE_NAMES
from sklearn_secondorder.cli._templates import BUILTIN_TEMPLATES

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SKSO_DATA", ROOT.parent / "shared" / "data"))
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def skso(*argv, cwd=None):
    """``python -m sklearn_secondorder ARGV``: the completed process (one per
    feature checked: each start-up imports scikit-learn, seconds on a busy
    machine; the further checks run ``main`` in-process)."""
    return subprocess.run([sys.executable, "-m", "sklearn_secondorder", *map(str, argv)],
                          capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300)


class Run:
    """``main(argv)`` in-process, with the completed process's attributes."""

    def __init__(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        self.returncode = main([str(a) for a in argv], stdout=out, stderr=err)
        self.stdout, self.stderr = out.getvalue(), err.getvalue()


def rows(n, d, seed=0, density=0.15):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=density, random_state=rng, format="csr")
    X.data = np.round(rng.uniform(-1, 1, X.data.shape), 3)
    y = np.where(X @ rng.randn(d) + 0.3 * rng.randn(n) > 0, 1.0, -1.0)
    return X, y


SENTENCES = ["Confidence NN B-NP\nin IN B-PP\nthe DT B-NP\npound NN I-NP",
             "He PRP B-NP\nreckons VBZ B-VP\nthe DT B-NP\ndeficit NN I-NP\n. . O",
             "Rockwell NNP B-NP\nsaid VBD B-VP"]


def conll(n, seed=0):
    order = np.random.RandomState(seed).randint(0, len(SENTENCES), size=n)
    return "\n\n".join(SENTENCES[i] for i in order) + "\n"


def table(stderr):
    """The progress table's rows: (rows, fraction done, time left) per line."""
    out = []
    for line in stderr.splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d,]+)\s+[\d,]+\s+"
                     r"([\d.]+)%\s+(\S+)$", line)
        if m:
            out.append((int(m.group(1).replace(",", "")), float(m.group(2)), m.group(3)))
    return out


# ---- model files: deployment by default, --keep-state, --resume -------------------
def test_tagger_model_sized_by_its_weights_and_predicting_as_trained(tmp_path):
    path = tmp_path / "toy.conll"
    path.write_text(conll(200))
    small, full = tmp_path / "small.skso", tmp_path / "full.skso"
    r = skso("train", path, "--model", "psa-tagger", "--out", small)
    assert r.returncode == 0, r.stderr
    r = Run("train", path, "--model", "psa-tagger", "--out", full, "--keep-state")
    assert r.returncode == 0, r.stderr
    deployed, trained = load_model(small), load_model(full)
    assert deployed.contents == "deployment" and trained.contents == "training-state"
    tagger = deployed.estimator
    assert isinstance(tagger, CompactTagger)
    # the columns kept: exactly those with a non-zero weight in the trained model
    W = trained.estimator.coef_
    assert_array_equal(tagger.columns, np.flatnonzero(np.any(W != 0, axis=0)))
    assert_array_equal(tagger.state, W[:, tagger.columns].T)
    # sized by the weights: the stored floats and a few KB of header, where
    # the trained model holds 2**18 columns of weights and training state
    n_floats = tagger.state.size + tagger.transitions.size + tagger.intercept.size
    assert small.stat().st_size < 8 * n_floats + 20_000
    assert full.stat().st_size > 8 * 2 ** 18 * tagger.classes_.size
    # predictions and marginals as the trained estimator's
    X = [x for x, _ in deployed.iter_chunks(path)]
    X = [s for chunk in X for s in chunk]
    assert tagger.predict(X) == trained.estimator.predict(X)
    got, ref = tagger.predict_marginals(X[:3]), trained.estimator.predict_marginals(X[:3])
    assert all(np.allclose(list(a.values()), list(b.values()), rtol=1e-12, atol=0)
               for sa, sb in zip(got, ref) for a, b in zip(sa, sb))
    # skso info says which kind of file each is
    r = skso("info", small)
    assert r.returncode == 0, r.stderr
    assert "contents         deployment: what prediction needs" in r.stdout
    n_nonzero = int(np.count_nonzero(W))
    assert f"nonzero_weights  {n_nonzero}" in r.stdout
    assert f"stored_weights   {tagger.state.size}" in r.stdout
    r = Run("info", full, "--json")
    assert json.loads(r.stdout)["contents"] == "training-state"
    # resuming a deployment model is refused, naming what to do
    r = Run("train", path, "--resume", small, "--out", tmp_path / "x.skso")
    assert r.returncode == 2
    assert "a deployment model" in r.stderr and "--keep-state" in r.stderr


def test_linear_model_sparse_and_resume_continues_the_state(tmp_path):
    X, y = rows(600, 20_000, density=0.001)
    first, more = tmp_path / "a.svm", tmp_path / "b.svm"
    dump_svmlight_file(X[:400], y[:400], str(first), zero_based=False)
    dump_svmlight_file(X[400:], y[400:], str(more), zero_based=False)
    kept, resumed, small = (tmp_path / n for n in ("kept.skso", "resumed.skso", "s.skso"))
    r = Run("train", first, "--model", "psa", "--out", kept, "--keep-state",
             "--chunk-size", 100, "--first-chunk-size", 200)
    assert r.returncode == 0, r.stderr
    r = Run("train", first, "--model", "psa", "--out", small,
             "--chunk-size", 100, "--first-chunk-size", 200)
    assert r.returncode == 0, r.stderr
    r = skso("train", more, "--resume", kept, "--out", resumed, "--chunk-size", 100)
    assert r.returncode == 0, r.stderr
    assert "resuming" in r.stderr and "L2: alpha = 0.0025 (the resumed model's)" in r.stderr
    # the reference: the kept estimator's partial_fit over the same 100-row chunks
    ref = load_model(kept).estimator
    deployed = load_model(small).estimator
    X_more, y_more = load_svmlight_file(more, n_features=X.shape[1])
    X_more.eliminate_zeros()
    for a in range(0, 200, 100):
        ref.partial_fit(X_more[a:a + 100], y_more[a:a + 100])
    got = load_model(resumed)
    assert got.contents == "deployment" and got.header["training"]["resumed_from"]
    # (the stream brings an idle weight to time at its next touch or at the
    # end, partial_fit at each call's end: the same model within the lazy
    # core's tolerance, 1e-5 of the weights' scale; tests/test_psa.py)
    assert_allclose(got.estimator.coef_.toarray(), ref.coef_, rtol=0,
                    atol=1e-5 * np.abs(ref.coef_).max())
    # deployment: sparse weights (most of the 5,000 columns never seen), the
    # same predictions as the full estimator
    assert sp.issparse(deployed.coef_)
    full = load_model(kept).estimator
    assert_array_equal(deployed.predict_proba(X), full.predict_proba(X))
    assert small.stat().st_size * 3 < kept.stat().st_size
    # a resumed model checks the data: labels it has no weights for
    bad = tmp_path / "c.svm"
    dump_svmlight_file(X[:50], np.where(y[:50] > 0, 2.0, -1.0), str(bad), zero_based=False)
    r = Run("train", bad, "--resume", kept, "--out", tmp_path / "x.skso")
    assert r.returncode == 2 and "label(s) 2.0 that the model" in r.stderr


# ---- progress ------------------------------------------------------------------------
def test_progress_fractions_from_the_scan_and_a_row_on_a_small_file(tmp_path):
    X, y = rows(1347, 30)
    path = tmp_path / "small.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    r = skso("train", path, "--model", "psa", "--out", tmp_path / "m.skso")
    assert r.returncode == 0, r.stderr
    # one chunk of 1,347 rows, each row scored before its own update (psa)
    assert table(r.stderr) == [(1347, 100.0, "0.00s")]
    assert "progressive validation (pass 1, 1,347 rows)" in r.stderr
    # a model that scores chunks: the file of one chunk cut in two, the
    # second half validated
    r = skso("train", path, "--model", "sgd", "--out", tmp_path / "m.skso")
    assert r.returncode == 0, r.stderr
    assert table(r.stderr) == [(1347, 100.0, "0.00s")]
    assert ("progressive validation (pass 1, 674 rows; not the first chunk's 673 rows: "
            "no model precedes it") in r.stderr
    assert "finished: 1,347 rows" in r.stderr
    # the L2 default, said in the summary
    assert "L2: alpha = 1/n = 0.0007424 (n = 1,347 rows, from the scan; --alpha sets it)" \
        in r.stderr
    # 2,000-row chunks of 12,000 rows: growing fractions, rows / the scan's rows
    X, y = rows(12_000, 30, seed=1)
    path = tmp_path / "more.svm.gz"
    with gzip.open(path, "wb") as f:
        dump_svmlight_file(X, y, f, zero_based=False)
    r = Run("train", path, "--model", "psa", "--out", tmp_path / "m.skso",
             "--chunk-size", 2000, "--first-chunk-size", 2000)
    assert r.returncode == 0, r.stderr
    got = table(r.stderr)
    assert [n for n, _, _ in got] == [2000, 4000, 6000, 8000, 10000, 12000]
    assert [f for _, f, _ in got] == [round(100 * n / 12000, 1) for n, _, _ in got]
    assert all(re.fullmatch(r"\d+\.\d+s", left) for _, _, left in got)
    # without the scan: the fraction of the (decompressed) bytes read
    r = Run("train", path, "--model", "psa", "--out", tmp_path / "m.skso", "--chunk-size",
            2000, "--first-chunk-size", 2000, "--classes=-1,1", "--n-features", 30,
            "--progress", "lines")
    assert r.returncode == 0, r.stderr
    got = table(r.stderr)
    text = gzip.decompress(path.read_bytes())
    ends = [len(b"".join(text.splitlines(keepends=True)[:n])) for n, _, _ in got]
    assert [f for _, f, _ in got] == [round(100 * e / len(text), 1) for e in ends]
    # the loss column is the loss: the tagger's is -log p, not its error rate
    path = tmp_path / "toy.conll"
    path.write_text(conll(300))
    r = Run("train", path, "--model", "psa-tagger", "--out", tmp_path / "t.skso",
             "--hash-bits", 12, "--chunk-size", 200, "--first-chunk-size", 200)
    assert r.returncode == 0, r.stderr
    assert "loss: -log p(labels | sentence), per token" in r.stderr
    h = load_model(tmp_path / "t.skso").header["training"]
    assert h["progressive_loss"] != h["progressive_error"] and h["progressive_loss"] > 0


@pytest.mark.skipif(not (DATA / "a9a" / "a9a.gz").exists(),
                    reason="../shared/data/a9a is absent (the a9a progress check needs it)")
def test_progress_on_a9a_in_2000_row_chunks(tmp_path):
    r = skso("train", DATA / "a9a" / "a9a.gz", "--model", "psa", "--out",
             tmp_path / "m.skso", "--chunk-size", 2000)
    assert r.returncode == 0, r.stderr
    got = table(r.stderr)
    assert len(got) >= 3
    fractions = [f for _, f, _ in got]
    assert fractions == sorted(fractions) and fractions[-1] == 100.0 and fractions[0] < 90
    assert [f for _, f, _ in got] == [round(100 * n / 32561, 1) for n, _, _ in got]
    assert "L2: alpha = 1/n = 3.071e-05 (n = 32,561 rows, from the scan" in r.stderr


# ---- defaults ------------------------------------------------------------------------
def test_alpha_follows_the_rows(tmp_path):
    X, y = rows(800, 20)
    path = tmp_path / "f.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    r = Run("train", path, "--model", "sgdqn", "--out", tmp_path / "m.skso",
            "--progress", "lines")
    assert r.returncode == 0, r.stderr
    assert "L2: alpha = 1/n = 0.00125 (n = 800 rows, from the scan; --alpha sets it)" \
        in r.stderr
    assert load_model(tmp_path / "m.skso").estimator.alpha == 1 / 800
    r = Run("train", path, "--model", "sgdqn", "--out", tmp_path / "m.skso", "--alpha", "0.01")
    assert "L2: alpha = 0.01 (given)" in r.stderr
    help_text = " ".join(Run("train", "--help").stdout.split())
    assert "L2 strength (default 1/n, n the rows of the data from the pre-scan" in help_text


# ---- errors that name the cause ------------------------------------------------------
def test_missing_output_directory_fails_at_once_naming_it(tmp_path):
    X, y = rows(50, 5)
    path = tmp_path / "f.svm"
    dump_svmlight_file(X, y, str(path))
    t = time.perf_counter()
    r = skso("train", path, "--model", "psa", "--out", "/nonexistent/dir/m.skso")
    elapsed = time.perf_counter() - t
    assert r.returncode == 2
    assert r.stderr == ("skso train: error: --out /nonexistent/dir/m.skso: the directory "
                        "/nonexistent/dir does not exist\n")
    assert elapsed < 1.0
    r = skso("train", path, "--model", "psa", "--out", tmp_path)
    assert r.returncode == 2 and "is a directory" in r.stderr
    assert list(tmp_path.iterdir()) == [path]


def test_format_detection_names_the_bad_line(tmp_path):
    X, y = rows(40, 38, seed=2)
    path = tmp_path / "bad3.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    path.write_text("garbage line that is not svmlight at all\n" + path.read_text())
    r = skso("train", path, "--model", "psa", "--out", tmp_path / "m.skso")
    assert r.returncode == 2
    # read as svmlight (the other lines' format): its parser names line 1
    assert "bad3.svm, line 1: label 'garbage' is not a number" in r.stderr
    path = tmp_path / "mixed.txt"
    path.write_text("a b c\n1 2\nx |y\n7 8 9 10\nq\n")
    r = Run("train", path, "--model", "psa", "--out", tmp_path / "m.skso")
    assert r.returncode == 2
    assert ("cannot tell the format: no format fits half of the first 5 data line(s). "
            "Tried Vowpal Wabbit: line 1 has no '|'") in r.stderr
    assert "svmlight: line 1 does not start with a numeric label ('a b c')" in r.stderr
    assert "CoNLL columns: line 1 has 3 columns, most lines 2 ('a b c')" in r.stderr


def test_model_and_data_mismatch_said_as_such(tmp_path):
    X, y = rows(300, 63, seed=3)
    train = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(train), zero_based=False)
    model = tmp_path / "m.skso"
    assert Run("train", train, "--model", "psa", "--out", model).returncode == 0
    sentences = tmp_path / "test.conll"
    sentences.write_text(conll(5))
    r = skso("evaluate", model, sentences)
    assert r.returncode == 2
    assert r.stderr.endswith("test.conll: the file holds CoNLL sentences, but the model "
                             "(PSAClassifier, a linear model) reads svmlight rows\n")
    tagger = tmp_path / "t.skso"
    r = Run("train", sentences, "--model", "sgd-tagger", "--out", tagger, "--hash-bits", 8)
    assert r.returncode == 0, r.stderr
    r = Run("predict", tagger, train)
    assert r.returncode == 2
    assert ("train.svm: the file holds svmlight rows, but the model (SGDSequenceTagger, "
            "a sequence tagger) reads CoNLL sentences") in r.stderr
    # a feature beyond the model's 63
    test = tmp_path / "test.svm"
    lines = train.read_text().splitlines()
    lines[4] += " 999:1"
    test.write_text("\n".join(lines) + "\n")
    r = Run("evaluate", model, test)
    assert r.returncode == 2
    assert ("test.svm, line 5: feature index 999 is beyond the model's 63 features "
            "(indices 1 to 63)") in r.stderr
    r = Run("evaluate", model, test, "--ignore-unseen-features", "--json")
    assert r.returncode == 0, r.stderr
    est = load_model(model).estimator
    assert json.loads(r.stdout)["accuracy"] == pytest.approx(est.score(X, y))


def test_load_model_unpacks_as_the_readme_says(tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert "estimator, header = load_model(" in readme
    X, y = rows(100, 5)
    path = tmp_path / "f.svm"
    dump_svmlight_file(X, y, str(path))
    from sklearn_secondorder.cli import main
    assert main(["train", str(path), "--model", "sgd", "--out", str(tmp_path / "m.skso"),
                 "--progress", "none"]) == 0
    estimator, header = load_model(tmp_path / "m.skso")
    assert header["estimator"] == "PlainSGDClassifier" == type(estimator).__name__
    assert clone(estimator).get_params() == estimator.get_params()


def test_builtin_template_names_agree():
    assert set(TEMPLATE_NAMES) == set(BUILTIN_TEMPLATES)
