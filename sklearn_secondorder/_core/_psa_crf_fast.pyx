"""Periodic Step-size Adaptation (PSA) on the CRF core, on the shared lazy core.

PSA (Hsu, Chang, Huang and Lee, NIPS 2009 workshop, Algorithm 1): SGD with a
step size per parameter, ``theta <- (1 - eta lam) theta + eta o grad log p(y|x)``
(the gradient of ``-log p(y|x) + lam/2 ||theta||^2``), one update per
sequence; every ``2b`` updates, from the snapshots ``theta(t)``,
``theta(t+b)``, ``theta(t+2b)``, each step size is adapted (Eqs. 6-10).
Windows are aligned on the global update counter (``t = 0, 2b, 4b, ...``).

The weights live in a ``LazyStepWeights`` (``_weights.pyx``: per-coordinate
steps, exact lazy L2 decay, lazy window-end adaptation, whole idle windows in
closed form), the same core as the linear PSA kernel (``_psa_fast.pyx``).
Blocks of ``H = n_states`` weights share their touch times, in the flat CRF
layout: the ``A`` attribute rows of the state block, the ``H`` rows
(``from``) of the transition matrix, then the bias. All of them carry the L2
(as CRFsuite's; no ``unregularized`` block). An update on a sequence touches
the rows of the attributes present, the transitions and (with
``fit_intercept``) the bias: they are caught up to ``t`` as the emissions are
read (``lazy_catch_up``), stepped, and their ``last`` set to ``t + 1``; every
block is caught up at the end of each pass (``catch_up_all``). The result is
the dense algorithm's to rounding (tests compare with a NumPy
re-implementation).

The sweep. The transition and bias blocks, read by every sequence, are swept
at each event (``LazyStepWeights.sweep``). The attribute rows are not: a
sequence touches hundreds of them (``b`` sequences, thousands), most of them
rare, so keeping them in a sweep list for a few idle sweeps costs more than it
saves (measured on CoNLL-2000: about 2.3 s per pass instead of 1.5 s); they
are caught up at their next touch, whole idle windows in closed form (the
linear kernel's lazy schedule), and their state is prefetched a sequence
ahead (``prefetch_block``). Both paths are ``catch_up``'s arithmetic, so the
results do not depend on it.

``LazyStepWeights`` stores each weight next to its step size (a strided
buffer), so the emissions and transition scores are written into the
``CRFContext`` buffers here rather than by ``load_emissions`` /
``load_transitions`` (which read a contiguous ``CRFWeights``); the rest of the
inference (forward-backward, marginals) is the context's.
"""
import numpy as np
from libc.math cimport exp, isfinite, INFINITY
from libc.stdlib cimport malloc, calloc, free

from ._crf_fast cimport SequenceData, CRFContext
from ._weights cimport (LazyStepWeights, lazy_catch_up, prefetch_block, row_emit,
                       row_shrink, row_step)
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC


cdef long long NO_SWEEP = 1LL << 62
# the swept blocks (transitions, bias) are touched by every update: a bias not
# fitted leaves the sweep after MAX_IDLE + 1 sweeps (then caught up lazily)
cdef int MAX_IDLE = 3


cdef inline void _prefetch_sequence(SequenceData ds, Py_ssize_t s, LazyStepWeights w,
                                    Py_ssize_t A) noexcept nogil:
    """Prefetch the state of the attribute rows a sequence will touch (mostly
    cold: rare attributes)."""
    cdef long long kk
    for kk in range(ds.indptr[ds.offsets[s]], ds.indptr[ds.offsets[s + 1]]):
        if ds.indices[kk] < A:
            prefetch_block(w, ds.indices[kk])


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + 1e-9 * <double>ts.tv_nsec


def new_psa_state(Py_ssize_t n_attributes, int n_states, double eta0):
    """A fresh PSA state for ``n_attributes`` attribute rows and ``n_states``
    labels: zero weights, every step size ``eta0``.

    Blocks: the attributes, the ``n_states`` transition rows, the bias
    (``n_attributes + n_states + 1`` blocks of ``n_states`` weights, the flat
    CRF layout).
    """
    n_blocks = n_attributes + n_states + 1
    size = n_blocks * n_states
    ve = np.zeros((size, 2))
    ve[:, 1] = eta0
    return {
        # (np.full, not np.zeros: the pages are written here, not at first use)
        "ve": ve, "snaps": np.full((size, 2), 0.0),
        "last": np.zeros(n_blocks, dtype=np.int64),
        "next_event": np.zeros(n_blocks, dtype=np.int64),
        "t": 0, "seed": 1,
    }


