"""PSARegressor and PlainSGDRegressor: the losses, the steps, the contract."""
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _oracles import numpy_linear_psa
from conftest import shared_data
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.datasets import make_regression
from sklearn.exceptions import DataConversionWarning
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.multioutput import MultiOutputRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_secondorder import PlainSGDRegressor, PSARegressor
from sklearn_secondorder._core._dataset import RowDataset
from sklearn_secondorder._core._lazy_steps import LazyStepState, PSAOptions
from sklearn_secondorder._core._losses import REGRESSION_LOSSES
from sklearn_secondorder._core._psa_fast import SHARED_ROUND_ROWS, psa_epochs
from sklearn_secondorder._threads import ThreadRunner
from sklearn_secondorder.linear._psa_regressor import column_rms
from sklearn_secondorder.linear._regression import ColumnCentring, loss_values

REGRESSORS = [PSARegressor, PlainSGDRegressor]

EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data":
        "SGD visits a repeated row twice with different step sizes, so weight 2 is not "
        "the same model as a duplicated row (same xfail as scikit-learn's SGDRegressor)",
    "check_sample_weight_equivalence_on_sparse_data": "same as on dense data",
}


@parametrize_with_checks(
    [PSARegressor(random_state=0), PSARegressor(loss="huber", max_iter=5, random_state=0),
     PlainSGDRegressor(random_state=0),
     PlainSGDRegressor(loss="epsilon_insensitive", average=True, max_iter=10,
                       random_state=0)],
    expected_failed_checks=lambda est: EXPECTED_FAILURES)
def test_sklearn_compatible(estimator, check):
    # (the checks' data are a few dozen rows, fewer than a pass needs to
    # find even the constant: the fits say so, which is not under test here)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*worse than a constant")
        check(estimator)


# ---- the losses -------------------------------------------------------------------
def _numpy_loss(name, p, y, epsilon=0.1, quantile=0.5):
    """The losses as scikit-learn's SGDRegressor and Vowpal Wabbit write them."""
    r = p - y
    if name == "squared_error":
        return 0.5 * r ** 2
    if name == "huber":
        return 0.5 * r ** 2 if abs(r) <= epsilon else epsilon * abs(r) - 0.5 * epsilon ** 2
    if name == "epsilon_insensitive":
        return max(0.0, abs(r) - epsilon)
    if name == "squared_epsilon_insensitive":
        return max(0.0, abs(r) - epsilon) ** 2
    return quantile * (y - p) if y >= p else (1 - quantile) * (p - y)


def _loss(name, epsilon=0.1, quantile=0.5):
    cls = REGRESSION_LOSSES[name]
    if name == "squared_error":
        return cls()
    return cls(quantile) if name == "quantile" else cls(epsilon)


@pytest.mark.parametrize("name", sorted(REGRESSION_LOSSES))
def test_losses_match_numpy_and_finite_differences(name):
    loss = _loss(name, epsilon=0.3, quantile=0.2)
    rng = np.random.RandomState(0)
    for p, y in zip(rng.randn(200) * 3, rng.randn(200) * 3):
        assert loss.py_loss(p, y) == pytest.approx(
            _numpy_loss(name, p, y, epsilon=0.3, quantile=0.2), rel=1e-12, abs=1e-15)
        h = 1e-6
        fd = (loss.py_loss(p + h, y) - loss.py_loss(p - h, y)) / (2 * h)
        assert loss.py_dloss(p, y) == pytest.approx(fd, rel=1e-5, abs=1e-6)
        assert loss_values(loss, np.array([p]), np.array([y]))[0] == pytest.approx(
            loss.py_loss(p, y), rel=1e-12, abs=1e-15)
    assert pickle.loads(pickle.dumps(loss)).py_loss(1.0, 0.2) == loss.py_loss(1.0, 0.2)


