"""PSA passes over rows (Hsu et al., Algorithm 1) on the shared lazy core.

Mini-batch 1: each row with non-zero weight is one update ``t``. The weights
live in a ``LazyStepWeights`` (per-coordinate steps, lazy L2 decay and lazy
window-end adaptation), so a step costs O(nnz(x) n_outputs) whatever the
number of features, and the only O(n_features) work is the flush at the end
of a pass (and the per-pass finiteness check).

Two schedules for the events (every ``b`` updates), both with the arithmetic
of ``LazyStepWeights.catch_up``:

- lazy (high-dimensional models): a block is caught up across the events it
  missed when it is next touched, whole idle windows in closed form, so an
  event costs nothing and a touch loads the block's state once;
- sweep every block (small models: at most ``2 b`` times the mean non-zeros
  per row of blocks): ``LazyStepWeights.sweep_all`` applies each event to all
  blocks in storage order, a streaming loop that is cheaper than the
  data-dependent catch-up in the row loop when the whole model is in cache.

With the L1 penalty (``PSAOptions.l1``: Tsuruoka et al.'s cumulative
penalty on each weight's own steps, ``LazyStepWeights``) the pass is
``_pass_l1``: the row's blocks are caught up with ``lazy_catch_up_l1`` (decay and
penalty owed), and each stepped weight is clipped after its gradient term
(``l1_penalize``); the schedule is the lazy one (the sweeps carry no L1). The
intercept has no penalty. The L2-only pass is unchanged.
"""
from libc.stdlib cimport malloc, free

from ._dataset cimport RowDataset, fetch_row, prefetch_row
from ._losses cimport Loss, softmax_loss
from ._numeric cimport clip_dloss
from ._weights cimport (
    LazyStepWeights,
    lazy_catch_up,
    lazy_catch_up_l1,
    l1_penalize,
    prefetch_l1,
    row_step_l1,
    decay_factor_of,
    rate_of,
    prefetch_block,
    row_emit,
    row_shrink_step,
)
from ._weights import PSAResult

cdef long long NO_SWEEP = 1LL << 62


cdef struct RowPass:
    # what one pass's row updates share
    int K                    # outputs per feature
    Py_ssize_t d             # features; block d is the intercept
    bint sweeping            # every block is current at the last event
    bint fit_intercept
    double alpha             # L2 strength
    double l1                # L1 strength (0: none)
    double* scores           # (K,) work buffers
    double* grad


cdef inline void _prefetch_next(RowDataset ds, LazyStepWeights w, Py_ssize_t i) noexcept nogil:
    """Prefetch the blocks of the next row (cold in a large model) and the
    indices of the row after, so that they can be prefetched in turn."""
    cdef Py_ssize_t nxt
    cdef long long kk
    prefetch_row(ds, i + 2)
    nxt = ds.order_ptr[i + 1]
    for kk in range(ds.indptr_ptr[nxt], ds.indptr_ptr[nxt + 1]):
        prefetch_block(w, ds.indices_ptr[kk])


cdef inline void _scores(LazyStepWeights w, const RowPass* rp, const double* x, const int* ind,
                         int nnz, long long t) noexcept nogil:
    """Catch the row's blocks (and the intercept) up to ``t`` and score the row
    at ``theta(t)`` into ``rp.scores``."""
    cdef int q, k, K = rp.K
    cdef Py_ssize_t j, d = rp.d
    cdef long long tau
    cdef double s = 0.0
    # (fields read into locals: the extensions are compiled with
    # -fno-strict-aliasing, so every store would otherwise reload them)
    cdef double* v = w.v
    cdef long long* last = w.last
    cdef const long long* next_event = w.next_event
    if K == 1:
        if rp.sweeping:
            # every block is current at the last event: one decay (a factor
            # of exactly 1 when tau == t or without L2)
            for q in range(nnz):
                j = ind[q]
                tau = last[2 * j]
                last[2 * j] = t
                v[2 * j] *= decay_factor_of(w, rate_of(w, j, rp.alpha), t - tau)
        else:
            for q in range(nnz):
                j = ind[q]
                if next_event[2 * j] <= t:
                    w.catch_up(j, t)
                else:                      # no event to cross: one decay
                    tau = last[2 * j]
                    last[2 * j] = t
                    v[2 * j] *= decay_factor_of(w, rate_of(w, j, rp.alpha), t - tau)
        # (a separate loop: the decays above are independent)
        for q in range(nnz):
            s += v[2 * ind[q]] * x[q]
        rp.scores[0] = s
    else:
        for k in range(K):
            rp.scores[k] = 0.0
        for q in range(nnz):
            j = ind[q]
            if next_event[2 * j] <= t:         # (never when sweeping)
                w.catch_up(j, t)
            else:
                lazy_catch_up(w, j, t)
            row_emit(rp.scores, v + 2 * j * K, x[q], K)
    if rp.fit_intercept:
        if next_event[2 * d] <= t:
            w.catch_up(d, t)
        last[2 * d] = t                        # the intercept has no L2: nothing to decay
        for k in range(K):
            rp.scores[k] += v[2 * (d * K + k)]


