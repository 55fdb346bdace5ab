"""ParameterMixing on a local cluster of two worker processes.

The oracle of every mixing test is local: the same estimator fitted with
``partial_fit`` on each worker's partitions from the same start, in this
process, and the mixing formula written out with NumPy. With one worker the
mixed model is the plain estimator, bit for bit.
"""
import copy
import os
import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.utils import check_random_state

import sklearn_secondorder
from sklearn_secondorder import (
    AROWSequenceTagger,
    ASFSequenceTagger,
    AveragedPerceptronSequenceTagger,
    PassiveAggressiveSequenceTagger,
    PlainSGDClassifier,
    PlainSGDRegressor,
    PSAClassifier,
    PSARegressor,
    PSASequenceTagger,
    SBMLogisticRegression,
    SGDQNLinearSVC,
    SGDSequenceTagger,
)

da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
import dask  # noqa: E402

from sklearn_secondorder.dask import MIXING_RULES, ParameterMixing  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=":0")
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


# ---- data ----------------------------------------------------------------------
CHUNKS = (700, 500, 900, 400)     # unequal partitions: the mixing weights matter


@pytest.fixture(scope="module")
def rows():
    X, y = make_classification(sum(CHUNKS), 12, n_informative=6, random_state=0)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X, y


@pytest.fixture(scope="module")
def rows3():
    X, y = make_classification(sum(CHUNKS), 12, n_informative=6, n_classes=3,
                               random_state=1)
    return X, y


def _dask_rows(X, y, chunks=CHUNKS):
    if sp.issparse(X):
        starts = np.cumsum((0,) + chunks)
        blocks = [da.from_delayed(dask.delayed(X[a:b]), shape=(b - a, X.shape[1]),
                                  dtype=np.float64, meta=sp.csr_matrix((0, X.shape[1])))
                  for a, b in zip(starts[:-1], starts[1:])]
        Xd = da.concatenate(blocks)
    else:
        Xd = da.from_array(X, chunks=(chunks, -1))
    return Xd, da.from_array(y, chunks=(chunks,))


def _worker_rows(model, chunks=CHUNKS):
    """The row indices of each worker, from ``partitions_``."""
    starts = np.cumsum((0,) + tuple(chunks))
    return [np.concatenate([np.arange(starts[i], starts[i + 1]) for i in parts])
            for parts in model.partitions_]


# Concrete settings: no 'auto' step left to resolve, so the local oracle starts
# exactly as the workers do.
LINEAR = {
    "sgd": PlainSGDClassifier(eta0=0.02, random_state=0, max_iter=2),
    "asgd": PlainSGDClassifier(eta0=0.02, average=True, random_state=0, max_iter=2),
    "psa": PSAClassifier(eta0=0.02, period=20, random_state=0, max_iter=2),
    "sgdqn": SGDQNLinearSVC(t0=1e6, skip=16, random_state=0, max_iter=2),
    "sbm": SBMLogisticRegression(random_state=0, max_iter=2),
}


def _local_start(est, X, y, n_rows):
    """The model a worker's first pass starts from: the unfitted estimator (its
    settings concrete), as on the workers."""
    return None


def _expected_states(name, models, p, start):
    """The mixing formulas, written out: the arrays the mixed model must hold."""
    s = [m._states[0] for m in models]
    s0 = None if start is None else start._states[0]
    exp = {"coef_": sum(pw * m.coef_ for m, pw in zip(models, p)),
           "intercept_": sum(pw * m.intercept_ for m, pw in zip(models, p)),
           "t_": (0 if s0 is None else s0.t) + sum(x.t - (0 if s0 is None else s0.t)
                                                   for x in s)}
    if name == "asgd":
        a0 = 0.0 if s0 is None else s0.avg_coef
        n0 = 0.0 if s0 is None else s0.n_iterates
        total = a0 + sum(x.avg_coef - a0 for x in s)
        exp["coef_"] = (total / (n0 + sum(x.n_iterates - n0 for x in s)))[None, :]
        exp.pop("intercept_")
    elif name == "psa":
        # (stored as float32, the kernels' step sizes)
        exp["eta_"] = np.exp(sum(pw * np.log(m.eta_) for m, pw in zip(models, p))
                             ).astype(np.float32)
    elif name == "sgdqn":
        inv0 = 1.0 / (s0.B if s0 is not None else np.full_like(s[0].B, 1 / (1e-4 * 1e6)))
        exp["B_"] = 1.0 / (inv0 + sum(1.0 / x.B - inv0 for x in s))[None, :]
    elif name == "sbm":
        # the bounds' curvature (Sigma without the regulariser) summed, the
        # regulariser of the largest n_t
        eye = np.eye(s[0].M.shape[0])
        c0 = 0.0 if s0 is None else np.linalg.inv(s0.M) - s0.lam_total * eye
        curv = c0 + sum(np.linalg.inv(x.M) - x.lam_total * eye - c0 for x in s)
        n_ref = max(x.n_ref for x in s)
        exp["M"] = np.linalg.inv(curv + models[0].alpha * n_ref * eye)
        mu0 = 0.0 if s0 is None else s0.mu
        exp["mu"] = mu0 + sum(x.mu - mu0 for x in s)
    return exp


