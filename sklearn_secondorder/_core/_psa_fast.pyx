"""PSA passes over rows (Hsu et al., Algorithm 1) on the lazy core.

Mini-batch 1: each row with non-zero weight is one update ``t``. Feature
``j``'s ``K`` weights are block ``j`` of a ``LazyStepState`` (the intercept
is block ``n_features``, without penalty); a row brings its blocks to ``t``
as it reads them (``touch``), scores, and steps them, so an update costs
O(nnz(x) K) plus the events its blocks crossed since their last touch. The
blocks a row stepped at the end of a window's half take that event at once
(they are in cache), so that a block's ``last`` always means "every event up
to it applied". The only O(n_features K) work is the flush at the end of a
pass (``catch_up`` of every block) and the finiteness check.
"""
from ._dataset cimport RowDataset, fetch_row, prefetch_row
from ._lazy_steps cimport (
    Block,
    L2Only,
    LazyCore,
    Layout,
    Log1pRate,
    Penalty,
    RateRule,
    SeriesRate,
    WithL1,
    apply_event,
    block_at,
    catch_up_all,
    last_event,
    layout_of,
    make_core,
    prefetch_block,
    step_weight,
    touch,
)
from ._losses cimport Loss, softmax_loss
from ._numeric cimport clip_dloss

from ._lazy_steps import PSAResult

import numpy as np


cdef struct RowWork:
    # what one call's row updates share
    Py_ssize_t d             # features; block d is the intercept
    bint fit_intercept
    double* scores           # (K,) work buffers
    double* grad


