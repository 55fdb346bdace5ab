"""Periodic Step-size Adaptation (PSA) for CRFs, on the shared lazy core.

PSA (Hsu, Chang, Huang and Lee, NIPS 2009 workshop, Algorithm 1): SGD with a
step size per parameter, ``theta <- (1 - eta lam) theta + eta o grad log p(y|x)``
(the gradient of ``-log p(y|x) + lam/2 ||theta||^2``), one update per
sequence; every ``2b`` updates, from the snapshots ``theta(t)``,
``theta(t+b)``, ``theta(t+2b)``, each step size is adapted (Eqs. 6-10,
``_psa_math.h``). Windows are aligned on the global update counter
(``t = 0, 2b, 4b, ...``).

The weights live in a ``LazyStepWeights`` (``_weights.pyx``: per-coordinate
steps, exact lazy L2 decay, lazy window-end adaptation, whole idle windows in
closed form), the same core as the linear PSA kernel (``_psa_fast.pyx``).
Blocks of ``H = n_states`` weights share their touch times, in
``CRFContext``'s layout: the ``A`` attribute rows, the ``H`` transition rows
(``from``), then the bias. All of them carry the L2 (as CRFsuite's). An
update on a sequence touches the rows of the attributes present, the
transitions and (with ``fit_intercept``) the bias: they are caught up to
``t`` as the emissions are read (``lazy_catch_up``), stepped, and their
``last`` set to ``t + 1``; every block is caught up at the end of each pass
(``catch_up_all``). The result is the dense algorithm's to rounding (tests
compare with a NumPy re-implementation).

The sweep. The transition and bias blocks, read by every sequence, are swept
at each event (``LazyStepWeights.sweep``). The attribute rows are not: a
sequence touches hundreds of them (``b`` sequences, thousands), most of them
rare, so keeping them in a sweep list for a few idle sweeps costs more than it
saves; they are caught up at their next touch, whole idle windows in closed
form (the linear kernel's lazy schedule), and their state is prefetched a
sequence ahead (``prefetch_block``). Both paths are ``catch_up``'s
arithmetic, so the results do not depend on it.

``LazyStepWeights`` stores each weight next to its step size (a strided
buffer), so the emissions and transition scores are written into the
``CRFContext`` buffers here rather than by ``load_emissions`` /
``load_transitions`` (which read a contiguous ``ScaledWeights``); the rest
of the inference (forward-backward, marginals) is the context's.

The L1 penalty (``PSAOptions.l1``, CRFsuite's ``c1``): Tsuruoka et al.'s
cumulative penalty on each weight's own steps (``LazyStepWeights``), on every
block as the L2 (the bias and transitions included). A touched row is caught
up (decay and penalty owed) as it is read; the step shrinks it and adds the
step's penalty to what it is owed at its first visit, and clips it once the
sequence's gradient terms are in (``_step`` with ``with_l1``). The transition and bias
rows are then caught up lazily like the others (``_shared_rows_to_l1``: no
sweep list, the sweep carries no L1).
"""
from libc.math cimport isfinite
from libc.stdlib cimport malloc, calloc, free

from ._crf_infer cimport CRFContext
from ._dataset cimport SequenceData
from ._numeric cimport now_seconds
from ._weights cimport (
    LazyStepWeights,
    l1_clip,
    lazy_catch_up,
    lazy_catch_up_l1,
    prefetch_block,
    row_emit,
    row_shrink,
    row_step,
    row_step_masked,
)
from ._weights import PSAResult

# the swept blocks (transitions, bias) are touched by every update: a bias not
# fitted leaves the sweep after MAX_IDLE + 1 sweeps (then caught up lazily)
cdef int MAX_IDLE = 3


cdef struct SweepList:
    # the swept blocks (transitions, bias): those due at the next event, and
    # the buffer the kept ones are written to
    Py_ssize_t* due
    Py_ssize_t* keep
    unsigned char* idle
    Py_ssize_t n_due
    long long next_sweep


cdef inline void _prefetch_sequence(SequenceData ds, Py_ssize_t s, LazyStepWeights w,
                                    Py_ssize_t A) noexcept nogil:
    """Prefetch the state of the attribute rows a sequence will touch (mostly
    cold: rare attributes)."""
    cdef long long kk
    for kk in range(ds.indptr[ds.offsets[s]], ds.indptr[ds.offsets[s + 1]]):
        if ds.indices[kk] < A:
            prefetch_block(w, ds.indices[kk])


