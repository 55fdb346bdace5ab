"""CRFsuite's trainers on our core: L-BFGS / OWL-QN, averaged perceptron, PA, AROW.

References: scipy's L-BFGS-B on the same objective (with L1 split into two
non-negative halves), the subgradient optimality conditions, CRFsuite's
converged objective on CoNLL-2000 sentences, and NumPy re-implementations of
the online trainers (CRFsuite's update rules and its ``w - ws / c`` average).
"""
import gzip

import numpy as np
import pytest
from _oracles import numpy_online
from conftest import shared_data
from numpy.testing import assert_allclose
from scipy.optimize import minimize
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_secondorder import (
    AROWSequenceTagger,
    AveragedPerceptronSequenceTagger,
    LBFGSSequenceTagger,
    PassiveAggressiveSequenceTagger,
)
from sklearn_secondorder._core._crf_compact import compact_loglik_gradient, feature_table
from sklearn_secondorder._core._crf_infer import loglik_gradient, objective
from sklearn_secondorder._core._weights import ScaledWeights
from sklearn_secondorder.sequence._feature_set import observed_weights
from sklearn_secondorder.sequence._lbfgs_solver import minimize_lbfgs

DENSE = {"all_possible_states": True, "all_possible_transitions": True}
ONLINE = [AveragedPerceptronSequenceTagger, PassiveAggressiveSequenceTagger,
          AROWSequenceTagger]


@parametrize_with_checks([LBFGSSequenceTagger(max_iter=20),
                          LBFGSSequenceTagger(max_iter=20, penalty="l1", alpha=1e-3),
                          AveragedPerceptronSequenceTagger(max_iter=3),
                          PassiveAggressiveSequenceTagger(max_iter=3),
                          AROWSequenceTagger(max_iter=3)])
def test_sklearn_api(estimator, check):
    check(estimator)


# ---- data ----------------------------------------------------------------------
def random_sequences(n_seq=14, n_attr=5, n_labels=3, seed=0, max_len=6):
    """Numeric sequences (half the values zero) whose labels depend on the
    features and on the previous label."""
    rng = np.random.RandomState(seed)
    W = rng.normal(size=(n_attr, n_labels))
    X, y = [], []
    for _ in range(n_seq):
        T = rng.randint(1, max_len + 1)
        x = rng.normal(size=(T, n_attr)) * (rng.uniform(size=(T, n_attr)) < 0.5)
        scores = x @ W
        lab = []
        for t in range(T):
            s = scores[t] + (0.8 * (np.arange(n_labels) == lab[-1]) if lab else 0)
            lab.append(int(np.argmax(s + 0.3 * rng.normal(size=n_labels))))
        X.append(x)
        y.append([f"L{v}" for v in lab])
    return X, y


def dataset(est, X, y):
    """Our ``SequenceData`` of ``X``, ``y`` for a fitted tagger."""
    batch = est._to_data(X, y, fitting=True)
    lab = np.searchsorted(est.classes_, batch.labels).astype(np.int32)
    return batch.sequence_data(est._state.crf.n_attributes, lab)


def mean_objective(ds, n_seq, H, alpha, fit_intercept):
    """``x -> (alpha/2 |x|^2 + mean -log p, gradient)`` for scipy."""
    def fun(x):
        ll, g = loglik_gradient(ds, ScaledWeights(x.copy(), H), 1, fit_intercept)
        return -ll / n_seq + 0.5 * alpha * x @ x, -g / n_seq + alpha * x
    return fun


