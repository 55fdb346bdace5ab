"""The Cython CRF core against independent references.

Brute-force enumeration of all label paths (log Z, marginals, Viterbi, the
latent model's constrained and free partitions), finite differences (the
gradient), and a NumPy re-implementation of SGD / ASF (lazy average, feedback
points, the scale trick).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _oracles import brute_force, to_data
from _oracles import numpy_crf_psa as numpy_psa
from _oracles import numpy_crf_sgd as numpy_sgd
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_secondorder._core._crf_infer import (
    CRFContext,
    label_marginals,
    loglik_gradient,
    objective,
    viterbi_decode,
)
from sklearn_secondorder._core._crf_sgd import (
    CRFSGDOptions,
    CRFState,
    is_feedback_pass,
    sgd_epochs,
)
from sklearn_secondorder._core._weights import ScaledWeights


@pytest.mark.parametrize("T,H", [(1, 3), (2, 2), (4, 3), (5, 2)])
@pytest.mark.parametrize("magnitude", [0.5, 3.0, 40.0])
def test_inference_matches_brute_force(T, H, magnitude):
    rng = np.random.default_rng(T * 10 + H)
    em = rng.normal(size=(T, H)) * magnitude
    tr = rng.normal(size=(H, H)) * magnitude
    ctx = CRFContext(H, 1, capacity=1)  # capacity 1: exercises the growth
    out = ctx.py_infer(em, tr)
    log_z, marg, edge, best, best_score = brute_force(em, tr)
    assert_allclose(out["log_z"], log_z, rtol=1e-12)
    assert_allclose(out["marginals"], marg, atol=1e-12)
    assert_allclose(out["edge"], edge, atol=1e-12)
    assert_allclose(out["marginals"].sum(axis=1), 1.0)
    assert out["viterbi"].tolist() == best.tolist()
    assert_allclose(out["viterbi_score"], best_score)


def test_loglik_matches_brute_force():
    rng = np.random.default_rng(0)
    em, tr = rng.normal(size=(4, 3)), rng.normal(size=(3, 3))
    y = np.array([0, 2, 2, 1])
    out = CRFContext(3).py_infer(em, tr, labels=y)
    log_z, *_ = brute_force(em, tr)
    score = em[np.arange(4), y].sum() + tr[y[:-1], y[1:]].sum()
    assert_allclose(out["path_score"], score)
    assert_allclose(out["loglik"], score - log_z)


@pytest.mark.parametrize("T", [1, 3, 4])
def test_latent_constrained_and_free_partition(T):
    """n_latent = 2 hidden states per label, 2 labels: H = 4 states."""
    rng = np.random.default_rng(T)
    n_latent, H = 2, 4
    em, tr = rng.normal(size=(T, H)), rng.normal(size=(H, H))
    y = rng.integers(0, 2, size=T)
    out = CRFContext(H, n_latent).py_infer(em, tr, labels=y)
    log_z, marg, edge, _, _ = brute_force(em, tr)
    log_zc, marg_c, edge_c, _, _ = brute_force(em, tr, n_latent, y)
    assert_allclose(out["log_z"], log_z)
    assert_allclose(out["log_z_c"], log_zc)
    assert_allclose(out["loglik"], log_zc - log_z)
    assert_allclose(out["marginals"], marg, atol=1e-12)
    assert_allclose(out["marginals_c"], marg_c, atol=1e-12)
    assert_allclose(out["edge_c"], edge_c, atol=1e-12)
    # constrained marginals vanish off the labels' states
    assert np.all(out["marginals_c"][np.arange(H)[None, :] // n_latent != y[:, None]] == 0)


def make_problem(rng, n_seq=6, n_attr=5, n_labels=3, max_len=4, density=0.6):
    lengths = rng.integers(1, max_len + 1, size=n_seq)
    n_tok = int(lengths.sum())
    X = sp.random(n_tok, n_attr, density=density, random_state=rng, format="csr")
    X.data = rng.normal(size=X.data.shape)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    labels = rng.integers(0, n_labels, size=n_tok).astype(np.int32)
    return X, offsets, labels


def dense_scores(X, offsets, flat, A, H, s):
    """Emissions and transitions of sequence s, from the flat layout, in NumPy."""
    W = flat[:A * H].reshape(A, H)
    tr = flat[A * H:A * H + H * H].reshape(H, H)
    b = flat[A * H + H * H:]
    rows = X[offsets[s]:offsets[s + 1]].toarray()
    return rows @ W + b, tr


def test_emissions_and_decoding_follow_the_flat_layout():
    rng = np.random.default_rng(1)
    A, L = 5, 3
    X, offsets, labels = make_problem(rng, n_attr=A, n_labels=L)
    flat = rng.normal(size=(A + L + 1) * L)
    w = ScaledWeights(flat.copy(), L)
    ds = to_data(X, offsets)
    pred = viterbi_decode(ds, w)
    P = label_marginals(ds, w)
    for s in range(len(offsets) - 1):
        em, tr = dense_scores(X, offsets, flat, A, L, s)
        _, marg, _, best, _ = brute_force(em, tr)
        assert pred[offsets[s]:offsets[s + 1]].tolist() == best.tolist()
        assert_allclose(P[offsets[s]:offsets[s + 1]], marg, atol=1e-12)


@pytest.mark.parametrize("n_latent", [1, 2])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_gradient_matches_finite_differences(n_latent, fit_intercept):
    rng = np.random.default_rng(2)
    A, L = 4, 3
    H = L * n_latent
    X, offsets, labels = make_problem(rng, n_attr=A, n_labels=L)
    ds = to_data(X, offsets, labels)
    flat = rng.normal(size=(A + H + 1) * H) * 0.5
    if not fit_intercept:
        flat[-H:] = 0.0
    total, grad = loglik_gradient(ds, ScaledWeights(flat.copy(), H), n_latent,
                                  fit_intercept=fit_intercept)

    def f(v):
        return loglik_gradient(ds, ScaledWeights(v, H), n_latent)[0]

    eps = 1e-6
    num = np.empty_like(flat)
    for p in range(flat.size):
        e = np.zeros_like(flat)
        e[p] = eps
        num[p] = (f(flat + e) - f(flat - e)) / (2 * eps)
    if not fit_intercept:
        num[-H:] = 0.0  # the bias is left untouched
    assert_allclose(grad, num, rtol=1e-6, atol=1e-7)
    # and the total is the brute-force log-likelihood (plain CRF)
    if n_latent == 1:
        expected = 0.0
        for s in range(len(offsets) - 1):
            em, tr = dense_scores(X, offsets, flat, A, L, s)
            y = labels[offsets[s]:offsets[s + 1]]
            expected += em[np.arange(len(y)), y].sum() + tr[y[:-1], y[1:]].sum()
            expected -= brute_force(em, tr)[0]
        assert_allclose(total, expected)


def test_gradient_is_sparse():
    """Attributes absent from the data get exactly zero gradient."""
    rng = np.random.default_rng(3)
    A, L = 6, 2
    X, offsets, labels = make_problem(rng, n_attr=A, n_labels=L)
    X = sp.csr_matrix(X @ sp.diags([1.0, 1.0, 1.0, 1.0, 0.0, 1.0]))
    X.eliminate_zeros()
    ds = to_data(X, offsets, labels)
    flat = rng.normal(size=(A + L + 1) * L)
    _, grad = loglik_gradient(ds, ScaledWeights(flat, L))
    assert np.all(grad[4 * L:5 * L] == 0.0)
    assert np.any(grad[:4 * L] != 0.0)


@pytest.mark.parametrize("mode", ["sgd", "asgd", "asf"])
def test_trainer_matches_numpy_reference(mode):
    rng = np.random.default_rng(4)
    A, L = 5, 3
    X, offsets, labels = make_problem(rng, n_seq=5, n_attr=A, n_labels=L)
    power = {"sgd": 1.0, "asgd": 0.75, "asf": 0.0}[mode]
    averaged = mode != "sgd"
    kw = dict(eta0=0.3, power=power, alpha=0.05, n_epochs=7)
    ref_w, ref_avg, ref_fb = numpy_sgd(X, offsets, labels, A, L, average=averaged,
                                       feedback=mode == "asf", **kw)
    v = np.zeros((A + L + 1) * L)
    u = np.zeros_like(v) if averaged else None
    state = CRFState(coef=v, avg=u, n_states=L)
    n_epochs = kw.pop("n_epochs")
    result = sgd_epochs(to_data(X, offsets, labels), state,
                        CRFSGDOptions(eta0=kw["eta0"], power=kw["power"], lam=kw["alpha"],
                                      average=averaged, feedback=mode == "asf"),
                        n_epochs=n_epochs, shuffle=False)
    assert result.epochs == 7 and state.t == 7 * 5 and not result.diverged
    assert_allclose(state.coef, ref_w, rtol=1e-10, atol=1e-12)
    if averaged:
        assert state.n_iterates == 35
        assert_allclose(state.model(), ref_avg, rtol=1e-10, atol=1e-12)
    assert result.feedbacks == ref_fb
    if mode == "asf":
        assert ref_fb == [1, 3, 6]


def test_lazy_average_survives_folds_and_resets():
    """Scale folds (tiny scale) and resets keep the exact mean of iterates."""
    rng = np.random.default_rng(5)
    A, L = 3, 2
    size = (A + L + 1) * L
    v, u = np.zeros(size), np.zeros(size)
    state = CRFState(coef=v, avg=u, n_states=L)
    options = CRFSGDOptions(eta0=0.5, power=0.0, lam=0.0, average=True)
    X, offsets, labels = make_problem(rng, n_seq=1, n_attr=A, n_labels=L, max_len=3)
    ds = to_data(X, offsets, labels)
    ctx_iterates = []
    for step in range(12):
        # a step through the trainer (one sequence, one pass), then a big shrink
        sgd_epochs(ds, state, options, shuffle=False)
        # (the trainer reads the arrays: the shrink's scale is folded into them)
        w = state.weights(averaged=True)
        ctx_iterates.append(w.weights().ravel())
        w.py_shrink(1e-5 if step % 3 == 0 else 0.7)
        w.py_fold()
        if step == 6:
            w.py_reset_to_average()
            assert_allclose(w.weights().ravel(), np.mean(ctx_iterates, axis=0), atol=1e-12)
    assert_allclose(state.weights(averaged=True).average().ravel(),
                    np.mean(ctx_iterates, axis=0), rtol=1e-10, atol=1e-12)


def test_feedback_schedule():
    fb = [p for p in range(1, 60) if is_feedback_pass(p)]
    assert fb == [1, 3, 6, 10, 15, 21, 28, 36, 45, 55]


def test_objective_matches_numpy():
    rng = np.random.default_rng(6)
    A, L = 4, 3
    X, offsets, labels = make_problem(rng, n_attr=A, n_labels=L)
    flat = rng.normal(size=(A + L + 1) * L)
    ds = to_data(X, offsets, labels)
    total, _ = loglik_gradient(ds, ScaledWeights(flat.copy(), L))
    n_seq = len(offsets) - 1
    expected = -total / n_seq + 0.5 * 0.1 * flat @ flat
    assert_allclose(objective(ds, ScaledWeights(flat.copy(), L), 0.1), expected)


def test_divergence_is_reported():
    rng = np.random.default_rng(7)
    A, L = 4, 3
    X, offsets, labels = make_problem(rng, n_attr=A, n_labels=L)
    X = X * 1e200
    state = CRFState(coef=np.zeros((A + L + 1) * L), avg=None, n_states=L)
    result = sgd_epochs(to_data(X, offsets, labels), state, CRFSGDOptions(eta0=1e100, lam=0.0),
                        n_epochs=3)
    assert result.diverged


def test_sequence_data_validation():
    X = sp.csr_matrix(np.ones((3, 2)))
    with pytest.raises(ValueError, match="empty"):
        to_data(X, np.array([0, 0, 3], dtype=np.int64))
    with pytest.raises(ValueError, match="offsets"):
        to_data(X, np.array([0, 2], dtype=np.int64))
    with pytest.raises(ValueError, match="one entry per token"):
        to_data(X, np.array([0, 3], dtype=np.int64), np.zeros(2, dtype=np.int32))


# ---------------------------------------------------------------------------
# PSA (Algorithm 1) with lazy catch-up vs a dense NumPy re-implementation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lam,b,eta0", [
    (0.01, 2, 0.5),    # idle windows clipped to kappa (closed form)
    (0.3, 2, 0.5),     # (1 - eta lam)^b < kappa: idle windows stepped one by one
    (0.0, 3, 0.3),     # no L2: idle weights never move (0/0)
    (0.05, 1, 0.8),
    (5e-5, 2, 0.5),    # every eta lam < 1e-4, clipped: the rows' gaps in one
                       # vector loop each (_binary_gaps.h, skso_block_gap)
])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_psa_matches_dense_numpy_reference(lam, b, eta0, fit_intercept):
    from sklearn_secondorder._core._crf_psa import psa_epochs
    from sklearn_secondorder._core._lazy_steps import LazyStepState, PSAOptions
    rng = np.random.default_rng(8)
    A, L = 12, 3
    # sparse rows: most attributes sit idle for several windows
    X, offsets, labels = make_problem(rng, n_seq=15, n_attr=A, n_labels=L, density=0.12)
    kw = dict(a=0.9999, be=0.99, kappa=0.9)
    ref_w, ref_eta, t = numpy_psa(X, offsets, labels, A, L, eta0=eta0, lam=lam, b=b,
                                  n_epochs=4, fit_intercept=fit_intercept, **kw)
    st = LazyStepState.zeros(A + L + 1, L, eta0)
    ds = to_data(X, offsets, labels)
    options = PSAOptions(lam=lam, period=b, psa_alpha=kw["a"], psa_beta=kw["be"],
                         kappa=kw["kappa"])
    psa_kw = dict(n_epochs=2, shuffle=False, fit_intercept=fit_intercept)
    # two calls (2 + 2 passes) as partial_fit would make them (t, seed kept in st)
    psa_epochs(ds, st, options, **psa_kw)
    info = psa_epochs(ds, st, options, **psa_kw)
    assert st.t == t and not info.diverged
    assert np.all(st.last == t)
    # within the float32 rounding of the step sizes (test_psa's tolerance)
    eta = st.step_sizes
    assert_allclose(st.weights, ref_w, rtol=1e-5, atol=1e-5 * np.abs(ref_w).max())
    assert_allclose(eta, ref_eta, rtol=1e-5)
    # each adaptation multiplies eta by a factor in [beta, alpha]
    n_windows = t // (2 * b)
    assert np.all(eta <= np.float32(eta0))
    assert np.all(eta >= eta0 * kw["be"] ** n_windows * (1 - 1e-6))
    assert np.any(eta < eta0)


def test_psa_idle_closed_form_many_windows():
    """A weight idle for hundreds of windows: the closed form equals stepping."""
    # the CRF PSA's state (A + L + 1 blocks of L) on the shared lazy core
    from sklearn_secondorder._core._lazy_steps import LazyStepState, PSAOptions, catch_up_state
    L, b, lam, eta0 = 2, 3, 0.02, 0.4
    a, be, kappa = 0.9999, 0.99, 0.9
    size = (1 + L + 1) * L
    state = LazyStepState.zeros(1 + L + 1, L, eta0)
    state.set_weights(np.linspace(-1, 1, size))
    T = 2 * b * 700 + 4
    catch_up_state(state, PSAOptions(lam=lam, period=b, psa_alpha=a, psa_beta=be, kappa=kappa), T)
    v, eta = state.weights, state.step_sizes
    # dense: shrink every update, adapt every 2b from the ratio of snapshots
    m = kappa * (a + be) / (a - be)
    n = 2 * kappa * (1 - a) / (a - be)
    w, e = np.linspace(-1, 1, size), np.full(size, eta0)
    snaps = [w.copy()]
    for t in range(1, T + 1):
        w = w * (1 - e * lam)
        if t % b == 0:
            snaps.append(w.copy())
        if t % (2 * b) == 0:
            w0, w1, w2 = snaps[-3:]
            u = np.clip((w2 - w1) / (w1 - w0), -kappa, kappa)
            e = e * (m + u) / (m + kappa + n)
    # (float32 step sizes over 700 windows: a relative 1e-7 a window at most)
    assert_allclose(eta, e, rtol=1e-6)
    assert_allclose(v, w, rtol=1e-6)


@pytest.mark.parametrize("l1", [0.0, 0.01])
@pytest.mark.parametrize("lam", [0.02, 5e-5])     # (5e-5: the gaps' regime)
def test_psa_rows_holding_their_trained_labels_only(l1, lam):
    """With CRFsuite's feature set an attribute's row holds only its trained
    labels' weights (``LazyStepState.zeros(exists=...)``), so a touch costs
    them alone; the model is the one the full rows with the same mask give."""
    from sklearn_secondorder._core._crf_psa import psa_epochs
    from sklearn_secondorder._core._lazy_steps import LazyStepState, PSAOptions
    rng = np.random.default_rng(3)
    A, L = 14, 4
    X, offsets, labels = make_problem(rng, n_seq=40, n_attr=A, n_labels=L, density=0.25)
    n_blocks = A + L + 1
    allowed = (rng.random(n_blocks * L) < 0.4).astype(np.uint8)
    allowed[A * L:] = 1
    exists = allowed.reshape(n_blocks, L).astype(bool)
    options = PSAOptions(lam=lam, period=2, l1=l1)
    held = LazyStepState.zeros(n_blocks, L, 0.3, l1=l1 > 0, exists=exists)
    full = LazyStepState.zeros(n_blocks, L, 0.3, l1=l1 > 0)
    assert_array_equal(held.widths[:A], exists[:A].sum(axis=1))
    ds = to_data(X, offsets, labels)
    for st in (held, full):
        psa_epochs(ds, st, options, n_epochs=3, shuffle=False, allowed=allowed)
    assert_allclose(held.weights, full.weights, rtol=1e-12, atol=1e-15)
    assert_allclose(held.step_sizes, full.step_sizes, rtol=1e-7)
    assert np.all(held.weights[allowed == 0] == 0) and np.any(held.weights != 0)
    # new attributes hold all their labels
    held.insert_blocks(A, 2, period=2)
    assert held.n_blocks == n_blocks + 2 and np.all(held.widths[A:A + 2] == L)
    assert_array_equal(held.labels[A:A + 2], np.tile(np.arange(L), (2, 1)))


@pytest.mark.parametrize("l1", [False, True])
def test_held_records_are_as_wide_as_their_weights(l1):
    """A held block's record (``LazyStepState.zeros(exists=...)``) is as wide
    as its weights: whole cache lines, one for an attribute of one or two
    labels (one with the L1 debts), its labels in it; its fields read and write
    as the flat weights' and survive ``with_l1``, ``insert_blocks`` and a
    state saved with records ``n_outputs`` wide."""
    import pickle

    from sklearn_secondorder._core import _lazy_steps
    from sklearn_secondorder._core._lazy_steps import LazyStepState, held_record_bytes
    rng = np.random.default_rng(7)
    K, n_blocks = 9, 40
    exists = rng.random((n_blocks, K)) < 0.25
    exists[:K + 1] = np.arange(K + 1)[:, None] > np.arange(K)      # widths 0..K
    st = LazyStepState.zeros(n_blocks, K, 0.25, l1=l1, exists=exists)
    widths = exists.sum(axis=1)
    size = held_record_bytes(widths, l1)
    at = st.record_at >> _lazy_steps.RECORD_AT_SHIFT
    assert_array_equal(st.record_at & ((1 << _lazy_steps.RECORD_AT_SHIFT) - 1), widths)
    assert np.all(at % 64 == 0) and np.all(np.diff(at) == size[:-1])
    assert st.records.nbytes == size.sum() and st.records.ctypes.data % 64 == 0
    assert np.all(size[widths <= (1 if l1 else 2)] == 64)
    assert np.all(8 + (44 if l1 else 28) * widths <= size)
    for j in range(n_blocks):               # the labels, in the record after the fields
        w = widths[j]
        lab = st.records.view(np.int32)[(at[j] + 8 + (40 if l1 else 24) * w) // 4:][:w]
        assert_array_equal(lab, np.flatnonzero(exists[j]))
    # the flat fields: weights where they exist, eta0 elsewhere
    w = rng.normal(size=(n_blocks, K)) * exists
    eta = np.where(exists, rng.uniform(0.1, 0.2, size=(n_blocks, K)), 0.25)
    st.t = 5
    st.set_weights(w.ravel(), eta.ravel())
    assert_array_equal(st.weights, w.ravel())
    assert_allclose(st.step_sizes, eta.ravel(), rtol=1e-7)
    assert np.all(st.last == 5) and st.max_step_size() == pytest.approx(eta[exists].max())
    assert "_held_index" in vars(st)                # (derived, not pickled)
    assert "_held_index" not in vars(pickle.loads(pickle.dumps(st)))
    st2 = pickle.loads(pickle.dumps(st)).prepare()
    assert_array_equal(st2.weights, w.ravel()) and st2.has_l1 == l1
    # with the L1 debts, then new blocks: the old blocks keep their fields
    st.with_l1()
    assert st.has_l1 and st.records.nbytes == held_record_bytes(widths, True).sum()
    assert_array_equal(st.weights, w.ravel())
    st.t = 8
    st.insert_blocks(3, 2, period=2)
    new_w = np.insert(w, [3, 3], 0.0, axis=0)
    assert_array_equal(st.weights, new_w.ravel())
    assert_array_equal(st.last, [5, 5, 5, 8, 8] + [5] * (n_blocks - 3))
    assert_allclose(st.step_sizes, np.insert(eta, [3, 3], 0.25, axis=0).ravel(), rtol=1e-7)
    # a state saved with its held blocks in records n_outputs wide
    wide = LazyStepState(records=_lazy_steps._zeros(n_blocks, _lazy_steps.record_dtype(K, l1)),
                         n_outputs=K, t=5, eta0=0.25, widths=widths.astype(np.int32),
                         labels=np.argsort(~exists, axis=1, kind="stable").astype(np.int32))
    slots = np.arange(K) < widths[:, None]
    wide.records["v"][slots] = w[exists]
    wide.records["eta"][slots] = eta[exists]
    wide.records["eta"][~slots] = 0.25
    wide.records["last"] = 5
    if l1:
        wide.records["owed_down"][slots] = 0.5
    # (as pickled before held records: without their fields)
    old = pickle.dumps(wide)
    wide.prepare()
    assert wide.records.dtype == np.uint8 and wide.has_l1 == l1
    assert_array_equal(wide.weights, w.ravel())
    assert_allclose(wide.step_sizes, eta.ravel(), rtol=1e-7)
    assert np.all(wide.last == 5)
    del wide.__dict__["record_at"], wide.__dict__["held_l1"]
    # unpickled, every method reads the held records, before any prepare()
    for call in ("insert_blocks", "with_l1"):
        back = pickle.loads(old)
        assert back.records.dtype == np.uint8 and back.has_l1 == l1
        if call == "insert_blocks":
            back.insert_blocks(3, 2, period=2)
            assert_array_equal(back.weights, new_w.ravel())
        else:
            back.with_l1()
            assert back.has_l1 and np.all(back.records.view(np.float64)[
                back._held_view("owed_down").positions] == (0.5 if l1 else 0.0))
            assert_array_equal(back.weights, w.ravel())


def test_held_edge_cases():
    """A held state of one label catches up as the fixed records do (these
    take ``binary_gaps``, the held ones ``walk``: within 1e-9 of the
    weights' scale); a held state without blocks takes new ones."""
    from sklearn_secondorder._core._lazy_steps import LazyStepState, PSAOptions, catch_up_state
    rng = np.random.default_rng(1)
    w = rng.normal(size=20)
    options = PSAOptions(lam=1e-4, period=10)
    fixed = LazyStepState.zeros(20, 1, 0.1)
    held = LazyStepState.zeros(20, 1, 0.1, exists=np.ones((20, 1), dtype=bool))
    for st in (fixed, held):
        st.set_weights(w)
        catch_up_state(st, options, 1000)
    assert np.all(held.last == 1000) and np.abs(held.weights - w).max() > 1e-3
    assert_allclose(held.weights, fixed.weights, rtol=0, atol=1e-9 * np.abs(w).max())
    assert_allclose(held.step_sizes, fixed.step_sizes, rtol=1e-6)
    empty = LazyStepState.zeros(0, 3, 0.1, exists=np.zeros((0, 3), dtype=bool))
    empty.t = 4
    empty.insert_blocks(0, 2, period=2)
    assert_array_equal(empty.widths, [3, 3]) and np.all(empty.last == 4)
    assert_allclose(empty.step_sizes, 0.1, rtol=1e-7) and np.all(empty.weights == 0)


def _numpy_asf(X, offsets, labels, A, L, *, eta0, alpha, n_epochs, feedback_average):
    """ASF with explicit iterates: a constant step, feedback after passes 1, 3,
    6, 10, ...; the feedback (and the model) is the average of all iterates
    since the start (``'all'``, the paper's Eq. 2) or of the period's: the
    point fed back and the iterates since (``'period'``)."""
    from sklearn_secondorder._core._crf_infer import loglik_gradient
    w = np.zeros((A + L + 1) * L)
    iterates = []
    for epoch in range(1, n_epochs + 1):
        for s in range(len(offsets) - 1):
            sub = to_data(X[offsets[s]:offsets[s + 1]],
                          np.array([0, offsets[s + 1] - offsets[s]]),
                          labels[offsets[s]:offsets[s + 1]])
            _, g = loglik_gradient(sub, ScaledWeights(w.copy(), L))
            w = (1 - eta0 * alpha) * w + eta0 * g
            iterates.append(w.copy())
        if is_feedback_pass(epoch):
            w = np.mean(iterates, axis=0)
            if feedback_average == "period":
                iterates = [w]
    return np.mean(iterates, axis=0) if iterates else w


@pytest.mark.parametrize("feedback_average", ["period", "all"])
def test_asf_tagger_feedback_average_matches_numpy(feedback_average):
    """ASFSequenceTagger's feedback and model: the average of the period's
    iterates (the default) or of all since the start, as the NumPy
    reference; ``fit`` and ``fit`` + ``partial_fit`` reach the same model."""
    from sklearn_secondorder import ASFSequenceTagger
    rng = np.random.default_rng(11)
    A, L = 5, 3
    X, offsets, labels = make_problem(rng, n_seq=6, n_attr=A, n_labels=L)
    Xs = [X[offsets[s]:offsets[s + 1]].toarray() for s in range(len(offsets) - 1)]
    ys = [labels[offsets[s]:offsets[s + 1]].tolist() for s in range(len(offsets) - 1)]
    assert sorted(set(labels.tolist())) == list(range(L))
    params = dict(eta0=0.3, alpha=0.05, shuffle=False, feedback_average=feedback_average)
    for n_epochs in (1, 2, 3, 5, 7):
        ref = _numpy_asf(X, offsets, labels, A, L, eta0=0.3, alpha=0.05, n_epochs=n_epochs,
                         feedback_average=feedback_average)
        tagger = ASFSequenceTagger(max_iter=n_epochs, **params).fit(Xs, ys)
        assert_allclose(tagger.flat_weights_, ref, rtol=1e-9, atol=1e-12)
    stepwise = ASFSequenceTagger(max_iter=2, **params).fit(Xs, ys)
    for _ in range(5):
        stepwise.partial_fit(Xs, ys)
    assert_allclose(stepwise.flat_weights_, tagger.flat_weights_, rtol=1e-9, atol=1e-12)
    if feedback_average == "period":      # (the two differ once a period has ended)
        other = _numpy_asf(X, offsets, labels, A, L, eta0=0.3, alpha=0.05, n_epochs=7,
                           feedback_average="all")
        assert np.abs(other - tagger.flat_weights_).max() > 1e-3