cdef inline void _load_transitions(CRFContext ctx, const double* v) noexcept nogil:
    """The transition scores from the strided weights ``v`` (value, step
    interleaved), then their exponentials (``CRFContext.finish_transitions``)."""
    cdef int i, H = ctx.n_states
    for i in range(H * H):
        ctx.trans[i] = v[2 * i]
    ctx.finish_transitions()


cdef void _shared_rows_to(LazyStepWeights w, SweepList* sw, CRFContext ctx, long long t,
                          long long b) noexcept nogil:
    """Bring the transition and bias rows to ``t`` (sweeping them at an event)
    and load the transition scores (``CRFContext.load_transitions`` on the
    strided weights)."""
    cdef int H = ctx.n_states
    cdef Py_ssize_t row, trans_row = ctx.n_attributes, bias_row = trans_row + H
    cdef Py_ssize_t* swap
    cdef const double* v = w.v + 2 * trans_row * H
    if t == sw.next_sweep:             # every listed block has next_event == t
        sw.n_due = w.sweep(sw.due, sw.n_due, sw.keep, sw.idle, MAX_IDLE, t)
        swap = sw.due
        sw.due = sw.keep
        sw.keep = swap
        sw.next_sweep += b
    for row in range(trans_row, bias_row + 1):   # (the bias is read even when not fitted)
        if w.next_event[2 * row] <= t:
            w.catch_up(row, t)
            if sw.n_due <= H:
                sw.due[sw.n_due] = row
                sw.n_due += 1
                sw.idle[row] = 0
        else:
            lazy_catch_up(w, row, t)
    _load_transitions(ctx, v)


cdef void _shared_rows_to_l1(LazyStepWeights w, CRFContext ctx, long long t) noexcept nogil:
    """``_shared_rows_to`` with the L1 penalty: the transition and bias rows
    caught up lazily (``lazy_catch_up_l1``; no sweep list), the transition
    scores loaded."""
    cdef int H = ctx.n_states
    cdef Py_ssize_t row, trans_row = ctx.n_attributes, bias_row = trans_row + H
    cdef const double* v = w.v + 2 * trans_row * H
    for row in range(trans_row, bias_row + 1):
        lazy_catch_up_l1(w, row, t)
    _load_transitions(ctx, v)


cdef inline void _emissions_at(LazyStepWeights w, SequenceData ds, Py_ssize_t s,
                               CRFContext ctx, long long t, bint with_l1) noexcept nogil:
    """Emission scores at ``theta(t)``, catching each attribute row up to ``t``
    as it is read (``CRFContext.load_emissions`` on the strided weights;
    ``lazy_catch_up_l1`` with the L1 penalty, ``with_l1`` a caller constant)."""
    cdef int H = ctx.n_states, tt, h
    cdef Py_ssize_t j, A = ctx.n_attributes
    cdef long long r, kk, first = ds.offsets[s]
    cdef const double* vb = w.v + 2 * (A + H) * H
    cdef double* em
    ctx.T = <int>(ds.offsets[s + 1] - first)
    for tt in range(ctx.T):
        em = ctx.emit + <Py_ssize_t>tt * H
        for h in range(H):
            em[h] = vb[2 * h]
        r = first + tt
        for kk in range(ds.indptr[r], ds.indptr[r + 1]):
            j = ds.indices[kk]
            if j >= A:                 # attribute unknown to the model
                continue
            if with_l1:
                lazy_catch_up_l1(w, j, t)
            else:
                lazy_catch_up(w, j, t)
            row_emit(em, w.v + 2 * j * H, ds.data[kk], H)


