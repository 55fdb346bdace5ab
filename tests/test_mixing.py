"""Parameter mixing without Dask: the public ``mix`` of every state kind and
estimator, on in-memory objects, against NumPy computations."""
import copy

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import make_classification

from sklearn_secondorder import (
    AROWSequenceTagger,
    ASFSequenceTagger,
    AveragedPerceptronSequenceTagger,
    PlainSGDClassifier,
    PSAClassifier,
    PSASequenceTagger,
    SBMLogisticRegression,
    SGDQNLinearSVC,
)
from sklearn_secondorder._core._lazy_steps import LazyStepState
from sklearn_secondorder._core._sgd_fast import LinearSGDState
from sklearn_secondorder._mixing import (
    geometric_mean,
    mix_lazy_steps,
    sum_increments,
    weighted_mean,
)
from sklearn_secondorder.linear._sgd import mix_sgd_states
from sklearn_secondorder.linear._sgdqn import mix_sgdqn_states

LINEAR = {
    "sgd": PlainSGDClassifier(eta0=0.05, random_state=0, max_iter=2, tol=None),
    "asgd": PlainSGDClassifier(eta0=0.05, average=True, random_state=0, max_iter=2, tol=None),
    "psa": PSAClassifier(eta0=0.05, period=10, random_state=0, max_iter=2),
    "sgdqn": SGDQNLinearSVC(t0=1e5, skip=4, random_state=0, max_iter=2),
    "sbm": SBMLogisticRegression(rank=None, random_state=0, max_iter=2),
}


@pytest.fixture(scope="module")
def shards():
    X, y = make_classification(n_samples=120, n_features=6, random_state=0)
    return (X[:50], y[:50]), (X[50:], y[50:])


def test_rules_against_numpy():
    rng = np.random.RandomState(0)
    a = [rng.rand(5) + 0.1 for _ in range(3)]
    p = np.array([0.2, 0.3, 0.5])
    assert_allclose(weighted_mean(a, p), p @ np.vstack(a), rtol=1e-14)
    assert_allclose(geometric_mean(a, p), np.exp(p @ np.log(np.vstack(a))), rtol=1e-14)
    start = rng.rand(5)
    assert_allclose(sum_increments(a, start), start + sum(x - start for x in a), rtol=1e-14)
    assert sum_increments([3, 5], 1) == 1 + 2 + 4


def test_mix_sgd_states_against_numpy():
    rng = np.random.RandomState(1)

    def state(t):
        s = LinearSGDState.zeros(4, 1, average=True, seed=3)
        s.coef[:], s.intercept[:] = rng.randn(4), rng.randn(1)
        s.avg_coef[:], s.avg_intercept[:] = rng.randn(4), rng.randn(1)
        s.n_iterates, s.t, s.eta0 = float(t), t, 0.1
        return s

    start, a, b = state(10), state(30), state(25)
    before = copy.deepcopy([a, b, start])
    p = [0.4, 0.6]
    out = mix_sgd_states([a, b], p, start)
    assert_allclose(out.coef, 0.4 * a.coef + 0.6 * b.coef, rtol=1e-14)
    assert_allclose(out.intercept, 0.4 * a.intercept + 0.6 * b.intercept, rtol=1e-14)
    assert_allclose(out.avg_coef, a.avg_coef + b.avg_coef - start.avg_coef, rtol=1e-14)
    assert out.n_iterates == 30 + 25 - 10 and out.t == 45
    # the inputs are not modified
    for s, s0 in zip([a, b, start], before):
        assert_array_equal(s.coef, s0.coef)
        assert_array_equal(s.avg_coef, s0.avg_coef)
        assert s.t == s0.t
    # no start: the sums and counters add up from zero
    out = mix_sgd_states([a, b], p)
    assert_allclose(out.avg_coef, a.avg_coef + b.avg_coef, rtol=1e-14)
    assert out.t == 55