def _check_expected(est, exp, rtol):
    for key, value in exp.items():
        got = (est._states[0].M if key == "M" else est._states[0].mu if key == "mu"
               else getattr(est, key))
        assert_allclose(got, value, rtol=rtol, atol=1e-12 * np.max(np.abs(value)),
                        err_msg=key)


# ---- linear estimators ----------------------------------------------------------
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("name", list(LINEAR))
def test_one_partition_is_the_plain_estimator(client, rows, name, sparse):
    """One partition, hence one worker: the model is ``partial_fit`` run
    ``max_iter`` times, bit for bit."""
    X, y = rows
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0))
    est = LINEAR[name]
    model = ParameterMixing(est).fit(*_dask_rows(X, y, chunks=(X.shape[0],)))
    assert model.n_workers_ == 1 and model.n_iter_ == 2
    ref = clone(est)
    for _ in range(2):
        ref.partial_fit(X, y, classes=np.unique(y))
    assert type(model.estimator_) is type(est)
    assert_array_equal(model.estimator_.coef_, ref.coef_)
    assert_array_equal(model.estimator_.intercept_, ref.intercept_)
    assert model.estimator_.t_ == ref.t_


@pytest.mark.parametrize("name", list(LINEAR))
def test_two_workers_mix_the_local_models(client, rows, name):
    """Two passes on two workers == two rounds of: each worker's ``partial_fit``
    on its partitions from the same start, in this process, then the mixing
    formula (checked against its NumPy form on every round)."""
    X, y = rows
    est = LINEAR[name]
    model = ParameterMixing(est).fit(*_dask_rows(X, y))
    assert model.n_workers_ == 2
    assert sorted(i for p in model.partitions_ for i in p) == [0, 1, 2, 3]
    idx = _worker_rows(model)
    n = np.array([i.size for i in idx], dtype=float)
    assert_array_equal(model.rows_per_worker_, n)
    p = n / n.sum()
    start = _local_start(est, X, y, X.shape[0])
    for _ in range(2):
        local = []
        for i in idx:
            m = clone(est) if start is None else copy.deepcopy(start)
            local.append(m.partial_fit(X[i], y[i], classes=np.unique(y)))
        mixed = MIXING_RULES[type(est)].mix(local, p, start)
        _check_expected(mixed, _expected_states(name, local, p, start), rtol=1e-9)
        start = mixed
    # the cluster computed the same numbers as this process
    assert_array_equal(model.estimator_.coef_, start.coef_)
    assert_array_equal(model.estimator_.intercept_, start.intercept_)
    assert model.estimator_.t_ == start.t_ == 2 * X.shape[0]


def test_multiclass_one_vs_rest_and_multinomial(client, rows3):
    """Every sub-problem is mixed: one-vs-rest (hinge) and multinomial (log loss)."""
    X, y = rows3
    for est in (PSAClassifier(loss="hinge", eta0=0.01, period=20, random_state=0),
                PlainSGDClassifier(eta0=0.01, random_state=0, max_iter=1)):
        model = ParameterMixing(est).fit(*_dask_rows(X, y))
        idx = _worker_rows(model)
        p = np.array([i.size for i in idx]) / X.shape[0]
        local = [clone(est).partial_fit(X[i], y[i], classes=[0, 1, 2]) for i in idx]
        assert model.estimator_.coef_.shape == (3, X.shape[1])
        assert_allclose(model.estimator_.coef_, p[0] * local[0].coef_ + p[1] * local[1].coef_,
                        rtol=1e-12)
        assert abs(model.estimator_.score(X, y) - clone(est).fit(X, y).score(X, y)) < 0.05


