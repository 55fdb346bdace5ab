"""The linear-classifier base, exercised through PlainSGDClassifier."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import shared_data
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_iris, make_classification
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_secondorder import PlainSGDClassifier

EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data":
        "SGD visits a repeated row twice with different step sizes, so weight 2 is not "
        "the same model as a duplicated row (same xfail as scikit-learn's SGDClassifier)",
    "check_sample_weight_equivalence_on_sparse_data": "same as on dense data",
}


@parametrize_with_checks(
    [PlainSGDClassifier(max_iter=20, random_state=0),
     PlainSGDClassifier(loss="hinge", max_iter=20, average=True, random_state=0)],
    expected_failed_checks=lambda est: EXPECTED_FAILURES)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _data(n_classes=2, seed=0):
    X, y = make_classification(n_samples=200, n_features=12, n_informative=6,
                               n_classes=n_classes, random_state=seed)
    return StandardScaler().fit_transform(X), y


@pytest.mark.parametrize("loss", ["log_loss", "hinge", "squared_hinge", "modified_huber"])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("average", [False, True])
def test_dense_and_csr_give_the_same_model(loss, n_classes, average):
    X, y = _data(n_classes)
    kw = dict(loss=loss, max_iter=3, random_state=1, average=average, eta0=0.05)
    a = PlainSGDClassifier(**kw).fit(X, y)
    b = PlainSGDClassifier(**kw).fit(sp.csr_matrix(X), y)
    assert_allclose(a.coef_, b.coef_, rtol=1e-10, atol=1e-12)
    assert_allclose(a.intercept_, b.intercept_, rtol=1e-10, atol=1e-12)


def test_fit_equals_partial_fit_in_chunks():
    X, y = _data(3)
    full = PlainSGDClassifier(max_iter=1, shuffle=False, eta0=0.1).fit(X, y)
    part = PlainSGDClassifier(shuffle=False, eta0=0.1)
    for chunk in np.array_split(np.arange(200), 4):
        part.partial_fit(X[chunk], y[chunk], classes=np.unique(y))
    assert_allclose(part.coef_, full.coef_, rtol=1e-12)
    assert part.t_ == full.t_ == 200


@pytest.mark.parametrize("shuffle", [False, True])
def test_partial_fit_twice_equals_two_epochs(shuffle):
    X, y = _data(2)
    two = PlainSGDClassifier(max_iter=2, shuffle=shuffle, eta0=0.1, random_state=0).fit(X, y)
    inc = PlainSGDClassifier(shuffle=shuffle, eta0=0.1, random_state=0)
    inc.partial_fit(X, y, classes=[0, 1]).partial_fit(X, y)
    assert_allclose(inc.coef_, two.coef_, rtol=1e-12)


def test_partial_fit_accepts_many_classes_silently():
    import warnings
    X = np.random.RandomState(0).randn(100, 3)  # `classes` itself is all unique
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PlainSGDClassifier().partial_fit(X, np.arange(100) % 20, classes=np.arange(20))


def test_zero_weight_rows_do_not_advance_the_counter():
    X, y = _data(2)
    sw = np.ones(200)
    sw[::4] = 0
    est = PlainSGDClassifier(max_iter=2, random_state=0).fit(X, y, sample_weight=sw)
    assert est.t_ == 2 * 150
    assert est.n_iter_ == 2


def test_partial_fit_errors():
    X, y = _data(3)
    est = PlainSGDClassifier()
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        est.partial_fit(X, y)
    est.partial_fit(X, y, classes=[0, 1, 2])
    est.partial_fit(X, y, classes=[2, 1, 0])  # the same classes again is fine
    with pytest.raises(ValueError, match="not the same as on the first call"):
        est.partial_fit(X, y, classes=[0, 1, 2, 3])
    with pytest.raises(ValueError, match="labels not in classes_"):
        est.partial_fit(X, np.full(200, 7))
    with pytest.raises(ValueError, match="X has 5 features, but PlainSGDClassifier is "
                                         "expecting 12 features"):
        est.partial_fit(X[:, :5], y)
    with pytest.raises(ValueError, match="class_weight='balanced' is not supported by "
                                         "partial_fit"):
        PlainSGDClassifier(class_weight="balanced").partial_fit(X, y, classes=[0, 1, 2])


def test_bad_input_errors():
    X, y = _data(2)
    Xnan = X.copy()
    Xnan[3, 2] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        PlainSGDClassifier().fit(Xnan, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        PlainSGDClassifier().fit(X, y[:-1])
    with pytest.raises(ValueError, match="at least 2 classes"):
        PlainSGDClassifier().fit(X, np.zeros(200))
    with pytest.raises(ValueError, match="Unknown label type"):
        PlainSGDClassifier().fit(X, np.linspace(0, 1, 200))
    with pytest.raises(ValueError, match="sample_weight must be finite and non-negative"):
        PlainSGDClassifier().fit(X, y, sample_weight=-np.ones(200))
    with pytest.raises(ValueError, match="'alpha' parameter"):
        PlainSGDClassifier(alpha=-1).fit(X, y)
    est = PlainSGDClassifier().fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features"):
        est.predict(X[:, :3])


def test_divergence_is_reported_not_returned():
    X = np.array([[1e300], [1e300], [-1e300]])
    with pytest.raises(ValueError, match="weights overflowed"):
        PlainSGDClassifier(loss="squared_hinge", learning_rate="constant",
                           eta0=1.0, shuffle=False).fit(X, [1, 0, 1])


def test_class_weight_equals_sample_weight():
    X, y = _data(2)
    a = PlainSGDClassifier(class_weight={0: 2.0, 1: 0.5}, random_state=0).fit(X, y)
    b = PlainSGDClassifier(random_state=0).fit(X, y, sample_weight=np.where(y == 0, 2.0, 0.5))
    assert_allclose(a.coef_, b.coef_)
    bal = PlainSGDClassifier(class_weight="balanced", random_state=0).fit(X[:150], y[:150])
    assert bal.coef_.shape == (1, 12)


def test_warm_start_starts_from_coef():
    X, y = _data(2)
    est = PlainSGDClassifier(max_iter=1, warm_start=True, shuffle=False, eta0=0.1).fit(X, y)
    coef, intercept = est.coef_.copy(), est.intercept_.copy()
    est.fit(X, y)
    ref = PlainSGDClassifier(max_iter=1, shuffle=False, eta0=0.1).fit(
        X, y, coef_init=coef, intercept_init=intercept)
    assert_allclose(est.coef_, ref.coef_, rtol=1e-12)
    assert est.t_ == 200


def test_one_vs_rest_threads_match_serial():
    X, y = _data(4)
    a = PlainSGDClassifier(loss="hinge", random_state=0, n_jobs=1).fit(X, y)
    b = PlainSGDClassifier(loss="hinge", random_state=0, n_jobs=2).fit(X, y)
    assert a.coef_.shape == (4, 12)
    assert_array_equal(a.coef_, b.coef_)


def test_predict_proba_available_only_for_probabilistic_losses():
    X, y = _data(3)
    assert not hasattr(PlainSGDClassifier(loss="hinge").fit(X, y), "predict_proba")
    for loss in ("log_loss", "modified_huber"):
        proba = PlainSGDClassifier(loss=loss, random_state=0).fit(X, y).predict_proba(X)
        assert proba.shape == (200, 3)
        assert_allclose(proba.sum(axis=1), 1.0)
    est = PlainSGDClassifier(random_state=0).fit(X, y)
    assert_array_equal(est.classes_[est.predict_proba(X).argmax(1)], est.predict(X))


def test_pipeline_in_grid_search_and_pickle():
    X, y = load_iris(return_X_y=True)
    search = GridSearchCV(make_pipeline(StandardScaler(), PlainSGDClassifier(random_state=0)),
                          {"plainsgdclassifier__alpha": [1e-4, 1e-2]}, cv=3).fit(X, y)
    assert search.best_score_ > 0.8
    est = pickle.loads(pickle.dumps(search.best_estimator_))
    assert_array_equal(est.predict(X), search.predict(X))


def test_feature_names_are_recorded():
    pd = pytest.importorskip("pandas")
    X, y = _data(2)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(12)])
    est = PlainSGDClassifier().fit(df, y)
    assert list(est.feature_names_in_) == list(df.columns)


def test_a9a_baseline_matches_sgdclassifier():
    """Plain SGD reaches SGDClassifier's test accuracy (within 0.5 points) on a9a."""
    from _datasets import a9a
    shared_data("a9a/a9a.gz")
    Xtr, ytr, Xte, yte = a9a()
    alpha = 1.0 / Xtr.shape[0]
    for epochs in (1, 5):
        ours = PlainSGDClassifier(alpha=alpha, max_iter=epochs, random_state=0).fit(Xtr, ytr)
        peer = SGDClassifier(loss="log_loss", alpha=alpha, max_iter=epochs, tol=None,
                             random_state=0).fit(Xtr, ytr)
        assert ours.score(Xte, yte) >= peer.score(Xte, yte) - 0.005