cdef inline void _step(LazyStepWeights w, SequenceData ds, Py_ssize_t s, CRFContext ctx,
                       long long t, bint fit_intercept, bint with_l1) noexcept nogil:
    """``theta(t+1) = (1 - eta lam) theta(t) + eta o grad log p`` (Algorithm 1,
    line 5), after ``loglik``: each row's shrink at its first visit in this
    update (``last == t``), then its tokens' terms; the transitions last.

    With ``with_l1`` (a constant at each caller, so the L2 path compiles
    without it), a row's first visit also adds the step's ``eta C`` to what it
    is owed (``u`` and ``q`` shrinking with it, ``_shrink_row_l1``), and after
    every gradient term of the sequence each touched weight is clipped
    (``l1_clip``; clipping twice is clipping once).
    """
    cdef int H = ctx.n_states, T = ctx.T, tt, h, i
    cdef Py_ssize_t j, p, A = ctx.n_attributes, bias_row = A + H, p0 = A * H
    cdef long long r, kk, first = ds.offsets[s]
    cdef const int* y = &ds.labels[0] + first
    cdef double lam = w.lam, c, e, l1 = w.l1
    cdef double* v = w.v
    cdef double* dl = w.l1d
    cdef double* d = ctx.tmp
    cdef const double* eta = w.eta
    cdef long long* last = w.last
    # the weights that exist (CRFContext.set_allowed; NULL: all): the others
    # get no gradient term, so they stay 0 (their shrink and window ends are
    # of 0, and 0/0 keeps their step)
    cdef const unsigned char* mk = ctx.allowed
    for tt in range(T):
        for h in range(H):
            d[h] = -ctx.marg[<Py_ssize_t>tt * H + h]
        d[y[tt]] += 1.0
        r = first + tt
        for kk in range(ds.indptr[r], ds.indptr[r + 1]):
            j = ds.indices[kk]
            if j >= A:
                continue
            if last[2 * j] == t:
                last[2 * j] = t + 1
                _shrink_row(w, j * H, H, lam, l1, with_l1)
            if mk != NULL:
                row_step_masked(v + 2 * j * H, ds.data[kk], d, mk + j * H, H)
            else:
                row_step(v + 2 * j * H, ds.data[kk], d, H)
        if fit_intercept:
            if last[2 * bias_row] == t:
                last[2 * bias_row] = t + 1
                _shrink_row(w, bias_row * H, H, lam, l1, with_l1)
            if mk != NULL:
                row_step_masked(v + 2 * bias_row * H, 1.0, d, mk + bias_row * H, H)
            else:
                row_step(v + 2 * bias_row * H, 1.0, d, H)   # (x = 1: the product eta d)
    for i in range(H * H):
        p = p0 + i
        e = eta[2 * p]
        c = 1.0 - e * lam
        c = c if c > 0.0 else 0.0
        v[2 * p] = c * v[2 * p] - e * (ctx.edge[i] if mk == NULL else ctx.edge[i] * mk[p])
        if with_l1:
            dl[2 * p] = dl[2 * p] * c + e * l1
            dl[2 * p + 1] = dl[2 * p + 1] * c + e * l1
    for tt in range(1, T):
        p = p0 + y[tt - 1] * H + y[tt]
        v[2 * p] += eta[2 * p] if mk == NULL else eta[2 * p] * mk[p]
    for j in range(A, A + H):
        last[2 * j] = t + 1
    if not with_l1:
        return
    # the clips, after every gradient term of the sequence
    for i in range(H * H):
        l1_clip(w, p0 + i)
    if fit_intercept:
        for h in range(H):
            l1_clip(w, bias_row * H + h)
    for kk in range(ds.indptr[first], ds.indptr[first + T]):
        j = ds.indices[kk]
        if j < A:
            for h in range(H):
                l1_clip(w, j * H + h)


cdef inline void _shrink_row(LazyStepWeights w, Py_ssize_t p0, int H, double lam, double l1,
                             bint with_l1) noexcept nogil:
    if with_l1:
        _shrink_row_l1(w, p0, H, lam, l1)
    else:
        row_shrink(w.v + 2 * p0, lam, H)


cdef inline void _shrink_row_l1(LazyStepWeights w, Py_ssize_t p0, int H, double lam,
                                double l1) noexcept nogil:
    """One step's shrink of the ``H`` weights from ``p0`` (``row_shrink``) and its
    penalty added to what they are owed (clipped later)."""
    cdef int h
    cdef Py_ssize_t p
    cdef double c
    for h in range(H):
        p = p0 + h
        c = 1.0 - w.eta[2 * p] * lam
        c = c if c > 0.0 else 0.0
        w.v[2 * p] *= c
        w.l1d[2 * p] = w.l1d[2 * p] * c + w.eta[2 * p] * l1
        w.l1d[2 * p + 1] = w.l1d[2 * p + 1] * c + w.eta[2 * p] * l1