cdef inline void _step(LazyStepWeights w, const RowPass* rp, const double* x, const int* ind,
                       int nnz, double sw, long long t) noexcept nogil:
    """``theta(t+1) = (1 - eta lam) theta(t) - eta sw grad x`` (Algorithm 1,
    line 5) on the row's blocks and the intercept."""
    cdef int q, k, K = rp.K
    cdef Py_ssize_t j, p, d = rp.d
    cdef double c, e, gsw, alpha = rp.alpha
    cdef double* v = w.v
    cdef const double* eta = w.eta
    cdef long long* last = w.last
    cdef const double* grad = rp.grad
    if K == 1:
        gsw = sw * grad[0]
        for q in range(nnz):
            j = ind[q]
            e = eta[2 * j]
            c = 1.0 - e * alpha
            if c < 0.0:
                c = 0.0
            v[2 * j] = c * v[2 * j] - e * gsw * x[q]
            last[2 * j] = t + 1
    else:
        for q in range(nnz):
            j = ind[q]
            row_shrink_step(v + 2 * j * K, alpha, sw, grad, x[q], K)
            last[2 * j] = t + 1
    if rp.fit_intercept:
        for k in range(K):
            p = d * K + k
            v[2 * p] -= eta[2 * p] * sw * grad[k]
        last[2 * d] = t + 1


