"""``n_jobs``: several threads on one model (``_threads.py`` and its users).

References: brute-force partitions for ``balanced_chunks``; the single-thread
gradient pass and the dense core's ``loglik_gradient`` for the threaded
objective; the pre-``n_jobs`` L-BFGS loop, written out here, for the default
model; CRFsuite's training log for the threaded fit's iterates; a lone fit for
concurrent fits.
"""
import threading
import time

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.linalg.blas import daxpy, ddot
from sklearn.utils.estimator_checks import parametrize_with_checks
from test_trainers import conll_subset, dataset, random_sequences

from sklearn_secondorder import LBFGSSequenceTagger, _validation
from sklearn_secondorder._core._crf_compact import compact_loglik_gradient, feature_table
from sklearn_secondorder._core._crf_infer import loglik_gradient
from sklearn_secondorder._core._weights import ScaledWeights
from sklearn_secondorder._threads import (
    ThreadRunner,
    balanced_chunks,
    check_n_jobs,
    effective_n_jobs,
)
from sklearn_secondorder.crfsuite import CRF
from sklearn_secondorder.sequence import _lbfgs
from sklearn_secondorder.sequence._feature_set import observed_weights
from sklearn_secondorder.sequence._lbfgs import compact_objective
from sklearn_secondorder.sequence._lbfgs_solver import minimize_lbfgs

BAD_N_JOBS = [0, 1.5, "2", True, np.float64(2.0)]


# ---- _threads: n_jobs, the partition, the runner -----------------------------------
def test_effective_n_jobs_is_scikit_learns_convention():
    n_cpus = joblib.cpu_count()
    assert effective_n_jobs(None) == 1
    assert effective_n_jobs(1) == 1
    assert effective_n_jobs(3) == 3
    assert effective_n_jobs(np.int64(2)) == 2
    assert effective_n_jobs(-1) == n_cpus
    assert effective_n_jobs(-2) == max(1, n_cpus - 1)
    assert effective_n_jobs(-10 * n_cpus) == 1
    # None stays 1 in a joblib context: the threads change the sums' order
    with joblib.parallel_config(n_jobs=4):
        assert effective_n_jobs(None) == 1


@pytest.mark.parametrize("bad", BAD_N_JOBS)
def test_check_n_jobs_names_the_parameter(bad):
    with pytest.raises(ValueError, match="n_jobs must be None or a non-zero int"):
        check_n_jobs(bad)
    with pytest.raises(ValueError, match="^threads must be"):
        effective_n_jobs(bad, name="threads")


def nearest_cut_oracle(offsets, n_chunks):
    """For each of the k - 1 equal shares of the total, the item boundary
    nearest to it (the lower one on a tie), by scanning them all."""
    n = len(offsets) - 1
    k = max(1, min(n_chunks, n))
    total = offsets[-1] - offsets[0]
    cuts = set()
    for c in range(1, k):
        target = offsets[0] + total * c / k
        best = min(range(n + 1), key=lambda i: (abs(offsets[i] - target), i))
        if 0 < best < n:
            cuts.add(best)
    return [0, *sorted(cuts), n]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_chunks", [1, 2, 3, 7])
def test_balanced_chunks_are_the_nearest_cuts(seed, n_chunks):
    rng = np.random.RandomState(seed)
    sizes = rng.randint(1, 40, size=rng.randint(1, 30))
    if seed == 0:
        sizes[0] = 500                          # one item larger than a share
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    bounds = balanced_chunks(offsets, n_chunks)
    assert bounds.tolist() == nearest_cut_oracle(offsets.tolist(), n_chunks)
    assert len(bounds) - 1 <= min(n_chunks, sizes.size)
    assert np.all(np.diff(bounds) > 0)                       # contiguous, none empty
    # each chunk is within one item of its share of the tokens
    shares = np.diff(offsets[bounds])
    if len(shares) == n_chunks:
        assert np.all(np.abs(shares - offsets[-1] / n_chunks) <= sizes.max())


def test_thread_runner_keeps_the_order_and_uses_the_threads():
    seen = []

    def work(i):
        time.sleep(0.01 * (3 - i))              # the later items finish first
        seen.append(threading.current_thread().name)
        return i * i

    with ThreadRunner(3) as runner:
        assert runner.map(work, range(3)) == [0, 1, 4]
    assert threading.current_thread().name in seen          # the caller takes item 0
    assert sum(name.startswith("skso") for name in seen) == 2
    with ThreadRunner(1) as runner:                          # no pool: in the caller
        seen.clear()
        assert runner.map(work, range(3)) == [0, 1, 4]
        assert set(seen) == {threading.current_thread().name}
    with pytest.raises(ValueError, match="n_threads"):
        ThreadRunner(0)


