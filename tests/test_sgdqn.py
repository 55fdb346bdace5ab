"""SGDQNLinearSVC and its kernel against a NumPy re-implementation of the
corrected SGD-QN (Bordes et al. 2009, Figure 2, with the 2010 erratum)."""
import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_classification
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_secondorder import SGDQNLinearSVC
from sklearn_secondorder._calibration import used_columns
from sklearn_secondorder._core._dataset import RowDataset
from sklearn_secondorder._core._losses import LOSSES
from sklearn_secondorder._core._sgdqn_fast import (
    SGDQNOptions,
    SGDQNState,
    csr_row_stats,
    primal_objective,
    sgdqn_epochs,
)
from sklearn_secondorder.linear._sgdqn import (
    T0_COST_SLACK,
    T0_GRID,
    T0_SAMPLE,
    t0_lower_bound,
)


# ------------------------------------------------------------ NumPy reference
def _dloss(loss, p, y):
    """d loss / d p, written independently of the Cython losses."""
    z = y * p
    if loss == "squared_hinge":
        return -2.0 * y * (1.0 - z) if z < 1.0 else 0.0
    if loss == "hinge":
        return -y if z < 1.0 else 0.0
    return -y / (1.0 + np.exp(z))  # log_loss


def _loss(loss, p, y):
    z = y * p
    if loss == "squared_hinge":
        return np.maximum(0.0, 1.0 - z) ** 2
    if loss == "hinge":
        return np.maximum(0.0, 1.0 - z)
    return np.logaddexp(0.0, -z)


def sgdqn_reference(X, y, sw, orders, *, loss, alpha, t0, skip, fit_intercept=True,
                    r_max=100.0, state=None):
    """Dense NumPy SGD-QN (corrected): returns (w, b, B, state).

    ``orders`` is the list of row orders, one per pass. ``state`` continues a
    previous call (for partial_fit).
    """
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
    d = X.shape[1]
    if state is None:
        state = dict(w=np.zeros(d), b=0.0, invB=np.full(d + 1, alpha * t0),
                     B=np.full(d + 1, 1.0 / (alpha * t0)), v=np.zeros(d + 1),
                     count=skip, update=False)
    s = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()}
    w, b, invB, B, v = s["w"], s["b"], s["invB"], s["B"], s["v"]
    for order in orders:
        for i in order:
            if sw[i] == 0:
                continue
            x = X[i]
            g = sw[i] * _dloss(loss, x @ w + b, y[i])
            if s["update"]:
                # secant of the full gradient between v (before the skip step) and w
                gv = sw[i] * _dloss(loss, x @ v[:d] + v[d], y[i])
                diff = np.append(w, b) - v
                r = np.full(d + 1, alpha)
                nz = diff[:d] != 0
                r[:d][nz] = alpha + (g - gv) * x[nz] / diff[:d][nz]
                if fit_intercept and diff[d] != 0:
                    r[d] = (g - gv) / diff[d]
                r = np.clip(r, alpha, r_max * alpha)
                invB += skip * r
                B = 1.0 / invB
                s["update"] = False
            s["count"] -= 1
            if s["count"] <= 0:
                v = np.append(w, b)
                lb = alpha * B[:d]
                f = 1.0 - skip * lb
                guard = f < 0.8
                f[guard] = np.where(lb[guard] < 1.0, (1.0 - lb[guard]) ** skip,
                                    np.exp(-skip * lb[guard]))
                w = w * f
                s["count"] = skip
                s["update"] = True
            w = w - g * B[:d] * x
            if fit_intercept:
                b = b - g * B[d]
    s.update(w=w, b=b, invB=invB, B=B, v=v)
    return w, b, B, s


def kernel_orders(n_samples, seed, n_epochs):
    """The row orders the kernel visits (RowDataset's seeded Fisher-Yates)."""
    ds = RowDataset(np.zeros((n_samples, 1)), np.zeros(n_samples), np.ones(n_samples))
    orders = []
    for _ in range(n_epochs):
        seed = ds.shuffle_py(seed)
        orders.append(ds.order_)
    return orders