# ---- CRFsuite's feature set and the compact gradient ------------------------------
@pytest.mark.parametrize("states, transitions", [(False, False), (True, False), (False, True)])
def test_observed_weights_are_crfsuites_features(states, transitions):
    X, y = random_sequences(seed=1)
    est = LBFGSSequenceTagger(max_iter=1).fit(X, y)
    batch = est._to_data(X, y, fitting=True)
    lab = np.searchsorted(est.classes_, batch.labels).astype(np.int32)
    A, H = est._state.crf.n_attributes, est.classes_.size
    mask = observed_weights(batch, lab, A, H, all_possible_states=states,
                            all_possible_transitions=transitions, fit_intercept=False)
    expected = np.zeros((A + H + 1) * H, dtype=bool)
    for x, labels in zip(X, y):
        path = np.searchsorted(est.classes_, labels)
        for t in range(len(path)):
            for a in np.flatnonzero(x[t]):
                expected[a * H:(a + 1) * H] |= states
                expected[a * H + path[t]] = True
            if t > 0:
                expected[A * H + path[t - 1] * H + path[t]] = True
    if transitions:
        expected[A * H:(A + H) * H] = True
    assert_allclose(mask, expected)


def test_compact_gradient_matches_the_dense_one():
    """The compact pass on a random feature set equals the dense core's
    ``loglik_gradient`` with the other weights at zero."""
    X, y = random_sequences(seed=4)
    est = LBFGSSequenceTagger(max_iter=1).fit(X, y)
    ds = dataset(est, X, y)
    A, H = est._state.crf.n_attributes, est.classes_.size
    rng = np.random.RandomState(0)
    mask = rng.uniform(size=(A + H + 1) * H) < 0.6
    idx, *table = feature_table(mask.view(np.uint8), A, H)
    w = rng.normal(size=idx.size)
    g = np.empty_like(w)
    ll = compact_loglik_gradient(ds, w, *table, H, g)
    full = np.zeros(mask.size)
    full[idx] = w
    ll_dense, g_dense = loglik_gradient(ds, ScaledWeights(full, H), 1, True)
    assert_allclose(ll, ll_dense, rtol=1e-12)
    assert_allclose(g, g_dense[idx], rtol=1e-10, atol=1e-12)


# ---- L-BFGS --------------------------------------------------------------------
@pytest.mark.parametrize("linesearch", ["MoreThuente", "Backtracking", "StrongBacktracking"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_lbfgs_reaches_scipys_minimum(linesearch, fit_intercept):
    X, y = random_sequences()
    alpha = 0.05
    est = LBFGSSequenceTagger(alpha=alpha, epsilon=1e-10, period=0, max_iter=500,
                              linesearch=linesearch, fit_intercept=fit_intercept,
                              **DENSE).fit(X, y)
    assert est.stop_reason_ in ("converged", "linesearch")
    H = est.classes_.size
    ds = dataset(est, X, y)
    fun = mean_objective(ds, len(X), H, alpha, fit_intercept)
    ref = minimize(fun, np.zeros(est._model.size), jac=True, method="L-BFGS-B",
                   options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-11})
    assert_allclose(est.objective_, ref.fun, rtol=1e-9)
    assert_allclose(est._model, ref.x, atol=1e-5)
    # objective_ is the objective of the returned weights (by the core's own routine)
    assert_allclose(est.objective_, objective(ds, ScaledWeights(est._model.copy(), H), alpha),
                    rtol=1e-12)
    if not fit_intercept:
        assert not est.intercept_.any()


def test_owlqn_l1_optimum():
    """OWL-QN's elastic-net optimum: the subgradient conditions hold, some
    weights are exactly zero, and scipy reaches the same objective on the
    split problem ``w = p - q``, ``p, q >= 0`` (smooth, bound-constrained)."""
    X, y = random_sequences(n_seq=20, n_attr=8, seed=3)
    alpha, l1_ratio = 0.08, 0.6
    est = LBFGSSequenceTagger(alpha=alpha, penalty="elasticnet", l1_ratio=l1_ratio,
                              epsilon=1e-10, period=0, max_iter=1000, **DENSE).fit(X, y)
    w = est._model
    H, n = est.classes_.size, len(X)
    a1, a2 = alpha * l1_ratio, alpha * (1 - l1_ratio)
    ds = dataset(est, X, y)
    smooth = mean_objective(ds, n, H, a2, True)
    f, g = smooth(w)
    assert_allclose(est.objective_, f + a1 * np.abs(w).sum(), rtol=1e-12)
    nz = w != 0
    assert 0 < nz.sum() < w.size                     # L1 zeroed some weights, not all
    assert np.abs(g[nz] + a1 * np.sign(w[nz])).max() < 1e-6
    assert np.abs(g[~nz]).max() <= a1 + 1e-6

    def split(z):
        p, q = z[:w.size], z[w.size:]
        fz, gz = smooth(p - q)
        return fz + a1 * z.sum(), np.concatenate([gz + a1, -gz + a1])

    ref = minimize(split, np.zeros(2 * w.size), jac=True, method="L-BFGS-B",
                   bounds=[(0, None)] * (2 * w.size),
                   options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-11})
    assert est.objective_ <= ref.fun + 1e-9
    assert_allclose(est.objective_, ref.fun, rtol=1e-7)