def test_thread_runner_raises_after_every_call_has_finished():
    finished = []

    def work(i):
        if i == 1:
            raise FloatingPointError("chunk 1")
        if i == 2:
            raise KeyError("chunk 2")
        time.sleep(0.05)
        finished.append(i)
        return i

    with ThreadRunner(4) as runner:
        with pytest.raises(FloatingPointError, match="chunk 1"):    # the first, in item order
            runner.map(work, range(4))
        assert sorted(finished) == [0, 3]


# ---- the threaded objective --------------------------------------------------------
def lbfgs_problem(X, y, seed=0, **params):
    """``(ds, table, H, n_weights)`` of LBFGSSequenceTagger's objective on ``X``, ``y``."""
    est = LBFGSSequenceTagger(max_iter=1, **params).fit(X, y)
    ds = dataset(est, X, y)
    batch = est._to_data(X, y, fitting=True)
    lab = np.searchsorted(est.classes_, batch.labels).astype(np.int32)
    A, H = est._state.crf.n_attributes, est.classes_.size
    exists = observed_weights(batch, lab, A, H, all_possible_states=False,
                              all_possible_transitions=False, fit_intercept=True)
    idx, *table = feature_table(exists.view(np.uint8), A, H)
    return ds, table, H, A, idx


def problem(name):
    """120 CoNLL-2000 sentences, or random sequences of 3 to 5 labels."""
    if name == "conll":
        return conll_subset(120)
    seed = int(name[-1])
    return random_sequences(n_seq=25 + 10 * seed, n_attr=6, n_labels=3 + seed, seed=seed,
                            max_len=9)


@pytest.mark.parametrize("name", ["conll", "random0", "random1", "random2"])
def test_threaded_objective_matches_one_thread(name):
    """n_jobs = 2, 3 (and more threads than sequences) give one thread's
    objective and gradient to 1e-12; one thread is the dense core's."""
    X, y = problem(name)
    ds, table, H, A, idx = lbfgs_problem(X, y)
    rng = np.random.RandomState(1)
    lam2 = 0.3
    one = compact_objective(ds, table, H, lam2)
    for z in (np.zeros(idx.size), rng.normal(scale=0.5, size=idx.size)):
        f1, g1 = one(z)
        # one thread against the dense core, the other weights at zero
        full = np.zeros((A + H + 1) * H)
        full[idx] = z
        ll, g_dense = loglik_gradient(ds, ScaledWeights(full, H), 1, True)
        assert_allclose(f1, -ll + 0.5 * lam2 * z @ z, rtol=1e-12)
        assert_allclose(g1, -g_dense[idx] + lam2 * z, rtol=1e-10, atol=1e-12)
        for n_threads in (2, 3, len(X) + 5):
            with ThreadRunner(n_threads) as runner:
                fk, gk = compact_objective(ds, table, H, lam2, runner)(z)
            assert_allclose(fk, f1, rtol=1e-12)
            assert_allclose(gk, g1, rtol=1e-12, atol=1e-12 * np.abs(g1).max())


def test_chunks_sum_to_the_whole_pass():
    X, y = random_sequences(n_seq=30, seed=5)
    ds, (attr_ptr, feat_label, trans_id, bias_id), H, A, idx = lbfgs_problem(X, y)
    w = np.random.RandomState(0).normal(size=idx.size)
    g = np.empty_like(w)
    ll = compact_loglik_gradient(ds, w, attr_ptr, feat_label, trans_id, bias_id, H, g)
    parts, grads = [], []
    for begin, end in [(0, 7), (7, 8), (8, 8), (8, 30)]:
        gp = np.empty_like(w)
        parts.append(compact_loglik_gradient(ds, w, attr_ptr, feat_label, trans_id, bias_id,
                                             H, gp, begin, end))
        grads.append(gp)
    assert parts[2] == 0.0 and not grads[2].any()
    assert_allclose(sum(parts), ll, rtol=1e-13)
    assert_allclose(sum(grads), g, rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="range 5..31"):
        compact_loglik_gradient(ds, w, attr_ptr, feat_label, trans_id, bias_id, H, g, 5, 31)


# ---- the estimators ----------------------------------------------------------------
def todays_fit(X, y, alpha, max_iter):
    """LBFGSSequenceTagger's fit before n_jobs: one unthreaded pass per
    evaluation, the solver on the compact weights from zero."""
    ds, (attr_ptr, feat_label, trans_id, bias_id), H, A, idx = lbfgs_problem(X, y)
    n = len(X)
    lam2 = n * alpha

    def fun(z):
        g = np.empty_like(z)
        ll = compact_loglik_gradient(ds, z, attr_ptr, feat_label, trans_id, bias_id, H, g)
        g *= -1.0
        g = daxpy(z, g, a=lam2)
        return -ll + 0.5 * lam2 * float(ddot(z, z)), g
    return minimize_lbfgs(fun, np.zeros(idx.size), c1=0.0, num_memories=6, epsilon=1e-5,
                          period=10, delta=1e-5, max_iter=max_iter, linesearch="MoreThuente",
                          max_linesearch=20), idx


