"""Periodic Step-size Adaptation (PSA) for CRFs, on the lazy core.

PSA (Hsu, Chang, Huang and Lee, NIPS 2009 workshop, Algorithm 1): SGD with a
step size per parameter, ``theta <- (1 - eta lam) theta + eta o grad log p(y|x)``
(the gradient of ``-log p(y|x) + lam/2 ||theta||^2``), one update per
sequence; every ``2b`` updates, from the snapshots ``theta(t)``,
``theta(t+b)``, ``theta(t+2b)``, each step size is adapted (Eqs. 6-10).
Windows are aligned on the global update counter (``t = 0, 2b, 4b, ...``).

The weights are a ``LazyStepState`` (``_lazy_steps``: one record per
weight, the same core as the linear kernel ``_psa_fast``), in
``CRFContext``'s layout: blocks of ``H = n_states`` records, the ``A``
attribute rows, the ``H`` transition rows (``from``), then the bias. All of
them carry the penalty (as CRFsuite's). An update brings the blocks it reads
to ``t`` (``touch``) as the emissions are read, shrinks each at its first
visit (``last == t``; then ``last = t + 1``), adds the tokens' gradient
terms, and, at the end of a window's half, applies that event to the blocks
it stepped (in cache), so that ``last`` always means "every event up to it
applied". Every block is caught up at the end of each pass.

With the L1 penalty (CRFsuite's ``c1``) a row's first visit also owes the
step's ``eta C``, and every weight the sequence touched is clipped once its
gradient terms are in (clipping twice is clipping once).
"""
from libc.math cimport isfinite

from ._crf_infer cimport CRFContext
from ._dataset cimport SequenceData
from ._lazy_steps cimport (
    Block,
    L2Only,
    block_add,
    block_emit,
    block_shrink,
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
    l1_clip,
    l1_owe,
    last_event,
    layout_of,
    make_core,
    prefetch_block,
    touch,
    width_of,
)
from ._numeric cimport now_seconds

from ._lazy_steps import PSAResult

import numpy as np


cdef inline void _shrink(Block r, Py_ssize_t n, double lam, double l1,
                         const Penalty* pen) noexcept nogil:
    """One update's shrink of ``n`` weights, ``v *= max(0, 1 - eta lam)``
    (and, with the L1 penalty, the step's ``eta C`` owed; clipped later)."""
    cdef Py_ssize_t h
    cdef double f
    if Penalty is L2Only:
        block_shrink(r.v, r.eta, lam, n)
    else:
        for h in range(n):
            f = 1.0 - r.eta[h] * lam
            f = f if f > 0.0 else 0.0
            r.v[h] *= f
            l1_owe(r, h, f, r.eta[h] * l1)


cdef inline void _visit(Block r, Py_ssize_t H, long long t, double lam, double l1,
                        const Penalty* pen, Py_ssize_t* stepped, Py_ssize_t* n_stepped,
                        Py_ssize_t row) noexcept nogil:
    """A row's first visit in update ``t``: its shrink, and it is listed as
    stepped."""
    if r.last[0] == t:
        r.last[0] = t + 1
        _shrink(r, H, lam, l1, pen)
        stepped[n_stepped[0]] = row
        n_stepped[0] += 1


cdef inline void _add(Block r, Py_ssize_t H, double x, const double* d,
                      const unsigned char* mask) noexcept nogil:
    """A token's gradient term on one row: ``v[h] += eta[h] x d[h]`` (only
    the weights that exist, ``mask`` not NULL)."""
    cdef Py_ssize_t h
    if mask == NULL:
        block_add(r.v, r.eta, x, d, H)
    else:
        for h in range(H):
            if mask[h]:
                r.v[h] += r.eta[h] * x * d[h]


cdef inline void _emit_held(double* em, Block r, Py_ssize_t w, const int* labels,
                            double x) noexcept nogil:
    """The emission scores of an attribute that holds only its trained
    labels' weights: ``em[labels[s]] += x v[s]``."""
    cdef Py_ssize_t s
    for s in range(w):
        em[labels[s]] += x * r.v[s]


cdef inline void _add_held(Block r, Py_ssize_t w, const int* labels, double x,
                           const double* d) noexcept nogil:
    """A token's gradient term on a row that holds only its trained labels'
    weights: ``v[s] += eta[s] x d[labels[s]]``."""
    cdef Py_ssize_t s
    for s in range(w):
        r.v[s] += r.eta[s] * x * d[labels[s]]


