# The per-example update of low-rank SBM (Section 3.2), inlined into the
# pass of ``_sbm_lowrank.pyx``: the row split into head and tail, the
# example's curvature into the low-rank head (``_sbm_lowrank_sigma``) and the
# diagonal tail, its gradient into ``mu``, and the step on the head. The tail
# coordinates are caught up lazily (``_sbm_lazy``).
from libc.math cimport fabs, sqrt

from ._dataset cimport RowDataset, SKSO_PREFETCH_READ
from ._linalg cimport strided_dot
from ._sbm_bound cimport Example, example_bound
from ._sbm_lazy cimport advance_tail
from ._sbm_lowrank_sigma cimport LowRank, merge, woodbury_solve


cdef struct LowRankKernel:
    # the kernel's view of a LowRankState and its SBMOptions
    int K                   # outputs
    int P                   # parameters, (n_features + fit_intercept) K
    int H                   # head coordinates
    Py_ssize_t n_features
    bint fit_intercept
    int icpt_lo             # first head coordinate of the intercept (none: -2K - 1)
    int batch_size
    long long n_steps       # examples in a pass (rows with non-zero weight)
    double alpha
    double eta
    const int* head_slot    # n_features + 1
    double* theta           # P (tail entries; the head's are in theta_head)
    double* mu              # P (tail entries)
    double* D               # P (tail entries)
    double* theta_head      # H
    double* mu_head         # H
    long long* tau          # n_features


cdef struct RowParts:
    # one row split into head and tail entries, and the scratch of its update
    int nh                  # head entries
    int nt                  # tail entries
    int* hslot              # head slot of each head entry
    double* hval
    int* tfeat              # feature of each tail entry
    double* tval
    double nh2              # ||xh||^2
    double nt2              # ||xtl||^2
    double nt1              # ||xtl||_1
    double* z               # H + 1: one head factor, the input of merge
    int* zidx               # H + 1: its non-zeros
    double* rowabs          # K: row sums of |S_j|
    double* phi_head        # H + 1: the head step


cdef inline void prefetch_tail(RowDataset ds, Py_ssize_t k,
                               const LowRankKernel* kr) noexcept nogil:
    """Prefetch the tail state (``theta``, ``mu``, ``D``, ``tau``) of the
    features of the k-th sparse row in the current order."""
    cdef Py_ssize_t i, q
    cdef long long kk
    cdef int f, K = kr.K
    if not ds.is_sparse or k >= ds.n_samples:
        return
    i = ds.order_ptr[k]
    for kk in range(ds.indptr_ptr[i], ds.indptr_ptr[i + 1]):
        f = ds.indices_ptr[kk]
        if kr.head_slot[f] < 0:
            q = <Py_ssize_t>f * K
            SKSO_PREFETCH_READ(kr.theta + q)
            SKSO_PREFETCH_READ(kr.mu + q)
            SKSO_PREFETCH_READ(kr.D + q)
            SKSO_PREFETCH_READ(kr.tau + f)


cdef inline void split_row(const LowRankKernel* kr, const Example* ex, RowParts* rp,
                           long long step) noexcept nogil:
    """Split the row into head and tail entries, and catch the tail
    coordinates up to ``step`` (their lazy recurrence, ``advance_tail``)
    before the example reads them."""
    cdef int j, a, slot, K = kr.K, nh = 0, nt = 0
    cdef Py_ssize_t q
    cdef double eta = kr.eta, alpha = kr.alpha, nh2 = 0.0, nt2 = 0.0, nt1 = 0.0
    cdef long long bsz = kr.batch_size, n_steps = kr.n_steps
    cdef const int* head_slot = kr.head_slot
    cdef double* th = kr.theta
    cdef double* mup = kr.mu
    cdef const double* Dp = kr.D
    cdef long long* taup = kr.tau
    for j in range(ex.nz):
        slot = head_slot[ex.idx[j]]
        if slot >= 0:
            rp.hslot[nh] = slot
            rp.hval[nh] = ex.val[j]
            nh2 += ex.val[j] * ex.val[j]
            nh += 1
        else:
            rp.tfeat[nt] = ex.idx[j]
            rp.tval[nt] = ex.val[j]
            nt2 += ex.val[j] * ex.val[j]
            nt1 += fabs(ex.val[j])
            q = <Py_ssize_t>ex.idx[j] * K
            for a in range(K):
                advance_tail(th + q + a, mup + q + a, eta / Dp[q + a], alpha,
                             taup[ex.idx[j]], step, bsz, n_steps)
            taup[ex.idx[j]] = step
            nt += 1
    rp.nh = nh
    rp.nt = nt
    rp.nh2 = nh2
    rp.nt2 = nt2
    rp.nt1 = nt1


cdef inline void row_scores(const LowRankKernel* kr, Example* ex,
                            const RowParts* rp) noexcept nogil:
    """``scores[a] = theta_a . xt`` from the head and the (caught-up) tail."""
    cdef int j, a, K = kr.K
    cdef Py_ssize_t q
    cdef const double* thh = kr.theta_head
    cdef const double* th = kr.theta
    for a in range(K):
        ex.scores[a] = 0.0
    for j in range(rp.nh):
        for a in range(K):
            ex.scores[a] += rp.hval[j] * thh[rp.hslot[j] * K + a]
    for j in range(rp.nt):
        q = <Py_ssize_t>rp.tfeat[j] * K
        for a in range(K):
            ex.scores[a] += rp.tval[j] * th[q + a]