cdef long long _pass(RowDataset ds, LazyStepWeights w, Loss loss, const RowPass* rp,
                     long long t, long long b) noexcept nogil:
    """One pass over the rows in their current order; returns the new ``t``."""
    cdef const double* x
    cdef const int* ind
    cdef int nnz
    cdef Py_ssize_t i
    cdef double y, sw
    cdef long long next_sweep = (t // b + 1) * b if rp.sweeping else NO_SWEEP
    for i in range(ds.n_samples):
        fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
        if sw == 0.0:
            continue
        if not rp.sweeping and ds.is_sparse and i + 1 < ds.n_samples:
            _prefetch_next(ds, w, i)
        if t == next_sweep:                # an event: apply it to every block
            w.sweep_all(t)
            next_sweep += b
        _scores(w, rp, x, ind, nnz, t)
        if rp.K == 1:                      # the loss derivative at theta(t)
            rp.grad[0] = clip_dloss(loss.dloss(rp.scores[0], y))
        else:
            softmax_loss(rp.scores, <int>y, rp.K, rp.grad)
        _step(w, rp, x, ind, nnz, sw, t)
        t += 1
    return t


cdef void _step_l1(LazyStepWeights w, const RowPass* rp, const double* x, const int* ind,
                   int nnz, double sw, long long t) noexcept nogil:
    """``_step`` with the L1 penalty: line 5 of Algorithm 1 on each weight of
    the row's blocks, then its penalty ``eta C`` (``l1_penalize``); the
    intercept has none."""
    cdef int q, k, K = rp.K
    cdef Py_ssize_t j, p, d = rp.d
    cdef double c, e, alpha = rp.alpha, l1 = rp.l1
    cdef double* v = w.v
    cdef const double* eta = w.eta
    for q in range(nnz):
        j = ind[q]
        if K > 1:                 # (the same arithmetic, one vectorised loop)
            row_step_l1(v + 2 * j * K, w.l1d + 2 * j * K, alpha, sw, rp.grad, x[q], l1, K)
        else:
            e = eta[2 * j]
            c = 1.0 - e * alpha
            if c < 0.0:
                c = 0.0
            v[2 * j] = c * v[2 * j] - e * sw * rp.grad[0] * x[q]
            l1_penalize(w, j, c, e * l1)
        w.last[2 * j] = t + 1
    if rp.fit_intercept:
        for k in range(K):
            p = d * K + k
            v[2 * p] -= eta[2 * p] * sw * rp.grad[k]
        w.last[2 * d] = t + 1


cdef long long _pass_l1(RowDataset ds, LazyStepWeights w, Loss loss, const RowPass* rp,
                        long long t) noexcept nogil:
    """``_pass`` with the L1 penalty (lazy schedule): the row's blocks are
    caught up with their decay and penalty owed (``lazy_catch_up_l1``) as they
    are read. (Its own loop, so that ``_scores`` and ``_step`` keep one
    caller, inlined into ``_pass`` as before.)"""
    cdef const double* x
    cdef const int* ind
    cdef int nnz, q, k, K = rp.K
    cdef Py_ssize_t i, j, nxt, d = rp.d
    cdef long long kk
    cdef double y, sw
    for i in range(ds.n_samples):
        fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
        if sw == 0.0:
            continue
        if ds.is_sparse and i + 1 < ds.n_samples:
            _prefetch_next(ds, w, i)
            nxt = ds.order_ptr[i + 1]
            for kk in range(ds.indptr_ptr[nxt], ds.indptr_ptr[nxt + 1]):
                prefetch_l1(w, ds.indices_ptr[kk])
        for k in range(K):
            rp.scores[k] = 0.0
        for q in range(nnz):
            j = ind[q]
            lazy_catch_up_l1(w, j, t)
            for k in range(K):
                rp.scores[k] += w.v[2 * (j * K + k)] * x[q]
        if rp.fit_intercept:
            lazy_catch_up_l1(w, d, t)          # (no penalty: events only)
            for k in range(K):
                rp.scores[k] += w.v[2 * (d * K + k)]
        if rp.K == 1:
            rp.grad[0] = clip_dloss(loss.dloss(rp.scores[0], y))
        else:
            softmax_loss(rp.scores, <int>y, rp.K, rp.grad)
        _step_l1(w, rp, x, ind, nnz, sw, t)
        t += 1
    return t


def psa_epochs(RowDataset ds, state, options, *, Loss loss=None, int n_epochs=1,
               bint shuffle=True, bint fit_intercept=True, int sweep_all=-1):
    """Run ``n_epochs`` PSA passes over ``ds``, updating ``state`` in place.

    Parameters
    ----------
    ds : RowDataset
    state : LazyStepState
        ``n_features + 1`` blocks of ``n_outputs`` weights, the last being the
        intercept (no L2); ``t`` and ``seed`` advance.
    options : PSAOptions
        ``lam`` (the penalty ``lam/2 ||w||^2``), ``period`` (``b``), and the
        paper's ``psa_alpha``, ``psa_beta``, ``kappa``.
    loss : Loss or None
        Binary margin loss, or None (with ``n_outputs > 1``) for the
        multinomial log loss with class indices in ``y``.
    n_epochs : int
    shuffle, fit_intercept : bool
    sweep_all : {-1, 0, 1}
        The event schedule: 1 sweeps every block at every event, 0 catches
        blocks up lazily at their next touch, -1 (default) sweeps when the
        number of blocks is at most ``2 b`` times the mean non-zeros per row.

    Returns
    -------
    result : PSAResult
    """
    cdef RowPass rp
    rp.K = state.n_outputs
    rp.d = ds.n_features
    rp.fit_intercept = fit_intercept
    rp.alpha = options.lam
    rp.l1 = getattr(options, "l1", 0.0)
    if rp.K == 1 and loss is None:
        raise ValueError("a binary loss is required when n_outputs == 1")
    cdef LazyStepWeights w = LazyStepWeights(state, options, rp.d)
    if w.n_blocks != rp.d + 1:
        raise ValueError("state does not match the number of features")
    cdef long long t = state.t
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef long long b = options.period if options.period > 0 else 0
    cdef double mean_nnz = (<double>ds.indptr[ds.n_samples] / max(ds.n_samples, 1)
                            if ds.is_sparse else <double>rp.d)
    if sweep_all == -1:
        sweep_all = rp.d + 1 <= 2.0 * b * mean_nnz
    rp.sweeping = b > 0 and sweep_all and rp.l1 == 0.0   # (the sweeps carry no L1)
    cdef int _epoch, epochs_run = 0
    cdef bint diverged = False
    rp.scores = <double*>malloc(rp.K * sizeof(double))
    rp.grad = <double*>malloc(rp.K * sizeof(double))
    try:
        with nogil:
            if rp.sweeping:
                w.catch_up_all(t)
            for _epoch in range(n_epochs):
                if shuffle:
                    ds.shuffle(&rng)
                if rp.l1 != 0.0:
                    t = _pass_l1(ds, w, loss, &rp, t)
                else:
                    t = _pass(ds, w, loss, &rp, t, b)
                epochs_run += 1
                w.catch_up_all(t)
                if not w.is_finite():
                    diverged = True
                    break
    finally:
        free(rp.scores)
        free(rp.grad)
    state.t, state.seed = t, rng
    return PSAResult.of(w, epochs_run, diverged)
