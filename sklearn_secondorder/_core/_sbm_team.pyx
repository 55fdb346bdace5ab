"""Full-rank SBM passes shared by threads (``n_jobs``; Choromanska & Jebara, Algorithm 2).

``_sbm_full.full_epochs`` with ``threads`` hands its passes to ``team_epochs``
when ``team_route`` says the split pays: ``P^2 r`` at least
``TEAM_MIN_WORK``, and ``batch_size=1`` or batches on the ``REFACTOR`` route
with several classes. The threads share the one state; the kernel's view of
it (``FullRankKernel``), its scratch and the steps are the one-thread
kernel's (``_sbm_full.pxd``), and so are the functions named below without a
module (``full_epochs``, ``gather_rows``, ``add_gradient``, ``sigma_add``,
``dense_flush``, ``end_batch``; ``read_row`` is ``_sbm_bound``'s,
``lower_solve_rows`` ``_linalg``'s).

With ``batch_size=1``, ``TeamPass`` runs the pass on several threads.
Algorithm 2 is sequential from example to example (each bound is formed at
the weights the previous step left), so the threads split each example's
work instead: every thread owns a contiguous range of the ``P`` coordinates
(rows of ``M``, entries of ``theta``, ``mu``, ``phi``; columns of ``(M U)^T``
and ``R^T``), forms the example's bound itself (all alike), and does its
range's share of the gather, the triangular solve, the rank-``r`` downdate
``M -= T T^T`` (the ``O(r P^2)`` that dominates) and the step; three
barriers an example. The model is the one-thread model up to the order of a
few floating-point sums (the BLAS calls on a range instead of the whole).
With batches on the ``REFACTOR`` route and several classes,
``BatchTeamPass`` forms the bounds of a batch's rows on the threads at once
(they are all formed at the same weights), and splits the ``dgemm`` that
adds the dense rows' terms to ``Sigma``; the Cholesky refactorisation and
the step stay on one thread.
"""
from libc.string cimport memcpy, memset

from ._dataset cimport RowDataset, row_span
from ._linalg cimport axpy, cholesky, dgemm_t, dgemv_t, scipy_dgemm, scipy_dgemv
from ._numeric cimport all_finite
from ._sbm_bound cimport (
    Example, PassTotals, Workspace, example_bound, example_init, finish_passes, read_row,
    start_totals)
from ._sbm_full cimport (
    DENSE_CHUNK, PER_EXAMPLE, REFACTOR, BatchWork, FullRankKernel, FullRankWork,
    add_batch_regulariser, add_outer, bind_kernel, bound_curvature, dense_pairs, dense_row,
    dense_xt, example_scores, full_step, refactor_finish, refactor_flush, scatter_sparse,
    surrogate_coef, surrogate_rhs, theta_step, woodbury_core, work_init)
from ._shared_state cimport Barrier, barrier_abort, barrier_init, barrier_wait

from ._sbm_full import batch_route

# SciPy's BLAS and LAPACK (looked up at import: _linalg.pxd)
cdef dgemm_t dgemm = scipy_dgemm()
cdef dgemv_t dgemv = scipy_dgemv()


#: The least ``P^2 r`` (the multiply-adds of one example's downdate ``M -= T
#: T^T``) for which the threads share a ``batch_size=1`` pass: below it three
#: barriers an example cost more than the split saves (see ``team_route``):
#: a9a (``P^2 r = 1.5e4``) gains nothing from a second thread, w8a
#: (``9.1e4``) and letter (``4.9e6``) do (benchmarks/RESULTS.md, "Figures
#: moved out of the core's comments").
TEAM_MIN_WORK = 50_000


def team_route(int batch_size, int n_outputs, Py_ssize_t P, int n_threads):
    """Whether ``full_epochs`` with ``n_threads`` threads shares its passes
    between them: at least two threads, ``P^2 r >= TEAM_MIN_WORK`` (``r``
    factors an example: 1 for two classes, ``K - 1`` for ``K``), and either
    ``batch_size=1`` (Algorithm 2, one Woodbury step per example:
    ``TeamPass``) or batches on the ``REFACTOR`` route with several classes
    (``BatchTeamPass``; with two classes a batch's work is its Cholesky
    refactorisation, which does not split). Otherwise the passes run on the
    calling thread alone."""
    cdef int r = 1 if n_outputs == 1 else n_outputs - 1
    if n_threads < 2 or <double>P * P * r < TEAM_MIN_WORK or P < 16 * n_threads:
        return False
    return batch_size == 1 or (n_outputs > 1
                               and batch_route(batch_size, n_outputs, P) == "refactor")