# ---- the PSA regression step against the dense oracle ------------------------------
def _problem(n=120, d=9, seed=0, density=0.5, outliers=True):
    rng = np.random.RandomState(seed)
    X = sp.random(n, d, density=density, random_state=rng, format="csr")
    X.data = rng.uniform(-1, 1, X.data.size) * np.array([1, 30, 0.05, 2, 1, 5, 1, 1, 1])[
        X.indices]
    y = X @ rng.randn(d) + 3 + 0.1 * rng.randn(n)
    sw = rng.choice([0.0, 1.0, 1.0, 2.5], n)
    if not outliers:
        return X, y, sw
    # two outliers, whose unbounded steps would throw the weights off
    X = X.tolil()
    X[5, 1], X[50, 3] = 300.0, -40.0
    return X.tocsr(), y, sw


@pytest.mark.parametrize("name", ["squared_error", "huber", "quantile"])
@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("eager", [False, True])
def test_psa_regression_passes_match_the_numpy_oracle(name, dense, eager):
    X, y, sw = _problem()
    d = X.shape[1]
    # (a larger eta0 makes PSA's eigenvalue ratios chaotic: rounding alone
    # then moves the model)
    eta = np.append(0.05 / np.square(column_rms(X)), 0.05)
    loss = _loss(name, epsilon=0.5)
    th, eta_ref, t, _ = numpy_linear_psa(X, y, sw, K=1, loss=loss, alpha=0.01, eta0=0.05, b=7,
                                         n_epochs=2, eta_init=eta, bound_steps=True)
    unbounded = numpy_linear_psa(X, y, sw, K=1, loss=loss, alpha=0.01, eta0=0.05, b=7,
                                 n_epochs=2, eta_init=eta)[0]
    assert np.abs(unbounded - th).max() > 0.01          # (the bound is at work)
    state = LazyStepState.zeros(d + 1, 1, 0.05)
    state.set_weights(np.zeros(d + 1), eta)
    Xk = X.toarray() if dense else X
    psa_epochs(RowDataset(Xk, y, sw), state, PSAOptions(lam=0.01, period=7), loss=loss,
               n_epochs=2, shuffle=False, bound_steps=True, eager=eager)
    assert state.t == t
    assert_allclose(state.weights, th, rtol=1e-5, atol=1e-8)
    assert_allclose(state.step_sizes.ravel(), eta_ref, rtol=1e-5)


@pytest.mark.parametrize("n_threads", [2, 3])
def test_shared_regression_pass_is_the_round_delayed_algorithm(n_threads):
    # the threads' shared pass: each row scored (and its bound's h summed)
    # at the weights of its round's start, stepped in order
    X, y, sw = _problem(n=400)
    d = X.shape[1]
    eta = np.append(0.05 / np.square(column_rms(X)), 0.05)
    loss = _loss("squared_error")
    state = LazyStepState.zeros(d + 1, 1, 0.05)
    state.set_weights(np.zeros(d + 1), eta)
    with ThreadRunner(n_threads) as runner:
        psa_epochs(RowDataset(X, y, sw), state, PSAOptions(lam=0.01, period=7), loss=loss,
                   n_epochs=2, shuffle=False, threads=runner, eager=False, bound_steps=True)
    th, eta_ref, t, _ = numpy_linear_psa(
        X, y, sw, K=1, loss=loss, alpha=0.01, eta0=0.05, b=7, n_epochs=2, eta_init=eta,
        bound_steps=True, round_rows=n_threads * SHARED_ROUND_ROWS)
    assert state.t == t
    assert_allclose(state.weights, th, rtol=0, atol=1e-5 * np.abs(th).max())
    assert_allclose(state.step_sizes.ravel(), eta_ref, rtol=1e-5)