def test_n_jobs_1_is_the_model_of_one_thread():
    X, y = random_sequences(n_seq=40, seed=2)
    res, idx = todays_fit(X, y, alpha=1e-2, max_iter=40)
    for n_jobs in (None, 1):
        est = LBFGSSequenceTagger(alpha=1e-2, max_iter=40, n_jobs=n_jobs).fit(X, y)
        assert est.n_iter_ == res.n_iter
        assert_array_equal(est._model[idx], res.x)                # bit for bit
        assert est.objective_ == res.fun / len(X)
    assert LBFGSSequenceTagger().get_params()["n_jobs"] is None


@pytest.mark.parametrize("n_jobs", [2, 3])
def test_threaded_fit_is_deterministic_and_matches_one_thread(n_jobs):
    X, y = conll_subset(150)
    kw = {"alpha": 2.0 / len(X), "max_iter": 30}
    one = LBFGSSequenceTagger(**kw).fit(X, y)
    first = LBFGSSequenceTagger(n_jobs=n_jobs, **kw).fit(X, y)
    again = LBFGSSequenceTagger(n_jobs=n_jobs, **kw).fit(X, y)
    assert_array_equal(first.coef_, again.coef_)
    assert first.transition_features_ == again.transition_features_
    assert first.loss_ == again.loss_
    assert_allclose(first.objective_, one.objective_, rtol=1e-9)
    assert_allclose(first.coef_, one.coef_, atol=1e-6)


def test_threaded_fit_follows_crfsuites_iterates():
    """Two threads, CRFsuite's objective: its training log to 6 decimals."""
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = conll_subset(150)
    log = sklearn_crfsuite.CRF(algorithm="lbfgs", c2=0.5, max_iterations=25).fit(
        X, y).training_log_.iterations
    est = LBFGSSequenceTagger(alpha=1.0 / len(X), max_iter=25, fit_intercept=False,
                              n_jobs=2).fit(X, y)
    assert_allclose(est.loss_, [it["loss"] for it in log], rtol=0, atol=2e-6)


def test_concurrent_fits_each_give_the_lone_model():
    """Two estimators fitted at the same time from two Python threads (each
    with two threads of its own) share nothing: each gets its lone fit."""
    data = [conll_subset(120), random_sequences(n_seq=80, seed=7)]
    kw = {"alpha": 1e-2, "max_iter": 25, "n_jobs": 2}
    lone = [LBFGSSequenceTagger(**kw).fit(X, y) for X, y in data]
    for _ in range(2):
        ests = [LBFGSSequenceTagger(**kw) for _ in data]
        errors = []

        def fit(est, X, y, errors):
            try:
                est.fit(X, y)
            except BaseException as exc:     # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=fit, args=(est, X, y, errors))
                   for est, (X, y) in zip(ests, data)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for est, ref in zip(ests, lone):
            assert_array_equal(est._model, ref._model)
            assert est.loss_ == ref.loss_


@parametrize_with_checks([LBFGSSequenceTagger(max_iter=20, n_jobs=2),
                          LBFGSSequenceTagger(max_iter=20, penalty="l1", alpha=1e-3, n_jobs=3)])
def test_sklearn_api_with_threads(estimator, check):
    check(estimator)


@pytest.mark.parametrize("bad", BAD_N_JOBS)
def test_bad_n_jobs_is_refused(bad):
    X, y = [[{"a": 1}], [{"b": 1}]], [["x"], ["y"]]
    with pytest.raises(ValueError, match="n_jobs"):
        LBFGSSequenceTagger(n_jobs=bad).fit(X, y)
    for algorithm in ("lbfgs", "asf", "ap"):
        with pytest.raises(ValueError, match="n_jobs"):
            CRF(algorithm=algorithm, n_jobs=bad).fit(X, y)


TINY_X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]] * 4
TINY_Y = [["D", "N"], ["D", "N"]] * 4