def thread_workspace(int k):
    """The work buffers' owner of thread ``k`` of a ``TeamPass`` (made on
    that thread, so that its buffers are first touched there)."""
    return Workspace()


cdef inline void lower_solve_cols(int n, const double* L, int m, int ld,
                                  double* B) noexcept nogil:
    """``lower_solve_rows`` on ``m`` columns of rows ``ld`` apart: the same
    operations on each entry, so a range of columns solved alone equals
    those columns of the whole solve."""
    cdef int i, j
    for i in range(n):
        for j in range(i):
            axpy(m, -L[i * n + j], B + <size_t>j * ld, B + <size_t>i * ld)
        scal_cols(m, 1.0 / L[i * n + i], B + <size_t>i * ld)


cdef inline void scal_cols(int m, double a, double* x) noexcept nogil:
    cdef int k
    for k in range(m):
        x[k] *= a


cdef class _Team:
    """What ``TeamPass`` and ``BatchTeamPass`` share: the kernel, the
    threads' barrier, each thread's status, row and work buffers (made on
    its own thread by ``run``), and the end of a pass."""

    cdef FullRankKernel kr
    cdef RowDataset ds
    cdef object state
    cdef readonly int n_threads
    cdef Barrier barrier
    cdef Workspace shared
    cdef list spaces
    cdef Example* ex            # one per thread
    cdef FullRankWork* w        # one per thread
    cdef int* status            # per thread: 1 done, 0 a curvature update failed, -1 aborted

    cdef _start(self, RowDataset ds, state, int n_threads):
        """The shared part of ``__cinit__`` (the kernel bound by the caller)."""
        cdef int k
        self.ds, self.state = ds, state
        self.n_threads = n_threads
        barrier_init(&self.barrier, n_threads)
        self.shared = Workspace()
        self.spaces = [None] * n_threads
        self.ex = <Example*>self.shared.flags(n_threads * sizeof(Example))
        self.w = <FullRankWork*>self.shared.flags(n_threads * sizeof(FullRankWork))
        self.status = self.shared.ints(n_threads)
        for k in range(n_threads):
            self.status[k] = -1

    cdef Workspace _thread_buffers(self, int k):
        """Thread ``k``'s row and work buffers, made on its own thread; if
        that fails, the other threads are released and the error raised."""
        cdef Workspace ws
        try:
            ws = thread_workspace(k)
            example_init(&self.ex[k], ws, self.kr.n_features, self.kr.K)
            work_init(&self.w[k], ws, self.kr.K, self.kr.P)
            self.spaces[k] = ws
        except BaseException:
            barrier_abort(&self.barrier)
            raise
        return ws

    def abort(self):
        """Release the threads waiting in the pass."""
        barrier_abort(&self.barrier)

    cdef int _status(self):
        """1 when every thread finished, 0 when a curvature update failed,
        -1 when the pass was aborted."""
        cdef int k, status = 1
        for k in range(self.n_threads):
            status = min(status, self.status[k])
        return status


