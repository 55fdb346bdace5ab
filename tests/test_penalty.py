"""The L1 / elastic-net penalty (Tsuruoka et al.'s cumulative penalty, ACL 2009)
in the shared core, against dense NumPy re-implementations that penalise every
weight at every step, and the ``penalty`` / ``l1_ratio`` parameters."""
import numpy as np
import pytest
import scipy.sparse as sp
from _oracles import _data, numpy_crf_psa_l1, numpy_crf_sgd_l1, numpy_psa_l1, numpy_sgd_l1
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_classification

from sklearn_secondorder import (
    ASFSequenceTagger,
    PlainSGDClassifier,
    PSAClassifier,
    PSASequenceTagger,
    SBMLogisticRegression,
    SGDQNLinearSVC,
    SGDSequenceTagger,
)
from sklearn_secondorder._core._crf_psa import psa_epochs as crf_psa_epochs
from sklearn_secondorder._core._crf_sgd import CRFSGDOptions, CRFState
from sklearn_secondorder._core._crf_sgd import sgd_epochs as crf_sgd_epochs
from sklearn_secondorder._core._dataset import RowDataset
from sklearn_secondorder._core._lazy_steps import LazyStepState, PSAOptions
from sklearn_secondorder._core._losses import LOSSES
from sklearn_secondorder._core._psa_fast import psa_epochs
from sklearn_secondorder._core._sgd_fast import (
    LinearSGDOptions,
    LinearSGDState,
    sgd_epochs,
    trial_pass,
)
from sklearn_secondorder._core._weights import ScaledWeights


def _rows(K, seed=0, n=60, d=12, density=0.25):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=density, random_state=rng, format="csr")
    X.data = rng.uniform(-1, 1, X.data.size)
    y = rng.randint(0, K, n).astype(float) if K > 1 else np.where(rng.rand(n) > .5, 1., -1.)
    sw = rng.choice([0.0, 1.0, 1.0, 2.5], n)
    return X, y, sw


# ---------------------------------------------------------------------------
# plain SGD on ScaledWeights
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("K, loss_name", [(1, "log_loss"), (1, "hinge"), (3, None)])
@pytest.mark.parametrize("l1_ratio, learning_rate", [(1.0, "optimal"), (0.5, "optimal"),
                                                      (0.7, "constant")])
@pytest.mark.parametrize("sparse", [True, False])
def test_sgd_kernel_matches_dense_cumulative_penalty(K, loss_name, l1_ratio, learning_rate,
                                                     sparse):
    """Lazy catch-up (before a read, after a write, at the end) == every weight
    penalised at every step; the scale trick and its folds included (the
    strong shrink folds the scale several times)."""
    X, y, sw = _rows(K)
    loss = LOSSES[loss_name]() if loss_name else None
    alpha, eta0 = 0.05, 0.5
    t0 = 1.0 / (alpha * eta0)
    state = LinearSGDState.zeros(X.shape[1], K, average=False, seed=1, l1=True)
    options = LinearSGDOptions(lam=alpha * (1.0 - l1_ratio), l1=alpha * l1_ratio,
                               learning_rate=learning_rate, eta0=eta0, t0=t0)
    ds = RowDataset(X if sparse else X.toarray(), y, sw)
    # two calls, as partial_fit makes them: u and q carry over
    sgd_epochs(ds, state, options, loss=loss, n_epochs=2, shuffle=False)
    sgd_epochs(ds, state, options, loss=loss, n_epochs=2, shuffle=False)
    w, b, t = numpy_sgd_l1(X, y, sw, K=K, loss=loss, alpha=alpha, l1_ratio=l1_ratio,
                           eta0=eta0, t0=t0, learning_rate=learning_rate, n_epochs=4)
    assert state.t == t
    assert_allclose(state.coef, w, rtol=1e-10, atol=1e-12)
    assert_allclose(state.intercept, b, rtol=1e-10, atol=1e-12)
    assert np.sum(w == 0) > 0
    assert_array_equal(state.coef == 0, w == 0)