cdef inline long long _pass(RowDataset ds, const Layout* L, Py_ssize_t K, const LazyCore* c,
                            const Penalty* pen, const RateRule* rule, Loss loss, RowWork* wk,
                            long long t) noexcept nogil:
    """One pass over the rows in their current order; returns the new ``t``.
    (Inline: a binary model's call passes ``K = 1``, a constant there.)"""
    cdef const double* x
    cdef const int* ind
    cdef int nnz, q
    cdef Py_ssize_t i, k, nxt
    cdef long long kk
    cdef double y, sw, s
    cdef Block row, icp = block_at(L, wk.d)
    cdef double lam = c.lam, l1 = c.l1
    cdef double* scores = wk.scores
    cdef double* grad = wk.grad
    cdef bint mid
    # the latest event <= t (a block current before it has events to cross),
    # and the next one
    cdef long long ev = last_event(c, t)
    cdef long long next_event = ev + c.b if c.b > 0 else -1
    for i in range(ds.n_samples):
        fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
        if sw == 0.0:
            continue
        if ds.is_sparse and i + 1 < ds.n_samples:
            # the next row's blocks (mostly cold in a large model), and the
            # indices of the row after, so that they are in cache then
            # (written out here, not in a function: _prefetch.h says why)
            prefetch_row(ds, i + 2)
            nxt = ds.order_ptr[i + 1]
            for kk in range(ds.indptr_ptr[nxt], ds.indptr_ptr[nxt + 1]):
                prefetch_block(L, ds.indices_ptr[kk])
        # theta(t) on the row's blocks, then the scores (accumulated in a
        # local: a store to a record could alias scores[k])
        for q in range(nnz):
            touch(block_at(L, ind[q]), K, t, ev, lam, l1, c, pen, rule)
        if wk.fit_intercept:
            touch(icp, K, t, ev, 0.0, 0.0, c, pen, rule)
        for k in range(K):
            s = icp.v[k] if wk.fit_intercept else 0.0
            for q in range(nnz):
                s += block_at(L, ind[q]).v[k] * x[q]
            scores[k] = s
        # the loss derivative at theta(t), then line 5 of Algorithm 1
        if K == 1:
            grad[0] = sw * clip_dloss(loss.dloss(scores[0], y))
        else:
            softmax_loss(scores, <int>y, <int>K, grad)
            for k in range(K):
                grad[k] *= sw
        if K == 1 and grad[0] == 0.0:
            # a zero gradient (a hinge-type loss past its margin): the update
            # is the shrink alone, which is an idle step of the lazy decay,
            # so the blocks stay current at t and a later catch-up applies it
            t += 1
        else:
            for q in range(nnz):
                row = block_at(L, ind[q])
                for k in range(K):
                    step_weight(row, k, lam, l1, grad[k] * x[q], pen)
                row.last[0] = t + 1
            if wk.fit_intercept:
                for k in range(K):
                    step_weight(icp, k, 0.0, 0.0, grad[k], pen)
                icp.last[0] = t + 1
            t += 1
            if t == next_event:        # the stepped blocks take the event at once
                mid = (t // c.b) & 1
                for q in range(nnz):
                    apply_event(block_at(L, ind[q]), K, mid, c)
                if wk.fit_intercept:
                    apply_event(icp, K, mid, c)
        if t == next_event:
            ev = t
            next_event += c.b
    return t


cdef object _epochs(RowDataset ds, const Layout* L, const Penalty* pen, const RateRule* rule,
                    state, LazyCore c, Loss loss, int n_epochs, bint shuffle,
                    bint fit_intercept):
    """``psa_epochs`` for one penalty kind and rate rule."""
    cdef RowWork wk
    cdef long long t = state.t
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef int _epoch, epochs_run = 0
    cdef bint finite = True
    cdef double[::1] buf = np.zeros(2 * state.n_outputs)
    wk.d = ds.n_features
    wk.fit_intercept = fit_intercept
    wk.scores = &buf[0]
    wk.grad = &buf[L.K]
    with nogil:
        for _epoch in range(n_epochs):
            if shuffle:
                ds.shuffle(&rng)
            if L.K == 1:
                t = _pass(ds, L, 1, &c, pen, rule, loss, &wk, t)
            else:
                t = _pass(ds, L, L.K, &c, pen, rule, loss, &wk, t)
            epochs_run += 1
            finite = catch_up_all(L, wk.d + 1, wk.d, t, &c, pen, rule)
            if not finite:
                break
    state.t, state.seed = t, rng
    return PSAResult(epochs=epochs_run, diverged=not finite)


def psa_epochs(RowDataset ds, state, options, *, Loss loss=None, int n_epochs=1,
               bint shuffle=True, bint fit_intercept=True):
    """Run ``n_epochs`` PSA passes over ``ds``, updating ``state`` in place.

    Parameters
    ----------
    ds : RowDataset
    state : LazyStepState
        ``n_features + 1`` blocks of ``n_outputs`` weights, the last being the
        intercept (no penalty); ``t`` and ``seed`` advance. Every block is
        current at ``t`` on return. L1 records with ``options.l1 > 0``.
    options : PSAOptions
        ``lam`` (the penalty ``lam/2 ||w||^2``), ``period`` (``b``), the
        paper's ``psa_alpha``, ``psa_beta``, ``kappa``, and ``l1``.
    loss : Loss or None
        Binary margin loss, or None (with ``n_outputs > 1``) for the
        multinomial log loss with class indices in ``y``.
    n_epochs : int
    shuffle, fit_intercept : bool

    Returns
    -------
    result : PSAResult
    """
    if state.n_outputs == 1 and loss is None:
        raise ValueError("a binary loss is required when n_outputs == 1")
    state.prepare()
    if state.n_blocks != ds.n_features + 1:
        raise ValueError("state does not match the number of features")
    if options.l1 > 0 and not state.has_l1:
        raise ValueError("the L1 penalty needs L1 records (LazyStepState.with_l1)")
    cdef LazyCore c = make_core(options, state)
    cdef Layout L = layout_of(state)
    cdef SeriesRate series
    cdef Log1pRate general
    cdef L2Only plain
    cdef WithL1 with_l1
    # every eta lam < 1e-4 now is so for the state's lifetime (eta only decreases)
    cdef bint small = c.rate_max < 1e-4
    if state.has_l1:
        if small:
            return _epochs(ds, &L, &with_l1, &series, state, c, loss, n_epochs, shuffle,
                           fit_intercept)
        return _epochs(ds, &L, &with_l1, &general, state, c, loss, n_epochs, shuffle,
                       fit_intercept)
    if small:
        return _epochs(ds, &L, &plain, &series, state, c, loss, n_epochs, shuffle,
                       fit_intercept)
    return _epochs(ds, &L, &plain, &general, state, c, loss, n_epochs, shuffle, fit_intercept)