@pytest.mark.parametrize("name", ["squared_error", "huber"])
def test_plain_sgd_bounded_steps_match_numpy(name):
    # PlainSGDRegressor's kernel with bounded steps against a NumPy loop:
    # constant step, rows in order, no intercept (so nothing is centred)
    X, y, sw = _problem()
    Xd = X.toarray()
    loss, eta, alpha = _loss(name, epsilon=0.5), 0.002, 0.01
    w = np.zeros(X.shape[1])
    for xi, yi, si in zip(Xd, y, sw):
        if si == 0:
            continue
        p = xi @ w
        g = loss.py_dloss(p, yi)
        h = eta * si * (xi @ xi)
        if h * abs(g) > abs(p - yi):
            g = (p - yi) / h
        w = max(0.0, 1 - eta * alpha) * w - eta * si * g * xi
    est = PlainSGDRegressor(loss=name, epsilon=0.5, alpha=alpha, eta0=eta,
                            learning_rate="constant", max_iter=1, shuffle=False,
                            fit_intercept=False)
    with warnings.catch_warnings():       # (one pass without an intercept: not the point)
        warnings.filterwarnings("ignore", message=".*worse than a constant")
        est.fit(X, y, sample_weight=sw)
    assert_allclose(est.coef_, w, rtol=1e-9, atol=1e-12)


def test_bounded_steps_never_pass_the_target():
    # one row, a huge feature: an unbounded squared-loss step would overshoot
    # the target by a factor of h - 1 = 1e4
    X = np.array([[100.0, 1.0]])
    y = np.array([5.0])
    state = LazyStepState.zeros(3, 1, 1.0)
    psa_epochs(RowDataset(X, y, np.ones(1)), state, PSAOptions(lam=0.0, period=10),
               loss=_loss("squared_error"), shuffle=False, bound_steps=True)
    w = state.weights
    assert X[0] @ w[:2] + w[2] == pytest.approx(5.0)


# ---- models against Ridge, twins, chunks ------------------------------------------
def _unscaled(n=3000, seed=0, spread=1000.0):
    """Columns on scales ``spread^2`` apart, two of them far from 0."""
    rng = np.random.RandomState(seed)
    scale = np.array([1, spread, 1 / spread, 10, 1])
    X = rng.randn(n, 5) * scale + [0, 5 * spread, 0, 60, 0]
    y = X @ ([1.0, 2.0, 0.8, -0.3, 2.0] / scale) + 40 + 0.3 * rng.randn(n)
    return X, y


def _data_for(cls, n=3000, seed=0):
    """Unscaled columns for PSARegressor; for PlainSGDRegressor, whose one
    step size serves every column, scales ten times apart."""
    return _unscaled(n, seed, 1000.0 if cls is PSARegressor else 3.0)


@pytest.mark.parametrize("cls", REGRESSORS)
def test_many_passes_reach_ridge_on_unscaled_columns(cls):
    X, y = _data_for(cls)
    alpha = 1e-8
    ridge = Ridge(alpha=alpha * X.shape[0]).fit(X, y)
    # (plain SGD: the average of constant-step iterates, which converges on
    # least squares)
    kw = dict(learning_rate="constant", average=True) if cls is PlainSGDRegressor else {}
    est = cls(alpha=alpha, max_iter=40 if cls is PSARegressor else 60, random_state=0,
              **kw).fit(X, y)
    rmse = np.sqrt(np.mean((est.predict(X) - y) ** 2))
    ridge_rmse = np.sqrt(np.mean((ridge.predict(X) - y) ** 2))
    assert rmse < 1.05 * ridge_rmse
    assert_allclose(est.coef_, ridge.coef_, rtol=0.05, atol=0.05 * np.abs(ridge.coef_).max())