def test_psa_window_restarts_at_the_mixed_weights(client, rows):
    X, y = rows
    model = ParameterMixing(LINEAR["psa"], max_iter=1).fit(*_dask_rows(X, y))
    k = model.estimator_._states[0].kernel
    assert k.t == X.shape[0]
    assert np.all(k.last == k.t)
    assert_array_equal(k.records["snap"].ravel(), k.weights)
    assert_array_equal(k.records["dsnap"], 0.0)
    # the step sizes only decreased: the geometric mean lies below eta0
    assert np.all(k.step_sizes <= np.float32(0.02)) and np.all(k.step_sizes > 0)


def test_auto_settings_resolved_once(client, rows):
    """'auto' settings are resolved on the first partition's head and applied to
    every worker; PSA's period follows the paper's b ~ 0.5 |D| / 1000 for the
    whole data."""
    X, y = rows
    model = ParameterMixing(PSAClassifier(random_state=0),
                            n_calibration_rows=300).fit(*_dask_rows(X, y))
    first = model.partitions_[0][0]
    a = sum(CHUNKS[:first])
    ref = PSAClassifier(random_state=0).partial_fit(X[a:a + 300], y[a:a + 300],
                                                    classes=[0, 1])
    assert model.resolved_params_ == {"eta0": ref._states[0].kernel.eta0, "period": 10}
    assert model.estimator_.get_params()["eta0"] == ref._states[0].kernel.eta0
    model = ParameterMixing(SGDQNLinearSVC(random_state=0, max_iter=1)).fit(
        *_dask_rows(X, y))
    assert set(model.resolved_params_) == {"t0", "skip"}
    assert model.estimator_.t0_[0] == model.resolved_params_["t0"]


def test_accuracy_near_the_single_machine(client):
    X, y = make_classification(8000, 20, n_informative=10, random_state=3)
    Xd, yd = _dask_rows(X, y, chunks=(2000,) * 4)
    for est in (PSAClassifier(random_state=0), PlainSGDClassifier(random_state=0),
                SGDQNLinearSVC(random_state=0), SBMLogisticRegression(random_state=0)):
        mixed = ParameterMixing(est).fit(Xd, yd)
        single = clone(est).fit(X, y)
        assert mixed.n_workers_ == 2
        assert mixed.estimator_.score(X, y) > single.score(X, y) - 0.02, type(est).__name__


# ---- the data stays on the workers ------------------------------------------------
def _arrive(value, client_pid, cls):
    """Unpickling a pinned partition: allowed on a worker (the scheduler may move
    data between workers), refused in the client's process."""
    if os.getpid() == client_pid:
        raise TypeError("a partition left its worker")
    return cls(value, client_pid)


class _Pinned:
    """Rows (``__array__``) that cannot arrive in the client process."""

    def __init__(self, a, client_pid):
        self.a, self.client_pid, self.shape = a, client_pid, a.shape

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)

    def __len__(self):
        return self.shape[0]

    def __reduce__(self):
        return _arrive, (self.a, self.client_pid, _Pinned)


class _PinnedLabels(list):
    """Labels of a sentence that cannot arrive in the client process."""

    def __init__(self, labels, client_pid):
        super().__init__(labels)
        self.client_pid = client_pid

    def __reduce__(self):
        return _arrive, (list(self), self.client_pid, _PinnedLabels)


def _make_pinned_block(seed, n, client_pid):
    X, y = make_classification(n, 8, random_state=seed)
    return _Pinned(X, client_pid), y


def _pinned_rows(parts):
    blocks = [dask.delayed(_make_pinned_block)(s, n, os.getpid()) for s, n in parts]
    Xd = da.concatenate([da.from_delayed(b[0], shape=(n, 8), dtype=np.float64)
                         for b, (_, n) in zip(blocks, parts)])
    yd = da.concatenate([da.from_delayed(b[1], shape=(n,), dtype=np.int64)
                         for b, (_, n) in zip(blocks, parts)])
    return Xd, yd


