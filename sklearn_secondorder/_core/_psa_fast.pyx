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

``SharedPass`` is the same pass on several threads sharing the one state
(``n_jobs``): each owns the blocks of a share of the cache lines, the rows
go by in rounds scored at the round's start and stepped in order, every
thread on its own blocks (``doc/core.md``, "Threads on one state").
"""
from libc.math cimport isfinite

from ._binary_gaps cimport GapConsts, binary_gaps
from ._block_ops cimport block_scale, block_shrink_factors
from ._dataset cimport RowDataset, fetch_row, row_span, row_value
from ._lazy_records cimport Block, Layout, fixed_block_at
from ._lazy_steps cimport (L2Only, LazyCore, Log1pRate, Penalty, RateRule, SeriesRate, WithL1,
                           apply_event, catch_up_all, gap_consts, gaps_apply, last_event,
                           layout_of, make_core, step_weight, touch)
from ._losses cimport Loss, softmax_loss
from ._numeric cimport bound_step, clip_dloss
from ._prefetch cimport prefetch_fixed_block, prefetch_row
from ._shared_state cimport (Barrier, barrier_abort, barrier_init, barrier_wait,
                             line_shift_of, owner_of)

# the lazy core's event walk inlined into this module's passes, by name
cdef extern from "_lazy_inline.h":
    pass

from ._lazy_steps import PSAResult, catch_up_state

import numpy as np


#: The records' bytes from which a pass prefetches the next row's blocks: a
#: smaller model stays in the core's L2 cache, where the prefetches only
#: cost (a9a's 124 blocks, w8a's 301; benchmarks/RESULTS.md, "Figures moved
#: out of the core's comments").
PREFETCH_MIN_BYTES = 1 << 18


cdef struct RowWork:
    # what one call's row updates share
    Py_ssize_t d             # features; block d is the intercept
    bint fit_intercept
    double* scores           # (K,) work buffers
    double* grad
    int* cross               # (the longest row) a row's blocks that cross an event,
    int* left                # and those of them binary_gaps leaves to walk
    double* margins          # (n_samples, K) each row's scores before its update, or NULL
    bint prefetch_blocks     # the next row's blocks prefetched (a model beyond the L2 cache)
    bint bound_steps         # regression: a step moves the row's prediction at most to y


cdef inline void _gradient(const double* scores, double* grad, Py_ssize_t K, Loss loss,
                           double y, double sw) noexcept nogil:
    """The loss derivative at a row's ``scores``, times its weight ``sw``:
    the binary loss's (clipped), or the multinomial log loss's for class
    ``y``."""
    cdef Py_ssize_t k
    if K == 1:
        grad[0] = sw * clip_dloss(loss.dloss(scores[0], y))
    else:
        softmax_loss(scores, <int>y, <int>K, grad)
        for k in range(K):
            grad[k] *= sw


cdef inline void _bound_row(double* grad, double p, double y, const double* x,
                            const int* ind, int nnz, const char* eta, Py_ssize_t stride,
                            double h) noexcept nogil:
    """Regression's bounded step (``_numeric.bound_step``) on a row whose
    weights' step sizes are the floats at ``eta + ind[q] * stride`` (the
    lazy records, or the eager pass's array); ``h`` starts at the
    intercept's step (0 without an intercept)."""
    cdef int q
    for q in range(nnz):
        h += (<const float*>(eta + ind[q] * stride))[0] * x[q] * x[q]
    bound_step(grad, p, y, h)