def test_psa_one_pass_on_unscaled_columns_is_close_to_ridge():
    X, y = _unscaled(20000)
    # (the same objective: Ridge's alpha is the sum's, ours the mean's)
    alpha = 1e-8
    ridge = Ridge(alpha=alpha * X.shape[0]).fit(X, y)
    ridge_rmse = np.sqrt(np.mean((ridge.predict(X) - y) ** 2))
    for seed in range(3):
        est = PSARegressor(alpha=alpha, random_state=seed).fit(X, y)
        assert np.sqrt(np.mean((est.predict(X) - y) ** 2)) < 1.1 * ridge_rmse
        # a target in the thousands: the same fit, scaled
        big = PSARegressor(alpha=alpha, random_state=seed).fit(X, 1000 * y)
        assert np.sqrt(np.mean((big.predict(X) - 1000 * y) ** 2)) < 1100 * ridge_rmse


@pytest.mark.parametrize("cls", REGRESSORS)
@pytest.mark.parametrize("loss", ["squared_error", "huber", "epsilon_insensitive",
                                  "squared_epsilon_insensitive", "quantile"])
def test_dense_and_csr_give_the_same_model(cls, loss):
    X, y, sw = _problem(density=0.7, outliers=False)
    kw = dict(loss=loss, epsilon=0.5, max_iter=3, random_state=1, eta0=0.02)
    a = cls(**kw).fit(X.toarray(), y, sample_weight=sw)
    b = cls(**kw).fit(X, y, sample_weight=sw)
    assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-11)
    assert_allclose(a.intercept_, b.intercept_, rtol=1e-9, atol=1e-11)
    assert a.coef_.shape == (X.shape[1],) and a.intercept_.shape == (1,)


@pytest.mark.parametrize("cls", REGRESSORS)
def test_float32_input_gives_float32_coefficients(cls):
    X, y = _data_for(cls, 500)
    a = cls(random_state=0).fit(X.astype(np.float32), y)
    b = cls(random_state=0).fit(X, y)
    assert a.coef_.dtype == np.float32 and a.intercept_.dtype == np.float32
    assert_allclose(a.predict(X), b.predict(X), rtol=1e-3, atol=1e-2 * np.std(y))


@pytest.mark.parametrize("cls", REGRESSORS)
def test_partial_fit_over_chunks_equals_one_pass_of_fit(cls):
    X, y, sw = _problem(n=200)
    # (without an intercept nothing is centred; PSA's step sizes start from
    # the first call's column scales, so its first chunk is all the rows'
    # scales here)
    kw = dict(shuffle=False, eta0=0.05, random_state=0, fit_intercept=False)
    full = cls(max_iter=1, **kw).fit(X, y, sample_weight=sw)
    part = cls(**kw)
    if cls is PSARegressor:
        part._column_scale = lambda X, sample_weight: column_rms(full_rows)
    full_rows = X
    for chunk in np.array_split(np.arange(200), 4):
        part.partial_fit(X[chunk], y[chunk], sample_weight=sw[chunk])
    assert_allclose(part.coef_, full.coef_, rtol=1e-9, atol=1e-12)
    assert part.t_ == full.t_


def test_psa_partial_fit_over_chunks_equals_one_pass_with_the_same_start():
    X, y, sw = _problem(n=200)
    kw = dict(shuffle=False, eta0=0.05, random_state=0)
    part = PSARegressor(**kw)
    chunks = np.array_split(np.arange(200), 4)
    part.partial_fit(X[chunks[0]], y[chunks[0]], sample_weight=sw[chunks[0]])
    whole = clone(part).partial_fit(X[chunks[0]], y[chunks[0]], sample_weight=sw[chunks[0]])
    rest = np.concatenate(chunks[1:])
    whole.partial_fit(X[rest], y[rest], sample_weight=sw[rest])
    for chunk in chunks[1:]:
        part.partial_fit(X[chunk], y[chunk], sample_weight=sw[chunk])
    assert_allclose(part.coef_, whole.coef_, rtol=1e-9, atol=1e-12)
    assert_allclose(part.intercept_, whole.intercept_, rtol=1e-9)