def run_kernel(X, y, sw, *, loss, alpha, t0, skip, n_epochs, seed, fit_intercept=True,
               shuffle=True, r_max=100.0):
    state = SGDQNState.zeros(X.shape[1], seed)
    state.start(t0, alpha, skip)
    options = SGDQNOptions(lam=alpha, r_max=r_max)
    info = sgdqn_epochs(RowDataset(X, y, sw), state, options, loss=LOSSES[loss](),
                        n_epochs=n_epochs, shuffle=shuffle, fit_intercept=fit_intercept)
    return state.coef, state.intercept[0], state.B, info


# A t0 above t0_lower_bound of ``binary_problem`` at alpha=0.01 with the
# squared hinge (about 2.4e3): below it the first steps amplify the margin
# errors and the weights of a fit end up implausibly large (UserWarning).
T0_BINARY = 3e3


@pytest.fixture
def binary_problem():
    rng = np.random.RandomState(0)
    X = sp.random(80, 25, density=0.2, random_state=rng, format="csr")
    X.data = rng.uniform(-1, 2, X.data.shape)
    w = rng.randn(25)
    y = np.where(X @ w + 0.3 * rng.randn(80) > 0, 1.0, -1.0)
    sw = rng.uniform(0.5, 2.0, 80)
    sw[[3, 17]] = 0.0
    return X, y, sw


# ----------------------------------------------------------------- kernel
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("loss", ["squared_hinge", "hinge", "log_loss"])
@pytest.mark.parametrize("fit_intercept, r_max", [(True, 100.0), (False, 100.0),
                                                  (True, 1e4)])
def test_kernel_matches_numpy_reference(binary_problem, fmt, loss, fit_intercept, r_max):
    X, y, sw = binary_problem
    Xk = X.toarray() if fmt == "dense" else X
    # skip alpha B = 10 * 0.05 / (0.05 * 40) = 0.25 at first: the early skip
    # steps take the guarded shrink (1 - alpha B_i)^skip.
    kw = dict(loss=loss, alpha=0.05, t0=40.0, skip=10, fit_intercept=fit_intercept,
              r_max=r_max)
    coef, b, B, info = run_kernel(Xk, y, sw, n_epochs=4, seed=5, **kw)
    w_ref, b_ref, B_ref, s = sgdqn_reference(X, y, sw, kernel_orders(80, 5, 4), **kw)
    assert not info.diverged
    assert info.t == 4 * 78 and info.count == s["count"]
    assert info.update_b == s["update"]
    assert_allclose(coef, w_ref, rtol=1e-10, atol=1e-13)
    assert_allclose(b, b_ref, rtol=1e-10, atol=1e-13)
    assert_allclose(B, B_ref, rtol=1e-10)
    # Without curvature information every B_i would be equal: the secant
    # branch was exercised.
    if loss != "hinge":
        assert np.unique(B[:-1]).size > 5


def test_kernel_dense_and_csr_identical(binary_problem):
    X, y, sw = binary_problem
    kw = dict(loss="squared_hinge", alpha=0.005, t0=50.0, skip=3, n_epochs=3, seed=9)
    dense = run_kernel(X.toarray(), y, sw, **kw)
    csr = run_kernel(X, y, sw, **kw)
    for a, c in zip(dense[:3], csr[:3]):
        assert_array_equal(a, c)


def test_shrink_guard_keeps_weights_sign():
    """A skip step with skip * alpha * B >> 1 must not flip the weights' sign."""
    rng = np.random.RandomState(0)
    X = rng.randn(40, 4)
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    kw = dict(loss="log_loss", alpha=0.1, t0=0.5, skip=40, fit_intercept=False)
    # alpha * B = 1 / t0 = 2 at the first skip step: 1 - skip alpha B = -79.
    coef, _, _, _ = run_kernel(X, y, np.ones(40), n_epochs=1, seed=1, shuffle=False, **kw)
    w_ref, _, _, _ = sgdqn_reference(X, y, np.ones(40), [np.arange(40)], **kw)
    assert_allclose(coef, w_ref, rtol=1e-10)
    assert np.all(np.isfinite(coef))