cdef double _pass(SequenceData ds, LazyStepWeights w, CRFContext ctx, SweepList* sw,
                  long long* t, long long b, bint fit_intercept) noexcept nogil:
    """One pass in the current order; returns the summed ``-log p(y|x)``, or
    NaN at divergence."""
    cdef Py_ssize_t k, s, A = ctx.n_attributes
    cdef double ll, loss_sum = 0.0
    if ds.n_sequences > 0:
        _prefetch_sequence(ds, ds.order[0], w, A)
    for k in range(ds.n_sequences):
        s = ds.order[k]
        if k + 1 < ds.n_sequences:
            _prefetch_sequence(ds, ds.order[k + 1], w, A)
        if w.has_l1:
            _shared_rows_to_l1(w, ctx, t[0])
            _emissions_at(w, ds, s, ctx, t[0], True)
        else:
            _shared_rows_to(w, sw, ctx, t[0], b)
            _emissions_at(w, ds, s, ctx, t[0], False)
        ctx.finish_emissions(NULL)
        ll = ctx.loglik(&ds.labels[0] + ds.offsets[s])
        if not isfinite(ll):
            return ll
        loss_sum -= ll
        if w.has_l1:
            _step(w, ds, s, ctx, t[0], fit_intercept, True)
        else:
            _step(w, ds, s, ctx, t[0], fit_intercept, False)
        t[0] += 1
    return loss_sum


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
        ``l1`` (the L1 strength; the state then needs its ``l1`` array).
    n_epochs : int
    shuffle, fit_intercept : bool
    allowed : uint8 ndarray of shape (n_weights,) or None
        The weights that exist (``CRFContext.set_allowed``: CRFsuite's
        feature set); the others get no gradient term and stay 0. None: all.

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
    cdef int H = state.n_outputs
    cdef LazyStepWeights w = LazyStepWeights(state, options, -1)
    if w.n_blocks < H + 1:
        raise ValueError("state does not match n_states")
    cdef CRFContext ctx = CRFContext(H, 1, ds.max_len, w.n_blocks - H - 1)
    ctx.set_allowed(allowed)
    cdef long long t = state.t, b = options.period
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef SweepList sw
    sw.due = <Py_ssize_t*>malloc((H + 1) * sizeof(Py_ssize_t))
    sw.keep = <Py_ssize_t*>malloc((H + 1) * sizeof(Py_ssize_t))
    sw.idle = <unsigned char*>calloc(w.n_blocks, sizeof(unsigned char))
    sw.n_due = 0
    sw.next_sweep = (t // b + 1) * b
    cdef int _epoch, epochs_run = 0
    cdef double loss_sum = 0.0, t_start, t_flush
    cdef bint diverged = False
    result = PSAResult.of(w, 0, False)
    try:
        if sw.due == NULL or sw.keep == NULL or sw.idle == NULL:
            raise MemoryError()
        with nogil:
            for _epoch in range(n_epochs):
                t_start = now_seconds()
                if shuffle:
                    ds.shuffle(&rng)
                loss_sum = _pass(ds, w, ctx, &sw, &t, b, fit_intercept)
                diverged = not isfinite(loss_sum)
                t_flush = now_seconds()
                # every block current at t; its next event the first multiple of b > t
                w.catch_up_all(t)
                with gil:
                    result.flush_seconds.append(now_seconds() - t_flush)
                sw.next_sweep = (t // b + 1) * b
                if diverged:
                    break
                epochs_run += 1
                with gil:
                    result.seconds.append(now_seconds() - t_start)
                if not w.is_finite():
                    diverged = True
                    break
    finally:
        free(sw.due)
        free(sw.keep)
        free(sw.idle)
    state.t, state.seed = t, rng
    mean_loss = loss_sum / ds.n_sequences if ds.n_sequences and not diverged else 0.0
    return PSAResult.of(w, epochs_run, diverged, mean_loss=mean_loss, seconds=result.seconds,
                        flush_seconds=result.flush_seconds)