# ---- failed calls leave no half-updated model; inputs checked up front -----------
from sklearn.exceptions import NotFittedError  # noqa: E402

from sklearn_secondorder import PSAClassifier, SBMLogisticRegression, SGDQNLinearSVC  # noqa: E402

ALL_LINEAR = [PSAClassifier, PlainSGDClassifier, SGDQNLinearSVC, SBMLogisticRegression]


@pytest.mark.parametrize("Est", ALL_LINEAR)
@pytest.mark.parametrize("warm_start", [False, True])
def test_a_refused_refit_keeps_the_model_a_failed_one_unfits_it(Est, warm_start):
    X, y = _data()
    est = Est(random_state=0, warm_start=warm_start).fit(X, y)
    coef = est.coef_.copy()
    with pytest.raises(ValueError, match="only one class: 7"):
        est.fit(X, np.full(len(y), 7))
    with pytest.raises(ValueError, match="NaN"):
        est.fit(np.c_[X, X] * np.nan, y)
    assert_array_equal(est.coef_, coef)          # the fitted model is untouched
    assert est.n_features_in_ == X.shape[1] and est.classes_.tolist() == [0, 1]
    est.predict(X)
    y3 = np.arange(len(y)) % 3
    with pytest.raises(ValueError, match="overflow|diverged"):
        est.fit(X * 1e200, y3)    # diverges (in the step-size choice or in training)
    with pytest.raises(NotFittedError):
        est.predict(X)