cdef inline void _row_gradient(RowDataset ds, Py_ssize_t i, const RowWork* wk, double* scores,
                               double* grad, Py_ssize_t K, Loss loss, double y, double sw,
                               const double* x, const int* ind, int nnz, const char* eta,
                               Py_ssize_t eta_stride, const float* icp_eta) noexcept nogil:
    """Row ``i``'s update direction from its ``scores``: the scores kept
    (``wk.margins``), the loss derivative at them (``_gradient``) into
    ``grad``, and regression's bound on the step (``_bound_row``, the step
    sizes at ``eta`` and the intercept's at ``icp_eta``)."""
    cdef Py_ssize_t k
    if wk.margins != NULL:
        for k in range(K):
            wk.margins[ds.order_ptr[i] * K + k] = scores[k]
    _gradient(scores, grad, K, loss, y, sw)
    if K == 1 and wk.bound_steps:
        _bound_row(grad, scores[0], y, x, ind, nnz, eta, eta_stride,
                   icp_eta[0] if wk.fit_intercept else 0.0)


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
    cdef Block row, icp = fixed_block_at(L, wk.d)
    cdef double lam = c.lam, l1 = c.l1
    cdef double* scores = wk.scores
    cdef double* grad = wk.grad
    cdef bint mid
    cdef bint gaps = ds.is_sparse and gaps_apply(c, L)
    cdef GapConsts gc = gap_consts(c, L)
    cdef Py_ssize_t n_left, n_cross
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
            if wk.prefetch_blocks:
                nxt = ds.order_ptr[i + 1]
                for kk in range(ds.indptr_ptr[nxt], ds.indptr_ptr[nxt + 1]):
                    prefetch_fixed_block(L, ds.indices_ptr[kk])
        # theta(t) on the row's blocks, then the scores (accumulated in a
        # local: a store to a record could alias scores[k])
        if K == 1 and Penalty is L2Only and RateRule is SeriesRate and gaps:
            # a binary row's gaps eight at a time, branch-free (_binary_gaps.h)
            n_cross = 0
            for q in range(nnz):
                row = fixed_block_at(L, ind[q])
                if row.last[0] < ev:
                    wk.cross[n_cross] = ind[q]
                    n_cross += 1
                else:
                    touch(row, K, t, ev, lam, l1, c, pen, rule)
            n_left = binary_gaps(L.base, wk.cross, n_cross, <double>t, <double>ev, &gc, wk.left)
            for q in range(n_left):
                touch(fixed_block_at(L, wk.left[q]), K, t, ev, lam, l1, c, pen, rule)
        else:
            for q in range(nnz):
                touch(fixed_block_at(L, ind[q]), K, t, ev, lam, l1, c, pen, rule)
        if wk.fit_intercept:
            touch(icp, K, t, ev, 0.0, 0.0, c, pen, rule)
        for k in range(K):
            s = icp.v[k] if wk.fit_intercept else 0.0
            for q in range(nnz):
                s += fixed_block_at(L, ind[q]).v[k] * x[q]
            scores[k] = s
        # the loss derivative at theta(t), then line 5 of Algorithm 1
        _row_gradient(ds, i, wk, scores, grad, K, loss, y, sw, x, ind, nnz, L.base + L.off_eta,
                      L.stride, icp.eta)
        if K == 1 and grad[0] == 0.0:
            # a zero gradient (a hinge-type loss past its margin): the update
            # is the shrink alone, which is an idle step of the lazy decay,
            # so the blocks stay current at t and a later catch-up applies it
            t += 1
        else:
            for q in range(nnz):
                row = fixed_block_at(L, ind[q])
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
                    apply_event(fixed_block_at(L, ind[q]), K, mid, c)
                if wk.fit_intercept:
                    apply_event(icp, K, mid, c)
        if t == next_event:
            ev = t
            next_event += c.b
    return t


# ---- one call's passes, their specialisation picked once ------------------

# The width of a model's blocks: a binary model's (one output) is the
# constant 1 in its passes' specialisation.
ctypedef struct OneOutput:
    char _unused

ctypedef struct Outputs:
    char _unused

ctypedef fused Width:
    OneOutput
    Outputs


cdef inline Py_ssize_t width(const Width* wd, Py_ssize_t K) noexcept nogil:
    """``K``, or the constant 1 for a binary model's specialisation."""
    if Width is OneOutput:
        return 1
    else:
        return K


cdef class SharedPass


cdef class KernelJob:
    """What one pass of a ``psa_epochs`` call needs (``run_picked`` runs it
    in the specialisation its constants choose): a lazy pass (``_pass``)
    and its flush, an eager pass (``_eager_pass``), or thread ``k``'s part
    of a shared pass (``sh``)."""
    cdef RowDataset ds
    cdef Loss loss
    cdef Layout L
    cdef LazyCore c
    cdef RowWork wk
    cdef long long t
    cdef unsigned int rng
    cdef bint flush           # (lazy) every block to t after the pass
    cdef bint finite          # every weight finite after the pass
    # the eager pass: the model as one block, its shrink factors, the intercept
    cdef bint eager
    cdef Block w, icp
    cdef double* shrink
    # a shared pass, and the thread this job is
    cdef SharedPass sh
    cdef int k
    cdef list buffers         # (what the pointers above point into)


include "_lazy_pick.pxi"


cdef long long run_specialised(KernelJob job, const Penalty* pen,
                               const RateRule* rule) noexcept nogil:
    """One pass of ``job`` for one penalty kind and rate rule, with ``K = 1``
    a constant for a binary model."""
    cdef OneOutput one
    cdef Outputs many
    if job.L.K == 1:
        return _run(job, pen, rule, &one)
    return _run(job, pen, rule, &many)


