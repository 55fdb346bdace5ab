"""The shared Cython core against NumPy re-implementations."""
import numpy as np
import pytest
import scipy.sparse as sp
from _oracles import numpy_linear_sgd as numpy_sgd
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_secondorder._core._dataset import RowDataset
from sklearn_secondorder._core._losses import (
    LOSSES,
    py_softmax_curvature,
    py_softmax_loss,
)
from sklearn_secondorder._core._sgd_fast import (
    LinearSGDOptions,
    LinearSGDState,
    sgd_epochs,
)
from sklearn_secondorder._core._weights import ScaledWeights


# ---------------------------------------------------------------- dataset
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("value_dtype", [np.float64, np.float32])
def test_dataset_rows_dense_and_csr_agree(index_dtype, value_dtype):
    rng = np.random.RandomState(1)
    D = sp.random(20, 7, density=0.3, random_state=rng).toarray().astype(value_dtype)
    C = sp.csr_matrix(D)
    C.indices, C.indptr = C.indices.astype(index_dtype), C.indptr.astype(index_dtype)
    y, sw = rng.randn(20), rng.rand(20)
    dense, csr = RowDataset(D, y, sw), RowDataset(C, y, sw)
    assert csr.is_sparse and not dense.is_sparse
    for k in range(20):
        xd, idd, yd, swd = dense.row_py(k)
        xs, ids, ys, sws = csr.row_py(k)
        assert_array_equal(idd, np.arange(7))
        assert_allclose(xd, D[k].astype(np.float64))
        row = np.zeros(7)
        row[ids] = xs
        assert_allclose(row, D[k])
        assert (yd, swd) == (ys, sws) == (y[k], sw[k])


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("value_dtype", [np.float64, np.float32])
def test_dataset_with_targets_reads_the_same_rows(sparse, value_dtype):
    """``with_targets``: the rows of the dataset it comes from (not converted
    again), its own targets, weights and order; the original is unchanged."""
    rng = np.random.RandomState(2)
    D = sp.random(15, 6, density=0.4, random_state=rng).toarray().astype(value_dtype)
    # a wider dense dataset first: the shared dense index has more entries
    RowDataset(np.zeros((2, 40)), np.zeros(2), np.ones(2))
    base = RowDataset(sp.csr_matrix(D) if sparse else D, np.zeros(15), np.ones(15))
    y, sw = rng.randn(15), rng.rand(15)
    ds = base.with_targets(y, sw)
    ds.shuffle_py(5)
    assert_array_equal(base.order_, np.arange(15))
    for k in range(15):
        i = ds.order_[k]
        x, ind, yk, swk = ds.row_py(k)
        row = np.zeros(6)
        row[ind] = x
        assert_allclose(row, D[i].astype(np.float64))
        assert (yk, swk) == (y[i], sw[i])
        assert base.row_py(i)[2:] == (0.0, 1.0)
    if not sparse:
        assert_array_equal(ds.row_py(0)[1], np.arange(6))
    with pytest.raises(ValueError, match="same number of rows"):
        base.with_targets(np.zeros(3), np.ones(15))


@pytest.mark.parametrize("sparse", [False, True])
def test_a_fit_converts_its_rows_once(monkeypatch, sparse):
    """One-vs-rest with monitored passes (3 problems x 3 passes, one kernel
    call each): the rows are converted once for the call, every call reading
    them through ``with_targets``; the model is the one of unmonitored passes."""
    from sklearn.datasets import make_classification
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_secondorder import PlainSGDClassifier
    from sklearn_secondorder.linear import _sgd, _training_loop

    X, y = make_classification(n_samples=90, n_features=6, n_informative=4, n_classes=3,
                               random_state=0)
    X = sp.csr_matrix(X) if sparse else X
    built = []

    def counting(*args):
        built.append(args)
        return RowDataset(*args)

    for module in (_training_loop, _sgd):       # (wherever a linear module builds one)
        if hasattr(module, "RowDataset"):
            monkeypatch.setattr(module, "RowDataset", counting)
    kw = dict(loss="hinge", eta0=0.01, max_iter=3, random_state=0, n_jobs=1)
    with pytest.warns(ConvergenceWarning):       # (3 passes: the rule never stops)
        monitored = PlainSGDClassifier(tol=0.0, n_iter_no_change=10, **kw).fit(X, y)
    assert len(built) == 1
    plain = PlainSGDClassifier(tol=None, **kw).fit(X, y)
    assert len(built) == 2
    assert_allclose(monitored.coef_, plain.coef_, rtol=1e-10)