def test_lbfgs_stopping_rules():
    X, y = random_sequences()
    est = LBFGSSequenceTagger(alpha=0.05, max_iter=3, period=0, epsilon=0).fit(X, y)
    assert (est.n_iter_, est.stop_reason_) == (3, "max_iter")
    assert len(est.pass_seconds_) == 3 and est.n_evals_ >= 4
    loose = LBFGSSequenceTagger(alpha=0.05, epsilon=1e-2, period=0).fit(X, y)
    tight = LBFGSSequenceTagger(alpha=0.05, epsilon=1e-8, period=0).fit(X, y)
    assert loose.stop_reason_ == "converged" and loose.n_iter_ < tight.n_iter_
    assert tight.objective_ <= loose.objective_
    delta = LBFGSSequenceTagger(alpha=0.05, epsilon=0, period=3, delta=1e-3).fit(X, y)
    assert delta.stop_reason_ == "delta" and delta.n_iter_ >= 3


def test_minimize_lbfgs_on_a_quadratic():
    """The optimiser alone: the minimum of a convex quadratic (and, with L1,
    the soft-thresholded one of a diagonal quadratic)."""
    rng = np.random.RandomState(0)
    M = rng.normal(size=(30, 30))
    A = M @ M.T + np.eye(30)
    b = rng.normal(size=30)
    for linesearch in ("MoreThuente", "Backtracking", "StrongBacktracking"):
        res = minimize_lbfgs(lambda x: (0.5 * x @ A @ x - b @ x, A @ x - b), np.zeros(30),
                             epsilon=1e-10, period=0, max_iter=500, linesearch=linesearch)
        # (the searches may stop on rounding before epsilon, as liblbfgs's)
        assert res.stop_reason in ("converged", "linesearch")
        assert_allclose(res.x, np.linalg.solve(A, b), atol=1e-6)
    d = rng.uniform(0.5, 2.0, size=30)
    res = minimize_lbfgs(lambda x: (0.5 * d @ x ** 2 - b @ x, d * x - b), np.zeros(30),
                         c1=0.7, epsilon=1e-12, period=0, max_iter=500)
    assert_allclose(res.x, np.sign(b) * np.maximum(np.abs(b) - 0.7, 0) / d, atol=1e-8)


def test_lbfgs_has_no_partial_fit():
    est = LBFGSSequenceTagger()
    assert not hasattr(est, "partial_fit")
    with pytest.raises(AttributeError, match="partial_fit"):
        est.partial_fit([[{"a": 1}]], [["x"]])