@pytest.mark.parametrize("Est", ALL_LINEAR)
def test_a_refused_first_partial_fit_changes_nothing(Est):
    X, y = _data()
    est = Est(random_state=0)
    with pytest.raises(ValueError, match="labels not in classes_"):
        est.partial_fit(X, y, classes=[0, 2])
    with pytest.raises(ValueError, match="at least 2 classes"):
        est.partial_fit(X, y, classes=[0])
    with pytest.raises(NotFittedError):
        est.predict(X)
    assert est.partial_fit(X, y, classes=[0, 1]).classes_.tolist() == [0, 1]
    coef = est.coef_.copy()
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(X[:, :5], y)          # a bad later batch: model kept
    assert_array_equal(est.coef_, coef)
    est.predict(X)


@pytest.mark.parametrize("Est", [PSAClassifier, PlainSGDClassifier, SBMLogisticRegression])
def test_a_diverged_partial_fit_says_the_estimator_is_unfitted(Est):
    X, y = _data()
    est = Est(random_state=0).partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="overflowed.*now unfitted"):
        est.partial_fit(X * 1e200, y)
    with pytest.raises(NotFittedError):
        est.predict(X)
    est.partial_fit(X, y, classes=[0, 1]).predict(X)   # a fresh start works


# scikit-learn's type_of_target casts the NaN label to int while checking it
@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("Est", ALL_LINEAR)
@pytest.mark.parametrize("classes, message", [
    ([0, 1, np.nan], "NaN"), ([0, 0.5, 1], "continuous"), ([0, "a"], "mixes string labels"),
    ([[0, 1], [1, 0]], "1d array")])
def test_partial_fit_checks_classes(Est, classes, message):
    X, y = _data()
    with pytest.raises(ValueError, match=message):
        Est(random_state=0).partial_fit(X, y, classes=classes)


@pytest.mark.parametrize("Est", ALL_LINEAR)
def test_parameters_checked_on_every_partial_fit_and_class_weight(Est):
    X, y = _data()
    est = Est(random_state=0).partial_fit(X, y, classes=[0, 1])
    est.set_params(alpha=-1.0)
    with pytest.raises(ValueError, match="alpha"):
        est.partial_fit(X, y)
    for cw in ({0: -1.0, 1: 1.0}, {0: np.nan, 1: 1.0}):
        with pytest.raises(ValueError, match="class_weight must give every class"):
            Est(class_weight=cw, random_state=0).fit(X, y)


def test_n_jobs_zero_is_refused():
    X, y = _data(n_classes=3)
    with pytest.raises(ValueError, match="n_jobs"):
        PlainSGDClassifier(n_jobs=0).fit(X, y)