cdef class TeamPass(_Team):
    """A ``batch_size=1`` pass of Algorithm 2 on ``n_threads`` threads that
    share the one state (see the module docstring); thread ``k`` runs
    ``run(k)``, and the caller ``ThreadRunner.map``s it over the threads.

    Thread ``k`` owns the coordinates ``lo[k]:lo[k + 1]`` (cut at multiples
    of 8, a cache line of doubles). Per example, between the barriers:

    1. (all) the row, its scores and its bound (Algorithm 1), alike on every
       thread; (own) the columns of ``W^T = (M U)^T`` (``gather_rows``' sums,
       read from ``M``'s own rows: it is symmetric, so a thread reads and
       writes its own rows of ``M`` only and they stay in its core's cache),
       of ``R^T = L^T W^T``, and the example's gradient term in ``mu``.
    2. (all) ``C = U^T M U`` from the shared ``W^T``, ``G = I + L^T C L`` and
       its Cholesky factor, alike; (own) the columns of ``T^T = chol(G)^-1
       R^T``.
    3. (own) the rows of ``M -= T T^T``, of ``phi = M mu`` (``M``'s own rows:
       it is symmetric) and of ``theta -= eta phi``.

    Nothing a thread writes is read by another before the next barrier, and
    every sum a thread forms is in a fixed order, so the model depends on
    ``n_threads``, not on the threads' timing.
    """

    cdef Py_ssize_t start, stop
    cdef PassTotals* tot        # one per thread
    cdef int* lo                # n_threads + 1 range bounds
    cdef double* Wt             # K x P, shared
    cdef double* Rt             # K x P, shared

    def __cinit__(self, RowDataset ds, state, opts, Py_ssize_t start, Py_ssize_t stop,
                  int n_threads):
        cdef int k, P, step
        bind_kernel(&self.kr, state, opts, ds.n_features)
        if self.kr.route != PER_EXAMPLE:
            raise ValueError("a TeamPass runs batch_size=1 passes only")
        self._start(ds, state, n_threads)
        self.start, self.stop = start, stop
        P = self.kr.P
        self.tot = <PassTotals*>self.shared.flags(n_threads * sizeof(PassTotals))
        self.lo = self.shared.ints(n_threads + 1)
        self.Wt = self.shared.doubles(<size_t>self.kr.K * P)
        self.Rt = self.shared.doubles(<size_t>self.kr.K * P)
        for k in range(n_threads + 1):
            step = <int>((<long long>P * k) // n_threads)
            self.lo[k] = min(P, (step + 4) // 8 * 8) if 0 < k < n_threads else step
        for k in range(n_threads):
            self.tot[k] = start_totals(state.t)

    def run(self, int k):
        """Thread ``k``'s part of the pass (its buffers made here, then the
        pass without the GIL). If anything fails before it starts, the
        other threads are released and the error raised."""
        self._thread_buffers(k)
        with nogil:
            self.status[k] = team_pass(self, k)

    def result(self):
        """``(status, totals)``: ``_status()``; thread 0's totals (all
        threads count alike)."""
        return self._status(), self.tot[0]


cdef inline void own_gradient(const FullRankKernel* kr, Example* ex, int lo,
                              int hi) noexcept nogil:
    """``add_gradient`` (per example, ``batch_size=1``) on the coordinates
    ``lo:hi`` only: the same operations on each of them."""
    cdef int K = kr.K, j, a, row, q
    cdef Py_ssize_t p
    cdef double alpha = kr.alpha
    cdef double* mup = kr.mu
    cdef const double* th = kr.theta
    cdef const double* coef = ex.gcoef
    if kr.surrogate:
        surrogate_coef(ex, ex.c)
        coef = ex.c
    for j in range(ex.nz):
        row = ex.idx[j] * K
        if row + K <= lo or row >= hi:
            continue
        for a in range(K):
            q = row + a
            if lo <= q < hi:
                mup[q] += coef[a] * ex.val[j]
    if not kr.surrogate:
        for p in range(lo, min(<Py_ssize_t>hi, kr.n_reg)):
            mup[p] += alpha * th[p]


cdef enum:
    GATHER_CHUNK = 32   # outputs summed at once in own_gather (a local array)


cdef inline void own_gather(const double* Mp, int K, const int* idx, const double* val,
                            int nz, double* out, int stride) noexcept nogil:
    """``out[a stride] = sum_j val_j Mp[idx_j K + a]`` for ``a < K``: column
    ``p`` of ``W^T = (M U)^T`` from row ``p`` of ``M`` (``Mp``; ``M`` is
    symmetric), each sum from 0 in ``j``'s order as ``gather_rows``' (so the
    same values). The sums are kept in a local array (no aliasing: they stay
    in registers or L1), ``GATHER_CHUNK`` outputs at a time."""
    cdef double acc[GATHER_CHUNK]
    cdef double s, v
    cdef int j, a, a0, c
    cdef const double* base
    if K == 1:
        s = 0.0
        for j in range(nz):
            s += val[j] * Mp[idx[j]]
        out[0] = s
        return
    a0 = 0
    while a0 < K:
        c = min(<int>GATHER_CHUNK, K - a0)
        for a in range(c):
            acc[a] = 0.0
        for j in range(nz):
            v = val[j]
            base = Mp + idx[j] * K + a0
            for a in range(c):
                acc[a] += v * base[a]
        for a in range(c):
            out[<size_t>(a0 + a) * stride] = acc[a]
        a0 += c


cdef inline void own_columns(TeamPass tp, const Example* ex, int lo, int hi) noexcept nogil:
    """Step 1's own part (``TeamPass``): the columns ``lo:hi`` of ``W^T = (M
    U)^T``, from ``M``'s own rows (``M`` is symmetric: its rows stay in this
    thread's cache), summed in ``gather_rows``' order, then of ``R^T = L^T
    W^T``."""
    cdef const FullRankKernel* kr = &tp.kr
    cdef int K = kr.K, P = kr.P, r = ex.r, n = hi - lo, p
    cdef double one = 1.0, zero = 0.0
    cdef char cN = b'N'
    for p in range(lo, hi):
        own_gather(kr.M + <size_t>p * P, K, ex.idx, ex.val, ex.nz, tp.Wt + p, P)
    dgemm(&cN, &cN, &n, &r, &K, &one, tp.Wt + lo, &P, ex.Lt, &K, &zero, tp.Rt + lo, &P)


cdef inline void own_rows(TeamPass tp, int r, double* rhs, int lo,
                          int hi) noexcept nogil:
    """Step 3 (``TeamPass``): the rows ``lo:hi`` of ``M -= T T^T`` (``r > 0``)
    and of ``phi = M rhs`` (``M`` symmetric: its own rows, not its columns),
    then ``theta``'s coordinates ``lo:hi`` (``theta_step``)."""
    cdef const FullRankKernel* kr = &tp.kr
    cdef int P = kr.P, n = hi - lo, inc = 1
    cdef double one = 1.0, zero = 0.0, mone = -1.0
    cdef char cN = b'N'
    cdef char cT = b'T'
    cdef double* M_own = kr.M + <size_t>lo * P
    if r > 0:
        dgemm(&cN, &cT, &P, &n, &r, &mone, tp.Rt, &P, tp.Rt + lo, &P, &one, M_own, &P)
    dgemv(&cT, &P, &n, &one, M_own, &P, rhs, &inc, &zero, kr.phi + lo, &inc)
    theta_step(kr, lo, hi)


cdef int team_pass(TeamPass tp, int k) noexcept nogil:
    """Thread ``k``'s part of ``tp``'s pass (``TeamPass``). Returns 1 at the
    end, 0 when ``G`` was not positive definite (every thread stops at the
    same example: they all factor the same ``G``), -1 when aborted."""
    cdef const FullRankKernel* kr = &tp.kr
    cdef Example* ex = &tp.ex[k]
    cdef FullRankWork* w = &tp.w[k]
    cdef PassTotals* tot = &tp.tot[k]
    cdef Barrier* bar = &tp.barrier
    cdef int lo = tp.lo[k], hi = tp.lo[k + 1], r, sense = 0
    cdef Py_ssize_t i
    cdef double* rhs = kr.mu
    tot.loss_sum = 0.0
    tot.w_sum = 0.0
    for i in range(tp.start, tp.stop):
        if not read_row(tp.ds, i, ex, kr.n_features, kr.fit_intercept):
            continue
        example_scores(ex, kr.theta)
        example_bound(ex)
        tot.loss_sum += ex.sw * ex.loss
        tot.w_sum += ex.sw
        r = ex.r
        if r > 0 and hi > lo:
            own_columns(tp, ex, lo, hi)
        own_gradient(kr, ex, lo, hi)
        if not barrier_wait(bar, &sense):
            return -1
        if r > 0:
            # C = U^T M U, G = I + L^T C L and its factor: alike on every thread
            woodbury_core(ex, tp.Wt, kr.P, w)
            if not cholesky(r, w.G):
                return 0
            lower_solve_cols(r, w.G, hi - lo, kr.P, tp.Rt + lo)
        if kr.surrogate:
            # the step's right-hand side, whole on every thread (theta is not
            # written before the next barrier)
            surrogate_rhs(kr, w.wrk)
            rhs = w.wrk
        if not barrier_wait(bar, &sense):
            return -1
        if hi > lo:
            own_rows(tp, r, rhs, lo, hi)
        tot.t += 1
        if not barrier_wait(bar, &sense):
            return -1
    return 1


def team_epochs(RowDataset ds, state, opts, Py_ssize_t start, Py_ssize_t stop, int n_epochs,
                bint shuffle, threads):
    """``full_epochs`` on ``threads`` (a ``ThreadRunner``): each pass one
    ``TeamPass`` (``batch_size=1``) or ``BatchTeamPass``. The state is
    updated in place; after a failure in a thread (an error raised) it is
    half-updated, and the caller must discard it."""
    cdef unsigned int rng = state.rng_state()
    cdef int epochs_run = 0
    cdef bint diverged = False
    cdef bint batched = opts.batch_size > 1
    cdef bint m_stale = batched and state.m_stale
    cdef PassTotals tot = start_totals(state.t)
    cdef double[::1] theta = state.theta
    cdef double[::1] phi = state.phi
    if n_epochs < 1:
        raise ValueError("team_epochs makes at least one pass")
    for _ in range(n_epochs):
        if shuffle:
            ds.shuffle(&rng)
        tp = (BatchTeamPass if batched else TeamPass)(ds, state, opts, start, stop,
                                                      threads.n_threads)
        try:
            threads.map(tp.run, range(tp.n_threads))
        except BaseException:
            tp.abort()
            raise
        status, tot = tp.result()
        if status < 0:
            raise RuntimeError("a thread of the shared SBM pass stopped without an error")
        state.t = tot.t
        if status == 0 or not all_finite(&theta[0], theta.shape[0]) or not all_finite(
                &phi[0], phi.shape[0]):
            diverged = True
            break
        epochs_run += 1
    if batched:
        if not diverged:
            tp.finish(m_stale)
        # (M is Sigma^-1 again; after a failure Sigma holds terms M has not)
        state.sigma_of = None if diverged else state.M
        state.m_stale = False
    return finish_passes(state, tot, rng, epochs_run, diverged)


# ---- a batched pass shared by threads (REFACTOR, several classes) -------------------
cdef class BatchTeamPass(_Team):
    """A ``batch_size > 1`` pass on the ``REFACTOR`` route on ``n_threads``
    threads sharing the one state (``team_route``: several classes, so that
    a row's terms ``S_j (x) xt xt^T`` are dense work). Every bound of a batch
    is formed at the same weights, so the threads form those of disjoint
    rows at once. The batch's rows go by in groups of at most
    ``DENSE_CHUNK`` (256); per group, between barriers:

    1. (own rows) the row, its bound (Algorithm 1), ``S_j`` and the row's
       pairs ``xt_i xt_k`` (dense rows), into the group's slots;
    2. (thread 0) the loss sums, the gradients into ``mu`` and the sparse
       rows' terms into ``Sigma``, in the rows' order; (own columns) the
       dense rows' terms, ``Out = Z^T S`` (``dense_flush``'s ``dgemm``, its
       columns ``(a, c)`` split between the threads);
    3. (own columns) ``Out`` into ``Sigma``;
    4. at the batch's end (thread 0) the regulariser, the Cholesky
       refactorisation and the step (``end_batch``), then every thread
       reads the new weights.

    The one-thread model up to the order of the sums into ``Sigma`` (the
    one-thread kernel adds the dense rows every 256 dense rows, here every
    group); the same model whatever the threads' timing.
    """

    cdef BatchWork b
    cdef double** xd            # one d1 scratch per thread (thread 0's w: the step's)
    cdef PassTotals tot         # thread 0's
    cdef Py_ssize_t* wrows      # the rows of non-zero weight, in the pass's order
    cdef Py_ssize_t n_w
    cdef int G, N, KK
    cdef int* s_nz
    cdef int* s_r
    cdef int* s_idx             # G x d1
    cdef double* s_val          # G x d1
    cdef double* s_coef         # G x K: the gradient coefficients
    cdef double* s_S            # G x K^2: S_j
    cdef double* s_Z            # G x N: pairs of dense rows (zeros for sparse ones)
    cdef double* s_loss
    cdef double* s_sw
    cdef unsigned char* s_dense
    cdef int* klo               # n_threads + 1 bounds of the columns (a, c)
    cdef int failed             # the refactorisation failed (thread 0 sets it)

    def __cinit__(self, RowDataset ds, state, opts, Py_ssize_t start, Py_ssize_t stop,
                  int n_threads):
        cdef Py_ssize_t i, n_w = 0
        cdef long long row_start
        cdef const int* ind
        cdef int nnz, k, d1, K
        cdef double yv, sw
        bind_kernel(&self.kr, state, opts, ds.n_features)
        if self.kr.route != REFACTOR or self.kr.K < 2:
            raise ValueError("a BatchTeamPass runs batches refactored by Cholesky, with "
                             "several classes, only")
        self._start(ds, state, n_threads)
        K, d1 = self.kr.K, self.kr.d1
        self.KK = K * K
        self.N = d1 * (d1 + 1) // 2
        self.G = min(self.kr.batch_size, DENSE_CHUNK)
        memset(&self.b, 0, sizeof(BatchWork))
        self.b.Lw = self.shared.doubles(<size_t>self.kr.P * self.kr.P)
        self.b.Out = self.shared.doubles(<size_t>self.KK * self.N)
        self.xd = <double**>self.shared.flags(n_threads * sizeof(double*))
        self.wrows = <Py_ssize_t*>self.shared.flags((stop - start) * sizeof(Py_ssize_t))
        for i in range(start, stop):
            row_span(ds, i, &row_start, &ind, &nnz, &yv, &sw)
            if sw != 0.0:
                self.wrows[n_w] = i
                n_w += 1
        self.n_w = n_w
        self.s_nz = self.shared.ints(self.G)
        self.s_r = self.shared.ints(self.G)
        self.s_idx = self.shared.ints(<size_t>self.G * d1)
        self.s_val = self.shared.doubles(<size_t>self.G * d1)
        self.s_coef = self.shared.doubles(<size_t>self.G * K)
        self.s_S = self.shared.doubles(<size_t>self.G * self.KK)
        self.s_Z = self.shared.doubles(<size_t>self.G * self.N)
        self.s_loss = self.shared.doubles(self.G)
        self.s_sw = self.shared.doubles(self.G)
        self.s_dense = self.shared.flags(self.G)
        self.klo = self.shared.ints(n_threads + 1)
        for k in range(n_threads + 1):
            self.klo[k] = <int>((<long long>self.KK * k) // n_threads)
        self.tot = start_totals(state.t)
        self.failed = 0

    def run(self, int k):
        """Thread ``k``'s part of the pass (``TeamPass.run``)."""
        cdef Workspace ws = self._thread_buffers(k)
        try:
            self.xd[k] = ws.doubles(self.kr.d1)
        except BaseException:
            barrier_abort(&self.barrier)
            raise
        with nogil:
            self.status[k] = batch_team_pass(self, k)

    def result(self):
        """``(status, totals)`` as ``TeamPass.result``."""
        return self._status(), self.tot

    def finish(self, bint m_stale):
        """The end of the call (``full_epochs``' ``REFACTOR`` end): ``M =
        Sigma^-1`` from the last factor, ``Sigma``'s lower triangle."""
        with nogil:
            if not self.b.factored and m_stale:     # (no row: Sigma grew only)
                refactor_flush(&self.kr, &self.b)
            refactor_finish(&self.kr, &self.b)


cdef void slot_fill(BatchTeamPass tp, int s, Example* ex, double* xd) noexcept nogil:
    """Slot ``s`` of the group from the bound of ``ex``: its row, loss, weight,
    gradient coefficients (``add_gradient``'s, batch mode), ``S_j``
    (``sigma_add``'s sums) and, for a dense row, its pairs ``xt_i xt_k``
    (``dense_flush``'s ``Z``)."""
    cdef const FullRankKernel* kr = &tp.kr
    cdef int K = kr.K, d1 = kr.d1
    cdef double* S = tp.s_S + <size_t>s * tp.KK
    cdef double* Z = tp.s_Z + <size_t>s * tp.N
    cdef double* coef = tp.s_coef + <size_t>s * K
    tp.s_nz[s] = ex.nz
    tp.s_r[s] = ex.r
    memcpy(tp.s_idx + <size_t>s * d1, ex.idx, ex.nz * sizeof(int))
    memcpy(tp.s_val + <size_t>s * d1, ex.val, ex.nz * sizeof(double))
    tp.s_loss[s] = ex.loss
    tp.s_sw[s] = ex.sw
    if kr.surrogate:
        surrogate_coef(ex, coef)
    else:
        memcpy(coef, ex.gcoef, K * sizeof(double))
    bound_curvature(ex, S)
    tp.s_dense[s] = ex.r > 0 and dense_row(kr, ex)
    if not tp.s_dense[s]:
        memset(Z, 0, tp.N * sizeof(double))
        return
    dense_xt(ex, d1, xd)
    dense_pairs(xd, d1, Z)


cdef int batch_team_pass(BatchTeamPass tp, int k) noexcept nogil:
    """Thread ``k``'s part of ``tp``'s pass (``BatchTeamPass``). Returns 1 at
    the end, 0 when ``Sigma`` was not positive definite, -1 when aborted."""
    cdef FullRankKernel* kr = &tp.kr
    cdef Example* ex = &tp.ex[k]
    cdef FullRankWork* w = &tp.w[k]
    cdef Barrier* bar = &tp.barrier
    cdef int J = tp.n_threads, K = kr.K, P = kr.P, d1 = kr.d1, B = kr.batch_size
    cdef int N = tp.N, KK = tp.KK, c0 = tp.klo[k], nc = tp.klo[k + 1] - tp.klo[k]
    cdef int n, s, s0, s1, a, col, q, i, kk, sense = 0, any_dense
    cdef Py_ssize_t pos = 0, bend, gend
    cdef double one = 1.0, zero = 0.0
    cdef char cN = b'N'
    cdef char cT = b'T'
    cdef const int* idx
    cdef const double* val
    cdef double* Sig = kr.Sigma
    cdef double* Out = tp.b.Out
    cdef size_t base
    while pos < tp.n_w:
        bend = min(tp.n_w, pos - pos % B + B)
        gend = min(bend, pos + tp.G)
        n = <int>(gend - pos)
        # 1. own rows: bounds at the batch's weights, into the slots
        s0 = <int>((<long long>n * k) // J)
        s1 = <int>((<long long>n * (k + 1)) // J)
        for s in range(s0, s1):
            read_row(tp.ds, tp.wrows[pos + s], ex, kr.n_features, kr.fit_intercept)
            example_scores(ex, kr.theta)
            example_bound(ex)
            slot_fill(tp, s, ex, tp.xd[k])
        if not barrier_wait(bar, &sense):
            return -1
        # 2. thread 0: sums, mu, sparse rows into Sigma, in order; all: own columns of Out
        if k == 0:
            for s in range(n):
                tp.tot.loss_sum += tp.s_sw[s] * tp.s_loss[s]
                tp.tot.w_sum += tp.s_sw[s]
                tp.tot.t += 1
                idx = tp.s_idx + <size_t>s * d1
                val = tp.s_val + <size_t>s * d1
                add_outer(kr.mu, K, tp.s_coef + <size_t>s * K, idx, val, tp.s_nz[s])
                if tp.s_r[s] > 0 and not tp.s_dense[s]:
                    scatter_sparse(Sig, P, K, tp.s_S + <size_t>s * KK, idx, val, tp.s_nz[s])
        any_dense = 0
        for s in range(n):
            any_dense = any_dense or tp.s_dense[s]
        if any_dense and nc > 0:
            # column-major: Out^T[:, own] (N x nc) = Z^T (N x n) . S[:, own] (n x nc)
            dgemm(&cN, &cT, &N, &nc, &n, &one, tp.s_Z, &N, tp.s_S + c0, &KK, &zero,
                  Out + <size_t>c0 * N, &N)
        if not barrier_wait(bar, &sense):
            return -1
        # 3. own columns (a, c) of Out into Sigma's upper triangle
        if any_dense:
            for col in range(c0, c0 + nc):
                a = col // K
                q = 0
                for i in range(d1):
                    for kk in range(i, d1):
                        base = <size_t>(i * K + a) * P + kk * K + col % K
                        Sig[base] += Out[<size_t>col * N + q]
                        q += 1
        # (the next group of the batch reads neither Out nor Sigma before its
        # first meeting: no meeting here)
        if gend == bend:
            if not barrier_wait(bar, &sense):
                return -1
            # 4. the batch's end: regulariser, refactorisation, step (thread 0)
            if k == 0:
                add_batch_regulariser(kr, <int>(bend - (bend - 1) // B * B))
                # (tp.b keeps no dense rows: only the Cholesky factor)
                if refactor_flush(kr, &tp.b):
                    full_step(kr, w.wrk, tp.b.Lw)
                else:
                    tp.failed = 1
            if not barrier_wait(bar, &sense):
                return -1
            if tp.failed:
                return 0
        pos = gend
    return 1