# ---- L-BFGS vs CRFsuite ----------------------------------------------------------
def conll_subset(n):
    path = shared_data("conll2000/train.txt.gz")
    with gzip.open(path, "rt") as f:
        blocks = f.read().strip().split("\n\n")[:n]
    sents = [[line.split() for line in b.splitlines()] for b in blocks]
    X = []
    for s in sents:
        feats = []
        for i in range(len(s)):
            d = {"w": s[i][0].lower(), "p": s[i][1]}
            if i > 0:
                d["p[-1]"] = s[i - 1][1]
            if i + 1 < len(s):
                d["p[1]"] = s[i + 1][1]
            feats.append(d)
        X.append(feats)
    return X, [[t[2] for t in s] for s in sents]


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("c1", [0.0, 0.5])
def test_lbfgs_matches_crfsuites_converged_objective(c1, dense):
    """CRFsuite's ``lbfgs`` and ours, both to convergence on 200 CoNLL-2000
    sentences (no bias), with CRFsuite's feature set (seen pairs only) or all
    possible states and transitions on both sides: the same objective, so the
    same optimum."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = conll_subset(200)
    n, c2 = len(X), 1.0
    features = {"all_possible_states": dense, "all_possible_transitions": dense}
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=1000,
                               epsilon=1e-7, delta=1e-9, **features)
    crf.fit(X, y)
    f_crfsuite = crf.training_log_.iterations[-1]["loss"]
    est = LBFGSSequenceTagger(alpha=(c1 + 2 * c2) / n, penalty="elasticnet",
                              l1_ratio=c1 / (c1 + 2 * c2), max_iter=1000, epsilon=1e-7,
                              delta=1e-9, fit_intercept=False, **features).fit(X, y)
    f_ours = n * est.objective_
    assert abs(f_ours - f_crfsuite) < 1e-5 * f_crfsuite
    # the same non-zero weights (CRFsuite lists those only): the same feature
    # set with L2, the same sparsity pattern (to a few borderline weights) with L1
    n_crfsuite = len(crf.state_features_) + len(crf.transition_features_)
    n_ours = np.count_nonzero(est._model)
    assert abs(n_ours - n_crfsuite) <= 0.01 * n_crfsuite
    if c1 > 0:
        assert n_ours < est._model.size // 4


@pytest.mark.parametrize("c1, linesearch", [(0.0, "MoreThuente"), (0.0, "Backtracking"),
                                             (0.0, "StrongBacktracking"), (0.3, "Backtracking")])
def test_lbfgs_follows_crfsuites_iterates(c1, linesearch):
    """Same algorithm, same start, same feature set: after 25 iterations the
    objective is CRFsuite's to the 6 decimals of its log (More-Thuente,
    backtracking, OWL-QN)."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = conll_subset(150)
    n, c2 = len(X), 0.5
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=25,
                               linesearch=linesearch)
    crf.fit(X, y)
    log = crf.training_log_.iterations
    est = LBFGSSequenceTagger(alpha=(c1 + 2 * c2) / n, l1_ratio=c1 / (c1 + 2 * c2),
                              max_iter=25, linesearch=linesearch, fit_intercept=False,
                              verbose=0).fit(X, y)
    assert est.n_iter_ == len(log) == 25
    assert_allclose(est.loss_, [it["loss"] for it in log], rtol=0, atol=2e-6)
    assert_allclose(n * est.objective_, log[-1]["loss"], rtol=0, atol=2e-6)


# ---- online trainers: NumPy re-implementations of CRFsuite's rules -------------


def flat_weights(est):
    """The fitted weights from the public attributes, in the flat layout."""
    names = est.classes_.tolist()
    trans = np.array([[est.transition_features_[(a, b)] for b in names] for a in names])
    return np.concatenate([est.coef_.T.ravel(), trans.ravel(), est.intercept_])