cdef inline long long _run(KernelJob job, const Penalty* pen, const RateRule* rule,
                           const Width* wd) noexcept nogil:
    """``run_specialised`` for one width; returns the time after the pass."""
    cdef Py_ssize_t K = width(wd, job.L.K)
    cdef Layout L
    cdef LazyCore c
    cdef RowWork wk
    if job.sh is not None:
        return _shared_rounds(job.sh, job.sh.ds, job.loss, job.k, K, pen, rule)
    if job.eager:
        return _eager_run(job, wd)
    # (the pass reads the job's constants from copies on the stack, which no
    # store to the weights can alias)
    L, c, wk = job.L, job.c, job.wk
    job.t = _pass(job.ds, &L, K, &c, pen, rule, job.loss, &wk, job.t)
    job.finite = True
    if job.flush:
        job.finite = catch_up_all(&L, wk.d + 1, wk.d, job.t, &c, pen, rule)
    return job.t


cdef KernelJob _job(RowDataset ds, state, options, Loss loss, bint fit_intercept,
                    double* margins, bint bound_steps):
    """A job for ``state``'s passes over ``ds``, with its work buffers."""
    cdef KernelJob job = KernelJob.__new__(KernelJob)
    cdef double[::1] buf = np.zeros(2 * state.n_outputs)
    cdef int[::1] cross = np.zeros(ds.max_nnz, dtype=np.intc)
    cdef int[::1] left = np.zeros(ds.max_nnz, dtype=np.intc)
    job.buffers = [buf, cross, left]
    job.wk.cross = &cross[0]
    job.wk.left = &left[0]
    job.ds, job.loss = ds, loss
    job.L, job.c = layout_of(state), make_core(options, state)
    job.t = state.t
    job.rng = state.seed if state.seed != 0 else 1
    job.finite = True
    job.wk.d = ds.n_features
    job.wk.fit_intercept = fit_intercept
    job.wk.margins = margins
    job.wk.bound_steps = bound_steps
    job.wk.prefetch_blocks = (job.wk.d + 1) * job.L.stride > PREFETCH_MIN_BYTES
    job.wk.scores = &buf[0]
    job.wk.grad = &buf[job.L.K]
    return job


cdef object _epochs(KernelJob job, state, int n_epochs, bint shuffle, bint flush):
    """``n_epochs`` passes of ``job`` (the last flushed if ``flush``), stopped
    at the first whose weights are not finite; ``state``'s ``t`` and seed
    advanced."""
    cdef int epoch, epochs_run = 0
    with nogil:
        for epoch in range(n_epochs):
            if shuffle:
                job.ds.shuffle(&job.rng)
            job.flush = flush or epoch + 1 < n_epochs
            run_picked(job, &job.c)
            epochs_run += 1
            if not job.finite:
                break
    state.t, state.seed = job.t, job.rng
    return PSAResult(epochs=epochs_run, diverged=not job.finite)


# ---- small models: Algorithm 1 as written ----------------------------------

#: A model of at most this many weights (``(n_features + 1) n_outputs``)
#: takes the eager pass (``_eager_pass``), every weight shrunk at every
#: update as Algorithm 1 writes it: a vector loop over weights that stay in
#: the L1 cache costs less than a lazy decay at each touch (a9a's 124
#: weights, w8a's 301, letter's 442).
EAGER_MAX_WEIGHTS = 4096


def eager_pass_applies(n_weights, has_l1):
    """Whether ``psa_epochs`` takes the eager pass by default: a model of at
    most ``EAGER_MAX_WEIGHTS`` weights without L1 (threads or not)."""
    return not has_l1 and n_weights <= EAGER_MAX_WEIGHTS