@pytest.mark.filterwarnings("ignore:.*implausibly large")
def test_tagger_eta0_must_keep_the_shrink_positive():
    """The CRF kernels do not clip the shrink 1 - eta0 alpha (the linear
    estimators do, as SGDClassifier: test_contract.py): the taggers refuse."""
    from sklearn_secondorder import SGDSequenceTagger
    X, y = _data()
    with pytest.raises(ValueError, match=r"eta0 \* alpha < 1"):
        SGDSequenceTagger(eta0=2e4, alpha=1e-4).fit(X, y)
    SGDSequenceTagger(eta0=0.5e4, alpha=1e-4, random_state=0, max_iter=1).fit(X, y)


@pytest.mark.filterwarnings("ignore:.*implausibly large")
def test_calibration_at_its_limit_warns():
    X, y = _data()
    with pytest.warns(UserWarning, match="calibration stopped at its limit"):
        PSAClassifier(random_state=0, max_iter=1).fit(X * 1e100, y)


def test_implausibly_large_weights_warn():
    """alpha/2 ||w||^2 far above P(0) = 1: worse than w = 0 (t0 far too small)."""
    X, y = _data()
    with pytest.warns(UserWarning, match="implausibly large"):
        SGDQNLinearSVC(t0=1e-10, random_state=0).fit(X, y)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SGDQNLinearSVC(random_state=0).fit(X, y)     # a sound model does not warn


@pytest.mark.parametrize("Est, kw", [(PSAClassifier, dict(eta0=0.01)),
                                     (PlainSGDClassifier, dict(eta0=0.01)),
                                     (SGDQNLinearSVC, dict(t0=1e6)),
                                     (SBMLogisticRegression, {})])
def test_zero_weight_rows_are_rows_left_out(Est, kw):
    X, y = _data()
    sw = np.r_[np.ones(len(y)), np.zeros(len(y))]
    est = Est(shuffle=False, random_state=0, **kw)
    a = est.fit(np.r_[X, X[::-1]], np.r_[y, y[::-1]], sample_weight=sw).coef_.copy()
    b = est.fit(X, y).coef_
    assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_sbm_divergence_names_its_step_parameter():
    X, y = _data()
    with pytest.raises(ValueError, match="lower eta,"):
        SBMLogisticRegression(random_state=0).fit(X * 1e8, y)


@pytest.mark.parametrize("Est", ALL_LINEAR)
def test_labels_mixing_strings_and_numbers_are_refused(Est):
    X, y = _data()
    mixed = np.array(["a" if v == 0 else 1 for v in y], dtype=object)
    for labels in (mixed, list(mixed)):
        with pytest.raises(ValueError, match="y mixes string labels"):
            Est().fit(X, labels)


def test_weight_scale_warning_follows_the_sample_weights():
    """P(0) grows with the sample weights: a sound model on heavy rows is quiet."""
    import warnings
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SBMLogisticRegression(alpha=1.0, max_iter=20, random_state=0).fit(
            X, y, sample_weight=np.full(len(y), 1000.0))


@pytest.mark.filterwarnings("ignore:.*implausibly large")
def test_eta0_of_one_over_alpha_fits_with_either_schedule():
    """'optimal': eta_t = 1/(alpha (t + t0)), only the first shrink (on zero
    weights) is 0; 'constant': every shrink is clipped at 0, as SGDClassifier."""
    X, y = _data()
    PlainSGDClassifier(alpha=1.0, eta0=1.0, random_state=0).fit(X, y)
    # (a fixed seed: with eta0 = 1/alpha every step restarts from 0, and one
    # shuffle in about 40 ends on a row that leaves the model worse than a
    # constant, which warns)
    est = PlainSGDClassifier(alpha=1.0, eta0=1.0, learning_rate="constant",
                             random_state=0).fit(X, y)
    assert np.all(np.isfinite(est.coef_))


@pytest.mark.filterwarnings("ignore:.*implausibly large")
@pytest.mark.parametrize("Est", [PSAClassifier, PlainSGDClassifier])
def test_a_new_alpha_past_one_over_the_step_continues(Est):
    X, y = _data()
    kw = dict(learning_rate="constant") if Est is PlainSGDClassifier else {}
    est = Est(random_state=0, **kw).fit(X, y)
    norm = np.linalg.norm(est.coef_)
    est.set_params(alpha=1e6).partial_fit(X, y)       # every step shrinks to zero first
    assert np.all(np.isfinite(est.coef_))
    assert np.linalg.norm(est.coef_) < norm