cdef inline void merge_head(const LowRankKernel* kr, LowRank* lr, const Example* ex,
                            const RowParts* rp, double fh) noexcept nogil:
    """Merge the head part ``fh S_j (x) xh xh^T`` factor by factor: ``z =
    sqrt(fh) (L_l (x) xh)`` for each of the ``r`` factors (``merge``)."""
    cdef int f, j, a, K = kr.K, nh = rp.nh
    cdef Py_ssize_t hidx
    cdef double sc = sqrt(fh)
    cdef double* z = rp.z
    cdef int* zidx = rp.zidx
    for f in range(ex.r):
        for hidx in range(kr.H):
            z[hidx] = 0.0
        for j in range(nh):
            for a in range(K):
                z[rp.hslot[j] * K + a] = sc * ex.Lt[f * K + a] * rp.hval[j]
                zidx[j * K + a] = rp.hslot[j] * K + a
        lr.nzi = nh * K
        merge(lr, z)


cdef inline void bound_tail(const LowRankKernel* kr, const Example* ex, const RowParts* rp,
                            double ft) noexcept nogil:
    """The tail part ``ft S_j (x) xtl xtl^T`` into the diagonal:
    ``D_i += ft (|S_j| 1)_a ||xtl||_1 |x_i|``."""
    cdef int j, a, b, K = kr.K, r = ex.r
    cdef Py_ssize_t q
    cdef double v, sc, nt1 = rp.nt1
    cdef double* rowabs = rp.rowabs
    cdef double* Dp = kr.D
    for a in range(K):
        v = 0.0
        for b in range(K):
            sc = strided_dot(r, ex.Lt + a, K, ex.Lt + b, K)     # (L L^T)_ab
            v += fabs(sc)
        rowabs[a] = v
    for j in range(rp.nt):
        q = <Py_ssize_t>rp.tfeat[j] * K
        for a in range(K):
            Dp[q + a] += ft * rowabs[a] * nt1 * fabs(rp.tval[j])


cdef inline void add_gradient(const LowRankKernel* kr, const Example* ex,
                              const RowParts* rp) noexcept nogil:
    """``mu += s_j (c_j - F[y_j]) (x) xt`` (once per example) and ``alpha
    theta`` on the head; the tail's ``alpha theta`` is in its lazy
    recurrence."""
    cdef int j, a, K = kr.K, icpt_lo = kr.icpt_lo
    cdef Py_ssize_t q, hidx
    cdef double alpha = kr.alpha
    cdef double* muh = kr.mu_head
    cdef double* mup = kr.mu
    cdef const double* thh = kr.theta_head
    for j in range(rp.nh):
        for a in range(K):
            muh[rp.hslot[j] * K + a] += ex.gcoef[a] * rp.hval[j]
    for j in range(rp.nt):
        q = <Py_ssize_t>rp.tfeat[j] * K
        for a in range(K):
            mup[q + a] += ex.gcoef[a] * rp.tval[j]
    for hidx in range(kr.H):
        if hidx < icpt_lo or hidx >= icpt_lo + K:
            muh[hidx] += alpha * thh[hidx]


cdef inline void lowrank_example(const LowRankKernel* kr, LowRank* lr, Example* ex,
                                 RowParts* rp, long long step) noexcept nogil:
    """The update of one example (read by ``read_row``) before the step:
    Algorithm 1 at the current weights, its curvature split between the
    low-rank head and the diagonal tail, its gradient into ``mu``."""
    cdef double fh, ft, gsplit
    split_row(kr, ex, rp, step)
    row_scores(kr, ex, rp)
    example_bound(ex)
    if rp.nt == 0:
        fh = 1.0
        ft = 0.0
    elif rp.nh == 0:
        fh = 0.0
        ft = 1.0
    else:
        gsplit = sqrt(rp.nt2 / rp.nh2)
        fh = 1.0 + gsplit
        ft = 1.0 + 1.0 / gsplit
    if rp.nh > 0 and ex.r > 0:
        merge_head(kr, lr, ex, rp, fh)
    if rp.nt > 0 and ex.r > 0:
        bound_tail(kr, ex, rp, ft)
    add_gradient(kr, ex, rp)


cdef inline int lowrank_step(const LowRankKernel* kr, LowRank* lr, RowParts* rp) noexcept nogil:
    """Algorithm 2's step on the head, ``theta_h -= eta (V^T S V + D)^-1
    mu_h`` (the tail's is lazy). Returns 0 when the Woodbury system is
    singular."""
    cdef Py_ssize_t hidx
    cdef double eta = kr.eta
    cdef double* thh = kr.theta_head
    cdef const double* phih = rp.phi_head
    if kr.H == 0:
        return 1
    if not woodbury_solve(lr, kr.mu_head, rp.phi_head):
        return 0
    for hidx in range(kr.H):
        thh[hidx] -= eta * phih[hidx]
    return 1


cdef inline void finish_tail(const LowRankKernel* kr) noexcept nogil:
    """Bring every tail coordinate to the end of the pass (``tau`` back to 0)."""
    cdef long long fb
    cdef int a, K = kr.K
    cdef Py_ssize_t q
    cdef double* th = kr.theta
    cdef double* mup = kr.mu
    cdef const double* Dp = kr.D
    cdef long long* taup = kr.tau
    cdef long long bsz = kr.batch_size, n_steps = kr.n_steps
    for fb in range(kr.n_features):
        if kr.head_slot[fb] >= 0:
            continue
        q = <Py_ssize_t>fb * K
        for a in range(K):
            if th[q + a] != 0.0 or mup[q + a] != 0.0:
                advance_tail(th + q + a, mup + q + a, kr.eta / Dp[q + a], kr.alpha,
                             taup[fb], n_steps, bsz, n_steps)
        taup[fb] = 0