def test_scaled_weights_clip_on_true_weights():
    """``w = scale v``: the penalty is clipped at the true weight's zero and a
    debt shrinks with the weights; a fold keeps ``u`` and ``q`` consistent."""
    v = np.array([1.0, -2.0, 0.5, 0.0])
    q = np.zeros(4)
    w = ScaledWeights(v, 1, None, 0.0, q, 0.0)
    w.py_shrink(0.5)                   # w = [0.5, -1, 0.25, 0]
    w.py_l1_add(0.3)                   # 0.3 on w
    w.py_l1_apply(np.array([0, 1, 2, 3], dtype=np.int32))
    assert_allclose(w.weights().ravel(), [0.2, -0.7, 0.0, 0.0])
    w.py_shrink(0.5)                   # w = [0.1, -0.35, 0, 0]; weight 2 owes 0.025 more
    w.py_fold()
    assert w.l1_u == pytest.approx(0.15)          # the total, shrunk with the weights
    assert_allclose(q, [-0.15, 0.15, -0.125, 0.0])
    w.py_l1_add(0.05)
    w.py_add(np.array([0.5]), np.array([2], dtype=np.int32), 1.0)   # weight 2 = 0.5
    w.py_l1_apply_all()
    # weight 2 owed u + q = 0.2 + (-0.125): the part of its debt the clip kept
    assert_allclose(w.weights().ravel(), [0.05, -0.3, 0.5 - 0.075, 0.0])


# ---------------------------------------------------------------------------
# PSA on the lazy core (_lazy_steps)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("K, loss_name", [(1, "log_loss"), (1, "squared_hinge"), (3, None)])
# (lam, l1, eta0, b): idle windows in closed form with L2 (b eta lam small), replayed
# (0.4), pure L1 (closed form of the linear drift), weights crossing 0 while idle, and
# k eta lam < 5e-4 (a multi-output block's catch-up as one vectorised loop)
@pytest.mark.parametrize("lam, l1, eta0, b", [(0.02, 0.01, 0.3, 2), (0.4, 0.02, 0.25, 2),
                                              (0.0, 0.004, 0.3, 2), (0.01, 0.05, 0.3, 1),
                                              (1e-4, 0.03, 0.3, 2)])
def test_psa_kernel_matches_dense_cumulative_penalty(sparse, K, loss_name, lam, l1, eta0, b):
    """The lazy L1 on PSA's per-coordinate steps (catch-up in closed form,
    events, whole idle windows) == the dense algorithm, steps and all."""
    X, y, sw = _rows(K, n=90, d=14, density=0.12)
    loss = LOSSES[loss_name]() if loss_name else None
    state = LazyStepState.zeros(X.shape[1] + 1, K, eta0, l1=True)
    options = PSAOptions(lam=lam, period=b, l1=l1)
    ds = RowDataset(X if sparse else X.toarray(), y, sw)
    for _ in range(2):
        info = psa_epochs(ds, state, options, loss=loss, n_epochs=2, shuffle=False)
    th, eta, t = numpy_psa_l1(X, y, sw, K=K, loss=loss, lam=lam, l1=l1, eta0=eta0, b=b,
                              n_epochs=4)
    assert state.t == t and not info.diverged
    _assert_l1_matches(state, th, eta)
    assert np.any(state.step_sizes < eta0 * 0.9999)
    assert l1 < 0.02 or np.sum(th[:-K] == 0) > 0


def _assert_l1_matches(state, th, eta):
    """Within the float32 tolerance of the lazy core (test_psa), and the
    same exact zeros wherever the oracle's weight is not within it of 0."""
    atol = 1e-5 * np.abs(th).max()
    w = state.weights
    assert_allclose(w, th, rtol=1e-5, atol=atol)
    assert_allclose(state.step_sizes, eta, rtol=1e-5)
    clear = np.abs(th) > atol
    assert np.all(w[th == 0] == 0) or np.all(np.abs(w[th == 0]) <= atol)
    assert np.all(w[clear] != 0)