def test_dataset_shuffle_is_seeded_permutation():
    X = np.zeros((50, 2))
    a, b = RowDataset(X, np.arange(50.0), np.ones(50)), RowDataset(X, np.arange(50.0), np.ones(50))
    assert a.shuffle_py(7) == b.shuffle_py(7)
    assert_array_equal(a.order_, b.order_)
    assert sorted(a.order_) == list(range(50))
    assert not np.array_equal(a.order_, np.arange(50))
    assert a.row_py(0)[2] == a.order_[0]  # y was the row number


def test_dataset_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="same number of rows"):
        RowDataset(np.zeros((3, 2)), np.zeros(2), np.ones(3))


# ---------------------------------------------------------------- weights
@pytest.mark.parametrize("K", [1, 3])
def test_scaled_weights_match_plain_vector(K):
    """Random dot/add/shrink sequence (through folds) vs an explicit vector."""
    rng = np.random.RandomState(0)
    d = 9
    v = np.zeros(d * K)
    w = ScaledWeights(v, K)
    ref = np.zeros((d, K))
    for step in range(300):
        nnz = rng.randint(0, d + 1)
        ind = np.sort(rng.choice(d, nnz, replace=False)).astype(np.int32)
        x = rng.randn(nnz)
        assert_allclose(w.py_dot(x, ind), x @ ref[ind], rtol=1e-12, atol=1e-12)
        c = rng.randn(K)
        w.py_add(x, ind, c)
        ref[ind] += np.outer(x, c)
        f = 0.3 if step % 50 == 0 else 0.97  # crosses the fold threshold
        w.py_shrink(f)
        ref *= f
        assert_allclose(w.weights(), ref, rtol=1e-10, atol=1e-300)
    w.py_fold()
    assert w.scale == 1.0
    assert_allclose(v.reshape(d, K), ref, rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("K", [1, 2])
def test_lazy_average_matches_mean_of_iterates(K):
    rng = np.random.RandomState(3)
    d = 6
    v, u = np.zeros(d * K), np.zeros(d * K)
    w = ScaledWeights(v, K, u)
    ref = np.zeros((d, K))
    iterates = []
    for step in range(200):
        ind = np.sort(rng.choice(d, rng.randint(1, d), replace=False)).astype(np.int32)
        x, c = rng.randn(ind.size), rng.randn(K)
        f = 1e-4 if step % 40 == 39 else 0.99  # forces folds mid-run
        w.py_shrink(f)
        ref *= f
        w.py_add(x, ind, c)
        ref[ind] += np.outer(x, c)
        w.py_count_iterate()
        iterates.append(ref.copy())
        if step % 37 == 0:
            assert_allclose(w.average(), np.mean(iterates, axis=0), rtol=1e-9, atol=1e-12)
    w.py_fold()
    assert_allclose(u.reshape(d, K) / len(iterates), np.mean(iterates, axis=0),
                    rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- losses
LOSS_TABLE = [  # (loss, p, y, value, dloss, curvature)
    ("hinge", 0.5, 1, 0.5, -1.0, 0.0),
    ("hinge", 2.0, 1, 0.0, 0.0, 0.0),
    ("hinge", 0.5, -1, 1.5, 1.0, 0.0),
    ("squared_hinge", 0.5, 1, 0.25, -1.0, 2.0),
    ("squared_hinge", -1.0, -1, 0.0, 0.0, 0.0),
    ("modified_huber", 0.0, 1, 1.0, -2.0, 2.0),
    ("modified_huber", -3.0, 1, 12.0, -4.0, 0.0),
    ("modified_huber", 1.5, 1, 0.0, 0.0, 0.0),
    ("log_loss", 0.0, 1, np.log(2), -0.5, 0.25),
    ("log_loss", 40.0, -1, 40.0, 1.0, 0.0),
    ("log_loss", -800.0, -1, 0.0, -0.0, 0.0),
]


@pytest.mark.parametrize("name, p, y, value, dloss, curv", LOSS_TABLE)
def test_loss_table(name, p, y, value, dloss, curv):
    loss = LOSSES[name]()
    assert loss.py_loss(p, y) == pytest.approx(value, rel=1e-12, abs=1e-15)
    assert loss.py_dloss(p, y) == pytest.approx(dloss, rel=1e-12, abs=1e-15)
    assert loss.py_curvature(p, y) == pytest.approx(curv, rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_derivatives_finite_differences(name):
    loss, h = LOSSES[name](), 1e-6
    kinks = {1.0, -1.0}
    for y in (-1.0, 1.0):
        for p in np.linspace(-3.1, 3.1, 41):
            if any(abs(y * p - k) < 1e-3 for k in kinks):
                continue
            fd = (loss.py_loss(p + h, y) - loss.py_loss(p - h, y)) / (2 * h)
            assert loss.py_dloss(p, y) == pytest.approx(fd, rel=1e-6, abs=1e-7)
            fd2 = (loss.py_dloss(p + h, y) - loss.py_dloss(p - h, y)) / (2 * h)
            assert loss.py_curvature(p, y) == pytest.approx(fd2, rel=1e-5, abs=1e-6)


def test_losses_pickle():
    import pickle
    for cls in LOSSES.values():
        assert type(pickle.loads(pickle.dumps(cls()))) is cls


def test_softmax_loss_gradient_and_curvature_finite_differences():
    rng = np.random.RandomState(0)
    s, h = rng.randn(5) * 3, 1e-6
    val, grad = py_softmax_loss(s, 2)
    assert val == pytest.approx(np.log(np.exp(s).sum()) - s[2], rel=1e-12)
    fd = [(py_softmax_loss(s + h * e, 2)[0] - py_softmax_loss(s - h * e, 2)[0]) / (2 * h)
          for e in np.eye(5)]
    assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
    p = grad + np.eye(5)[2]
    hess_fd = np.array([(py_softmax_loss(s + h * e, 2)[1] - py_softmax_loss(s - h * e, 2)[1])
                        / (2 * h) for e in np.eye(5)])
    assert_allclose(py_softmax_curvature(p), hess_fd, rtol=1e-5, atol=1e-8)
    # huge scores do not overflow
    assert np.isfinite(py_softmax_loss(np.array([1e4, -1e4, 0.0]), 1)[0])


# ---------------------------------------------------------------- SGD driver


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("K, loss_name", [(1, "log_loss"), (1, "hinge"), (1, "modified_huber"),
                                          (3, None)])
@pytest.mark.parametrize("average", [False, True])
def test_sgd_epochs_match_numpy(sparse, K, loss_name, average):
    rng = np.random.RandomState(0)
    X = sp.random(40, 8, density=0.4, random_state=rng, format="csr")
    Xd = X.toarray()
    y = rng.randint(0, K, 40).astype(float) if K > 1 else np.where(rng.rand(40) > 0.5, 1.0, -1.0)
    sw = rng.choice([0.0, 0.5, 1.0, 2.0], 40)
    loss = LOSSES[loss_name]() if loss_name else None
    coef, intercept = np.zeros(8 * K), np.zeros(K)
    kw = dict(alpha=0.01, eta0=0.5, t0=3.0, fit_intercept=True)
    avg = (np.zeros(8 * K), np.zeros(K)) if average else (None, None)
    state = LinearSGDState(coef, intercept, avg_coef=avg[0], avg_intercept=avg[1])
    sgd_epochs(RowDataset(X if sparse else Xd, y, sw), state,
               LinearSGDOptions(lam=kw["alpha"], eta0=kw["eta0"], t0=kw["t0"]), loss=loss,
               n_epochs=3, shuffle=False, fit_intercept=kw["fit_intercept"])
    W, b, t = numpy_sgd(Xd, y, sw, K=K, loss=loss, n_epochs=3, average=average, **kw)
    assert state.t == t == 3 * np.count_nonzero(sw)  # zero weights do not count
    if average:
        coef, intercept = avg[0] / state.n_iterates, avg[1] / state.n_iterates
    assert_allclose(coef.reshape(8, K), W, rtol=1e-10, atol=1e-12)
    assert_allclose(intercept, b, rtol=1e-10, atol=1e-12)


def test_sgd_epochs_report_divergence():
    X = np.array([[1e300], [1e300]])
    coef, b = np.zeros(1), np.zeros(1)
    result = sgd_epochs(RowDataset(X, np.array([1.0, -1.0]), np.ones(2)),
                        LinearSGDState(coef, b),
                        LinearSGDOptions(learning_rate="constant", eta0=1.0, lam=1e-4),
                        loss=LOSSES["squared_hinge"](), n_epochs=5, shuffle=False)
    assert result.diverged


# ---------------------------------------------------------------- calibration
def test_calibration_picks_the_best_trial_and_halves_it():
    """eta0='auto' (Bottou's recipe) returns half of the trial step with the lowest
    objective, checked against an exhaustive run of the same trial passes."""
    from sklearn_secondorder._calibration import calibrate_linear_eta0
    from sklearn_secondorder._core._sgd_fast import trial_pass
    rng = np.random.RandomState(0)
    X = rng.randn(300, 5)
    y = np.where(X @ rng.randn(5) > 0, 1.0, -1.0)
    sw = np.ones(300)
    kw = dict(loss=LOSSES["log_loss"](), n_outputs=1, fit_intercept=True)
    eta = calibrate_linear_eta0(X, y, sw, np.zeros(5), np.zeros(1), lam=1e-3,
                                random_state=np.random.RandomState(0), **kw)
    ds = RowDataset(X, y, sw)  # n <= 1000: the sample is all rows, in order
    grid = 0.1 * 2.0 ** np.arange(-20, 21)
    objs = [trial_pass(ds, np.zeros(5), np.zeros(1),
                       LinearSGDOptions(lam=1e-3, learning_rate="constant", eta0=e), **kw)
            for e in grid]
    best = grid[int(np.argmin(objs))]
    assert eta == pytest.approx(best / 2)


def test_calibration_reports_divergence():
    from sklearn_secondorder._calibration import calibrate_linear_eta0
    X = np.array([[1e300], [1e300]])
    with pytest.raises(ValueError, match="calibration diverged"):
        calibrate_linear_eta0(X, np.array([1.0, -1.0]), np.ones(2), np.zeros(1), np.zeros(1),
                              loss=LOSSES["squared_hinge"](), n_outputs=1, lam=1e-4,
                              fit_intercept=True, random_state=np.random.RandomState(0))


def test_decay_exp_is_exp_within_two_ulp():
    """The decays' exp (``_lazy_steps.decay_exp``: a Taylor polynomial near 0,
    else libm's) against NumPy's over the range a decay takes; 1 at 0."""
    from sklearn_secondorder._core._lazy_steps import py_decay_exp
    rng = np.random.RandomState(0)
    z = np.concatenate([-rng.exponential(s, 20000) for s in (1e-4, 5e-4, 1e-3, 0.3, 5.0)]
                       + [rng.uniform(-700, 0, 20000), [0.0, -5e-4, -1e-3]])
    got, ref = py_decay_exp(z), np.exp(z)
    assert np.max(np.abs(got - ref) / np.spacing(ref)) <= 2.0
    assert py_decay_exp(np.array([0.0]))[0] == 1.0