ONLINE_CASES = [
    (AveragedPerceptronSequenceTagger, "ap", {}),
    (PassiveAggressiveSequenceTagger, "pa", {"pa_type": 0}),
    (PassiveAggressiveSequenceTagger, "pa", {"pa_type": 1, "c": 0.05}),
    (PassiveAggressiveSequenceTagger, "pa", {"pa_type": 2, "c": 0.3,
                                             "error_sensitive": False}),
    (PassiveAggressiveSequenceTagger, "pa", {"pa_type": 1, "averaging": False}),
    (AROWSequenceTagger, "arow", {}),
    (AROWSequenceTagger, "arow", {"variance": 0.3, "gamma": 2.5}),
]


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("Tagger, method, params", ONLINE_CASES)
def test_online_trainer_matches_numpy(Tagger, method, params, fit_intercept):
    X, y = random_sequences(n_seq=16, seed=5)
    est = Tagger(max_iter=3, shuffle=False, fit_intercept=fit_intercept, **params).fit(X, y)
    H = est.classes_.size
    lab = [list(np.searchsorted(est.classes_, s)) for s in y]
    ref = numpy_online(X, lab, H, method, est.n_iter_, fit_intercept, **params)
    assert np.abs(ref).max() > 0.1                     # something was learned
    assert_allclose(flat_weights(est), ref, rtol=1e-10, atol=1e-12)
    assert est.n_iter_ == 3 or method == "arow"
    assert est.t_ == est.n_iter_ * len(X)
    assert len(est.loss_) == est.n_iter_ and est.loss_[0] > 0


@pytest.mark.parametrize("Tagger", ONLINE)
def test_online_partial_fit_k_times_equals_fit(Tagger):
    X, y = random_sequences(seed=2)
    fitted = Tagger(max_iter=3, random_state=7).fit(X, y)
    est = Tagger(random_state=7)
    for _ in range(3):
        est.partial_fit(X, y, classes=fitted.classes_)
    assert_allclose(est._model, fitted._model, rtol=1e-12)


def test_online_partial_fit_learns_new_attributes():
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}]]
    y = [["A", "B"], ["B", "A"]]
    for Tagger in ONLINE:
        est = Tagger(random_state=0).partial_fit(X, y)
        est.partial_fit([[{"w": "c"}, {"w": "a"}]], [["B", "A"]])
        assert est.attributes_ == ["w:a", "w:b", "w:c"]
        assert est.predict([[{"w": "c"}]]) == [["B"]]


def test_epsilon_stops_the_passes():
    """AROW stops after a pass without errors at ``epsilon=0`` (its test is
    ``mean cost <= epsilon``); AP and PA need ``mean loss < epsilon``."""
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}]] * 3
    y = [["A", "B"], ["B", "A"]] * 3
    arow = AROWSequenceTagger(max_iter=50, random_state=0).fit(X, y)
    assert arow.n_iter_ < 50 and arow.loss_[-1] == 0.0
    ap = AveragedPerceptronSequenceTagger(max_iter=20, random_state=0).fit(X, y)
    assert ap.n_iter_ == 20
    ap = AveragedPerceptronSequenceTagger(max_iter=20, epsilon=1e-9, random_state=0).fit(X, y)
    assert ap.n_iter_ < 20


def test_one_stopping_test_for_every_online_method():
    """One rule: a pass's mean loss below ``epsilon``, or a pass without an
    update when nothing is averaged (the later passes would repeat it). PA
    without averaging stops like AROW; an averaged model keeps counting
    iterates, so its passes go on."""
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}]] * 3
    y = [["A", "B"], ["B", "A"]] * 3
    plain = PassiveAggressiveSequenceTagger(averaging=False, max_iter=30, random_state=0)
    plain.fit(X, y)
    assert plain.n_iter_ < 30 and plain.loss_[-1] == 0.0
    assert all(loss > 0 for loss in plain.loss_[:-1])
    averaged = PassiveAggressiveSequenceTagger(max_iter=12, random_state=0).fit(X, y)
    assert averaged.n_iter_ == 12
    # a positive epsilon: strictly below, as for AP and PA
    arow = AROWSequenceTagger(max_iter=30, random_state=0).fit(X, y)
    first = arow.loss_[0] / len(X)
    capped = AROWSequenceTagger(max_iter=30, random_state=0, epsilon=first).fit(X, y)
    assert capped.n_iter_ > 1
    over = AROWSequenceTagger(max_iter=30, random_state=0, epsilon=first * 1.0001).fit(X, y)
    assert over.n_iter_ == 1


