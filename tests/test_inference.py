"""The sequence package's inference entry points (``sequence/_inference.py``)
against brute force over every label path, and the layering rule they serve:
the CRFsuite facade imports no ``_core`` module."""
import ast
import itertools
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp

import sklearn_secondorder
from sklearn_secondorder.sequence import (
    path_log_likelihood,
    sequence_batch,
    token_marginals,
    viterbi_labels,
)


def _chain(seed, A=4, L=3, lengths=(1, 3, 4)):
    """Random CSR tokens (some zeros), offsets and flat weights (state block,
    transitions, biases)."""
    rng = np.random.RandomState(seed)
    T = sum(lengths)
    X = sp.random(T, A, density=0.6, random_state=rng, format="csr")
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = rng.normal(size=(A + L + 1) * L)
    return X, offsets, flat, A, L


def _brute_force(x, flat, A, L):
    """Scores of every label path of one sequence (dense ``x``)."""
    W = flat[:A * L].reshape(A, L)
    trans = flat[A * L:(A + L) * L].reshape(L, L)
    emit = x @ W + flat[-L:]
    paths = list(itertools.product(range(L), repeat=x.shape[0]))
    scores = np.array([emit[np.arange(len(p)), p].sum()
                       + sum(trans[a, b] for a, b in zip(p, p[1:])) for p in paths])
    return paths, scores, emit, trans


def _batch(X, offsets, A):
    return sequence_batch(X.data, X.indices.astype(np.int32), X.indptr.astype(np.int64),
                          offsets, A)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_viterbi_and_marginals_match_brute_force(seed):
    X, offsets, flat, A, L = _chain(seed)
    batch = _batch(X, offsets, A)
    labels = viterbi_labels(batch, flat, L)
    marg = token_marginals(batch, flat, L)
    assert labels.shape == (X.shape[0],) and marg.shape == (X.shape[0], L)
    for a, b in zip(offsets[:-1], offsets[1:]):
        paths, scores, _, _ = _brute_force(X[a:b].toarray(), flat, A, L)
        assert_array_equal(labels[a:b], paths[int(np.argmax(scores))])
        p = np.exp(scores - logsumexp(scores))
        expected = np.zeros((b - a, L))
        for path, pv in zip(paths, p):
            expected[np.arange(b - a), path] += pv
        assert_allclose(marg[a:b], expected, rtol=1e-10, atol=1e-12)


def test_path_log_likelihood_matches_brute_force():
    X, offsets, flat, A, L = _chain(3, lengths=(4,))
    paths, scores, emit, trans = _brute_force(X.toarray(), flat, A, L)
    for k in (0, 7, len(paths) - 1):
        assert_allclose(path_log_likelihood(emit, trans, np.array(paths[k], dtype=np.int32)),
                        scores[k] - logsumexp(scores), rtol=1e-10)


def test_crfsuite_facade_imports_no_core_module():
    """``crfsuite/`` reaches the compiled core only through the sequence package."""
    root = Path(sklearn_secondorder.__file__).parent / "crfsuite"
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.name}: {n}" for n in names if "_core" in n.split(".")]
    assert found == []