def test_primal_objective_matches_numpy(binary_problem):
    X, y, sw = binary_problem
    w = np.random.RandomState(1).randn(25)
    for loss in ("squared_hinge", "hinge", "log_loss"):
        p = X @ w + 0.3
        expected = 0.05 * w @ w + np.sum(sw * _loss(loss, p, y)) / sw.sum()
        state = SGDQNState.zeros(25, seed=1)
        state.coef[:], state.intercept[:] = w, 0.3
        got = primal_objective(RowDataset(X, y, sw), state, SGDQNOptions(lam=0.1),
                               loss=LOSSES[loss]())
        assert_allclose(got, expected, rtol=1e-12)


# -------------------------------------------------------------- estimator
def test_fit_matches_reference_and_dense_equals_csr(binary_problem):
    X, y, sw = binary_problem
    labels = np.where(y > 0, "yes", "no")
    kw = dict(alpha=0.01, t0=T0_BINARY, skip=5, max_iter=3, random_state=0)
    dense = SGDQNLinearSVC(**kw).fit(X.toarray(), labels, sample_weight=sw)
    csr = SGDQNLinearSVC(**kw).fit(X, labels, sample_weight=sw)
    assert_array_equal(dense.coef_, csr.coef_)
    assert_array_equal(dense.intercept_, csr.intercept_)
    assert_array_equal(dense.B_, csr.B_)
    # The reference, fed the kernel's visiting order with the problem's seed.
    seed = dense._states[0].seed  # seed *after* fitting: recompute the start seed
    seed0 = np.random.RandomState(0).randint(1, np.iinfo(np.int32).max)
    w_ref, b_ref, B_ref, _ = sgdqn_reference(
        X, y, sw, kernel_orders(80, seed0, 3), loss="squared_hinge", alpha=0.01,
        t0=T0_BINARY, skip=5)
    assert seed != seed0
    assert_allclose(dense.coef_.ravel(), w_ref, rtol=1e-10, atol=1e-13)
    assert_allclose(dense.intercept_, [b_ref], rtol=1e-10, atol=1e-13)
    assert_allclose(dense.B_.ravel(), B_ref, rtol=1e-10)
    assert dense.t_ == 3 * 78 and dense.n_iter_ == 3


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge", "log_loss"])
@pytest.mark.parametrize("max_curvature", [100.0, 1e4])
def test_B_never_exceeds_its_start_value(loss, max_curvature):
    X, y = make_classification(n_samples=400, n_features=30, n_informative=10,
                               random_state=0)
    X = StandardScaler().fit_transform(X)
    clf = SGDQNLinearSVC(loss=loss, alpha=1e-3, max_iter=5, max_curvature=max_curvature,
                         random_state=0).fit(X, y)
    start = 1.0 / (clf.alpha * clf.t0_[0])
    assert np.all(clf.B_ <= start * (1 + 1e-12))
    assert np.all(clf.B_ > 0)
    # and the 1/t decay is inside B: with r_i >= alpha after t examples,
    # 1/B_i >= alpha (t0 + skip * number of re-estimates); a re-estimate
    # happens on the example after each skip step.
    n_updates = (clf.t_ - 1) // clf.skip_
    assert np.all(1.0 / clf.B_ >= clf.alpha * (clf.t0_[0] + clf.skip_ * n_updates)
                  * (1 - 1e-9))
    assert np.all(1.0 / clf.B_ <= clf.alpha * (clf.t0_[0] + max_curvature * clf.skip_
                                               * n_updates) * (1 + 1e-9))