cdef double _update(const Layout* L, SequenceData ds, Py_ssize_t s, CRFContext ctx,
                    const LazyCore* c, const Penalty* pen, const RateRule* rule, long long t,
                    bint fit_intercept, Py_ssize_t* stepped) noexcept nogil:
    """One update on sequence ``s`` at time ``t``: the blocks read to ``t``,
    ``-log p(y|x)`` at ``theta(t)``, then line 5 of Algorithm 1; returns the
    loss (NaN at divergence)."""
    cdef Py_ssize_t H = ctx.n_states, A = ctx.n_attributes, j, h, i, tt, n_stepped = 0
    cdef Py_ssize_t trans_row = A, bias_row = A + H, T, w
    cdef long long r, kk, first = ds.offsets[s], ev = last_event(c, t)
    cdef const int* y = &ds.labels[0] + first
    cdef double lam = c.lam, l1 = c.l1, ll
    cdef double* d = ctx.tmp
    cdef double* em
    cdef const unsigned char* mk = ctx.allowed
    cdef Block row, bias = block_at(L, bias_row)
    # theta(t): the transitions (row i of H: from label i), the bias (read
    # even when not fitted) and the sequence's attribute rows
    for j in range(trans_row, bias_row + 1):
        touch(block_at(L, j), H, t, ev, lam, l1, c, pen, rule)
    for i in range(H):
        row = block_at(L, trans_row + i)
        for h in range(H):
            ctx.trans[i * H + h] = row.v[h]
    ctx.finish_transitions()
    T = ds.offsets[s + 1] - first
    ctx.T = <int>T
    for tt in range(T):
        em = ctx.emit + tt * H
        for h in range(H):
            em[h] = bias.v[h]
        r = first + tt
        for kk in range(ds.indptr[r], ds.indptr[r + 1]):
            j = ds.indices[kk]
            if j >= A:                 # an attribute unknown to the model
                continue
            row = block_at(L, j)
            w = width_of(L, j)
            touch(row, w, t, ev, lam, l1, c, pen, rule)
            if L.labels == NULL:
                block_emit(em, row.v, ds.data[kk], H)
            else:                      # (the row's trained labels only)
                _emit_held(em, row, w, L.labels + j * H, ds.data[kk])
    ctx.finish_emissions(NULL)
    ll = ctx.loglik(y)
    if not isfinite(ll):
        return ll
    # the step: each row shrunk at its first visit, then the tokens' terms;
    # the weights that do not exist (mask 0) get no gradient term and stay 0
    for tt in range(T):
        for h in range(H):
            d[h] = -ctx.marg[tt * H + h]
        d[y[tt]] += 1.0
        r = first + tt
        for kk in range(ds.indptr[r], ds.indptr[r + 1]):
            j = ds.indices[kk]
            if j >= A:
                continue
            row = block_at(L, j)
            if L.labels == NULL:
                _visit(row, H, t, lam, l1, pen, stepped, &n_stepped, j)
                _add(row, H, ds.data[kk], d, NULL if mk == NULL else mk + j * H)
            else:
                w = width_of(L, j)
                _visit(row, w, t, lam, l1, pen, stepped, &n_stepped, j)
                _add_held(row, w, L.labels + j * H, ds.data[kk], d)
        if fit_intercept:
            _visit(bias, H, t, lam, l1, pen, stepped, &n_stepped, bias_row)
            _add(bias, H, 1.0, d, NULL if mk == NULL else mk + bias_row * H)
    # the transitions: shrink and the edge marginals, then the observed pairs
    for i in range(H):
        row = block_at(L, trans_row + i)
        _shrink(row, H, lam, l1, pen)
        for h in range(H):
            row.v[h] -= row.eta[h] * (ctx.edge[i * H + h] if mk == NULL
                                      else ctx.edge[i * H + h] * mk[(A + i) * H + h])
        row.last[0] = t + 1
        stepped[n_stepped] = trans_row + i
        n_stepped += 1
    for tt in range(1, T):
        row = block_at(L, trans_row + y[tt - 1])
        h = y[tt]
        row.v[h] += row.eta[h] if mk == NULL else row.eta[h] * mk[(A + y[tt - 1]) * H + h]
    if Penalty is WithL1:            # the clips, after every gradient term
        for i in range(n_stepped):
            row = block_at(L, stepped[i])
            for h in range(width_of(L, stepped[i])):
                l1_clip(row, h)
    if c.b > 0 and (t + 1) % c.b == 0:   # the stepped rows take the event at once
        for i in range(n_stepped):
            apply_event(block_at(L, stepped[i]), width_of(L, stepped[i]),
                        ((t + 1) // c.b) & 1, c)
    return -ll


cdef double _pass(SequenceData ds, const Layout* L, CRFContext ctx, const LazyCore* c,
                  const Penalty* pen, const RateRule* rule, long long* t, bint fit_intercept,
                  Py_ssize_t* stepped) noexcept nogil:
    """One pass in the current order; returns the summed ``-log p(y|x)``, or
    NaN at divergence."""
    cdef Py_ssize_t k, s, nxt, A = ctx.n_attributes
    cdef long long kk
    cdef double loss, loss_sum = 0.0
    for k in range(ds.n_sequences):
        s = ds.order[k]
        if k + 1 < ds.n_sequences:
            # the attribute rows the next sequence touches (mostly cold;
            # written out here, not in a function: _prefetch.h says why)
            nxt = ds.order[k + 1]
            for kk in range(ds.indptr[ds.offsets[nxt]], ds.indptr[ds.offsets[nxt + 1]]):
                if ds.indices[kk] < A:
                    prefetch_block(L, ds.indices[kk])
        loss = _update(L, ds, s, ctx, c, pen, rule, t[0], fit_intercept, stepped)
        if not isfinite(loss):
            return loss
        loss_sum += loss
        t[0] += 1
    return loss_sum


cdef Py_ssize_t _max_row_nnz(SequenceData ds):
    """The most non-zeros a sequence has (its tokens' attributes)."""
    cdef Py_ssize_t s, most = 0
    for s in range(ds.n_sequences):
        most = max(most, ds.indptr[ds.offsets[s + 1]] - ds.indptr[ds.offsets[s]])
    return most


cdef object _epochs(SequenceData ds, const Layout* L, const Penalty* pen, const RateRule* rule,
                    state, LazyCore c, CRFContext ctx, int n_epochs, bint shuffle,
                    bint fit_intercept):
    """``psa_epochs`` for one penalty kind and rate rule."""
    cdef long long t = state.t
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef Py_ssize_t H = state.n_outputs, n_blocks = state.n_blocks
    cdef int _epoch, epochs_run = 0
    cdef double loss_sum = 0.0, t_start, t_flush
    cdef bint diverged = False
    # the rows an update steps: at most its non-zeros, the transitions, the bias
    cdef Py_ssize_t[::1] stepped = np.zeros(_max_row_nnz(ds) + H + 1, dtype=np.intp)
    result = PSAResult(epochs=0, diverged=False)
    with nogil:
        for _epoch in range(n_epochs):
            t_start = now_seconds()
            if shuffle:
                ds.shuffle(&rng)
            loss_sum = _pass(ds, L, ctx, &c, pen, rule, &t, fit_intercept, &stepped[0])
            diverged = not isfinite(loss_sum)
            t_flush = now_seconds()
            diverged |= not catch_up_all(L, n_blocks, -1, t, &c, pen, rule)
            with gil:
                result.flush_seconds.append(now_seconds() - t_flush)
            if diverged:
                break
            epochs_run += 1
            with gil:
                result.seconds.append(now_seconds() - t_start)
    state.t, state.seed = t, rng
    result.epochs, result.diverged = epochs_run, diverged
    result.mean_loss = loss_sum / ds.n_sequences if ds.n_sequences and not diverged else 0.0
    return result


def psa_epochs(SequenceData ds, state, options, *, int n_epochs=1, bint shuffle=True,
               bint fit_intercept=True, allowed=None):
    """Run ``n_epochs`` passes of PSA (Algorithm 1) over ``ds``.

    Parameters
    ----------
    ds : SequenceData (with labels)
    state : LazyStepState
        ``n_attributes + n_states + 1`` blocks of ``n_states`` weights
        (``CRFContext``'s layout); updated in place, ``t`` and ``seed``
        included. Every block is current at ``t`` on return.
    options : PSAOptions
        ``lam`` (L2 on every weight, bias and transitions included),
        ``period`` (``b``), ``psa_alpha``, ``psa_beta``, ``kappa``, and
        ``l1`` (the L1 strength; the state then needs L1 records).
    n_epochs : int
    shuffle, fit_intercept : bool
    allowed : uint8 ndarray of shape (n_weights,) or None
        The weights that exist (``CRFContext.set_allowed``: CRFsuite's
        feature set); the others get no gradient term and stay 0. None: all.
        A state made with ``exists`` (``LazyStepState.zeros``) holds only
        the attribute rows' existing weights, so a touch costs them alone.

    Returns
    -------
    result : PSAResult
        With ``mean_loss``, ``seconds`` (per pass, the end-of-pass catch-up
        included) and ``flush_seconds`` (that catch-up alone).
    """
    if not ds.has_labels:
        raise ValueError("labels are required for training")
    if not options.period >= 1:
        raise ValueError("period must be >= 1")
    cdef Py_ssize_t H = state.n_outputs
    state.prepare()
    if state.n_blocks < H + 1:
        raise ValueError("state does not match n_states")
    if options.l1 > 0 and not state.has_l1:
        raise ValueError("the L1 penalty needs L1 records (LazyStepState.with_l1)")
    cdef LazyCore c = make_core(options, state)
    cdef Layout L = layout_of(state)
    cdef SeriesRate series
    cdef Log1pRate general
    cdef L2Only plain
    cdef WithL1 with_l1
    cdef CRFContext ctx = CRFContext(H, 1, ds.max_len, state.n_blocks - H - 1)
    ctx.set_allowed(allowed)
    cdef bint small = c.rate_max < 1e-4
    if state.has_l1:
        if small:
            return _epochs(ds, &L, &with_l1, &series, state, c, ctx, n_epochs, shuffle,
                           fit_intercept)
        return _epochs(ds, &L, &with_l1, &general, state, c, ctx, n_epochs, shuffle,
                       fit_intercept)
    if small:
        return _epochs(ds, &L, &plain, &series, state, c, ctx, n_epochs, shuffle,
                       fit_intercept)
    return _epochs(ds, &L, &plain, &general, state, c, ctx, n_epochs, shuffle, fit_intercept)
