"""``n_jobs`` threads sharing each pass of one model (data parallelism).

``PSAClassifier``'s threads share one state, each owning a part of the
blocks, the rows going by in rounds scored at the round's start. The other
single-problem linear estimators and the online taggers split every pass's
visiting order into contiguous shards, run the compiled kernel on each shard
in its own thread, and mix the threads' states after the pass.

References: the dense NumPy Algorithm 1 with the rounds' scores (PSA); the
compiled kernels called directly on a state built as the estimator builds it
(the one-thread model, and each shard of a threaded pass), with the mixing
done in NumPy here; a lone fit for concurrent fits; ``n_jobs=1`` for the
quality margins.
"""
import copy
import threading

import numpy as np
import pytest
import scipy.sparse as sp
from _oracles import (
    numpy_crf_psa,
    numpy_crf_psa_l1,
    numpy_crf_sgd,
    numpy_linear_psa,
    numpy_psa_l1,
    to_data,
)
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_classification
from sklearn.utils import check_random_state
from sklearn.utils.estimator_checks import parametrize_with_checks
from test_crf import make_problem
from test_trainers import conll_subset, dataset, random_sequences

from sklearn_secondorder import (
    AROWSequenceTagger,
    ASFSequenceTagger,
    AveragedPerceptronSequenceTagger,
    PassiveAggressiveSequenceTagger,
    PlainSGDClassifier,
    PSAClassifier,
    PSASequenceTagger,
    SGDQNLinearSVC,
    SGDSequenceTagger,
    _validation,
)
from sklearn_secondorder._core import _crf_psa, _crf_sgd, _psa_fast
from sklearn_secondorder._core._crf_online import online_epochs
from sklearn_secondorder._core._crf_psa import psa_epochs as crf_psa_epochs
from sklearn_secondorder._core._crf_sgd import CRFSGDOptions, CRFState
from sklearn_secondorder._core._crf_sgd import sgd_epochs as crf_sgd_epochs
from sklearn_secondorder._core._dataset import RowDataset, shuffled_order
from sklearn_secondorder._core._lazy_steps import LazyStepState, PSAOptions, catch_up_state
from sklearn_secondorder._core._losses import LOSSES
from sklearn_secondorder._core._psa_fast import psa_epochs
from sklearn_secondorder._core._sgd_fast import LinearSGDOptions, LinearSGDState, sgd_epochs
from sklearn_secondorder._threads import ThreadRunner, copy_state, shard_order
from sklearn_secondorder._validation import draw_seed
from sklearn_secondorder.crfsuite import CRF
from sklearn_secondorder.linear import _training_loop as linear_loop
from sklearn_secondorder.sequence import _online as sequence_online
from sklearn_secondorder.sequence import _training_loop as sequence_loop

BAD_N_JOBS = [0, 1.5, "2", True, np.float64(2.0)]

LINEAR = [
    PSAClassifier(eta0=0.05, period=10, random_state=0, max_iter=2),
    PSAClassifier(random_state=0, max_iter=2),                    # multinomial (3 classes)
    PlainSGDClassifier(eta0=0.05, random_state=0, max_iter=3, tol=None),
    PlainSGDClassifier(eta0=0.05, average=True, random_state=0, max_iter=3, tol=None),
    SGDQNLinearSVC(random_state=0, max_iter=3),
]
TAGGERS = [
    ASFSequenceTagger(eta0=0.1, max_iter=3, random_state=0),
    ASFSequenceTagger(eta0=0.1, max_iter=3, random_state=0, n_latent=2),   # (mixes)
    PSASequenceTagger(eta0=0.1, max_iter=3, random_state=0),
    SGDSequenceTagger(eta0=0.1, max_iter=3, random_state=0),
    AveragedPerceptronSequenceTagger(max_iter=3, random_state=0),
    PassiveAggressiveSequenceTagger(max_iter=3, random_state=0),
    AROWSequenceTagger(max_iter=3, random_state=0),
]


def linear_data(est, n=600, sparse=True):
    # (PSA with the multinomial log loss on three classes: one problem too)
    n_classes = 3 if est is LINEAR[1] else 2
    X, y = make_classification(n_samples=n, n_features=20, n_informative=8,
                               n_classes=n_classes, random_state=1)
    X[np.abs(X) < 0.7] = 0.0                     # (sparse rows of varying length)
    if isinstance(est, PSAClassifier):
        # columns no row uses, past the eager pass's size: the threads' passes
        X = np.hstack([X, np.zeros((n, _psa_fast.EAGER_MAX_WEIGHTS))])
    return (sp.csr_matrix(X) if sparse else X), y


def work_of(X):
    return np.diff(X.indptr).astype(np.int64) + 1


# ---- n_jobs=1 is the one-thread kernel call, bit for bit --------------------------
def test_n_jobs_1_psa_is_the_kernel_call():
    X, y = linear_data(LINEAR[0])
    alpha, eta0, b = 1e-3, 0.05, 10
    seed = draw_seed(check_random_state(0))
    state = LazyStepState.zeros(X.shape[1] + 1, 1, eta0, seed=seed)
    options = PSAOptions(lam=alpha, period=b, psa_alpha=0.9999, psa_beta=0.99, kappa=0.9)
    target = np.where(y == 1, 1.0, -1.0)
    psa_epochs(RowDataset(X, target, np.ones(X.shape[0])), state, options,
               loss=LOSSES["log_loss"](), n_epochs=3, shuffle=True, fit_intercept=True)
    for n_jobs in (None, 1):
        est = PSAClassifier(alpha=alpha, eta0=eta0, period=b, max_iter=3, random_state=0,
                            n_jobs=n_jobs).fit(X, y)
        assert_array_equal(est.coef_.ravel(), state.weights[:-1])
        assert_array_equal(est.intercept_, state.weights[-1:])
        assert est.t_ == state.t