def psa_epochs(SequenceData ds, dict state, *, int n_states, double lam=0.0,
               long long period=10, double psa_alpha=0.9999, double psa_beta=0.99,
               double kappa=0.9, int n_epochs=1, bint shuffle=True, bint fit_intercept=True):
    """Run ``n_epochs`` passes of PSA (Algorithm 1) over ``ds``.

    Parameters
    ----------
    ds : SequenceData (with labels)
    state : dict
        ``ve`` (weights in column 0, in the flat CRF layout, and their step
        sizes in column 1) and ``snaps`` (window snapshots), float64 of shape
        ``(n_blocks * n_states, 2)`` with ``n_blocks = n_attributes +
        n_states + 1``; ``last`` and ``next_event`` (int64, ``n_blocks``);
        ``t`` (the global update counter, windows are aligned on it) and
        ``seed`` (shuffling RNG state). Arrays are updated in place; ``t``
        and ``seed`` are returned. Every block is current at ``t`` on return.
    n_states : int
        ``H`` (labels; latent states are not supported).
    lam : float
        L2 strength (every weight, bias and transitions included).
    period, psa_alpha, psa_beta, kappa
        The paper's ``b``, ``alpha``, ``beta``, ``kappa``.

    Returns
    -------
    info : dict
        ``t``, ``seed``, ``epochs``, ``mean_loss`` (last pass, pre-step),
        ``diverged``, ``seconds`` (per pass, the end-of-pass catch-up of every
        block included), ``flush_seconds`` (that catch-up alone),
        ``min_factor`` / ``max_factor`` and ``n_adaptations``.
    """
    if not ds.has_labels:
        raise ValueError("labels are required for training")
    if not period >= 1:
        raise ValueError("period must be >= 1")
    cdef int H = n_states
    cdef LazyStepWeights w = LazyStepWeights(
        state["ve"], state["snaps"], state["last"], state["next_event"], H, lam, period,
        psa_alpha, psa_beta, kappa, -1)
    cdef Py_ssize_t n_blocks = w.n_blocks
    cdef Py_ssize_t A = n_blocks - H - 1
    if A < 0:
        raise ValueError("state does not match n_states")
    cdef Py_ssize_t trans_row = A, bias_row = A + H
    cdef CRFContext ctx = CRFContext(H, 1, ds.max_len)
    cdef long long t = state["t"]
    cdef unsigned int rng = state["seed"] if state["seed"] != 0 else 1
    # the swept blocks (transitions, bias): those for the next event (`due`),
    # and those to keep
    cdef Py_ssize_t* due = <Py_ssize_t*>malloc((H + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t* keep = <Py_ssize_t*>malloc((H + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t* swap
    cdef unsigned char* idle = <unsigned char*>calloc(n_blocks, sizeof(unsigned char))
    if due == NULL or keep == NULL or idle == NULL:
        free(due)
        free(keep)
        free(idle)
        raise MemoryError()
    cdef Py_ssize_t n_due = 0
    cdef long long b = period
    cdef long long next_sweep = (t // b + 1) * b
    cdef long long* last = w.last
    cdef long long* next_event = w.next_event
    cdef double* v = w.v
    cdef double* eta = w.eta
    cdef Py_ssize_t k, s, j, p, p0, row
    cdef long long r, kk, first
    cdef int tt, h, T, i, epoch, epochs_run = 0
    cdef double ll, loss_sum = 0.0, c, x, e, m, t_start, t_flush
    cdef bint diverged = False
    cdef const int* lab = &ds.labels[0]
    cdef const int* y
    cdef double* d
    cdef double* em
    cdef const double* vb
    seconds = []
    flush_seconds = []
    try:
        with nogil:
            for epoch in range(n_epochs):
                t_start = _now()
                if shuffle:
                    ds.shuffle(&rng)
                loss_sum = 0.0
                if ds.n_sequences > 0:
                    _prefetch_sequence(ds, ds.order[0], w, A)
                for k in range(ds.n_sequences):
                    s = ds.order[k]
                    y = lab + ds.offsets[s]
                    first = ds.offsets[s]
                    T = <int>(ds.offsets[s + 1] - first)
                    if k + 1 < ds.n_sequences:
                        _prefetch_sequence(ds, ds.order[k + 1], w, A)
                    # 0. at an event time, apply the event to the swept blocks
                    #    (every listed block has next_event == next_sweep)
                    if t == next_sweep:
                        n_due = w.sweep(due, n_due, keep, idle, MAX_IDLE, t)
                        swap = due
                        due = keep
                        keep = swap
                        next_sweep += b
                    # 1. catch the transitions and the bias (read even when it is
                    #    not fitted) up to t
                    for row in range(trans_row, bias_row + 1):
                        if next_event[row] <= t:
                            w.catch_up(row, t)
                            if n_due <= H:
                                due[n_due] = row
                                n_due += 1
                                idle[row] = 0
                        else:
                            lazy_catch_up(w, row, t)
                    # transition scores (CRFContext.load_transitions on the strided v)
                    p0 = trans_row * H
                    m = -INFINITY
                    for i in range(H * H):
                        ctx.trans[i] = v[2 * (p0 + i)]
                        if ctx.trans[i] > m:
                            m = ctx.trans[i]
                    ctx.trans_max = m
                    for i in range(H * H):
                        ctx.exp_trans[i] = exp(ctx.trans[i] - m)
                    # 2. emissions at theta(t), catching each attribute row up
                    #    to t as it is read (CRFContext.load_emissions)
                    ctx.T = T
                    vb = v + 2 * bias_row * H
                    for tt in range(T):
                        em = ctx.emit + <Py_ssize_t>tt * H
                        for h in range(H):
                            em[h] = vb[2 * h]
                        r = first + tt
                        for kk in range(ds.indptr[r], ds.indptr[r + 1]):
                            j = ds.indices[kk]
                            if j >= A:               # attribute unknown to the model
                                continue
                            lazy_catch_up(w, j, t)
                            row_emit(em, v + 2 * j * H, ds.data[kk], H)
                    ctx.finish_emissions()
                    ll = ctx.loglik(y)
                    if not isfinite(ll):
                        diverged = True
                        break
                    loss_sum -= ll
                    # 3. theta(t+1) = (1 - eta lam) theta(t) + eta o grad log p
                    #    (Alg. 1, line 5): the shrink at a row's first visit in
                    #    this update (last == t), then its tokens' terms
                    d = ctx.tmp
                    for tt in range(T):
                        for h in range(H):
                            d[h] = -ctx.marg[<Py_ssize_t>tt * H + h]
                        d[y[tt]] += 1.0
                        r = first + tt
                        for kk in range(ds.indptr[r], ds.indptr[r + 1]):
                            j = ds.indices[kk]
                            if j >= A:
                                continue
                            if last[j] == t:
                                last[j] = t + 1
                                row_shrink(v + 2 * j * H, lam, H)
                            row_step(v + 2 * j * H, ds.data[kk], d, H)
                        if fit_intercept:
                            if last[bias_row] == t:
                                last[bias_row] = t + 1
                                row_shrink(v + 2 * bias_row * H, lam, H)
                            # (eta x d with x = 1: the same product as eta d)
                            row_step(v + 2 * bias_row * H, 1.0, d, H)
                    p0 = trans_row * H
                    for i in range(H * H):
                        p = p0 + i
                        e = eta[2 * p]
                        c = 1.0 - e * lam
                        v[2 * p] = (c if c > 0.0 else 0.0) * v[2 * p] - e * ctx.edge[i]
                    for tt in range(1, T):
                        p = p0 + y[tt - 1] * H + y[tt]
                        v[2 * p] += eta[2 * p]
                    for row in range(trans_row, trans_row + H):
                        last[row] = t + 1
                    t += 1
                t_flush = _now()
                # every block current at t; its next event is the first multiple of b > t
                w.catch_up_all(t)
                with gil:
                    flush_seconds.append(_now() - t_flush)
                next_sweep = (t // b + 1) * b
                if diverged:
                    break
                epochs_run += 1
                with gil:
                    seconds.append(_now() - t_start)
                if not w.is_finite():
                    diverged = True
                    break
    finally:
        free(due)
        free(keep)
        free(idle)
    return {"t": t, "seed": rng, "epochs": epochs_run,
            "mean_loss": loss_sum / ds.n_sequences if ds.n_sequences else 0.0,
            "diverged": diverged, "seconds": seconds, "flush_seconds": flush_seconds,
            "min_factor": w.min_factor, "max_factor": w.max_factor,
            "n_adaptations": w.n_adaptations}