def test_crf_passes_n_jobs_to_every_algorithm():
    crf = CRF(algorithm="lbfgs", n_jobs=2, keep_training_state=True).fit(TINY_X, TINY_Y)
    assert crf.estimator_.n_jobs == 2
    one = CRF(algorithm="lbfgs", keep_training_state=True).fit(TINY_X, TINY_Y)
    assert one.estimator_.n_jobs is None
    assert_allclose(crf.estimator_._model, one.estimator_._model, rtol=1e-9, atol=1e-12)
    # the online algorithms share their passes between the threads: the
    # tagger's own threaded model, the same on every run
    for algorithm in ("asf", "l2sgd", "ap", "pa", "arow"):
        kw = {"algorithm": algorithm, "keep_training_state": True, "max_iterations": 3}
        two = CRF(n_jobs=2, **kw).fit(TINY_X, TINY_Y)
        assert two.estimator_.n_jobs == 2
        again = CRF(n_jobs=2, **kw).fit(TINY_X, TINY_Y)
        assert_array_equal(two.estimator_._model, again.estimator_._model)
        assert CRF(**kw).fit(TINY_X, TINY_Y).estimator_.n_jobs is None


def fails_in_a_worker(real):
    """``compact_loglik_gradient`` that raises on the chunks after the first,
    which run on the pool's threads."""
    def wrapped(*args):
        if len(args) > 8 and args[8] > 0:
            assert threading.current_thread() is not threading.main_thread()
            raise MemoryError("chunk on a worker thread")
        return real(*args)
    return wrapped


def test_a_failure_in_a_thread_surfaces(monkeypatch):
    X, y = random_sequences(n_seq=30, seed=1)
    crf_X, crf_y = conll_subset(40)
    crf = CRF(algorithm="lbfgs", max_iterations=5, n_jobs=2).fit(crf_X, crf_y)
    before = crf.state_features_
    tagger = LBFGSSequenceTagger(max_iter=5, n_jobs=2).fit(X, y)
    monkeypatch.setattr(_lbfgs, "compact_loglik_gradient",
                        fails_in_a_worker(compact_loglik_gradient))
    with pytest.raises(MemoryError, match="worker thread"):
        crf.fit(crf_X[:20], crf_y[:20])
    assert crf.state_features_ == before                  # the previous model, unchanged
    with pytest.raises(MemoryError, match="worker thread"):
        tagger.fit(X, y)
    assert not hasattr(tagger, "coef_")           # a tagger's failed fit: no half model
    # one thread does not reach the failing chunks
    LBFGSSequenceTagger(max_iter=5, n_jobs=1).fit(X, y)


def nan_in_a_worker(real):
    """``compact_loglik_gradient`` whose chunks after the first (on the
    pool's threads) overflow: a NaN objective and gradient."""
    def wrapped(*args):
        ll = real(*args)
        if len(args) > 8 and args[8] > 0:
            args[7][:] = np.nan
            return np.nan
        return ll
    return wrapped


def test_a_nan_objective_in_a_thread_is_the_divergence_error(monkeypatch):
    X, y = random_sequences(n_seq=30, seed=1)
    crf_X, crf_y = conll_subset(40)
    crf = CRF(algorithm="lbfgs", max_iterations=5, n_jobs=2).fit(crf_X, crf_y)
    before = crf.state_features_
    monkeypatch.setattr(_lbfgs, "compact_loglik_gradient",
                        nan_in_a_worker(compact_loglik_gradient))
    with pytest.raises(ValueError, match="overflowed"):
        LBFGSSequenceTagger(max_iter=5, n_jobs=2).fit(X, y)
    with pytest.raises(ValueError, match="overflowed"):
        crf.fit(crf_X[:20], crf_y[:20])
    assert crf.state_features_ == before                  # the previous model, unchanged


def test_memory_check_counts_the_threads_buffers(monkeypatch):
    X, y = random_sequences(n_seq=20, seed=0)
    est = LBFGSSequenceTagger(max_iter=3, n_jobs=4).fit(X, y)
    H, A = est.classes_.size, est._state.crf.n_attributes
    one = LBFGSSequenceTagger(max_iter=3, n_jobs=1)
    one.classes_ = est.classes_
    n_weights = (A + H + 1) * H
    need_one = n_weights * one._bytes_per_weight()
    assert est._bytes_per_weight() == one._bytes_per_weight() + 3 * 8
    crf = CRF(algorithm="lbfgs", max_iterations=3, n_jobs=4).fit(TINY_X, TINY_Y)
    before = crf.state_features_
    monkeypatch.setattr(_validation, "available_memory", lambda: need_one)
    LBFGSSequenceTagger(max_iter=3, n_jobs=1).fit(X, y)       # fits with one thread
    with pytest.raises(ValueError, match="needs .* bytes of state per weight"):
        LBFGSSequenceTagger(max_iter=3, n_jobs=4).fit(X, y)
    monkeypatch.setattr(_validation, "available_memory", lambda: 10)
    with pytest.raises(ValueError, match="needs"):
        crf.fit(TINY_X, TINY_Y)
    assert crf.state_features_ == before