def test_n_jobs_1_sgd_is_the_kernel_call():
    X, y = linear_data(LINEAR[2])
    alpha, eta0 = 1e-3, 0.05
    state = LinearSGDState.zeros(X.shape[1], 1, average=False,
                                 seed=draw_seed(check_random_state(0)))
    state.eta0 = eta0
    options = LinearSGDOptions(lam=alpha, l1=0.0, learning_rate="optimal", eta0=eta0,
                               t0=1.0 / (alpha * eta0))
    target = np.where(y == 1, 1.0, -1.0)
    sgd_epochs(RowDataset(X, target, np.ones(X.shape[0])), state, options,
               loss=LOSSES["log_loss"](), n_epochs=3, shuffle=True, fit_intercept=True)
    est = PlainSGDClassifier(alpha=alpha, eta0=eta0, max_iter=3, tol=None, random_state=0,
                             n_jobs=1).fit(X, y)
    coef, intercept = state.model()
    assert_array_equal(est.coef_.ravel(), coef)
    assert_array_equal(est.intercept_, intercept)


def test_n_jobs_1_asf_tagger_is_the_kernel_call():
    X, y = random_sequences(n_seq=30, seed=3)
    # (the kernel call's feedback is the average of all iterates)
    est = ASFSequenceTagger(eta0=0.1, alpha=1e-2, max_iter=3, random_state=0, n_jobs=1,
                            feedback_average="all")
    est.fit(X, y)
    ds = dataset(est, X, y)
    H = est.classes_.size
    crf = CRFState.new(est._state.crf.n_attributes, H, averaged=True, seed=0)
    crf.seed = draw_seed(check_random_state(0))
    crf_sgd_epochs(ds, crf, CRFSGDOptions(eta0=0.1, power=0.0, lam=1e-2, average=True,
                                          feedback=True), n_epochs=3, shuffle=True,
                   fit_intercept=True)
    assert_array_equal(est._model, crf.model())
    assert est.t_ == crf.t


# ---- the threaded pass is the NumPy mix of the shards' kernel passes ---------------
def test_threaded_sgd_pass_is_the_mix_of_its_shards():
    """Two threads, one pass: the shards are contiguous pieces of the order a
    one-thread pass visits; each is one kernel pass from the start state, and
    the model is their row-share-weighted mean."""
    X, y = linear_data(LINEAR[2], n=701)
    alpha, eta0 = 1e-3, 0.05
    seed = draw_seed(check_random_state(0))
    target = np.where(y == 1, 1.0, -1.0)
    order, _ = shuffled_order(X.shape[0], seed)
    shards = shard_order(order, work_of(X), 2)
    assert len(shards) == 2 and abs(X[shards[0]].nnz - X[shards[1]].nnz) <= 21
    options = LinearSGDOptions(lam=alpha, l1=0.0, learning_rate="optimal", eta0=eta0,
                               t0=1.0 / (alpha * eta0))
    coefs, intercepts = [], []
    for shard in shards:
        s = LinearSGDState.zeros(X.shape[1], 1, average=False, seed=seed)
        s.eta0 = eta0
        sgd_epochs(RowDataset(X[shard], target[shard], np.ones(shard.size)), s, options,
                   loss=LOSSES["log_loss"](), n_epochs=1, shuffle=False, fit_intercept=True)
        c, b = s.model()
        coefs.append(c)
        intercepts.append(b)
    p = np.array([s.size for s in shards]) / X.shape[0]
    est = PlainSGDClassifier(alpha=alpha, eta0=eta0, max_iter=1, tol=None, random_state=0,
                             n_jobs=2).fit(X, y)
    assert_allclose(est.coef_.ravel(), p[0] * coefs[0] + p[1] * coefs[1], rtol=1e-14,
                    atol=1e-15)
    assert_allclose(est.intercept_, p[0] * intercepts[0] + p[1] * intercepts[1],
                    rtol=1e-14)
    assert est.t_ == X.shape[0]