def test_mix_identical_states_is_the_state():
    s = LinearSGDState.zeros(3, 2, average=False, seed=1)
    s.coef[:] = np.arange(6.0)
    s.t = 7
    start = copy.deepcopy(s)
    start.t = 7
    out = mix_sgd_states([s, copy.deepcopy(s)], [0.5, 0.5], start)
    assert_array_equal(out.coef, s.coef)
    assert out.t == 7          # no increment past the start


def test_mix_lazy_steps_against_numpy():
    rng = np.random.RandomState(2)
    states = []
    for t in (12, 20):
        k = LazyStepState.zeros(5, 1, 0.1, seed=1)
        k.set_weights(rng.randn(5), 0.1 * rng.rand(5) + 0.01)
        k.t = t
        states.append(k)
    p = [0.25, 0.75]
    out = mix_lazy_steps(states, p)
    assert out.t == 32
    assert_allclose(out.weights, 0.25 * states[0].weights + 0.75 * states[1].weights,
                    rtol=1e-14)
    assert_allclose(out.step_sizes, np.exp(0.25 * np.log(states[0].step_sizes)
                                           + 0.75 * np.log(states[1].step_sizes)),
                    rtol=2 ** -23)       # (the state keeps its step sizes in float32)
    # two identical states: the same weights and step sizes
    same = mix_lazy_steps([states[0], copy.deepcopy(states[0])], [0.5, 0.5])
    assert_allclose(same.weights, states[0].weights, rtol=1e-15)
    assert_allclose(same.step_sizes, states[0].step_sizes, rtol=2 ** -23)


def test_mix_sgdqn_states_fresh_start_counts_from_alpha_t0(shards):
    (X, y), _ = shards
    est = SGDQNLinearSVC(t0=1e4, skip=4, alpha=1e-3, random_state=0, max_iter=1).fit(X, y)
    s = est._states[0]
    out = mix_sgdqn_states([s, copy.deepcopy(s)], [0.5, 0.5], lam=1e-3)
    assert_allclose(out.coef, s.coef, rtol=1e-15)
    # 1/B: twice the increment over the starting alpha t0
    assert_allclose(out.invB, 1e-3 * 1e4 + 2 * (s.invB - 1e-3 * 1e4), rtol=1e-12)
    assert_allclose(out.B, 1.0 / out.invB)
    assert out.count == s.skip and not out.update_b


@pytest.mark.parametrize("name", list(LINEAR))
def test_estimator_mix_averages_the_weights(shards, name):
    """Two models on two shards from a fresh start: the mixed weights are the
    weighted mean of theirs (the averaged SGD's, from its running sums), and
    the counters add up."""
    (X1, y1), (X2, y2) = shards
    est = LINEAR[name]
    a = clone(est).partial_fit(X1, y1, classes=[0, 1])
    b = clone(est).partial_fit(X2, y2, classes=[0, 1])
    coefs = copy.deepcopy([a.coef_, b.coef_])
    p = np.array([50, 70]) / 120
    mixed = type(est).mix([a, b], p)
    assert mixed.t_ == a.t_ + b.t_ == 120
    if name == "asgd":
        sa, sb = a._states[0], b._states[0]
        expected = (sa.avg_coef + sb.avg_coef) / (sa.n_iterates + sb.n_iterates)
        assert_allclose(mixed.coef_.ravel(), expected, rtol=1e-12)
    elif name == "sbm":
        theta = p[0] * a._states[0].theta + p[1] * b._states[0].theta
        assert_allclose(mixed.coef_.ravel(), theta[:X1.shape[1]], rtol=1e-12)
    else:
        assert_allclose(mixed.coef_, p[0] * a.coef_ + p[1] * b.coef_, rtol=1e-12)
    assert_array_equal(a.coef_, coefs[0])     # the inputs are not modified
    assert_array_equal(b.coef_, coefs[1])
    # the mixed model trains on: a further pass from it works as from any fit
    mixed.partial_fit(X1, y1)
    assert np.all(np.isfinite(mixed.coef_))