# ---- targets, errors, meta-estimators ----------------------------------------------
@pytest.mark.parametrize("cls", REGRESSORS)
def test_y_of_several_columns_names_multioutput(cls):
    X, y = _data_for(cls, 200)
    with pytest.raises(ValueError, match="MultiOutputRegressor"):
        cls().fit(X, np.c_[y, y])
    with pytest.warns(DataConversionWarning):
        est = cls(random_state=0).fit(X, y[:, None])
    assert est.coef_.shape == (5,)


@pytest.mark.parametrize("cls", REGRESSORS)
def test_multioutput_regressor_fits_and_streams(cls):
    X, y = _data_for(cls, 1000)
    Y = np.c_[y, -2 * y + 7]
    model = MultiOutputRegressor(cls(alpha=1e-8, max_iter=5, random_state=0)).fit(X, Y)
    assert model.score(X, Y) > 0.97
    stream = MultiOutputRegressor(cls(alpha=1e-8, random_state=0))
    for _ in range(3):
        for chunk in np.array_split(np.arange(1000), 5):
            stream.partial_fit(X[chunk], Y[chunk])
    assert stream.score(X, Y) > 0.9


@pytest.mark.parametrize("cls", REGRESSORS)
def test_refused_input_leaves_the_model_as_it_was(cls):
    X, y = _data_for(cls, 300)
    est = cls(random_state=0).fit(X, y)
    coef = est.coef_.copy()
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError):
        est.fit(X, bad)
    with pytest.raises(ValueError):
        est.partial_fit(X[:, :3], y)
    assert_allclose(est.coef_, coef)


@pytest.mark.parametrize("cls", REGRESSORS)
def test_pipeline_and_grid_search(cls):
    X, y = make_regression(n_samples=300, n_features=6, noise=1.0, random_state=0)
    grid = GridSearchCV(make_pipeline(StandardScaler(), cls(random_state=0, max_iter=5)),
                        {f"{cls.__name__.lower()}__alpha": [1e-4, 1e-2]}, cv=3).fit(X, y)
    assert grid.best_score_ > 0.95


@pytest.mark.parametrize("cls", REGRESSORS)
def test_sparsify_densify_and_strip(cls):
    X, y = _data_for(cls, 300)
    est = cls(random_state=0).fit(X, y)
    expected = est.predict(X)
    est.sparsify()
    assert sp.issparse(est.coef_)
    assert_allclose(est.predict(X), expected)
    est.densify()
    assert est.coef_.shape == (5,)
    est.strip_training_state()
    assert_allclose(pickle.loads(pickle.dumps(est)).predict(X), expected)
    with pytest.raises(ValueError, match="strip_training_state"):
        est.partial_fit(X, y)


def test_centring_maps_back_to_the_raw_features():
    X, _ = _unscaled(400)
    X = np.c_[X, (np.arange(400) % 7 == 0)]
    centring = ColumnCentring.fit(X, np.ones(400), True)
    assert list(centring.columns) == [0, 1, 2, 3, 4]          # not the sparse indicator
    assert_allclose(centring.means, X[:, :5].mean(axis=0))
    Xc = centring.transform(X)
    assert_allclose(Xc[:, :5], X[:, :5] - X[:, :5].mean(axis=0))
    assert_allclose(centring.transform(sp.csr_matrix(X)).toarray(), Xc, atol=1e-9)
    w = np.arange(6.0)
    assert_allclose(X @ w + 1.0, Xc @ w + 1.0 + centring.shift(w))


@pytest.mark.parametrize("cls", REGRESSORS)
def test_quantile_loss_predicts_the_quantile(cls):
    rng = np.random.RandomState(0)
    X = rng.rand(4000, 1)
    y = 2 * X[:, 0] + rng.exponential(1.0, 4000)
    for q in (0.2, 0.8):
        est = cls(loss="quantile", quantile=q, max_iter=20, alpha=1e-6,
                  random_state=0).fit(X, y)
        share = np.mean(y <= est.predict(X))
        assert abs(share - q) < 0.03