@pytest.mark.parametrize("K", [1, 4])
@pytest.mark.parametrize("lam, l1", [(0.02, 0.002), (0.0, 0.001), (0.02, 0.05)])
def test_long_idle_windows_with_l1_match_numpy(K, lam, l1):
    """Rarely touched features cross many whole idle windows at once: weights
    replayed until they reach 0, then the zero case (the debt grows, eta
    kept), with and without L2 == the dense algorithm."""
    rng = np.random.RandomState(5)
    n, d, b = 300, 8, 3
    X = np.zeros((n, d))
    X[:, :2] = rng.randn(n, 2) * (rng.rand(n, 2) < 0.6)
    for j, gap in zip(range(2, d), (30, 50, 75, 100, 150, 300)):
        X[rng.choice(n, n // gap, replace=False), j] = 3 * rng.randn(n // gap)
    y = rng.randint(0, K, n).astype(float) if K > 1 else np.where(rng.rand(n) > .5, 1., -1.)
    sw = np.ones(n)
    loss = LOSSES["log_loss"]() if K == 1 else None
    X = sp.csr_matrix(X)
    state = LazyStepState.zeros(d + 1, K, 0.5, l1=True)
    psa_epochs(RowDataset(X, y, sw), state, PSAOptions(lam=lam, period=b, l1=l1), loss=loss,
               n_epochs=2, shuffle=False)
    th, eta, t = numpy_psa_l1(X, y, sw, K=K, loss=loss, lam=lam, l1=l1, eta0=0.5, b=b,
                              n_epochs=2)
    _assert_l1_matches(state, th, eta)
    assert np.all(state.records["owed_down"] >= -1e-12)
    assert np.all(state.records["owed_up"] >= -1e-12)


# ---------------------------------------------------------------------------
# CRFs: SGD and PSA with L1 against dense NumPy on tiny data
# ---------------------------------------------------------------------------
def _sequences(rng, n_seq=12, n_attr=8, n_labels=3, max_len=4, density=0.25):
    lengths = rng.integers(1, max_len + 1, size=n_seq)
    X = sp.random(int(lengths.sum()), n_attr, density=density, random_state=rng,
                  format="csr")
    X.data = rng.normal(size=X.data.shape)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    labels = rng.integers(0, n_labels, size=int(lengths.sum())).astype(np.int32)
    return X, offsets, labels


@pytest.mark.parametrize("power, l1_ratio", [(1.0, 1.0), (1.0, 0.4), (0.0, 0.6)])
def test_crf_sgd_matches_dense_cumulative_penalty(power, l1_ratio):
    rng = np.random.default_rng(3)
    A, L = 8, 3
    X, offsets, labels = _sequences(rng, n_attr=A, n_labels=L)
    kw = dict(eta0=0.4, power=power, alpha=0.08, l1_ratio=l1_ratio)
    ref = numpy_crf_sgd_l1(X, offsets, labels, A, L, n_epochs=5, **kw)
    state = CRFState.new(A, L, averaged=False, seed=1, l1=True)
    ds = _data(X, offsets, labels)
    opts = CRFSGDOptions(eta0=kw["eta0"], power=power, lam=kw["alpha"] * (1.0 - l1_ratio),
                         l1=kw["alpha"] * l1_ratio)
    crf_sgd_epochs(ds, state, opts, n_epochs=3, shuffle=False)
    crf_sgd_epochs(ds, state, opts, n_epochs=2, shuffle=False)
    assert_allclose(state.coef, ref, rtol=1e-10, atol=1e-12)
    assert np.sum(ref == 0) > 0
    assert_array_equal(state.coef == 0, ref == 0)


@pytest.mark.parametrize("lam, l1, b", [(0.01, 0.02, 2), (0.3, 0.02, 2), (0.0, 0.01, 3)])
def test_crf_psa_matches_dense_cumulative_penalty(lam, l1, b):
    rng = np.random.default_rng(8)
    A, L = 12, 3
    X, offsets, labels = _sequences(rng, n_seq=15, n_attr=A, n_labels=L, density=0.12)
    ref_w, ref_eta, t = numpy_crf_psa_l1(X, offsets, labels, A, L, eta0=0.4, lam=lam, l1=l1,
                                         b=b, n_epochs=4)
    st = LazyStepState.zeros(A + L + 1, L, 0.4, l1=True)
    options = PSAOptions(lam=lam, period=b, l1=l1)
    ds = _data(X, offsets, labels)
    crf_psa_epochs(ds, st, options, n_epochs=2, shuffle=False)
    info = crf_psa_epochs(ds, st, options, n_epochs=2, shuffle=False)
    assert st.t == t and not info.diverged
    _assert_l1_matches(st, ref_w, ref_eta)
    assert np.sum(ref_w == 0) > 0


# ---------------------------------------------------------------------------
# estimators
# ---------------------------------------------------------------------------
def _noisy(seed=0, n=400, d=60):
    X, y = make_classification(n, d, n_informative=5, n_redundant=0, random_state=seed)
    return X, y


LINEAR = [PlainSGDClassifier, PSAClassifier]


@pytest.mark.parametrize("Est", LINEAR)
def test_l2_path_unchanged(Est):
    """'l2' (the default), and 'elasticnet' with l1_ratio=0, are the L2 path bit
    for bit."""
    X, y = _noisy()
    ref = Est(random_state=0, max_iter=3).fit(X, y)
    for kw in (dict(penalty="l2", l1_ratio=0.7), dict(penalty="elasticnet", l1_ratio=0.0)):
        est = Est(random_state=0, max_iter=3, **kw).fit(X, y)
        assert_array_equal(est.coef_, ref.coef_)
        assert_array_equal(est.intercept_, ref.intercept_)


# Fits made with the code before the L1 penalty (main at 61c4911), fixed seeds:
# the L2 path must give them still (to rounding across machines' libm).
_BEFORE = {
    PlainSGDClassifier: [-0.001546385476250126, 0.03562075472032389, -0.01734074482379488],
    PSAClassifier: [-0.007035378072143872, 0.033476786238525395, -0.01515210857883527],
}


@pytest.mark.parametrize("Est", LINEAR)
def test_l2_fit_as_before(Est):
    X, y = _noisy()
    est = Est(random_state=0, max_iter=3).fit(X, y)
    # (PSA's step sizes are float32 now: its tolerance of test_psa)
    rtol = 1e-5 if Est is PSAClassifier else 1e-12
    assert_allclose(est.coef_.ravel()[:3], _BEFORE[Est], rtol=rtol)


@pytest.mark.parametrize("Est", LINEAR)
@pytest.mark.parametrize("penalty", ["l1", "elasticnet"])
def test_dense_and_csr_fits_agree(Est, penalty):
    X, y = _noisy()
    kw = dict(penalty=penalty, alpha=0.01, random_state=0, max_iter=3, eta0=0.05)
    dense = Est(**kw).fit(X, y)
    csr = Est(**kw).fit(sp.csr_matrix(X), y)
    assert_allclose(csr.coef_, dense.coef_, rtol=1e-10, atol=1e-13)
    assert_array_equal(csr.coef_ == 0, dense.coef_ == 0)


@pytest.mark.parametrize("Est", LINEAR)
def test_l1_selects_features(Est):
    """5 informative features of 60: L1 keeps few weights and the accuracy of
    L2; elastic-net sits between."""
    X, y = _noisy()
    kw = dict(alpha=0.01, random_state=0, max_iter=5)
    l2 = Est(**kw).fit(X, y)
    l1 = Est(penalty="l1", **kw).fit(X, y)
    en = Est(penalty="elasticnet", l1_ratio=0.5, **kw).fit(X, y)
    nnz = [int(np.sum(m.coef_ != 0)) for m in (l2, en, l1)]
    assert nnz[0] == 60 and nnz[2] < 30 and nnz[2] <= nnz[1] <= nnz[0]
    assert l1.score(X, y) >= l2.score(X, y) - 0.03


def test_averaged_model_keeps_the_last_iterate_support():
    X, y = _noisy()
    est = PlainSGDClassifier(penalty="l1", alpha=0.01, average=True, random_state=0,
                             max_iter=3).fit(X, y)
    (state,) = est._states
    assert np.any(state.coef == 0)
    assert_array_equal(est.coef_.ravel() == 0, state.coef == 0)
    # the kept weights are the average's
    avg = state.avg_coef / state.n_iterates
    keep = state.coef != 0
    assert_allclose(est.coef_.ravel()[keep], avg[keep])


def test_partial_fit_continues_the_penalty():
    """Two partial_fit calls == one fit pass over the same rows in the same order."""
    X, y = _noisy()
    kw = dict(penalty="l1", alpha=0.01, eta0=0.05, learning_rate="constant", shuffle=False,
              random_state=0)
    one = PlainSGDClassifier(max_iter=1, **kw).fit(X, y)
    two = PlainSGDClassifier(**kw)
    two.partial_fit(X[:200], y[:200], classes=[0, 1]).partial_fit(X[200:], y[200:])
    assert_allclose(two.coef_, one.coef_, rtol=1e-12, atol=1e-15)


def test_calibration_objective_includes_l1():
    """A trial pass with a negligible step returns the objective at the start
    weights, the L1 term included."""
    X, y = _noisy(n=100, d=10)
    ys = np.where(y == 1, 1.0, -1.0)
    rng = np.random.RandomState(0)
    coef, intercept = rng.randn(10), np.array([0.3])
    loss = LOSSES["log_loss"]()
    alpha, r = 0.1, 0.4
    options = LinearSGDOptions(lam=alpha * (1 - r), l1=alpha * r, learning_rate="constant",
                               eta0=1e-300)
    obj = trial_pass(RowDataset(X, ys, np.ones(100)), coef, intercept, options, loss=loss)
    z = X @ coef + 0.3
    ref = np.mean(np.logaddexp(0, -ys * z)) + alpha * (r * np.abs(coef).sum()
                                                      + (1 - r) / 2 * coef @ coef)
    assert obj == pytest.approx(ref, rel=1e-12)


def test_invalid_penalties_are_refused():
    X, y = _noisy(n=50, d=5)
    with pytest.raises(ValueError, match="penalty"):
        PlainSGDClassifier(penalty="l0").fit(X, y)
    with pytest.raises(ValueError, match="l1_ratio"):
        PSAClassifier(penalty="elasticnet", l1_ratio=1.5).fit(X, y)
    with pytest.raises(ValueError, match="SGD-QN.*curvature"):
        SGDQNLinearSVC(penalty="l1").fit(X, y)
    with pytest.raises(ValueError, match="SBM.*closed form"):
        SBMLogisticRegression(penalty="elasticnet").fit(X, y)
    assert SBMLogisticRegression(penalty="l2").fit(X, y).score(X, y) > 0.5
    with pytest.raises(ValueError, match="penalty"):
        ASFSequenceTagger(penalty="L1").fit([[{"a": 1}], [{"b": 1}]], [["x"], ["y"]])


# ---------------------------------------------------------------------------
# taggers
# ---------------------------------------------------------------------------
def _tagging(seed=0, n=60):
    rng = np.random.RandomState(seed)
    X, y = [], []
    for _ in range(n):
        T = rng.randint(2, 6)
        words = rng.randint(0, 40, T)
        X.append([{"w": f"w{k}", f"noise{rng.randint(200)}": 1.0} for k in words])
        y.append(["A" if k < 20 else "B" for k in words])
    return X, y


TAGGERS = [SGDSequenceTagger, ASFSequenceTagger, PSASequenceTagger]


@pytest.mark.parametrize("Tagger", TAGGERS)
def test_tagger_l1_is_sparse_and_accurate(Tagger):
    X, y = _tagging()
    kw = dict(alpha=0.02, random_state=0, max_iter=3)
    l2 = Tagger(**kw).fit(X, y)
    l1 = Tagger(penalty="elasticnet", l1_ratio=0.8, **kw).fit(X, y)
    nz2, nz1 = np.sum(l2.coef_ != 0), np.sum(l1.coef_ != 0)
    assert nz1 < 0.5 * nz2
    assert l1.score(X, y) >= 0.95
    # the noise attributes are the ones dropped
    kept = {a for (a, _), v in l1.state_features_.items() if v != 0}
    assert sum(a.startswith("w") for a in kept) > sum(a.startswith("noise") for a in kept)


@pytest.mark.parametrize("Tagger", TAGGERS)
def test_tagger_l2_path_unchanged(Tagger):
    X, y = _tagging()
    ref = Tagger(random_state=0, max_iter=2).fit(X, y)
    est = Tagger(random_state=0, max_iter=2, penalty="elasticnet", l1_ratio=0.0).fit(X, y)
    assert_array_equal(est.coef_, ref.coef_)


def test_asf_average_on_the_iterate_support():
    X, y = _tagging()
    est = ASFSequenceTagger(penalty="l1", alpha=0.01, random_state=0, max_iter=3).fit(X, y)
    crf = est._state.crf
    assert np.any(crf.coef == 0)
    assert_array_equal(est._model == 0, crf.coef == 0)
    assert est.feedback_passes_ == [1, 3]