@pytest.mark.parametrize("name", list(LINEAR))
def test_estimator_mix_of_identical_models_is_the_model(shards, name):
    (X1, y1), _ = shards
    a = clone(LINEAR[name]).partial_fit(X1, y1, classes=[0, 1])
    mixed = type(a).mix([a, copy.deepcopy(a)], [0.5, 0.5])
    assert_allclose(mixed.coef_, a.coef_, rtol=1e-10, atol=1e-14)
    assert_allclose(mixed.intercept_, a.intercept_, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("est", [ASFSequenceTagger(eta0=0.1, max_iter=2, random_state=0),
                                 PSASequenceTagger(eta0=0.1, max_iter=2, random_state=0),
                                 AveragedPerceptronSequenceTagger(max_iter=2, random_state=0),
                                 AROWSequenceTagger(max_iter=2, random_state=0)])
def test_tagger_mix_of_identical_models_is_the_model(est):
    X = [[{"a": 1.0}, {"b": 1.0}], [{"b": 1.0}, {"a": 1.0}, {"c": 1.0}]]
    Y = [["x", "y"], ["y", "x", "z"]]
    a = clone(est).fit(X, Y)
    coef = a.coef_.copy()
    mixed = type(a).mix([a, copy.deepcopy(a)], [0.5, 0.5], start=None)
    assert_allclose(mixed.coef_, coef, rtol=1e-10, atol=1e-14)
    assert_array_equal(a.coef_, coef)           # the input is not modified
    assert mixed.t_ == 2 * a.t_
    assert mixed.predict(X) == a.predict(X)


def test_mix_full_rank_states_against_numpy(shards):
    """SBM at full rank: ``theta`` averaged; the bounds' curvature
    ``M^-1 - lam I`` and ``mu`` summed; the regulariser sized for the largest
    ``n_t`` (``mix_full_rank_states``), against the NumPy formula."""
    from sklearn_secondorder.linear._sbm import mix_full_rank_states

    (X1, y1), (X2, y2) = shards
    est = SBMLogisticRegression(rank=None, alpha=1e-2, random_state=0, max_iter=1)
    a, b = clone(est).fit(X1, y1), clone(est).fit(X2, y2)
    sa, sb = a._states[0], b._states[0]
    p = [0.4, 0.6]
    out = mix_full_rank_states([sa, sb], p, alpha=1e-2, step_size=lambda n: 1.0 / n)
    eye = np.eye(sa.theta.size)
    n_ref = max(sa.n_ref, sb.n_ref)
    curv = (np.linalg.inv(sa.M) - sa.lam_total * eye) + (np.linalg.inv(sb.M) - sb.lam_total * eye)
    assert_allclose(out.theta, 0.4 * sa.theta + 0.6 * sb.theta, rtol=1e-14)
    assert_allclose(np.linalg.inv(out.M), curv + 1e-2 * n_ref * eye, rtol=1e-8, atol=1e-10)
    assert_allclose(out.mu, sa.mu + sb.mu, rtol=1e-14)
    assert_allclose(out.phi, out.M @ out.mu, rtol=1e-12)
    assert out.lam == out.lam_total == 1e-2 * n_ref and out.eta == 1.0 / n_ref
    assert out.t == sa.t + sb.t


def test_mix_lazy_steps_into_a_given_state():
    """``out=`` (a state the caller owns, e.g. a thread's) gets the mix that
    a new state would; the other inputs are untouched."""
    rng = np.random.RandomState(5)
    states = []
    for t in (4, 9):
        k = LazyStepState.zeros(6, 1, 0.1, seed=1)
        k.set_weights(rng.randn(6), 0.1 * rng.rand(6) + 0.01)
        k.t = t
        states.append(k)
    ref = mix_lazy_steps(states, [0.3, 0.7])
    second = copy.deepcopy(states[1])
    out = mix_lazy_steps(states, [0.3, 0.7], out=states[0])
    assert out is states[0] and out.t == ref.t
    assert_array_equal(out.weights, ref.weights)
    assert_array_equal(out.step_sizes, ref.step_sizes)
    assert_array_equal(states[1].weights, second.weights)