def test_hinge_secants_are_mostly_zero():
    """With the hinge, l' is piecewise constant: the secant is 0 unless the
    margin crosses 1 between v and w, so most B_i keep the first-order
    schedule 1/(alpha (t0 + skip k)) (documented behaviour)."""
    rng = np.random.RandomState(0)
    X = sp.random(2000, 100, density=0.05, random_state=rng, format="csr")
    X.data[:] = 1.0
    y = np.where(X @ rng.randn(100) + 0.5 * rng.randn(2000) > 0, 1, -1)
    # t0 above t0_lower_bound for the squared hinge on these unscaled binary
    # rows (1.5e4): a smaller one makes its weights implausibly large.
    t0 = 2e4
    kw = dict(alpha=1e-3, t0=t0, skip=16, max_iter=2, random_state=0)
    on_schedule = {}
    for loss in ("hinge", "squared_hinge", "log_loss"):
        clf = SGDQNLinearSVC(loss=loss, **kw).fit(X, y)
        first_order = 1.0 / (1e-3 * (t0 + 16 * ((clf.t_ - 1) // 16)))
        on_schedule[loss] = np.mean(np.isclose(clf.B_[0, :-1], first_order, rtol=1e-9))
    assert on_schedule["hinge"] > 0.8
    assert on_schedule["squared_hinge"] < 0.5
    assert on_schedule["log_loss"] < 0.05


def test_skip_auto():
    rng = np.random.RandomState(0)
    X = sp.random(300, 200, density=0.05, random_state=rng, format="csr")
    y = rng.randint(2, size=300)
    # t0 above t0_lower_bound of every X below (at most 2.4e5 for the randn
    # one): with smaller ones the weights become implausibly large.
    t0 = 1e6
    clf = SGDQNLinearSVC(max_iter=1, t0=t0, random_state=0).fit(X, y)
    assert clf.skip_ == int(round(16 * 200 / (X.nnz / 300)))
    # the same data stored densely get the same skip (same model, see below)
    clf = SGDQNLinearSVC(max_iter=1, t0=t0, random_state=0).fit(X.toarray(), y)
    assert clf.skip_ == int(round(16 * 200 / (X.nnz / 300)))
    clf = SGDQNLinearSVC(max_iter=1, t0=t0, random_state=0).fit(rng.randn(300, 7), y)
    assert clf.skip_ == 16
    assert SGDQNLinearSVC(max_iter=1, t0=t0, skip=3).fit(X, y).skip_ == 3


def test_auto_settings_dense_and_csr_give_the_same_model(binary_problem):
    X, y, sw = binary_problem
    kw = dict(alpha=0.01, max_iter=3, random_state=0)
    dense = SGDQNLinearSVC(**kw).fit(X.toarray(), y, sample_weight=sw)
    csr = SGDQNLinearSVC(**kw).fit(X, y, sample_weight=sw)
    assert dense.skip_ == csr.skip_ > 16 and dense.t0_[0] == csr.t0_[0]
    assert_array_equal(dense.coef_, csr.coef_)
    assert_array_equal(dense.B_, csr.B_)


def test_t0_auto_picks_the_largest_nearly_lowest_primal_cost_after_one_pass():
    """With n <= 1000 the sample is the whole data; with shuffle=False the
    selection pass is a plain fit(max_iter=1) with that t0."""
    X, y = make_classification(n_samples=300, n_features=8, random_state=3)
    X = StandardScaler().fit_transform(X)
    ys = np.where(y == 1, 1.0, -1.0)
    lower = t0_lower_bound(X, np.ones(300), loss="squared_hinge", alpha=1e-2,
                           fit_intercept=True)
    assert T0_GRID[0] < lower < T0_GRID[-1]  # the bound removes some candidates
    costs = []
    grid = [t0 for t0 in T0_GRID if t0 >= lower]
    for t0 in grid:
        c = SGDQNLinearSVC(alpha=1e-2, t0=t0, max_iter=1, shuffle=False).fit(X, y)
        p = X @ c.coef_.ravel() + c.intercept_[0]
        costs.append(5e-3 * c.coef_.ravel() @ c.coef_.ravel()
                     + np.mean(np.maximum(0, 1 - ys * p) ** 2))
    auto = SGDQNLinearSVC(alpha=1e-2, max_iter=1, shuffle=False).fit(X, y)
    costs = np.array(costs)
    # the largest t0 within T0_COST_SLACK (25%) of the lowest cost
    assert auto.t0_[0] == max(t0 for t0, c in zip(grid, costs) if c <= 1.25 * costs.min())
    # the choice matters: the worst candidate is clearly worse
    assert max(costs) > 1.5 * min(costs)


def _trial_costs(X, y, *, loss, alpha, skip):
    """The primal cost after one unshuffled SGD-QN pass from zero for every
    candidate of T0_GRID, by the NumPy reference (independent of the walk)."""
    ys = np.where(y == 1, 1.0, -1.0)
    sw = np.ones(X.shape[0])
    costs = {}
    for t0 in T0_GRID:
        with np.errstate(over="ignore", invalid="ignore"):
            w, b, _, _ = sgdqn_reference(X, ys, sw, [np.arange(X.shape[0])], loss=loss,
                                         alpha=alpha, t0=t0, skip=skip)
        p = X @ w + b
        with np.errstate(over="ignore", invalid="ignore"):
            c = 0.5 * alpha * w @ w + np.mean(_loss(loss, p, ys))
        costs[t0] = c if np.isfinite(c) else np.inf
    return costs


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge", "log_loss"])
def test_t0_auto_walk_finds_the_exhaustive_choice_in_few_trials(loss, capsys):
    """The walk (from the squared hinge's bound, down while improving, up
    until T0_COST_SLACK above the lowest) returns what trying every grid
    value at or above the loss's bound returns, with the costs of the NumPy
    reference, and tries fewer than half of the candidates. With n <= 1000
    the trial sample is the whole data (in order, shuffle=False)."""
    X, y = make_classification(n_samples=300, n_features=8, random_state=3)
    X = StandardScaler().fit_transform(X)
    alpha, skip = 1e-2, 4
    costs = _trial_costs(X, y, loss=loss, alpha=alpha, skip=skip)
    lower = t0_lower_bound(X, np.ones(300), loss=loss, alpha=alpha, fit_intercept=True)
    allowed = {t0: c for t0, c in costs.items() if t0 >= lower}
    best = min(allowed.values())
    expected = max(t0 for t0, c in allowed.items() if c <= (1 + T0_COST_SLACK) * best)
    auto = SGDQNLinearSVC(loss=loss, alpha=alpha, skip=skip, max_iter=1, shuffle=False,
                          verbose=2).fit(X, y)
    assert auto.t0_[0] == expected
    tried = [line for line in capsys.readouterr().out.splitlines() if "primal cost" in line]
    assert 2 <= len(tried) < len(allowed) / 2
    # every trial's printed cost is the reference's
    for line in tried:
        t0 = float(line.split("t0=")[1].split(":")[0])
        ref = min(costs, key=lambda c: abs(np.log(c / t0)))
        assert_allclose(float(line.rsplit(" ", 1)[1]), allowed[ref], rtol=1e-5)
    if loss == "hinge":   # no bound: the walk went down from the squared hinge's
        start = t0_lower_bound(X, np.ones(300), loss="squared_hinge", alpha=alpha,
                               fit_intercept=True)
        assert min(float(ln.split("t0=")[1].split(":")[0]) for ln in tried) < start


def test_t0_auto_trials_use_at_most_T0_SAMPLE_rows_and_their_columns(monkeypatch):
    """The trials see T0_SAMPLE rows (the cost does not grow with n), and a
    trial restricted to the sample's columns makes the same steps."""
    rng = np.random.RandomState(0)
    # 10 non-zeros a row over 50,000 columns (sp.random draws them slowly)
    X = sp.csr_matrix((rng.rand(50000), rng.randint(0, 50000, 50000),
                       np.arange(0, 50001, 10)), shape=(5000, 50000))
    X.sum_duplicates()
    y = (X @ rng.randn(50000) + 0.1 * rng.randn(5000) > 0).astype(int)
    seen = []
    real = sgdqn_epochs

    def spy(ds, state, options, **kw):
        seen.append((ds.n_samples, ds.n_features))
        return real(ds, state, options, **kw)

    monkeypatch.setattr("sklearn_secondorder.linear._sgdqn.sgdqn_epochs", spy)
    SGDQNLinearSVC(alpha=1e-3, max_iter=1, random_state=0).fit(X, y)
    trials, full = seen[:-1], seen[-1]
    assert full == (5000, 50000) and len(trials) >= 2
    assert all(n == T0_SAMPLE and d < 50000 for n, d in trials)

    Xs = X[:T0_SAMPLE]
    compact, used = used_columns(Xs)
    cols = np.unique(Xs.indices)
    assert_array_equal(used, cols)
    # (no more columns than entries: kept as it is)
    narrow = sp.random(10, 5, density=0.8, format="csr", random_state=0)
    assert used_columns(narrow)[0] is narrow and used_columns(narrow)[1] is None
    assert compact.shape == (T0_SAMPLE, cols.size)
    ys = np.where(y[:T0_SAMPLE] == 1, 1.0, -1.0)
    sw = np.ones(T0_SAMPLE)
    kw = dict(loss="squared_hinge", alpha=1e-3, t0=1e3, skip=50, n_epochs=1, seed=5)
    w_full, b_full, _, _ = run_kernel(Xs, ys, sw, **kw)
    w_comp, b_comp, _, _ = run_kernel(compact, ys, sw, **kw)
    assert_array_equal(w_full[cols], w_comp)
    assert not np.any(np.delete(w_full, cols)) and b_full == b_comp


def test_csr_row_stats_against_numpy():
    rng = np.random.RandomState(1)
    X = sp.random(40, 9, density=0.3, format="csr", random_state=rng)
    X.data[::4] = 0.0                                     # stored zeros: not counted
    X = sp.vstack([X, sp.csr_matrix((1, 9))], format="csr")   # an empty row
    sw = rng.rand(41) * 3
    dense = X.toarray()
    for fit_intercept in (True, False):
        nnz, norm = csr_row_stats(X.data, X.indptr.astype(np.int64), sw, fit_intercept)
        assert nnz == np.count_nonzero(dense)
        assert_allclose(norm, np.max(sw * ((dense ** 2).sum(1) + fit_intercept)))
    big = sp.csr_matrix(np.full((2, 2), 1e200))
    assert csr_row_stats(big.data, big.indptr.astype(np.int64), np.ones(2), True)[1] == np.inf


def test_t0_auto_first_streaming_chunk_picks_like_fit():
    """t0='auto' on the first 2,000-row partial_fit chunk of a9a picks within
    a half-decade of fit on the whole set (both from 1000-row trials)."""
    from conftest import shared_data
    from sklearn.datasets import load_svmlight_file

    path = shared_data("a9a/a9a.gz")
    X, y = load_svmlight_file(str(path), n_features=123)
    X = sp.csr_matrix(X)
    alpha = 1.0 / X.shape[0]
    for seed in range(3):
        full = SGDQNLinearSVC(alpha=alpha, max_iter=1, random_state=seed).fit(X, y)
        chunk = SGDQNLinearSVC(alpha=alpha, random_state=seed).partial_fit(
            X[:2000], y[:2000], classes=np.unique(y))
        ratio = chunk.t0_[0] / full.t0_[0]
        assert 10 ** -0.5 - 1e-9 <= ratio <= 10 ** 0.5 + 1e-9


@pytest.mark.parametrize("loss, curvature", [("squared_hinge", 2.0), ("log_loss", 0.25),
                                             ("hinge", 0.0)])
def test_t0_lower_bound(binary_problem, loss, curvature):
    X, y, sw = binary_problem
    rows = X.toarray()
    expected = curvature * max(s * (r @ r + 1) for r, s in zip(rows, sw)) / (2 * 0.01)
    for Xk in (X, rows):
        got = t0_lower_bound(Xk, sw, loss=loss, alpha=0.01, fit_intercept=True)
        assert_allclose(got, expected, rtol=1e-12)
    no_b = t0_lower_bound(X, sw, loss=loss, alpha=0.01, fit_intercept=False)
    assert_allclose(no_b, curvature * max(s * (r @ r) for r, s in zip(rows, sw)) / 0.02)


def test_t0_lower_bound_is_the_squared_hinge_stability_limit(binary_problem):
    """At t0 = bound, one step on the heaviest row maps its margin residual
    1 to -1 (no amplification); below the bound it is amplified."""
    X, y, sw = binary_problem
    k = int(np.argmax(sw * (np.asarray(X.multiply(X).sum(axis=1)).ravel() + 1)))
    bound = t0_lower_bound(X, sw, loss="squared_hinge", alpha=0.01, fit_intercept=True)
    for factor, amplified in ((1.0, False), (0.5, True)):
        coef, b, _, _ = run_kernel(X[k], y[k:k + 1], sw[k:k + 1], loss="squared_hinge",
                                   alpha=0.01, t0=factor * bound, skip=10, n_epochs=1,
                                   seed=1, shuffle=False)
        residual = 1.0 - y[k] * (X[k] @ coef + b)[0]
        assert (abs(residual) > 1.0 + 1e-9) == amplified
        if not amplified:
            assert_allclose(residual, -1.0)


def test_partial_fit_continues_state(binary_problem):
    X, y, sw = binary_problem
    kw = dict(alpha=0.01, t0=T0_BINARY, skip=7, shuffle=False)
    fit = SGDQNLinearSVC(max_iter=3, **kw).fit(X, y, sample_weight=sw)
    inc = SGDQNLinearSVC(**kw)
    for _ in range(3):
        inc.partial_fit(X, y, classes=[-1.0, 1.0], sample_weight=sw)
    assert_allclose(inc.coef_, fit.coef_, rtol=1e-12)
    assert_allclose(inc.B_, fit.B_, rtol=1e-12)
    assert inc.t_ == fit.t_ == 3 * 78
    # Split batches too: the skip countdown and the pending B re-estimate
    # carry over between calls (80 rows in batches of 33, 33, 14).
    split = SGDQNLinearSVC(**kw)
    for _ in range(3):
        for sl in (slice(0, 33), slice(33, 66), slice(66, 80)):
            split.partial_fit(X[sl], y[sl], classes=[-1.0, 1.0], sample_weight=sw[sl])
    assert_allclose(split.coef_, fit.coef_, rtol=1e-12)
    w_ref, _, B_ref, _ = sgdqn_reference(X, y, sw, [np.arange(80)] * 3,
                                         loss="squared_hinge", alpha=0.01, t0=T0_BINARY,
                                         skip=7)
    assert_allclose(split.coef_.ravel(), w_ref, rtol=1e-10, atol=1e-13)
    assert_allclose(split.B_.ravel(), B_ref, rtol=1e-10)


def test_multiclass_ovr_and_n_jobs():
    X, y = make_classification(n_samples=300, n_features=10, n_informative=6,
                               n_classes=3, random_state=0)
    X = StandardScaler().fit_transform(X)
    one = SGDQNLinearSVC(alpha=1e-3, random_state=0, n_jobs=1).fit(X, y)
    two = SGDQNLinearSVC(alpha=1e-3, random_state=0, n_jobs=2).fit(X, y)
    assert one.coef_.shape == (3, 10) and one.B_.shape == (3, 11)
    assert_array_equal(one.coef_, two.coef_)
    assert one.score(X, y) > LinearSVC().fit(X, y).score(X, y) - 0.05
    # each class is its own binary problem: class 1 against the rest
    yb = np.where(y == 1, 1, -1)
    binary = SGDQNLinearSVC(alpha=1e-3, t0=one.t0_[1], max_iter=5, shuffle=False)
    ovr = SGDQNLinearSVC(alpha=1e-3, t0=one.t0_[1], max_iter=5, shuffle=False).fit(X, y)
    assert_allclose(ovr.coef_[1], binary.fit(X, yb).coef_[0], rtol=1e-12)


def test_predict_proba_only_for_log_loss():
    X, y = make_classification(n_samples=200, random_state=0)
    log = SGDQNLinearSVC(loss="log_loss", alpha=1e-3, random_state=0).fit(X, y)
    proba = log.predict_proba(X)
    assert_allclose(proba.sum(axis=1), 1.0)
    assert_allclose(proba[:, 1], 1 / (1 + np.exp(-log.decision_function(X))))
    for loss in ("squared_hinge", "hinge"):
        clf = SGDQNLinearSVC(loss=loss, random_state=0).fit(X, y)
        assert not hasattr(clf, "predict_proba")


def test_grid_search_in_pipeline():
    X, y = make_classification(n_samples=300, n_features=12, random_state=0)
    pipe = make_pipeline(StandardScaler(), SGDQNLinearSVC(random_state=0))
    gs = GridSearchCV(pipe, {"sgdqnlinearsvc__alpha": [1e-4, 1e-2],
                             "sgdqnlinearsvc__loss": ["squared_hinge", "log_loss"]},
                      cv=3).fit(X, y)
    assert gs.best_score_ > 0.8
    assert set(gs.cv_results_["param_sgdqnlinearsvc__loss"]) == {"squared_hinge",
                                                                "log_loss"}


# ----------------------------------------------------------------- errors
def test_error_nan_input():
    X = np.array([[0.0, 1.0], [np.nan, 2.0], [1.0, 0.0]])
    with pytest.raises(ValueError, match="Input X contains NaN"):
        SGDQNLinearSVC().fit(X, [0, 1, 0])


def test_error_wrong_feature_count():
    X, y = make_classification(n_samples=50, n_features=5, random_state=0)
    clf = SGDQNLinearSVC(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="X has 4 features, but SGDQNLinearSVC is "
                                         "expecting 5 features"):
        clf.predict(X[:, :4])
    with pytest.raises(ValueError, match="expecting 5 features"):
        clf.partial_fit(X[:, :4], y)


def test_error_unseen_labels_in_partial_fit():
    X, y = make_classification(n_samples=50, n_features=5, random_state=0)
    clf = SGDQNLinearSVC().partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match=r"y contains labels not in classes_"):
        clf.partial_fit(X[:3], [0, 1, 2])
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        SGDQNLinearSVC().partial_fit(X, y)


def test_error_divergence_never_returns_nan():
    rng = np.random.RandomState(0)
    X = rng.randn(50, 5) * 1e305  # one clipped step (|l'| <= 1e12) overflows
    y = rng.randint(2, size=50)
    with pytest.raises(ValueError, match="weights overflowed"):
        SGDQNLinearSVC(t0=1e-3, alpha=1e-4, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="squared norms of the rows overflow"):
        SGDQNLinearSVC(alpha=1e-4, random_state=0).fit(X, y)
    # the hinge has no curvature bound: every grid value is tried, and with
    # |x| ~ 1e305 every one of them overflows
    with pytest.raises(ValueError, match="t0='auto' diverged for every candidate"):
        SGDQNLinearSVC(loss="hinge", alpha=1e-4, random_state=0).fit(X, y)


def test_error_bad_parameters():
    X, y = make_classification(n_samples=30, random_state=0)
    with pytest.raises(ValueError, match="'skip' parameter"):
        SGDQNLinearSVC(skip=0).fit(X, y)
    with pytest.raises(ValueError, match="'t0' parameter"):
        SGDQNLinearSVC(t0=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="'max_curvature' parameter"):
        SGDQNLinearSVC(max_curvature=0.5).fit(X, y)
    with pytest.raises(ValueError, match="'loss' parameter"):
        SGDQNLinearSVC(loss="modified_huber").fit(X, y)


# --------------------------------------------------------- scikit-learn API
_WEIGHT_REASON = (
    "stochastic solver: a row of weight k takes one step of size k at one point "
    "of the trajectory, while k repeated rows take k steps at different points "
    "(and shift the skip schedule and the t0 sample), so the fits agree only "
    "at convergence, not after max_iter passes (as scikit-learn's SGDClassifier)")


@parametrize_with_checks(
    [SGDQNLinearSVC(max_iter=5, random_state=0),
     SGDQNLinearSVC(loss="log_loss", max_iter=5, random_state=0)],
    expected_failed_checks=lambda est: {
        "check_sample_weight_equivalence_on_dense_data": _WEIGHT_REASON,
        "check_sample_weight_equivalence_on_sparse_data": _WEIGHT_REASON,
    })
def test_sklearn_api(estimator, check):
    check(estimator)