def _fit_within(model, *args, seconds=60, **kwargs):
    """``model.fit`` with a deadline: a partition sent to the client would fail
    to serialise, which distributed reports by waiting, not raising."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(model.fit, *args, **kwargs).result(timeout=seconds)


def test_partitions_never_reach_the_client(client):
    with pytest.raises(TypeError, match="left its worker"):   # the guard itself
        pickle.loads(pickle.dumps(_Pinned(np.zeros((1, 1)), os.getpid())))
    Xd, yd = _pinned_rows([(0, 300), (1, 300), (2, 300)])
    for est in (PSAClassifier(eta0=0.02, period=10), PlainSGDClassifier(eta0=0.02),
                SBMLogisticRegression()):
        model = _fit_within(ParameterMixing(est, max_iter=2), Xd, yd, classes=[0, 1])
        assert model.n_workers_ == 2
        assert np.all(np.isfinite(model.estimator_.coef_))


def _make_pinned_sentences(seed, n, client_pid):
    X, Y = _sentences(n, seed)
    return [(x, _PinnedLabels(lab, client_pid)) for x, lab in zip(X, Y)]


def test_bag_partitions_never_reach_the_client(client):
    with pytest.raises(TypeError, match="left its worker"):
        pickle.loads(pickle.dumps(_PinnedLabels(["A"], os.getpid())))
    bag = db.from_delayed([dask.delayed(_make_pinned_sentences)(s, 60, os.getpid())
                           for s in range(3)])
    model = _fit_within(ParameterMixing(SGDSequenceTagger(eta0=0.1, max_iter=1)), bag)
    assert model.n_workers_ == 2 and set(model.classes_) == {"A", "B", "C"}


# ---- taggers ----------------------------------------------------------------------
def _sentences(n, seed):
    rng = np.random.RandomState(seed)
    X, Y = [], []
    for _ in range(n):
        words = rng.randint(0, 40, size=rng.randint(2, 7))
        X.append([{"w": f"w{w}", "suffix": f"s{w % 7}", "len": 0.1 * (w % 5)}
                  for w in words])
        Y.append(["A" if w < 12 else "B" if w < 25 else "C" for w in words])
    return X, Y


TAGGERS = {
    "sgd": SGDSequenceTagger(eta0=0.1, random_state=0, max_iter=2),
    "asgd": SGDSequenceTagger(eta0=0.1, average=True, random_state=0, max_iter=2),
    "asf": ASFSequenceTagger(eta0=0.1, random_state=0, max_iter=2),
    "psa": PSASequenceTagger(eta0=0.1, period=5, random_state=0, max_iter=2),
    "ap": AveragedPerceptronSequenceTagger(random_state=0, max_iter=2),
    "pa": PassiveAggressiveSequenceTagger(random_state=0, max_iter=2),
    "arow": AROWSequenceTagger(random_state=0, max_iter=2),
}


@pytest.fixture(scope="module")
def sentences():
    return _sentences(240, 0)


@pytest.mark.parametrize("name", list(TAGGERS))
def test_tagger_one_partition_is_the_plain_tagger(client, sentences, name):
    X, Y = sentences
    bag = db.from_sequence(list(zip(X, Y)), npartitions=1)
    est = TAGGERS[name]
    model = ParameterMixing(est).fit(bag)
    assert model.n_workers_ == 1
    ref = clone(est).set_params(max_iter=1).fit(X, Y)
    ref.partial_fit(X, Y)
    assert model.estimator_.vocabulary_ == ref.vocabulary_
    assert_array_equal(model.estimator_.coef_, ref.coef_)
    assert model.estimator_.transition_features_ == ref.transition_features_
    assert model.estimator_.t_ == ref.t_


@pytest.mark.parametrize("name", list(TAGGERS))
def test_tagger_two_workers_mix_the_local_models(client, sentences, name):
    X, Y = sentences
    pairs = list(zip(X, Y))
    bag = db.from_sequence(pairs, partition_size=60)     # 4 partitions of 60
    est = TAGGERS[name]
    model = ParameterMixing(est).fit(bag)
    assert model.n_workers_ == 2
    idx = [np.concatenate([np.arange(60 * i, 60 * i + 60) for i in parts])
           for parts in model.partitions_]
    p = np.array([i.size for i in idx]) / len(X)
    # the start: zero weights over the whole vocabulary (attributes in order of
    # first appearance, as a tagger's fit on all the sentences numbers them)
    start = clone(est).set_params(max_iter=1).fit(X, Y)
    start._new_state(len(start.vocabulary_), check_random_state(0))
    start._model = start._final_flat()
    start.t_ = 0
    rule = MIXING_RULES[type(est)]
    for _ in range(2):
        local = [copy.deepcopy(start).partial_fit([X[j] for j in i], [Y[j] for j in i])
                 for i in idx]
        mixed = rule.mix(local, p, start)
        crfs, c0 = [m._state.crf for m in local], start._state.crf
        if name in ("asgd", "asf", "ap", "pa"):
            total = c0.avg + sum(c.avg - c0.avg for c in crfs)
            count = c0.n_iterates + sum(c.n_iterates - c0.n_iterates for c in crfs)
            assert_allclose(mixed._model, total / count, rtol=1e-12)
        else:
            assert_allclose(mixed._model, p[0] * crfs[0].coef + p[1] * crfs[1].coef,
                            rtol=1e-12, atol=1e-15)
        if name in ("ap", "pa", "arow"):
            assert_array_equal(mixed._state.exists,
                               local[0]._state.exists | local[1]._state.exists)
        if name == "arow":   # precisions summed as increments over the start's
            prec0 = 1.0 / start._state.cov
            assert_allclose(1.0 / mixed._state.cov, prec0 + sum(
                1.0 / m._state.cov - prec0 for m in local), rtol=1e-12)
        if name == "psa":
            # (the step sizes are float32: the mean rounded to one)
            assert_allclose(mixed.step_sizes_, np.exp(
                p[0] * np.log(local[0].step_sizes_) + p[1] * np.log(local[1].step_sizes_)),
                rtol=1e-7)
        assert mixed.t_ == start.t_ + len(X)
        start = mixed
    assert_array_equal(model.estimator_.coef_, start.coef_)
    assert model.estimator_.score(X, Y) > 0.9


# ---- the fitted model -------------------------------------------------------------
def test_fitted_model_pickles_and_predicts_without_dask(client, rows):
    X, y = rows
    Xd, yd = _dask_rows(X, y)
    model = ParameterMixing(LINEAR["psa"]).fit(Xd, yd)
    plain = pickle.loads(pickle.dumps(model.estimator_))
    assert type(plain) is PSAClassifier
    assert_array_equal(plain.predict(X), model.estimator_.predict(X))
    assert model.model_bytes_ > 0 and len(model.mix_seconds_) == 2
    assert np.shape(model.worker_seconds_) == np.shape(model.worker_cpu_seconds_) == (2, 2)
    # delegated prediction: lazy on Dask input, computed on the workers
    assert_array_equal(model.predict(Xd).compute(), plain.predict(X))
    assert_allclose(model.predict_proba(Xd).compute(), plain.predict_proba(X))
    assert_allclose(model.decision_function(Xd).compute(), plain.decision_function(X))
    assert model.score(Xd, yd) == pytest.approx(plain.score(X, y))
    assert_array_equal(model.predict(X), plain.predict(X))
    # and it goes on learning as any fitted estimator (its PSA windows rebuilt)
    assert_array_equal(copy.deepcopy(plain).partial_fit(X, y).coef_,
                       copy.deepcopy(model.estimator_).partial_fit(X, y).coef_)
    assert plain.partial_fit(X, y).t_ == 3 * X.shape[0]


def test_dataframe_input(client, rows):
    X, y = rows
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    Xd = dd.from_pandas(df, npartitions=1)
    yd = dd.from_pandas(pd.Series(y), npartitions=1)
    est = LINEAR["sgd"]
    model = ParameterMixing(est).fit(Xd, yd)
    ref = clone(est)
    for _ in range(2):
        ref.partial_fit(df, y, classes=[0, 1])
    assert_array_equal(model.estimator_.coef_, ref.coef_)
    assert list(model.estimator_.feature_names_in_) == list(df.columns)
    Xd, yd = dd.from_pandas(df, npartitions=4), dd.from_pandas(pd.Series(y), npartitions=4)
    model = ParameterMixing(SBMLogisticRegression(random_state=0)).fit(Xd, yd)
    assert model.n_workers_ == 2
    assert model.score(Xd, yd) == pytest.approx(model.estimator_.score(df, y))


def test_tagger_predict_and_score_on_a_bag(client, sentences):
    X, Y = sentences
    bag = db.from_sequence(list(zip(X, Y)), npartitions=3)
    model = ParameterMixing(TAGGERS["asf"]).fit(bag)
    pred = model.predict(db.from_sequence(X, npartitions=3)).compute()
    assert pred == model.estimator_.predict(X)
    assert model.score(bag) == pytest.approx(model.estimator_.score(X, Y))


# ---- errors ---------------------------------------------------------------------
def test_errors(client, rows, sentences):
    X, y = rows
    Xd, yd = _dask_rows(X, y)
    with pytest.raises(TypeError, match="no mixing rule for LogisticRegression"):
        from sklearn.linear_model import LogisticRegression
        ParameterMixing(LogisticRegression()).fit(Xd, yd)
    with pytest.raises(ValueError, match="full rank only"):
        ParameterMixing(SBMLogisticRegression(rank=2)).fit(Xd, yd)
    with pytest.raises(ValueError, match="L2-penalised models only; got penalty='l1'"):
        ParameterMixing(clone(LINEAR["sgd"]).set_params(penalty="l1")).fit(Xd, yd)
    with pytest.raises(TypeError, match="X is a ndarray"):
        ParameterMixing(LINEAR["sgd"]).fit(X, y)
    with pytest.raises(ValueError, match="4 partitions but y has 2"):
        ParameterMixing(LINEAR["sgd"]).fit(Xd, dd.from_pandas(pd.Series(y), npartitions=2))
    with pytest.raises(TypeError, match="needs a dask.bag"):
        ParameterMixing(TAGGERS["sgd"]).fit(Xd, yd)
    bag = db.from_sequence(list(zip(*sentences)), npartitions=2)
    with pytest.raises(TypeError, match="needs a dask array"):
        ParameterMixing(LINEAR["sgd"]).fit(bag)
    with pytest.raises(ValueError, match="y=None"):
        ParameterMixing(TAGGERS["sgd"]).fit(bag, yd)
    unfitted = ParameterMixing(LINEAR["sgd"])
    with pytest.raises(Exception, match="not fitted"):
        unfitted.predict(Xd)


def test_balance_moves_partitions_to_idle_workers():
    from sklearn_secondorder.dask._transport import _balance
    rows = [700, 500, 900, 400]
    # all on one worker: half of the rows move, the loads end 1200 / 1300
    moves = _balance({0: "a", 1: "a", 2: "a", 3: "a"}, rows, ["a", "b"])
    on_b = sum(rows[i] for i, w in moves.items() if w == "b")
    assert set(moves.values()) == {"b"} and on_b in (1200, 1300)
    # no move that would not narrow the gap (700 vs 900 + ... stays)
    assert _balance({0: "a", 1: "b", 2: "a", 3: "b"}, rows, ["a", "b"]) == {}
    assert _balance({0: "a"}, [10], ["a", "b"]) == {}
    moves = _balance({0: "a", 1: "a", 2: "a"}, [5, 5, 5], ["a", "b", "c"])
    assert sorted(moves.values()) == ["b", "c"]


def test_every_single_pass_estimator_has_a_rule(client, sentences):
    online = {"PSAClassifier", "PlainSGDClassifier", "SGDQNLinearSVC",
              "SBMLogisticRegression", "PSARegressor", "PlainSGDRegressor",
              "ASFSequenceTagger", "PSASequenceTagger",
              "SGDSequenceTagger", "AveragedPerceptronSequenceTagger",
              "PassiveAggressiveSequenceTagger", "AROWSequenceTagger"}
    for name in sklearn_secondorder.__all__:
        cls = getattr(sklearn_secondorder, name)
        assert (cls in MIXING_RULES) == (name in online), name
    bag = db.from_sequence(list(zip(*sentences)), npartitions=2)
    for name in sorted(set(sklearn_secondorder.__all__) - online):
        with pytest.raises(TypeError, match=f"no mixing rule for {name}"):
            ParameterMixing(getattr(sklearn_secondorder, name)()).fit(bag)


# ---- dask-ml's Incremental and the joblib backend ---------------------------------
def test_dask_ml_incremental_streams_blocks_to_one_model(client, rows):
    """``Incremental`` calls ``partial_fit`` once per block, in order: the same
    model as those calls made here."""
    wrappers = pytest.importorskip("dask_ml.wrappers")
    X, y = rows
    Xd, yd = _dask_rows(X, y)
    est = PSAClassifier(eta0=0.02, period=20, random_state=0)
    inc = wrappers.Incremental(est, shuffle_blocks=False).fit(Xd, yd, classes=[0, 1])
    ref = clone(est)
    starts = np.cumsum((0,) + CHUNKS)
    for a, b in zip(starts[:-1], starts[1:]):
        ref.partial_fit(X[a:b], y[a:b], classes=[0, 1])
    assert_array_equal(inc.estimator_.coef_, ref.coef_)
    assert_array_equal(inc.predict(Xd).compute(), ref.predict(X))


def test_grid_search_on_the_joblib_dask_backend(client, rows):
    import joblib
    from sklearn.model_selection import GridSearchCV

    X, y = rows
    grid = {"alpha": [1e-4, 1e-2]}
    est = PSAClassifier(random_state=0)
    ref = GridSearchCV(est, grid, cv=3).fit(X, y)
    with joblib.parallel_backend("dask"):
        got = GridSearchCV(est, grid, cv=3, n_jobs=2).fit(X, y)
    assert_array_equal(got.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"])
    assert got.best_params_ == ref.best_params_


def test_docstrings():
    validate = pytest.importorskip("numpydoc.validate").validate
    ignored = {"EX01", "SA01", "ES01", "RT02"}
    names = ["ParameterMixing"] + [f"ParameterMixing.{m}" for m in
                                   ("fit", "predict", "predict_proba", "decision_function",
                                    "score")]
    for name in names:
        errors = [e for e in validate(f"sklearn_secondorder.dask.{name}")["errors"]
                  if e[0] not in ignored]
        assert not errors, (name, errors)


# ---- regressors -----------------------------------------------------------------------
def _regression_rows(n=None, seed=0):
    n = sum(CHUNKS) if n is None else n
    rng = np.random.RandomState(seed)
    scale = np.array([1.0, 100.0, 0.01, 5.0, 1.0, 1.0])
    X = rng.randn(n, 6) * scale + [0, 500, 0, 60, 0, 0]       # unscaled, two far from 0
    y = X @ (np.array([1.0, -2.0, 0.5, 1.5, 0.0, 3.0]) / scale) + 7 + 0.2 * rng.randn(n)
    return X, y


@pytest.mark.parametrize("cls", [PSARegressor, PlainSGDRegressor])
def test_regressors_mix_the_workers_models(client, cls):
    # every worker continues the one start (its centring and step sizes, from
    # the first partition's first rows), and the mix is the estimator's own
    # rule applied to the workers' models: the local oracle below
    X, y = _regression_rows()
    est = cls(eta0=0.02, random_state=0, max_iter=2, alpha=1e-6)
    n_head = 300
    model = ParameterMixing(est, n_calibration_rows=n_head).fit(*_dask_rows(X, y))
    starts = np.cumsum((0,) + CHUNKS)
    first = model.partitions_[0][0]
    head = np.arange(starts[first], starts[first] + n_head)
    start = est.start_model(X[head], y[head])
    shares = np.array([r.size for r in _worker_rows(model)], dtype=float)
    shares /= shares.sum()
    for _ in range(2):
        models = [copy.deepcopy(start).partial_fit(X[r], y[r]) for r in _worker_rows(model)]
        start = cls.mix(models, shares, start)
    assert_allclose(model.estimator_.coef_, start.coef_, rtol=1e-9, atol=1e-12)
    assert_allclose(model.estimator_.intercept_, start.intercept_, rtol=1e-9)
    # the mix is that of the models' weights: its predictions, the mean of theirs
    assert_allclose(start.predict(X), np.average([m.predict(X) for m in models], axis=0,
                                                 weights=shares), rtol=1e-9)
    pred = model.predict(_dask_rows(X, y)[0]).compute()
    assert_allclose(pred, model.estimator_.predict(X))


def test_regressor_rmse_near_the_single_machine(client):
    X, y = _regression_rows(20000, seed=1)
    chunks = (5000,) * 4
    alone = PSARegressor(random_state=0).fit(X, y)
    mixed = ParameterMixing(PSARegressor(random_state=0)).fit(*_dask_rows(X, y, chunks))
    rmse_alone = np.sqrt(np.mean((alone.predict(X) - y) ** 2))
    rmse_mixed = np.sqrt(np.mean((mixed.estimator_.predict(X) - y) ** 2))
    assert rmse_mixed < 1.05 * rmse_alone
    assert not hasattr(mixed, "classes_")