cdef inline long long _eager_pass(RowDataset ds, Py_ssize_t K, Block w, double* shrink,
                                  Block icp, const LazyCore* c, Loss loss, RowWork* wk,
                                  long long t) noexcept nogil:
    """One pass over the rows in their current order, every weight current at
    every update: ``w`` is the whole model as one block of ``n_features K``
    weights (feature-major), ``shrink`` their shrink factors ``max(0, 1 - eta
    lam)`` (kept: eta changes only at a window's end), ``icp`` the intercept.
    Returns the new ``t``. (Inline: a binary model's call passes ``K = 1``,
    a constant there.)"""
    cdef const double* x
    cdef const int* ind
    cdef int nnz, q
    cdef Py_ssize_t i, k, j, n = wk.d * K
    cdef double y, sw, s
    cdef double* scores = wk.scores
    cdef double* grad = wk.grad
    cdef L2Only plain
    for i in range(ds.n_samples):
        fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
        if sw == 0.0:
            continue
        # (the rows, in a shuffled order, are what is cold here)
        prefetch_row(ds, i + 2)
        for k in range(K):
            s = icp.v[k] if wk.fit_intercept else 0.0
            for q in range(nnz):
                s += w.v[ind[q] * K + k] * x[q]
            scores[k] = s
        _row_gradient(ds, i, wk, scores, grad, K, loss, y, sw, x, ind, nnz, <const char*>w.eta,
                      sizeof(float), icp.eta)
        # line 5 of Algorithm 1 on every weight at theta(t): the shrink, then
        # the row's gradient terms
        block_scale(w.v, shrink, n)
        for q in range(nnz):
            for k in range(K):
                j = ind[q] * K + k
                w.v[j] -= w.eta[j] * grad[k] * x[q]
        if wk.fit_intercept:
            for k in range(K):
                step_weight(icp, k, 0.0, 0.0, grad[k], &plain)
        t += 1
        if c.b > 0 and t % c.b == 0:
            apply_event(w, n, (t // c.b) & 1, c)
            if wk.fit_intercept:
                apply_event(icp, K, (t // c.b) & 1, c)
            if (t // c.b) & 1 == 0:        # (a window's end: new step sizes)
                block_shrink_factors(shrink, w.eta, c.lam, n)
    return t


cdef long long _eager_run(KernelJob job, const Width* wd) noexcept nogil:
    """An eager pass of ``job`` (``_eager_pass``: ``K = 1`` a constant for a
    binary model), and whether its weights are finite."""
    cdef Py_ssize_t j, K = width(wd, job.L.K)
    cdef LazyCore c = job.c          # (stack copies, as in _run)
    cdef RowWork wk = job.wk
    cdef bint finite = True
    job.t = _eager_pass(job.ds, K, job.w, job.shrink, job.icp, &c, job.loss, &wk, job.t)
    for j in range(wk.d * K):
        finite &= isfinite(job.w.v[j])
    for j in range(K):
        finite &= isfinite(job.icp.v[j])
    job.finite = finite
    return job.t


cdef object _eager_epochs(KernelJob job, state, options, int n_epochs, bint shuffle):
    """``psa_epochs`` for a small model without L1: the fields of the
    features' records as contiguous arrays (every block brought to ``t``
    first: a stream's earlier call may have left some behind), the eager
    passes, and the fields written back, every block current at ``t``."""
    cdef Py_ssize_t d = job.wk.d, K = state.n_outputs
    catch_up_state(state, options, state.t, unregularized=d)
    records = state.records[:d]
    cdef double[::1] v = np.ascontiguousarray(records["v"], dtype=np.float64).reshape(-1)
    cdef double[::1] snap = np.ascontiguousarray(records["snap"], dtype=np.float64).reshape(-1)
    cdef float[::1] eta = np.ascontiguousarray(records["eta"], dtype=np.float32).reshape(-1)
    cdef float[::1] dsnap = np.ascontiguousarray(records["dsnap"],
                                                 dtype=np.float32).reshape(-1)
    cdef double[::1] shrink = np.empty(d * K)
    job.eager = True
    job.wk.prefetch_blocks = False
    job.icp = fixed_block_at(&job.L, d)
    job.w.v, job.w.snap, job.w.eta, job.w.dsnap = &v[0], &snap[0], &eta[0], &dsnap[0]
    job.shrink = &shrink[0]
    block_shrink_factors(job.shrink, job.w.eta, job.c.lam, d * K)
    result = _epochs(job, state, n_epochs, shuffle, True)
    for name, values in (("v", v), ("snap", snap), ("eta", eta), ("dsnap", dsnap)):
        records[name] = np.asarray(values).reshape(d, K)
    state.records["last"] = job.t
    return result


# ---- a pass shared by threads ---------------------------------------------

#: Rows a thread scores in one round of a shared pass: the rows of a round
#: are scored at the weights of its start, so a row's score misses the
#: updates of at most ``n_threads * SHARED_ROUND_ROWS - 1`` rows before it.
SHARED_ROUND_ROWS = 32
#: Non-zeros one round holds at most (a round ends before a row that would
#: pass it; a longer row is a round of its own).
SHARED_ROUND_NNZ = 1 << 16


cdef class SharedPass:
    """What the threads of one shared pass read and write (``psa_epochs``
    with ``threads``): the state's layout and constants, the round buffers,
    the barrier. Thread ``k`` runs ``SharedPass.run(k)``."""
    cdef RowDataset ds
    cdef object state         # (L points into its records: held while the pass lives)
    cdef Layout L
    cdef LazyCore c
    cdef Loss loss
    cdef Barrier barrier
    cdef int n_threads, line_shift
    cdef Py_ssize_t round_rows, K
    cdef bint fit_intercept, bound_steps
    cdef Py_ssize_t stride    # doubles per row and thread in partial: K scores (+ h)
    cdef long long t
    # partial scores: (2 rounds, n_threads, round_rows, K), a round's
    # from its owned blocks; per thread its round's owned non-zeros (block,
    # position in the row) and where each row's end, the rows' offsets,
    # labels and weights, the distinct blocks and those left to walk (the
    # bitmap ``listed``, all 0 between two rounds), and 2K of work
    cdef double[::1] partial
    cdef int[:, ::1] own_block, own_pos, ends, distinct, left
    cdef long long[:, ::1] row_start
    cdef double[:, ::1] row_y, row_sw
    cdef unsigned long long[:, ::1] listed
    cdef double[:, ::1] work
    cdef unsigned char[::1] finite
    cdef double* margins      # (n_samples, K) the rows' scores before their update, or NULL
    cdef bint flush

    def __cinit__(self, RowDataset ds, state, options, Loss loss, int n_threads,
                  bint fit_intercept, Py_ssize_t rows_per_thread, bint flush=True,
                  bint bound_steps=False):
        self.ds = ds
        self.state = state
        self.L = layout_of(state)
        self.c = make_core(options, state)
        self.loss = loss
        self.n_threads = n_threads
        self.K = state.n_outputs
        self.round_rows = n_threads * rows_per_thread
        self.fit_intercept = fit_intercept
        self.t = state.t
        self.bound_steps = bound_steps and self.K == 1
        self.stride = self.K + self.bound_steps
        barrier_init(&self.barrier, n_threads)
        self.partial = np.zeros(2 * n_threads * self.round_rows * self.stride)
        n_own = max(int(SHARED_ROUND_NNZ), int(ds.max_nnz))
        self.own_block = np.zeros((n_threads, n_own), dtype=np.intc)
        self.own_pos = np.zeros((n_threads, n_own), dtype=np.intc)
        self.row_start = np.zeros((n_threads, self.round_rows), dtype=np.int64)
        self.row_y = np.zeros((n_threads, self.round_rows))
        self.row_sw = np.zeros((n_threads, self.round_rows))
        self.distinct = np.zeros((n_threads, n_own), dtype=np.intc)
        self.left = np.zeros((n_threads, n_own), dtype=np.intc)
        self.listed = np.zeros((n_threads, (ds.n_features + 64) // 64), dtype=np.uint64)
        self.ends = np.zeros((n_threads, self.round_rows + 1), dtype=np.intc)
        self.line_shift = line_shift_of(self.L.stride)
        # (a thread's work row on cache lines of its own)
        self.work = np.zeros((n_threads, 8 * (-(-2 * self.K // 8) + 1)))
        self.finite = np.ones(n_threads, dtype=np.uint8)
        self.margins = NULL
        self.flush = flush

    def abort(self):
        """Release the threads waiting in the pass (one could not start)."""
        barrier_abort(&self.barrier)

    def run(self, int k):
        """Thread ``k``'s part of the pass; returns the time after it."""
        cdef KernelJob job = KernelJob.__new__(KernelJob)
        cdef long long t
        job.sh, job.k, job.loss, job.L = self, k, self.loss, self.L
        with nogil:
            t = run_picked(job, &self.c)
        return t


cdef struct ThreadRound:
    # thread k's part of a shared pass: its rows of the round buffers, the
    # current round's owned non-zeros and the thread's clock
    int k
    int* own_block            # the round's owned non-zeros: block,
    int* own_pos              # position in its row,
    int* ends                 # and where each row's end
    long long* row_start      # each row's offset, label and weight
    double* row_y
    double* row_sw
    int* distinct             # the round's distinct owned blocks,
    int* left                 # those binary_gaps leaves to walk,
    unsigned long long* listed    # and the bitmap of those listed (0 between rounds)
    double* scores            # K scores and K gradient terms
    double* grad
    Py_ssize_t n_own
    long long t, ev, next_event


cdef inline long long _shared_rounds(SharedPass sh, RowDataset ds, Loss loss, int k,
                                     Py_ssize_t K, const Penalty* pen,
                                     const RateRule* rule) noexcept nogil:
    """Thread ``k`` of ``J``: each round of rows ``[i0, i1)``, (a) the round's
    end and its rows (``_list_round``), the scores of its rows on the blocks
    ``k`` owns at time ``t`` of the round's start, into the round's partial
    scores (``_score_round``); after the barrier, (b) the rows' updates on
    the owned blocks, each at its own time (``_step_round``). Only the
    owner writes a block, so (b) of one round and (a) of the next need no
    barrier (the partial scores alternate between two buffers). Returns the
    time after the pass, with every owned block flushed to it."""
    cdef int sense = 0
    cdef Py_ssize_t i0 = 0, i1, rnd = 0, d = ds.n_features
    cdef double* part
    cdef ThreadRound tr
    tr.k = k
    tr.own_block, tr.own_pos, tr.ends = &sh.own_block[k, 0], &sh.own_pos[k, 0], &sh.ends[k, 0]
    tr.row_start, tr.row_y, tr.row_sw = &sh.row_start[k, 0], &sh.row_y[k, 0], &sh.row_sw[k, 0]
    tr.distinct, tr.left, tr.listed = &sh.distinct[k, 0], &sh.left[k, 0], &sh.listed[k, 0]
    tr.scores = &sh.work[k, 0]
    tr.grad = tr.scores + K
    tr.t = sh.t
    tr.ev = last_event(&sh.c, tr.t)
    tr.next_event = tr.ev + sh.c.b if sh.c.b > 0 else -1
    while i0 < ds.n_samples:
        part = &sh.partial[(rnd & 1) * sh.n_threads * sh.round_rows * sh.stride]
        i1 = _list_round(sh, ds, &tr, i0)
        _score_round(sh, ds, &tr, part, i0, i1, K, pen, rule)
        if not barrier_wait(&sh.barrier, &sense):
            return tr.t
        _step_round(sh, ds, loss, &tr, part, i0, i1, K, pen, rule)
        i0 = i1
        rnd += 1
    # the flush: every owned block to t
    if sh.flush:
        sh.finite[k] = catch_up_all(&sh.L, d + 1, d, tr.t, &sh.c, pen, rule, k, sh.n_threads,
                                    sh.line_shift)
    return tr.t


cdef inline Py_ssize_t _list_round(SharedPass sh, RowDataset ds, ThreadRound* tr,
                                   Py_ssize_t i0) noexcept nogil:
    """(a) The round from row ``i0``, read once; returns its end ``i1``.

    ``round_rows`` rows, fewer if their non-zeros would pass the buffers,
    at least one row, and none past the row of the next event, each row of
    non-zero weight being one update: no block stepped in the round crosses
    an event between its score and its step. The end depends on the data
    alone, so every thread cuts alike. Each row's offset, label and weight
    are kept for the round, and the thread's own non-zeros listed without a
    branch per non-zero."""
    cdef Py_ssize_t i = i0, total = 0, R = sh.round_rows, d = ds.n_features
    cdef Py_ssize_t n_own_max = sh.own_block.shape[1]
    cdef long long start, to_event = tr.next_event - tr.t if sh.c.b > 0 else -1
    cdef const int* ind
    cdef int nnz, q
    cdef double y, sw
    tr.n_own = 0
    tr.ends[0] = 0
    while i < ds.n_samples and i - i0 < R and to_event != 0:
        row_span(ds, i, &start, &ind, &nnz, &y, &sw)
        if i > i0 and total + nnz > n_own_max:
            break
        total += nnz
        to_event -= sw != 0.0
        tr.row_start[i - i0] = start
        tr.row_y[i - i0] = y
        tr.row_sw[i - i0] = sw
        if sw != 0.0:
            for q in range(nnz):
                tr.own_block[tr.n_own] = ind[q]
                tr.own_pos[tr.n_own] = q
                tr.n_own += owner_of(ind[q], d, sh.line_shift, sh.n_threads) == tr.k
        tr.ends[i - i0 + 1] = <int>tr.n_own
        i += 1
    return i


cdef inline void _score_round(SharedPass sh, RowDataset ds, ThreadRound* tr, double* part,
                              Py_ssize_t i0, Py_ssize_t i1, Py_ssize_t K, const Penalty* pen,
                              const RateRule* rule) noexcept nogil:
    """(a) The round's owned blocks brought to ``t``, and each row's partial
    scores on them (and, with ``bound_steps``, its partial ``sum eta x^2``)
    into the thread's rows of ``part``."""
    cdef const LazyCore* c = &sh.c
    cdef const Layout* L = &sh.L
    cdef Py_ssize_t i, e, kk, n_left, n_distinct, word, R = sh.round_rows, S = sh.stride
    cdef long long t = tr.t, ev = tr.ev
    cdef double h, xv, lam = c.lam, l1 = c.l1
    cdef double* scores = tr.scores
    cdef unsigned long long bit
    cdef GapConsts gc
    cdef Block row, icp = fixed_block_at(L, ds.n_features)
    if (K == 1 and Penalty is L2Only and RateRule is SeriesRate and ds.is_sparse
            and gaps_apply(c, L)):
        # the round's owned blocks brought to t eight at a time
        # (_binary_gaps.h), each once: a third of a round's non-zeros
        # repeat a block of an earlier row (hashed tokens), which a
        # bitmap of the blocks listed in the round leaves out
        gc = gap_consts(c, L)
        n_distinct = 0
        for e in range(tr.n_own):
            word = tr.own_block[e] >> 6
            bit = (<unsigned long long>1) << (tr.own_block[e] & 63)
            tr.distinct[n_distinct] = tr.own_block[e]
            n_distinct += (tr.listed[word] & bit) == 0
            tr.listed[word] |= bit
        n_left = binary_gaps(L.base, tr.distinct, n_distinct, <double>t, <double>ev, &gc,
                             tr.left)
        for e in range(n_distinct):
            tr.listed[tr.distinct[e] >> 6] = 0
        for e in range(n_left):
            touch(fixed_block_at(L, tr.left[e]), K, t, ev, lam, l1, c, pen, rule)
    for i in range(i0, i1):
        for kk in range(K):
            scores[kk] = 0.0
        h = 0.0
        for e in range(tr.ends[i - i0], tr.ends[i - i0 + 1]):
            if e + 16 < tr.n_own:
                prefetch_fixed_block(L, tr.own_block[e + 16])
            row = fixed_block_at(L, tr.own_block[e])
            touch(row, K, t, ev, lam, l1, c, pen, rule)
            xv = row_value(ds, tr.row_start[i - i0], tr.own_pos[e])
            for kk in range(K):
                scores[kk] += row.v[kk] * xv
            if sh.bound_steps:
                # (the step sizes change at events only, which no round
                # spans: h at the round's start is h at the row's step)
                h += row.eta[0] * xv * xv
        if sh.fit_intercept and tr.k == 0 and tr.row_sw[i - i0] != 0.0:
            touch(icp, K, t, ev, 0.0, 0.0, c, pen, rule)
            for kk in range(K):
                scores[kk] += icp.v[kk]
            h += icp.eta[0]
        for kk in range(K):
            part[(tr.k * R + i - i0) * S + kk] = scores[kk]
        if sh.bound_steps:
            part[(tr.k * R + i - i0) * S + K] = h


cdef inline void _step_round(SharedPass sh, RowDataset ds, Loss loss, ThreadRound* tr,
                             const double* part, Py_ssize_t i0, Py_ssize_t i1, Py_ssize_t K,
                             const Penalty* pen, const RateRule* rule) noexcept nogil:
    """(b) The round's rows in order, each at its own time: its score, the
    sum of the ``J`` partial ones in thread order (every thread computes the
    same), its gradient, and line 5 of Algorithm 1 on the owned blocks, the
    events as in ``_pass``."""
    cdef const LazyCore* c = &sh.c
    cdef const Layout* L = &sh.L
    cdef int m, J = sh.n_threads
    cdef Py_ssize_t i, e, kk, R = sh.round_rows, S = sh.stride
    cdef long long start, t = tr.t, ev = tr.ev, next_event = tr.next_event
    cdef double s, sw, h, lam = c.lam, l1 = c.l1
    cdef double* scores = tr.scores
    cdef double* grad = tr.grad
    cdef bint icp_own = sh.fit_intercept and tr.k == 0, mid
    cdef Block row, icp = fixed_block_at(L, ds.n_features)
    for i in range(i0, i1):
        # the next round's rows (in a shuffled order each is cold, and
        # every thread reads every row: the listing waits on them)
        prefetch_row(ds, i + R)
        sw = tr.row_sw[i - i0]
        if sw == 0.0:
            continue
        start = tr.row_start[i - i0]
        for kk in range(K):
            s = 0.0
            for m in range(J):
                s += part[(m * R + i - i0) * S + kk]
            scores[kk] = s
        if tr.k == 0 and sh.margins != NULL:
            for kk in range(K):
                sh.margins[ds.order_ptr[i] * K + kk] = scores[kk]
        _gradient(scores, grad, K, loss, tr.row_y[i - i0], sw)
        if sh.bound_steps:
            h = 0.0
            for m in range(J):
                h += part[(m * R + i - i0) * S + K]
            bound_step(grad, scores[0], tr.row_y[i - i0], h)
        if K == 1 and grad[0] == 0.0:
            t += 1                  # (the shrink alone: an idle step, as in _pass)
        else:
            for e in range(tr.ends[i - i0], tr.ends[i - i0 + 1]):
                row = fixed_block_at(L, tr.own_block[e])
                touch(row, K, t, ev, lam, l1, c, pen, rule)
                for kk in range(K):
                    step_weight(row, kk, lam, l1,
                                grad[kk] * row_value(ds, start, tr.own_pos[e]), pen)
                row.last[0] = t + 1
            if icp_own:
                touch(icp, K, t, ev, 0.0, 0.0, c, pen, rule)
                for kk in range(K):
                    step_weight(icp, kk, 0.0, 0.0, grad[kk], pen)
                icp.last[0] = t + 1
            t += 1
            if t == next_event:
                mid = (t // c.b) & 1
                for e in range(tr.ends[i - i0], tr.ends[i - i0 + 1]):
                    apply_event(fixed_block_at(L, tr.own_block[e]), K, mid, c)
                if icp_own:
                    apply_event(icp, K, mid, c)
        if t == next_event:
            ev = t
            next_event += c.b
    tr.t, tr.ev, tr.next_event = t, ev, next_event


def shared_pass(SharedPass sh, threads):
    """One pass of ``sh`` on ``threads`` (a ``ThreadRunner``: thread ``k``
    runs ``sh.run(k)``); returns the time after it, whether every weight is
    finite."""
    try:
        times = threads.map(sh.run, range(sh.n_threads))
    except BaseException:
        sh.abort()
        raise
    return times[0], bool(np.all(sh.finite))


def _shared_epochs(RowDataset ds, state, options, Loss loss, int n_epochs, bint shuffle,
                   bint fit_intercept, threads, double[::1] margins, bint flush,
                   bint bound_steps):
    """``psa_epochs`` on ``threads``: each pass one ``shared_pass``."""
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef int epochs_run = 0
    cdef SharedPass sh
    finite = True
    for epoch in range(n_epochs):
        if shuffle:
            ds.shuffle(&rng)
        sh = SharedPass(ds, state, options, loss, threads.n_threads, fit_intercept,
                        SHARED_ROUND_ROWS, flush or epoch + 1 < n_epochs, bound_steps)
        if margins is not None:
            sh.margins = &margins[0]
        state.t, finite = shared_pass(sh, threads)
        epochs_run += 1
        if not finite:
            break
    state.seed = rng
    return PSAResult(epochs=epochs_run, diverged=not finite)


def psa_epochs(RowDataset ds, state, options, *, Loss loss=None, int n_epochs=1,
               bint shuffle=True, bint fit_intercept=True, threads=None,
               double[::1] margins=None, bint flush=True, eager=None,
               bint bound_steps=False):
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
    threads : ThreadRunner or None
        With two threads or more, the passes are shared (``SharedPass``):
        block ``j`` belongs to one thread (``owner_of``), which alone
        reads and writes it, and the rows go by in rounds, each scored at
        the weights of the round's start (stale by at most ``n_threads *
        SHARED_ROUND_ROWS - 1`` updates) and then stepped in order, every
        thread on its own blocks. The model depends on the number of
        threads, not on their timing.
    margins : ndarray of shape (n_samples * n_outputs,), float64, or None
        Receives each row's scores before its update (row ``i``'s at ``i *
        n_outputs``; the last pass's): progressive validation at no extra
        pass. Rows of weight zero are left as they are.
    flush : bool, default=True
        Bring every block to ``t`` after the last pass (``catch_up_all``).
        False leaves the blocks the pass did not touch behind ``t``, as
        within a pass, for a stream of calls with the same options (the next
        call, or ``catch_up_state``, brings them up; divergence then shows
        in the next call's scores or at that catch-up).
    eager : bool or None, default=None
        Without L1, every weight shrunk at every update (``_eager_pass``:
        Algorithm 1 as written, every block current at ``t`` after each
        call) instead of the lazy decays, on one thread whatever
        ``threads``. None: for a model of at most ``EAGER_MAX_WEIGHTS``
        weights, where one thread's eager pass costs less than the lazy
        passes on two.
    bound_steps : bool, default=False
        Regression (one output): each step moves its row's prediction at
        most to the target (``_numeric.bound_step``, with ``h = sum_j eta_j
        x_j^2`` over the row's weights and the intercept at the step).

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
    if margins is not None and margins.shape[0] != ds.n_samples * state.n_outputs:
        raise ValueError(f"margins holds {margins.shape[0]} scores, not n_samples * "
                         f"n_outputs = {ds.n_samples * state.n_outputs}")
    if eager is None:
        eager = eager_pass_applies(state.n_blocks * state.n_outputs, state.has_l1)
    eager = eager and not state.has_l1 and ds.n_features > 0
    if not eager and threads is not None and threads.n_threads > 1:
        return _shared_epochs(ds, state, options, loss, n_epochs, shuffle, fit_intercept,
                              threads, margins, flush, bound_steps)
    cdef double* out = &margins[0] if margins is not None and margins.shape[0] > 0 else NULL
    cdef KernelJob job = _job(ds, state, options, loss, fit_intercept, out, bound_steps)
    if eager:
        return _eager_epochs(job, state, options, n_epochs, shuffle)
    return _epochs(job, state, n_epochs, shuffle, flush)