@pytest.mark.parametrize("dense", [False, True])
def test_online_trainers_match_crfsuite_on_one_sequence(dense):
    """With a single training sequence the visiting order cannot differ:
    CRFsuite's ap / pa / arow (no bias; its feature set, or all possible
    states and transitions on both sides) give our weights."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X = [[{"w": "the", "p": "DT"}, {"w": "dog", "p": "NN"}, {"w": "runs", "p": "VB"},
          {"w": "the", "p": "DT"}, {"w": "cat", "p": "NN"}]]
    y = [["B", "I", "O", "B", "I"]]
    for Tagger, name, extra in [(AveragedPerceptronSequenceTagger, "ap", {}),
                                (PassiveAggressiveSequenceTagger, "pa", {"c": 0.5}),
                                (AROWSequenceTagger, "arow", {"gamma": 0.5})]:
        features = {"all_possible_states": dense, "all_possible_transitions": dense}
        crf = sklearn_crfsuite.CRF(algorithm=name, max_iterations=4, **features, **extra)
        crf.fit(X, y)
        est = Tagger(max_iter=4, fit_intercept=False, **features, **extra).fit(X, y)
        ours = {k: v for k, v in est.state_features_.items()}      # (CRFsuite's names)
        theirs = {k: v for k, v in crf.state_features_.items() if v != 0}
        assert set(ours) == set(theirs), name
        # (sklearn-crfsuite reads the weights from CRFsuite's dump, 6 decimals)
        assert_allclose([ours[k] for k in theirs], list(theirs.values()), rtol=0, atol=6e-7)
        for k, v in crf.transition_features_.items():
            assert_allclose(est.transition_features_[k], v, rtol=0, atol=6e-7)


@pytest.mark.parametrize("params, match", [
    ({"pa_type": 3}, "pa_type"), ({"c": 0.0}, "'c'"), ({"max_iter": 0}, "max_iter")])
def test_online_parameter_errors(params, match):
    with pytest.raises(ValueError, match=match):
        PassiveAggressiveSequenceTagger(**params).fit([[{"a": 1}], [{"b": 1}]], [["x"], ["y"]])


def test_lbfgs_parameter_errors():
    X, y = [[{"a": 1}], [{"b": 1}]], [["x"], ["y"]]
    with pytest.raises(ValueError, match="linesearch"):
        LBFGSSequenceTagger(linesearch="Armijo").fit(X, y)
    with pytest.raises(ValueError, match="l1_ratio"):
        LBFGSSequenceTagger(l1_ratio=1.5).fit(X, y)


@pytest.mark.parametrize("Tagger", ONLINE)
def test_an_overflowing_online_fit_raises_and_leaves_the_tagger_unfitted(Tagger):
    X = [np.array([[1e300, -1e300], [1e300, 1e300]]), np.array([[-1e300, 1e300]])]
    y = [["a", "b"], ["b"]]
    est = Tagger(max_iter=5, random_state=0)
    with pytest.raises(ValueError, match="overflowed .non-finite values. during pass"):
        est.fit(X, y)
    assert not hasattr(est, "classes_")


def test_lbfgs_penalty_and_l1_ratio():
    """``l1_ratio`` alone sets the mix (the crfsuite facade's mapping);
    ``penalty`` forces pure L2 or L1."""
    X, y = random_sequences()
    kw = {"alpha": 0.05, "max_iter": 30}
    mix = LBFGSSequenceTagger(l1_ratio=0.4, **kw).fit(X, y)
    assert_allclose(mix._model, LBFGSSequenceTagger(penalty="elasticnet", l1_ratio=0.4,
                                                    **kw).fit(X, y)._model)
    assert np.count_nonzero(mix._model == 0) > 0
    l2 = LBFGSSequenceTagger(penalty="l2", l1_ratio=0.4, **kw).fit(X, y)
    assert_allclose(l2._model, LBFGSSequenceTagger(**kw).fit(X, y)._model)
    l1 = LBFGSSequenceTagger(penalty="l1", **kw).fit(X, y)
    assert_allclose(l1._model, LBFGSSequenceTagger(l1_ratio=1.0, **kw).fit(X, y)._model)