# (modified_huber: rows past the margin are zero-gradient updates; hinge's
# unpenalised intercept moves on a lattice of +-eta, whose exact returns make
# 0/0 events that the float64 oracle does not see as such)
@pytest.mark.parametrize("K, loss", [(1, "log_loss"), (1, "modified_huber"), (3, None)])
@pytest.mark.parametrize("n_threads", [2, 3])
def test_shared_psa_pass_is_the_round_delayed_algorithm(K, loss, n_threads):
    """PSA's passes shared by threads: the dense Algorithm 1 (NumPy) with
    each row scored at the weights of its round's start, the rounds of
    ``n_threads * SHARED_ROUND_ROWS`` rows cut at the events; weights within
    1e-5 of their scale, step sizes within 1e-5 relative (the one-thread
    kernel's tolerance against the same oracle)."""
    rng = np.random.RandomState(K + n_threads)
    X = sp.random(500, 30, density=0.2, format="csr", random_state=rng)
    y = (rng.randint(3, size=500) if K > 1
         else np.where(X @ rng.randn(30) > 0.1, 1.0, -1.0))
    sw = np.ones(500)
    sw[::17] = 0.0                                      # (rows that are not updates)
    lam, eta0, b = 1e-2, 0.2, 7
    loss_fn = None if K > 1 else LOSSES[loss]()
    state = LazyStepState.zeros(X.shape[1] + 1, K, eta0)
    options = PSAOptions(lam=lam, period=b, psa_alpha=0.9999, psa_beta=0.99, kappa=0.9)
    with ThreadRunner(n_threads) as runner:
        # (eager=False: a model this small takes the one-thread eager pass)
        result = psa_epochs(RowDataset(X, y.astype(float), sw), state, options, loss=loss_fn,
                            n_epochs=2, shuffle=False, threads=runner, eager=False)
    assert result.epochs == 2 and not result.diverged
    w, eta, t, _ = numpy_linear_psa(X, y, sw, K=K, loss=loss_fn, alpha=lam, eta0=eta0, b=b,
                                    n_epochs=2,
                                    round_rows=n_threads * _psa_fast.SHARED_ROUND_ROWS)
    assert state.t == t
    assert_allclose(state.weights, w, rtol=0, atol=1e-5 * np.abs(w).max())
    assert_allclose(state.step_sizes, eta, rtol=1e-5)
    # (a different model from the one-thread pass: the rounds matter)
    one, _, _, _ = numpy_linear_psa(X, y, sw, K=K, loss=loss_fn, alpha=lam, eta0=eta0, b=b,
                                    n_epochs=2)
    assert np.abs(one - w).max() > 1e-3 * np.abs(w).max()


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("crfsuite_features", [False, True])
def test_shared_crf_psa_pass_is_the_round_delayed_algorithm(n_threads, crfsuite_features):
    """The PSA tagger's passes shared by threads: the dense Algorithm 1
    (NumPy) with each sequence's gradient at the weights of its round's
    start, the rounds of ``n_threads * SHARED_ROUND_SEQUENCES`` sequences cut
    at the events; within the one-thread kernel's tolerance. With CRFsuite's
    feature set the rows hold their trained labels only."""
    rng = np.random.default_rng(n_threads)
    A, H, lam, b, eta0 = 12, 3, 0.01, 3, 0.5
    X, offsets, labels = make_problem(rng, n_seq=40, n_attr=A, n_labels=H, density=0.2)
    exists = None
    if crfsuite_features:
        exists = np.zeros((A + H + 1, H), dtype=bool)
        for r in range(X.shape[0]):
            exists[X.indices[X.indptr[r]:X.indptr[r + 1]], labels[r]] = True
        exists[A:] = True
    state = LazyStepState.zeros(A + H + 1, H, eta0, exists=exists)
    options = PSAOptions(lam=lam, period=b, psa_alpha=0.9999, psa_beta=0.99, kappa=0.9)
    allowed = None if exists is None else exists.reshape(-1).view(np.uint8)
    with ThreadRunner(n_threads) as runner:
        result = crf_psa_epochs(to_data(X, offsets, labels), state, options, n_epochs=2,
                                shuffle=False, allowed=allowed, threads=runner)
    assert result.epochs == 2 and not result.diverged and len(result.seconds) == 2
    kw = dict(eta0=eta0, lam=lam, b=b, a=0.9999, be=0.99, kappa=0.9, n_epochs=2)
    if exists is None:
        w, eta, t = numpy_crf_psa(X, offsets, labels, A, H,
                                  round_seqs=n_threads * _crf_psa.SHARED_ROUND_SEQUENCES, **kw)
        assert state.t == t
        assert_allclose(state.weights, w, rtol=1e-5, atol=1e-5 * np.abs(w).max())
        assert_allclose(state.step_sizes, eta, rtol=1e-5)
        one, _, _ = numpy_crf_psa(X, offsets, labels, A, H, **kw)
        assert np.abs(one - w).max() > 1e-3 * np.abs(w).max()     # (the rounds matter)
    else:
        # the weights that do not exist stay 0; the others are those of the
        # shared pass over the dense layout with the same mask
        assert np.all(state.weights.reshape(-1, H)[~exists] == 0.0)
        dense = LazyStepState.zeros(A + H + 1, H, eta0)
        with ThreadRunner(n_threads) as runner:
            crf_psa_epochs(to_data(X, offsets, labels), dense, options, n_epochs=2,
                           shuffle=False, allowed=allowed, threads=runner)
        assert_allclose(state.weights, dense.weights, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n_threads", [2, 3])
def test_shared_crf_psa_pass_with_the_l1_penalty_is_the_round_delayed_algorithm(n_threads):
    """The same with CRFsuite's c1 (the L1 records: Tsuruoka's cumulative
    penalty), against the dense NumPy reference with the rounds' gradients."""
    rng = np.random.default_rng(20 + n_threads)
    A, H, lam, l1, b = 12, 3, 0.01, 0.02, 3
    X, offsets, labels = make_problem(rng, n_seq=40, n_attr=A, n_labels=H, density=0.2)
    state = LazyStepState.zeros(A + H + 1, H, 0.4, l1=True)
    with ThreadRunner(n_threads) as runner:
        crf_psa_epochs(to_data(X, offsets, labels), state, PSAOptions(lam=lam, period=b, l1=l1),
                       n_epochs=2, shuffle=False, threads=runner)
    w, eta, t = numpy_crf_psa_l1(X, offsets, labels, A, H, eta0=0.4, lam=lam, l1=l1, b=b,
                                 n_epochs=2,
                                 round_seqs=n_threads * _crf_psa.SHARED_ROUND_SEQUENCES)
    assert state.t == t
    assert_allclose(state.weights, w, rtol=1e-5, atol=1e-5 * np.abs(w).max())
    assert_allclose(state.step_sizes, eta, rtol=1e-5)
    assert np.sum(w == 0) > 0
    assert_array_equal(state.weights == 0, w == 0)


@pytest.mark.parametrize("power, average, feedback", [(1.0, False, False),
                                                     (0.0, True, True)])
@pytest.mark.parametrize("n_threads", [2, 3])
def test_shared_crf_sgd_pass_is_the_round_delayed_algorithm(power, average, feedback,
                                                            n_threads):
    """SGD and ASF taggers' passes shared by threads: the dense SGD (NumPy,
    explicit iterates and feedbacks) with each sequence's gradient at the
    weights of its round's start, rounds of ``shared_round_sequences``;
    to rounding."""
    rng = np.random.default_rng(10 + n_threads)
    A, H, alpha, eta0 = 12, 3, 0.01, 0.3
    X, offsets, labels = make_problem(rng, n_seq=40, n_attr=A, n_labels=H, density=0.2)
    state = CRFState.new(A, H, averaged=average, seed=1)
    options = CRFSGDOptions(eta0=eta0, power=power, lam=alpha, average=average,
                            feedback=feedback)
    with ThreadRunner(n_threads) as runner:
        result = crf_sgd_epochs(to_data(X, offsets, labels), state, options, n_epochs=3,
                                shuffle=False, threads=runner)
    assert result.epochs == 3 and not result.diverged
    w, avg, feedbacks = numpy_crf_sgd(
        X, offsets, labels, A, H, eta0=eta0, power=power, alpha=alpha, n_epochs=3,
        average=average, feedback=feedback,
        round_seqs=_crf_sgd.shared_round_sequences(n_threads))
    assert state.t == 3 * 40 and result.feedbacks == feedbacks
    assert_allclose(state.coef, w, rtol=1e-9, atol=1e-12)
    assert_allclose(state.model(), avg if average else w, rtol=1e-9, atol=1e-12)
    one, _, _ = numpy_crf_sgd(X, offsets, labels, A, H, eta0=eta0, power=power, alpha=alpha,
                              n_epochs=3, average=average, feedback=feedback)
    assert np.abs(one - w).max() > 1e-4 * np.abs(w).max()       # (the rounds matter)


@pytest.mark.parametrize("algorithm", ["psa", "asf"])
def test_shared_tagger_passes_with_the_l1_penalty(algorithm):
    """CRFsuite's c1 at two threads (the L1 records of the lazy core; the
    cumulative penalty of ScaledWeights): as sparse a model, as accurate
    (token accuracy within 1.5 points on 250 training sentences, where a
    round of 8 is 3% of a pass)."""
    X, y = conll_subset(300)
    # (six passes: ASF's periods end at passes 1, 3 and 6)
    kw = {"algorithm": algorithm, "c1": 0.5, "c2": 0.01, "max_iterations": 6}
    one = CRF(**kw).fit(X[:250], y[:250])
    two = CRF(n_jobs=2, **kw).fit(X[:250], y[:250])
    n_one, n_two = len(one.state_features_), len(two.state_features_)
    assert 0 < n_two and abs(n_two - n_one) <= 0.1 * n_one
    assert two.score(X[250:], y[250:]) >= one.score(X[250:], y[250:]) - 0.015


def test_more_threads_than_rows():
    """Threads that own no row's weights, rounds longer than the data."""
    X, y = linear_data(LINEAR[0], n=5)
    est = PSAClassifier(eta0=0.05, period=2, random_state=0, n_jobs=4).fit(X, y)
    assert np.all(np.isfinite(est.coef_)) and est.t_ == 5
    Xs, ys = random_sequences(n_seq=3, seed=2, max_len=4)
    for cls in (PSASequenceTagger, ASFSequenceTagger, SGDSequenceTagger):
        tagger = cls(eta0=0.1, max_iter=2, random_state=0, n_jobs=4).fit(Xs, ys)
        assert np.all(np.isfinite(tagger._model)) and tagger.t_ == 6


@pytest.mark.parametrize("K, loss", [(1, "log_loss"), (3, None)])
def test_shared_psa_pass_with_the_l1_penalty_is_the_round_delayed_algorithm(K, loss):
    """The same with the L1 records (Tsuruoka's cumulative penalty)."""
    rng = np.random.RandomState(K)
    X = sp.random(400, 14, density=0.15, format="csr", random_state=rng)
    y = (rng.randint(3, size=400) if K > 1
         else np.where(X @ rng.randn(14) > 0.05, 1.0, -1.0))
    sw = np.ones(400)
    lam, l1, eta0, b = 0.02, 0.01, 0.3, 3
    loss_fn = None if K > 1 else LOSSES[loss]()
    state = LazyStepState.zeros(X.shape[1] + 1, K, eta0, l1=True)
    with ThreadRunner(2) as runner:
        psa_epochs(RowDataset(X, y.astype(float), sw), state,
                   PSAOptions(lam=lam, period=b, l1=l1), loss=loss_fn, n_epochs=2,
                   shuffle=False, threads=runner)
    th, eta, t = numpy_psa_l1(X, y, sw, K=K, loss=loss_fn, lam=lam, l1=l1, eta0=eta0, b=b,
                              n_epochs=2, round_rows=2 * _psa_fast.SHARED_ROUND_ROWS)
    assert state.t == t
    assert_allclose(state.weights, th, rtol=0, atol=1e-5 * np.abs(th).max())
    assert_allclose(state.step_sizes, eta, rtol=1e-5)
    assert np.sum(th[:-K] == 0) > 0


def test_shared_crf_sgd_rounds_cut_by_their_non_zeros():
    """Long sentences: a round ends before a sentence whose non-zeros would
    pass its buffers, at the same sentence in every thread (a rule of the
    data alone, computed again here), and the pass is the dense reference
    with those rounds."""
    rng = np.random.default_rng(5)
    A, H = 140, 3
    X, offsets, labels = make_problem(rng, n_seq=40, n_attr=A, n_labels=H, max_len=40,
                                      density=0.6)
    lengths = np.diff(offsets)
    nnz = np.diff(X.indptr[offsets])
    R = _crf_sgd.shared_round_sequences(2)
    max_tokens = max(R * 32, lengths.max())
    max_nnz = max(max_tokens * 32, nnz.max())
    starts, q = [], 0
    while q < lengths.size:
        starts.append(q)
        q0, tokens, total = q, 0, 0
        while q < lengths.size and q - q0 < R:
            if q > q0 and (tokens + lengths[q] > max_tokens or total + nnz[q] > max_nnz):
                break
            tokens, total, q = tokens + lengths[q], total + nnz[q], q + 1
    assert len(starts) > -(-lengths.size // R)           # (the non-zeros cut some rounds)
    state = CRFState.new(A, H, averaged=True, seed=1)
    options = CRFSGDOptions(eta0=0.05, power=0.0, lam=0.01, average=True, feedback=True)
    with ThreadRunner(2) as runner:
        crf_sgd_epochs(to_data(X, offsets, labels), state, options, n_epochs=2, shuffle=False,
                       threads=runner)
    w, avg, _ = numpy_crf_sgd(X, offsets, labels, A, H, eta0=0.05, power=0.0, alpha=0.01,
                              n_epochs=2, average=True, feedback=True, round_starts=starts)
    assert_allclose(state.coef, w, rtol=1e-9, atol=1e-12)
    assert_allclose(state.model(), avg, rtol=1e-9, atol=1e-12)


def test_shared_psa_pass_with_the_l1_penalty():
    """Elastic net at two threads: finite, and as accurate as one thread."""
    X, y = make_classification(n_samples=3000, n_features=40, n_informative=10,
                               random_state=5)
    kw = {"penalty": "elasticnet", "alpha": 1e-3, "l1_ratio": 0.5, "random_state": 0}
    one = PSAClassifier(n_jobs=1, **kw).fit(X[:2500], y[:2500])
    two = PSAClassifier(n_jobs=2, **kw).fit(X[:2500], y[:2500])
    assert np.all(np.isfinite(two.coef_))
    assert np.count_nonzero(two.coef_ == 0.0) > 0          # (the L1 clip at work)
    assert two.score(X[2500:], y[2500:]) >= one.score(X[2500:], y[2500:]) - 0.01


def test_threaded_tagger_pass_is_the_mix_of_its_shards():
    """SGD tagger without averaging: one pass at two threads is the mean of
    the CRF kernel's passes over the gathered shards of the pass's order."""
    X, y = random_sequences(n_seq=41, seed=4, max_len=8)
    est = SGDSequenceTagger(eta0=0.1, alpha=1e-2, max_iter=1, random_state=0, n_jobs=2)
    est.fit(X, y)
    ds = dataset(est, X, y)
    H = est.classes_.size
    seed = draw_seed(check_random_state(0))
    order, _ = shuffled_order(ds.n_sequences, seed)
    shards = shard_order(order, ds.token_counts() + ds.nnz_counts(), 2)
    coefs = []
    for shard in shards:
        crf = CRFState.new(est._state.crf.n_attributes, H, averaged=False, seed=seed)
        crf_sgd_epochs(ds.take(shard), crf, CRFSGDOptions(eta0=0.1, power=1.0, lam=1e-2),
                       n_epochs=1, shuffle=False, fit_intercept=True)
        coefs.append(crf.model())
    p = np.array([s.size for s in shards]) / ds.n_sequences
    assert_allclose(est._model, p[0] * coefs[0] + p[1] * coefs[1], rtol=1e-13, atol=1e-16)
    assert est.t_ == ds.n_sequences


def test_sequence_take_gathers_the_sequences():
    X, y = random_sequences(n_seq=12, seed=2)
    est = SGDSequenceTagger(eta0=0.1, max_iter=1, random_state=0).fit(X, y)
    ds = dataset(est, X, y)
    picked = np.array([7, 2, 11])
    sub = ds.take(picked)
    Xp = [X[i] for i in picked]
    yp = [y[i] for i in picked]
    ref = dataset(est, Xp, yp)
    assert sub.n_sequences == 3 and sub.n_tokens == ref.n_tokens
    assert_array_equal(sub.token_counts(), ref.token_counts())
    assert_array_equal(sub.nnz_counts(), ref.nnz_counts())
    with pytest.raises(ValueError, match="sequences must be"):
        ds.take([12])


def test_row_subset_dataset_visits_the_rows_given():
    X = sp.csr_matrix(np.arange(12.0).reshape(4, 3))
    ds = RowDataset(X, np.zeros(4), np.ones(4))
    sub = ds.with_targets(np.arange(4.0), np.ones(4), rows=[3, 1])
    assert sub.n_samples == 2
    vals, idx, yy, _ = sub.row_py(0)
    assert_array_equal(vals, X[3].data) and yy == 3.0
    vals, idx, yy, _ = sub.row_py(1)
    assert_array_equal(vals, X[1].data) and yy == 1.0
    with pytest.raises(ValueError, match="rows must be"):
        ds.with_targets(np.zeros(4), np.ones(4), rows=[4])
    # the shuffle a kernel would draw from a seed
    order, seed = shuffled_order(4, 5)
    ref = RowDataset(X, np.zeros(4), np.ones(4))
    assert ref.shuffle_py(5) == seed
    assert_array_equal(ref.order_, order)


# ---- determinism, quality ------------------------------------------------------------
@pytest.mark.parametrize("est", LINEAR, ids=lambda e: repr(e)[:40])
@pytest.mark.parametrize("n_jobs", [2, 3])
def test_threaded_linear_fit_is_deterministic(est, n_jobs):
    X, y = linear_data(est)
    first = copy.deepcopy(est).set_params(n_jobs=n_jobs).fit(X, y)
    again = copy.deepcopy(est).set_params(n_jobs=n_jobs).fit(X, y)
    one = copy.deepcopy(est).set_params(n_jobs=1).fit(X, y)
    assert_array_equal(first.coef_, again.coef_)
    assert_array_equal(first.intercept_, again.intercept_)
    assert first.t_ == again.t_ == one.t_
    assert not np.array_equal(first.coef_, one.coef_)       # (a different model)
    # partial_fit continues the threaded state as fit does
    cont = copy.deepcopy(first).partial_fit(X, y)
    cont2 = copy.deepcopy(again).partial_fit(X, y)
    assert_array_equal(cont.coef_, cont2.coef_)


@pytest.mark.parametrize("est", TAGGERS, ids=lambda e: type(e).__name__)
def test_threaded_tagger_fit_is_deterministic(est):
    X, y = random_sequences(n_seq=40, n_attr=8, n_labels=4, seed=6, max_len=9)
    first = copy.deepcopy(est).set_params(n_jobs=2).fit(X, y)
    again = copy.deepcopy(est).set_params(n_jobs=2).fit(X, y)
    one = copy.deepcopy(est).set_params(n_jobs=1).fit(X, y)
    assert_array_equal(first._model, again._model)
    assert first.t_ == again.t_ == one.t_
    assert first.predict(X) == again.predict(X)
    assert len(first.pass_seconds_) == 3
    assert not np.array_equal(first._model, one._model)     # (a different model)
    # partial_fit continues the threaded state as fit does
    cont = copy.deepcopy(first).partial_fit(X, y)
    cont2 = copy.deepcopy(again).partial_fit(X, y)
    assert_array_equal(cont._model, cont2._model)
    assert cont.t_ == first.t_ + len(X)


def test_threaded_pass_of_one_problem_only():
    """One-vs-rest with several classes keeps its classes side by side:
    n_jobs does not change the model there."""
    X, y = make_classification(n_samples=300, n_features=10, n_informative=6, n_classes=3,
                               random_state=0)
    kw = {"loss": "hinge", "eta0": 0.05, "max_iter": 2, "random_state": 0}
    one = PSAClassifier(n_jobs=1, **kw).fit(X, y)
    two = PSAClassifier(n_jobs=2, **kw).fit(X, y)
    assert_array_equal(one.coef_, two.coef_)


def test_linear_quality_at_two_threads():
    """Accuracy at two threads within 0.01 of one thread's after the same
    passes (held-out rows of a 20-feature problem)."""
    X, y = make_classification(n_samples=6000, n_features=20, n_informative=10,
                               random_state=3)
    Xtr, ytr, Xte, yte = X[:5000], y[:5000], X[5000:], y[5000:]
    for est in (PSAClassifier(random_state=0), PlainSGDClassifier(random_state=0),
                SGDQNLinearSVC(random_state=0)):
        one = copy.deepcopy(est).set_params(n_jobs=1).fit(Xtr, ytr).score(Xte, yte)
        two = copy.deepcopy(est).set_params(n_jobs=2).fit(Xtr, ytr).score(Xte, yte)
        assert two >= one - 0.01, (type(est).__name__, one, two)


@pytest.mark.parametrize("est", [ASFSequenceTagger(random_state=0, max_iter=3),
                                 PSASequenceTagger(random_state=0, max_iter=3),
                                 AveragedPerceptronSequenceTagger(random_state=0, max_iter=3)],
                         ids=lambda e: type(e).__name__)
def test_tagger_quality_at_two_threads(est):
    """CoNLL-2000 (1200 training, 400 test sentences): the token accuracy at
    two threads within 1 point of one thread's after the same passes."""
    X, y = conll_subset(1600)
    Xtr, ytr, Xte, yte = X[:1200], y[:1200], X[1200:], y[1200:]
    one = copy.deepcopy(est).set_params(n_jobs=1).fit(Xtr, ytr).score(Xte, yte)
    two = copy.deepcopy(est).set_params(n_jobs=2).fit(Xtr, ytr).score(Xte, yte)
    assert two >= one - 0.01, (one, two)


# ---- threads from the caller, failures, memory, bad values ----------------------------
def test_concurrent_fits_each_give_the_lone_model():
    Xl, yl = linear_data(LINEAR[0], n=1500)
    Xs, ys = random_sequences(n_seq=60, n_attr=8, n_labels=4, seed=8, max_len=9)
    makers = [lambda: PSAClassifier(eta0=0.05, period=10, max_iter=2, random_state=0,
                                    n_jobs=2),
              lambda: ASFSequenceTagger(eta0=0.1, max_iter=3, random_state=0, n_jobs=2)]
    data = [(Xl, yl), (Xs, ys)]
    lone = [make().fit(X, y) for make, (X, y) in zip(makers, data)]
    for _ in range(2):
        ests = [make() for make in makers]
        errors = []

        def fit(est, X, y, errors):
            try:
                est.fit(X, y)
            except BaseException as exc:     # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=fit, args=(e, X, y, errors)) for e, (X, y) in
                   zip(ests, data)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert_array_equal(ests[0].coef_, lone[0].coef_)
        assert_array_equal(ests[1]._model, lone[1]._model)


def fails_on_a_worker(real):
    def wrapped(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            raise MemoryError("shard on a worker thread")
        return real(*args, **kwargs)
    return wrapped


class _SecondThreadFails(ThreadRunner):
    """A runner whose second thread starts and whose third cannot: the
    calling thread's part never runs, the started one waits for it."""

    started = []

    def map(self, fn, items):
        items = list(items)
        worker = threading.Thread(target=fn, args=(items[1],))
        worker.start()
        self.started.append(worker)
        raise RuntimeError("can't start new thread")


def test_a_thread_that_cannot_start_releases_the_others(monkeypatch):
    """The shared passes (PSA, the PSA and ASF taggers): when a thread cannot
    start, the started ones leave the pass (the barrier is aborted), the
    error surfaces, no half model (``crfsuite.CRF`` keeps its previous one)."""
    X, y = linear_data(LINEAR[0])
    Xs, ys = conll_subset(40)
    crf = CRF(algorithm="asf", max_iterations=2, n_jobs=3).fit(Xs, ys)
    before = crf.state_features_
    monkeypatch.setattr(linear_loop, "ThreadRunner", _SecondThreadFails)
    monkeypatch.setattr(sequence_loop, "ThreadRunner", _SecondThreadFails)
    for est, data in [(PSAClassifier(eta0=0.05, period=10, random_state=0, n_jobs=3), (X, y)),
                      (PSASequenceTagger(eta0=0.1, max_iter=2, n_jobs=3), (Xs, ys)),
                      (ASFSequenceTagger(eta0=0.1, max_iter=2, n_jobs=3), (Xs, ys))]:
        with pytest.raises(RuntimeError, match="can't start new thread"):
            est.fit(*data)
        assert not hasattr(est, "coef_")
    with pytest.raises(RuntimeError, match="can't start new thread"):
        crf.fit(Xs[:20], ys[:20])
    assert crf.state_features_ == before
    assert len(_SecondThreadFails.started) == 4
    for worker in _SecondThreadFails.started:
        worker.join(timeout=10)
        assert not worker.is_alive()


def test_a_failure_in_a_thread_surfaces(monkeypatch):
    """The mixing taggers: a thread's exception is raised once every thread
    has finished, with nothing half-written."""
    Xs, ys = conll_subset(40)
    crf = CRF(algorithm="ap", max_iterations=2, n_jobs=2).fit(Xs, ys)
    before = crf.state_features_
    monkeypatch.setattr(sequence_online, "online_epochs", fails_on_a_worker(online_epochs))
    with pytest.raises(MemoryError, match="worker thread"):
        crf.fit(Xs[:20], ys[:20])
    assert crf.state_features_ == before                # the previous model, unchanged
    tagger = AveragedPerceptronSequenceTagger(max_iter=2, n_jobs=2)
    with pytest.raises(MemoryError, match="worker thread"):
        tagger.fit(Xs, ys)
    assert not hasattr(tagger, "coef_")


def test_memory_check_counts_the_threads_copies(monkeypatch):
    X, y = linear_data(LINEAR[2])
    est = PlainSGDClassifier(eta0=0.05, random_state=0, n_jobs=4)
    one_model = (X.shape[1]) * est._bytes_per_weight(X.shape[1], 1)
    monkeypatch.setattr(_validation, "available_memory", lambda: 2 * one_model)
    PlainSGDClassifier(eta0=0.05, random_state=0, n_jobs=1).fit(X, y)
    with pytest.raises(ValueError, match="needs .* bytes of state per weight"):
        est.fit(X, y)
    # PSA's threads share the one state: as much memory as one thread
    psa = PSAClassifier(eta0=0.05, period=10, random_state=0)
    monkeypatch.setattr(_validation, "available_memory",
                        lambda: 2 * X.shape[1] * psa._bytes_per_weight(X.shape[1], 1))
    psa.set_params(n_jobs=4).fit(X, y)
    Xs, ys = random_sequences(n_seq=20, seed=0)
    fitted = AveragedPerceptronSequenceTagger(max_iter=1).fit(Xs, ys)
    H, A = fitted.classes_.size, fitted._state.crf.n_attributes
    need_one = (A + H + 1) * H * fitted._bytes_per_weight()
    monkeypatch.setattr(_validation, "available_memory", lambda: 2 * need_one)
    AveragedPerceptronSequenceTagger(max_iter=1, n_jobs=1).fit(Xs, ys)
    with pytest.raises(ValueError, match="needs"):
        AveragedPerceptronSequenceTagger(max_iter=1, n_jobs=3).fit(Xs, ys)
    # the ASF tagger's threads share the one state
    ASFSequenceTagger(eta0=0.1, max_iter=1, n_jobs=3).fit(Xs, ys)


@pytest.mark.parametrize("bad", BAD_N_JOBS)
@pytest.mark.parametrize("est", [PSAClassifier(), PlainSGDClassifier(), *TAGGERS],
                         ids=lambda e: type(e).__name__ if not isinstance(e, (int, float, str))
                         else repr(e))
def test_bad_n_jobs_is_refused(est, bad):
    if isinstance(est, PSAClassifier | PlainSGDClassifier):
        X, y = linear_data(LINEAR[0], n=50)
        fitted = copy.deepcopy(est).fit(X, y)
        coef = fitted.coef_.copy()
        with pytest.raises(ValueError, match="n_jobs"):
            copy.deepcopy(est).set_params(n_jobs=bad).fit(X, y)
        with pytest.raises(ValueError, match="n_jobs"):
            fitted.set_params(n_jobs=bad).partial_fit(X, y)
        assert_array_equal(fitted.coef_, coef)           # a refused call changes nothing
        return
    X, y = random_sequences(n_seq=10, seed=0)
    fitted = copy.deepcopy(est).fit(X, y)
    model = fitted._model.copy()
    with pytest.raises(ValueError, match="n_jobs"):
        copy.deepcopy(est).set_params(n_jobs=bad).fit(X, y)
    with pytest.raises(ValueError, match="n_jobs"):
        fitted.set_params(n_jobs=bad).partial_fit(X, y)
    assert_array_equal(fitted._model, model)


def test_n_jobs_minus_one_is_all_the_cores():
    X, y = linear_data(LINEAR[0])
    est = PSAClassifier(eta0=0.05, period=10, random_state=0, n_jobs=-1).fit(X, y)
    import joblib
    ref = PSAClassifier(eta0=0.05, period=10, random_state=0,
                        n_jobs=joblib.cpu_count()).fit(X, y)
    assert_array_equal(est.coef_, ref.coef_)


@parametrize_with_checks([PSAClassifier(max_iter=3, n_jobs=2),
                          PlainSGDClassifier(max_iter=3, n_jobs=2),
                          SGDQNLinearSVC(max_iter=3, n_jobs=2),
                          ASFSequenceTagger(max_iter=3, n_jobs=2),
                          PSASequenceTagger(max_iter=3, n_jobs=3),
                          AveragedPerceptronSequenceTagger(max_iter=3, n_jobs=2)],
                         expected_failed_checks=lambda est: {
                             "check_sample_weight_equivalence_on_dense_data":
                                 "a row of weight 2 is one step, not two (as at n_jobs=1 "
                                 "and for scikit-learn's SGDClassifier)",
                             "check_sample_weight_equivalence_on_sparse_data":
                                 "same as on dense data"})
def test_sklearn_api_with_threads(estimator, check):
    check(estimator)


def test_monitored_threaded_passes_are_the_same_passes(capsys):
    """``verbose`` (one pass at a time, each evaluated) gives the model of
    the unmonitored threaded fit."""
    X, y = linear_data(LINEAR[0])
    kw = {"eta0": 0.05, "period": 10, "random_state": 0, "max_iter": 3, "n_jobs": 2}
    quiet = PSAClassifier(**kw).fit(X, y)
    loud = PSAClassifier(verbose=1, **kw).fit(X, y)
    assert_array_equal(quiet.coef_, loud.coef_)
    assert capsys.readouterr().out.count("pass") == 3


def test_copy_state_reuses_the_arrays_it_is_given():
    """``copy_state(src, into)`` equals ``copy.deepcopy(src)`` and writes into
    ``into``'s arrays (same shapes); other fields are deep-copied."""
    X, y = random_sequences(n_seq=15, seed=1)
    a = ASFSequenceTagger(eta0=0.1, max_iter=2, random_state=0).fit(X, y)._state
    b = ASFSequenceTagger(eta0=0.1, max_iter=1, random_state=1).fit(X, y)._state
    coef_buffer = b.crf.coef
    out = copy_state(a, b)
    assert out is b and out.crf.coef is coef_buffer
    ref = copy.deepcopy(a)
    assert_array_equal(out.crf.coef, ref.crf.coef)
    assert_array_equal(out.crf.avg, ref.crf.avg)
    assert (out.crf.t, out.crf.passes, out.crf.seed) == (ref.crf.t, ref.crf.passes, ref.crf.seed)
    assert out.pass_seconds == a.pass_seconds and out.pass_seconds is not a.pass_seconds
    assert not np.may_share_memory(out.crf.coef, a.crf.coef)
    # nothing to reuse: a deep copy
    fresh = copy_state(a)
    assert_array_equal(fresh.crf.coef, a.crf.coef)
    assert not np.may_share_memory(fresh.crf.coef, a.crf.coef)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("est", [PlainSGDClassifier(eta0=0.05, max_iter=2, tol=None),
                                 PSAClassifier(eta0=0.05, period=10, max_iter=2)],
                         ids=lambda e: type(e).__name__)
def test_threaded_dense_rows_are_the_sparse_rows(dtype, est):
    """Dense and CSR rows (float64 or float32, read in place) give the same
    threaded model (mixed shards; PSA's shared pass)."""
    X, y = linear_data(LINEAR[2], sparse=False)
    X = X.astype(dtype)
    est = copy.deepcopy(est).set_params(random_state=0, n_jobs=2)
    dense = copy.deepcopy(est).fit(X, y)
    # (the CSR rows hold the explicit zeros too, so the shards have the same work)
    Xs = sp.csr_matrix((X.ravel(), np.tile(np.arange(X.shape[1]), X.shape[0]),
                        np.arange(0, X.size + 1, X.shape[1])), shape=X.shape)
    sparse = copy.deepcopy(est).fit(Xs, y)
    assert_allclose(dense.coef_, sparse.coef_, rtol=1e-12, atol=1e-14)
    # float32 rows are read as their float64 values (the model's arrays
    # follow X's dtype: float32's rounding)
    wide = copy.deepcopy(est).fit(X.astype(np.float64), y)
    assert_allclose(dense.coef_, wide.coef_, rtol=1e-6, atol=1e-7)


def test_a_shared_pass_holds_its_state():
    """The pass keeps the state whose records its threads write alive."""
    import gc
    X, y = linear_data(LINEAR[0])
    options = PSAOptions(lam=1e-3, period=10, psa_alpha=0.9999, psa_beta=0.99, kappa=0.9)
    sh = _psa_fast.SharedPass(RowDataset(X, np.where(y == 1, 1.0, -1.0), np.ones(X.shape[0])),
                              LazyStepState.zeros(X.shape[1] + 1, 1, 0.05), options,
                              LOSSES["log_loss"](), 1, True, 4)
    gc.collect()
    assert sh.run(0) == X.shape[0]


@pytest.mark.parametrize("K, loss", [(1, "log_loss"), (3, None)])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_psa_stream_calls_score_each_row_and_defer_the_flush(K, loss, n_threads):
    """``psa_epochs(margins=, flush=False)``, as a stream of calls uses it
    (``PSAClassifier.begin_stream``): each row's scores before its update
    are the oracle's (the one-thread pass: the weights before the row; the
    shared pass: those of its round's start), within the tolerance of the
    weights (1e-5 of their scale, times the rows' l1 norm); the blocks a
    call did not touch stay behind ``t`` until the next call or
    ``catch_up_state`` brings them up, to the oracle's model."""
    rng = np.random.RandomState(7 + K)
    X = sp.random(400, 40, density=0.1, format="csr", random_state=rng)
    y = (rng.randint(3, size=400) if K > 1
         else np.where(X @ rng.randn(40) > 0.1, 1.0, -1.0)).astype(float)
    sw = np.ones(400)
    sw[::13] = 0.0
    lam, eta0, b = 1e-2, 0.2, 7
    loss_fn = None if K > 1 else LOSSES[loss]()
    options = PSAOptions(lam=lam, period=b, psa_alpha=0.9999, psa_beta=0.99, kappa=0.9)
    state = LazyStepState.zeros(X.shape[1] + 1, K, eta0)
    # the calls split the rows at an event, where the shared pass's rounds
    # start anyway (a call's first round starts at its first row)
    split = next(i for i in range(150, 400) if np.count_nonzero(sw[:i]) % b == 0)
    chunks = [slice(0, split), slice(split, 400)]
    got = np.zeros((400, K))
    with ThreadRunner(n_threads) as runner:
        for rows in chunks:
            margins = np.full((rows.stop - rows.start) * K, np.nan)
            result = psa_epochs(RowDataset(X[rows], y[rows], sw[rows]), state, options,
                                loss=loss_fn, shuffle=False, threads=runner,
                                margins=margins, flush=False, eager=False)
            assert not result.diverged
            got[rows] = margins.reshape(-1, K)
            # (a column no row of the call touched is behind t)
            assert state.last[:-1].min() < state.t
    catch_up_state(state, options, state.t, unregularized=X.shape[1])
    assert np.all(state.last == state.t)
    ref = np.full((400, K), np.nan)
    round_rows = None if n_threads == 1 else n_threads * _psa_fast.SHARED_ROUND_ROWS
    w, eta, t, _ = numpy_linear_psa(X, y, sw, K=K, loss=loss_fn, alpha=lam, eta0=eta0, b=b,
                                    round_rows=round_rows, scores=ref)
    scale = np.abs(w).max()
    used = sw > 0
    norms = np.asarray(abs(X).sum(axis=1)).ravel() + 1
    assert state.t == t
    assert_allclose(state.weights, w, rtol=0, atol=1e-5 * scale)
    assert_allclose(state.step_sizes, eta, rtol=1e-5)
    assert_allclose(got[used], ref[used], rtol=0,
                    atol=1e-5 * scale * norms[used, None].max())
    assert np.isnan(got[~used]).all()       # (rows of weight zero are left as they are)