@pytest.mark.parametrize("cls", REGRESSORS)
def test_n_jobs_gives_the_same_model_each_time(cls):
    rng = np.random.RandomState(0)
    X = sp.random(20000, 5000, density=0.004, random_state=rng, format="csr")
    y = X @ rng.randn(5000) + 0.1 * rng.randn(20000)
    a = cls(n_jobs=2, random_state=0).fit(X, y)
    b = cls(n_jobs=2, random_state=0).fit(X, y)
    one = cls(random_state=0).fit(X, y)
    assert_allclose(a.coef_, b.coef_, rtol=0, atol=0)
    # (one pass of PSA's shared pass is nearly the one-thread model; plain
    # SGD mixes the threads' models after each pass, which costs progress)
    r2_one, r2_two = one.score(X, y), a.score(X, y)
    assert r2_two > r2_one - (0.05 if cls is PSARegressor else 0.25)


# ---- real data -----------------------------------------------------------------------
def _diamonds(target="log"):
    pd = pytest.importorskip("pandas")
    path = shared_data("regression/diamonds.csv.gz")
    df = pd.read_csv(path)
    y = np.log(df.price.to_numpy()) if target == "log" else df.price.to_numpy(float)
    num = df[["carat", "depth", "table", "x", "y", "z"]].to_numpy(float)
    cat = pd.get_dummies(df[["cut", "color", "clarity"]]).to_numpy(float)
    from sklearn.model_selection import train_test_split
    return train_test_split(np.hstack([num, cat]), y, test_size=0.2, random_state=0)


@pytest.mark.parametrize("target", ["log", "price"])
def test_diamonds_unscaled_one_pass_near_ridge(target):
    Xtr, Xte, ytr, yte = _diamonds(target)
    ridge = Ridge(alpha=1e-3).fit(Xtr, ytr)
    ridge_rmse = np.sqrt(np.mean((ridge.predict(Xte) - yte) ** 2))
    psa = PSARegressor(random_state=0).fit(Xtr, ytr)
    assert np.sqrt(np.mean((psa.predict(Xte) - yte) ** 2)) < 1.08 * ridge_rmse
    plain = PlainSGDRegressor(random_state=0).fit(Xtr, ytr)
    assert np.sqrt(np.mean((plain.predict(Xte) - yte) ** 2)) < 1.5 * ridge_rmse


@pytest.mark.parametrize("cls", REGRESSORS)
def test_stopping_rule_early_stopping_and_verbose(cls, capsys):
    X, y = _data_for(cls, 2000)
    est = cls(max_iter=50, tol=1e-3, n_iter_no_change=2, random_state=0, verbose=1).fit(X, y)
    assert est.n_iter_ < 50
    assert f"-- {cls.__name__} pass 1: rows 2000" in capsys.readouterr().out
    es = cls(max_iter=50, tol=1e-4, early_stopping=True, validation_fraction=0.2,
             n_iter_no_change=2, random_state=0).fit(X, y)
    assert es.n_iter_ < 50 and es.score(X, y) > 0.9


@pytest.mark.parametrize("cls", REGRESSORS)
def test_coef_init_and_warm_start(cls):
    X, y = _data_for(cls, 1000)
    est = cls(random_state=0, alpha=1e-8, max_iter=5).fit(X, y)
    # started at the fitted model, a pass with tiny steps stays there
    again = cls(random_state=0, alpha=1e-8, eta0=1e-9).fit(
        X, y, coef_init=est.coef_, intercept_init=est.intercept_)
    assert_allclose(again.predict(X), est.predict(X), rtol=1e-5)
    warm = clone(est).set_params(warm_start=True, eta0=1e-9)
    warm.coef_, warm.intercept_ = est.coef_, est.intercept_
    warm.n_features_in_ = est.n_features_in_
    warm.fit(X, y)
    assert_allclose(warm.predict(X), est.predict(X), rtol=1e-5)
    with pytest.raises(ValueError, match="coef_init"):
        cls().fit(X, y, coef_init=np.zeros(3))
