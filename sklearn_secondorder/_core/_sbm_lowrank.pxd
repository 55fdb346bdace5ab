# The per-example update of low-rank SBM (Section 3.2), inlined into the
# pass of ``_sbm_lowrank.pyx``: the row split into head and tail, the
# example's curvature into the low-rank head (``_sbm_lowrank_sigma``) and the
# diagonal tail, its gradient into ``mu``, and the step. With the lazy head
# both parts are lazy, so an example costs O(k nnz) plus ``k x k`` work,
# whatever ``H`` and the number of features:
#
# - a tail coordinate moves between its touches by a fixed linear recurrence
#   (``_sbm_lazy``), applied in closed form when it is next touched;
# - the lazy head (``LowRankState.lazy_head``) is ``V^T S V + delta I`` with
#   ``V = P V~`` (``P``: ``k x k``),
#   the matrix analogue of the scale trick: a merge changes ``P`` and the
#   columns of ``V~`` of the row's coordinates only. Between its touches a
#   head coordinate ``x_h = (theta_h, mu_h)`` moves by ``mu += alpha theta``
#   per example and, per step, ``theta -= (eta / delta) mu - v~_h . g`` with
#   ``g = (eta / delta) P^T a`` (``head_solve``'s ``a``): the same 2 x 2 maps
#   for every coordinate plus a forcing linear in ``v~_h``. So ``x_h = Phi
#   (y_h + Gam v~_h)`` with one shared propagator ``Phi`` (2 x 2) and
#   ``Gam`` (2 x k); a coordinate stores ``y_h``, and the step's ``V mu`` comes
#   from the running sums ``Y = sum v~_h y_h^T`` and ``W = sum v~_h v~_h^T``.
#   The intercept's ``K`` coordinates (no ``alpha`` term) are kept explicit.
#
# The dense head (``V^T S V + diag(Dh)``, a tighter bound) instead steps every
# head coordinate at every step: O(k H) an example.
from libc.math cimport fabs, sqrt

from ._dataset cimport RowDataset, SKSO_PREFETCH_READ
from ._linalg cimport householder_rows, solve_small, strided_dot
from ._sbm_bound cimport Example, example_bound
from ._sbm_lazy cimport advance_tail
from ._sbm_lowrank_sigma cimport LowRank, head_solve, merge, merge_small, woodbury_solve


cdef struct LowRankKernel:
    # the kernel's view of a LowRankState and its SBMOptions
    int K                   # outputs
    int P                   # parameters, (n_features + fit_intercept) K
    int H                   # head coordinates
    Py_ssize_t n_features
    bint fit_intercept
    int batch_size
    bint lazy_head          # the lazy head (else the dense one)
    long long n_steps       # examples in a pass (rows with non-zero weight)
    double alpha
    double eta
    const int* head_slot    # n_features + 1
    double* theta           # P (tail entries; the head's are in Head.th)
    double* mu              # P (tail entries)
    double* D               # P (tail entries)
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
    double* z               # H + 1: one head factor (lazy head: packed, on zidx)
    int* zidx               # H + 1: its non-zeros
    double* rowabs          # K: row sums of |S_j|
    double* phi_head        # H + 1: the dense head's step


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


cdef struct Head:
    # the head's weights (both forms), and the lazy head's state between the
    # coordinates' touches (see the module comment)
    int k
    int H
    int K
    int icpt_lo             # the intercept's K coordinates, always explicit (none: -2K - 1)
    int since_flush         # steps since Phi was last I
    double* th              # H: theta, explicit while held (and the intercept), else y
    double* mu              # H: mu, likewise
    double* vt              # H x k: V~ (coordinate h's column of V is P vt_h)
    double* P               # k x k
    double phi[4]           # the shared propagator, row-major (determinant 1)
    double* gam             # 2 x k
    double* Y               # k x 2: sum over the lazy coordinates of vt_h y_h^T
    double* W               # k x k: sum over the lazy coordinates of vt_h vt_h^T
    unsigned char* held     # H: 1 while the current example holds it explicit
    # scratch
    double* q               # k
    double* u               # k
    double* M               # k x k
    double* Pn              # k x k
    double* C               # (k + 1) x k
    double* f               # k + 1
    double* work            # k + 1


cdef inline bint always_explicit(const Head* hd, int h) noexcept nogil:
    """The intercept's coordinates (no ``alpha theta`` term) are never lazy."""
    return hd.icpt_lo <= h < hd.icpt_lo + hd.K


cdef inline void lazy_value(const Head* hd, int h, double* th, double* mu) noexcept nogil:
    """``(theta_h, mu_h) = Phi (y_h + Gam v~_h)`` of a lazy coordinate."""
    cdef int s, k = hd.k
    cdef double s0 = hd.th[h], s1 = hd.mu[h]
    cdef const double* v = hd.vt + <size_t>h * k
    for s in range(k):
        s0 += hd.gam[s] * v[s]
        s1 += hd.gam[k + s] * v[s]
    th[0] = hd.phi[0] * s0 + hd.phi[1] * s1
    mu[0] = hd.phi[2] * s0 + hd.phi[3] * s1


cdef inline void add_to_sums(Head* hd, int h, double sign) noexcept nogil:
    """``Y += sign v~_h y_h^T``, ``W += sign v~_h v~_h^T``."""
    cdef int r, s, k = hd.k
    cdef const double* v = hd.vt + <size_t>h * k
    for r in range(k):
        hd.Y[2 * r] += sign * v[r] * hd.th[h]
        hd.Y[2 * r + 1] += sign * v[r] * hd.mu[h]
        for s in range(k):
            hd.W[r * k + s] += sign * v[r] * v[s]


cdef inline void hold(Head* hd, int h) noexcept nogil:
    """Make coordinate ``h`` explicit for the current example (out of the sums)."""
    cdef double th, mu
    if hd.held[h] or always_explicit(hd, h):
        return
    add_to_sums(hd, h, -1.0)
    lazy_value(hd, h, &th, &mu)
    hd.th[h] = th
    hd.mu[h] = mu
    hd.held[h] = 1


cdef inline void release(Head* hd, int h) noexcept nogil:
    """Back to lazy: ``y_h = Phi^-1 x_h - Gam v~_h``, into the sums."""
    cdef int s, k = hd.k
    cdef double x0 = hd.th[h], x1 = hd.mu[h], y0, y1
    cdef double det = hd.phi[0] * hd.phi[3] - hd.phi[1] * hd.phi[2]
    cdef const double* v = hd.vt + <size_t>h * k
    if not hd.held[h]:
        return
    y0 = (hd.phi[3] * x0 - hd.phi[1] * x1) / det
    y1 = (hd.phi[0] * x1 - hd.phi[2] * x0) / det
    for s in range(k):
        y0 -= hd.gam[s] * v[s]
        y1 -= hd.gam[k + s] * v[s]
    hd.th[h] = y0
    hd.mu[h] = y1
    add_to_sums(hd, h, 1.0)
    hd.held[h] = 0


cdef inline void recompute_sums(Head* hd) noexcept nogil:
    """``Y`` and ``W`` from scratch (their running updates drift by rounding)."""
    cdef int h, i, k = hd.k
    for i in range(2 * k):
        hd.Y[i] = 0.0
    for i in range(k * k):
        hd.W[i] = 0.0
    for h in range(hd.H):
        if not hd.held[h] and not always_explicit(hd, h):
            add_to_sums(hd, h, 1.0)


cdef inline void restart_propagator(Head* hd) noexcept nogil:
    """``Phi = I``, ``Gam = 0``, for coordinates that are explicit (``y_h = x_h``)."""
    cdef int i
    hd.phi[0] = 1.0
    hd.phi[1] = 0.0
    hd.phi[2] = 0.0
    hd.phi[3] = 1.0
    for i in range(2 * hd.k):
        hd.gam[i] = 0.0
    hd.since_flush = 0
    recompute_sums(hd)


cdef inline void make_explicit(Head* hd) noexcept nogil:
    """Every lazy coordinate's ``x_h`` into ``th``, ``mu`` (a restart must follow)."""
    cdef int h
    cdef double th, mu
    for h in range(hd.H):
        if not hd.held[h] and not always_explicit(hd, h):
            lazy_value(hd, h, &th, &mu)
            hd.th[h] = th
            hd.mu[h] = mu


cdef inline void flush_lazy(Head* hd) noexcept nogil:
    """Every lazy coordinate explicit, and ``Phi = I``, ``Gam = 0`` (then ``y_h
    = x_h``): O(k H), every ``H`` steps at most and at the end of a pass."""
    make_explicit(hd)
    restart_propagator(hd)


cdef inline int invert_small(int k, const double* A, double* Ainv, double* M,
                             double* col) noexcept nogil:
    """``Ainv = A^-1`` (``k x k``) column by column; 0 when ``A`` is singular
    or ``||A||_F ||A^-1||_F > 10 k`` (``k`` for an orthogonal ``A``): ``V = P
    V~`` loses about ``log10`` of that many digits, and the step's Woodbury
    system amplifies them by ``||S|| / delta``."""
    cdef int i, j
    cdef double na = 0.0, ni = 0.0
    for j in range(k):
        for i in range(k * k):
            M[i] = A[i]
        for i in range(k):
            col[i] = 1.0 if i == j else 0.0
        if not solve_small(k, M, col):
            return 0
        for i in range(k):
            Ainv[i * k + j] = col[i]
    for i in range(k * k):
        na += A[i] * A[i]
        ni += Ainv[i] * Ainv[i]
    return na * ni <= 100.0 * k * k


cdef inline void merge_lazy(Head* hd, LowRank* lr, const int* zidx, const double* z,
                            int nz) noexcept nogil:
    """Absorb ``z z^T`` (``z`` on the held coordinates ``zidx``) into ``V^T S V
    + delta I`` (``merge_small``) in O(k nz + k^4).

    ``[V; w] = C V~ + f z^T`` with ``C = [[P], [-p^T P / rho]]`` and ``f =
    e_k / rho``, so ``V' = (Q C)_:k V~ + (Q f)_:k z^T``: the new ``P`` is
    ``(Q C)_:k`` and only the columns of ``V~`` on ``z``'s coordinates change,
    by ``P^-1 (Q f)_:k z_h``. When the new ``P`` is (nearly) singular (the
    merge replaced a direction by one off the old span) the basis is rebuilt
    explicitly instead, in O(k^2 H).
    """
    cdef int k = hd.k, j, r, s, h
    cdef double zz = 0.0, v
    cdef double* q = hd.q
    for s in range(k):
        q[s] = 0.0
    for j in range(nz):
        zz += z[j] * z[j]
        for s in range(k):
            q[s] += hd.vt[<size_t>zidx[j] * k + s] * z[j]
    for r in range(k):
        v = 0.0
        for s in range(k):
            v += hd.P[r * k + s] * q[s]
        lr.p[r] = v
    if not merge_small(lr, zz):
        return
    for r in range(k):
        for s in range(k):
            hd.C[r * k + s] = hd.P[r * k + s]
    for s in range(k):
        v = 0.0
        for r in range(k):
            v += lr.p[r] * hd.P[r * k + s]
        hd.C[k * k + s] = -v / lr.rho
        hd.f[s] = 0.0
    hd.f[k] = 1.0 / lr.rho
    householder_rows(k + 1, k, lr.bq, lr.e, hd.C, hd.work)
    householder_rows(k + 1, 1, lr.bq, lr.e, hd.f, hd.work)
    if invert_small(k, hd.C, hd.Pn, hd.M, hd.work):
        # u = P'^-1 (Q f)_:k; the other columns of V keep P' v~_h
        for r in range(k):
            v = 0.0
            for s in range(k):
                v += hd.Pn[r * k + s] * hd.f[s]
            hd.u[r] = v
        for r in range(k * k):
            hd.P[r] = hd.C[r]
        for j in range(nz):
            for s in range(k):
                hd.vt[<size_t>zidx[j] * k + s] += hd.u[s] * z[j]
        return
    # rebuild: v~_h <- P' v~_h (+ (Q f)_:k z_h), P = I
    make_explicit(hd)
    for h in range(hd.H):
        for r in range(k):
            v = 0.0
            for s in range(k):
                v += hd.C[r * k + s] * hd.vt[<size_t>h * k + s]
            q[r] = v
        for r in range(k):
            hd.vt[<size_t>h * k + r] = q[r]
    for j in range(nz):
        for s in range(k):
            hd.vt[<size_t>zidx[j] * k + s] += hd.f[s] * z[j]
    for r in range(k):
        for s in range(k):
            hd.P[r * k + s] = 1.0 if r == s else 0.0
    restart_propagator(hd)


cdef inline int lazy_step(Head* hd, LowRank* lr, double eta) noexcept nogil:
    """Algorithm 2's step on the head, ``theta_h -= eta (V^T S V + delta I)^-1
    mu_h``, in O(k^3 + k K): explicit on the intercept, through ``Phi`` and
    ``Gam`` on the lazy coordinates. No coordinate is held. Returns 0 when
    the ``k x k`` system is singular."""
    cdef int k = hd.k, r, s, h, m
    cdef double c0, c1, v, c = eta / lr.delta, det
    cdef double* msum = hd.q
    cdef double* Wt = hd.M
    cdef double* vmu = hd.u
    cdef double* a = lr.a
    cdef double* g = hd.work
    cdef const double* vh
    # sum over the head of v~_h mu_h, and of v~_h v~_h^T
    for r in range(k):
        c0 = hd.Y[2 * r]
        c1 = hd.Y[2 * r + 1]
        for s in range(k):
            c0 += hd.W[r * k + s] * hd.gam[s]
            c1 += hd.W[r * k + s] * hd.gam[k + s]
        msum[r] = hd.phi[2] * c0 + hd.phi[3] * c1
        for s in range(k):
            Wt[r * k + s] = hd.W[r * k + s]
    if hd.icpt_lo >= 0:
        for h in range(hd.icpt_lo, hd.icpt_lo + hd.K):
            vh = hd.vt + <size_t>h * k
            for r in range(k):
                msum[r] += vh[r] * hd.mu[h]
                for s in range(k):
                    Wt[r * k + s] += vh[r] * vh[s]
    # V mu = P msum, G = P Wt P^T
    for r in range(k):
        v = 0.0
        for s in range(k):
            v += hd.P[r * k + s] * msum[s]
        vmu[r] = v
    for r in range(k):
        for s in range(k):
            v = 0.0
            for m in range(k):
                v += Wt[r * k + m] * hd.P[s * k + m]
            hd.Pn[r * k + s] = v                    # (Wt P^T)
    for r in range(k):
        for s in range(k):
            v = 0.0
            for m in range(k):
                v += hd.P[r * k + m] * hd.Pn[m * k + s]
            lr.G[r * k + s] = v
    if not head_solve(lr, lr.G, vmu, a):
        return 0
    # g = (eta / delta) P^T a: theta_h += -c mu_h + v~_h . g
    for s in range(k):
        v = 0.0
        for r in range(k):
            v += hd.P[r * k + s] * a[r]
        g[s] = c * v
    if hd.icpt_lo >= 0:
        for h in range(hd.icpt_lo, hd.icpt_lo + hd.K):
            vh = hd.vt + <size_t>h * k
            v = 0.0
            for s in range(k):
                v += vh[s] * g[s]
            hd.th[h] += -c * hd.mu[h] + v
    # Phi <- [[1, -c], [0, 1]] Phi, Gam += Phi^-1 e_1 g^T
    hd.phi[0] -= c * hd.phi[2]
    hd.phi[1] -= c * hd.phi[3]
    det = hd.phi[0] * hd.phi[3] - hd.phi[1] * hd.phi[2]
    for s in range(k):
        hd.gam[s] += hd.phi[3] / det * g[s]
        hd.gam[k + s] -= hd.phi[2] / det * g[s]
    hd.since_flush += 1
    # a flush every H steps costs O(k) a step; it also bounds how far Phi and
    # Gam drift from I and 0 (their growth would cost digits in x = Phi (y + Gam v))
    if (hd.since_flush >= hd.H or fabs(hd.phi[0]) + fabs(hd.phi[1]) + fabs(hd.phi[2])
            + fabs(hd.phi[3]) > 1e3):
        flush_lazy(hd)
    return 1


cdef inline void row_scores(const LowRankKernel* kr, const Head* hd, Example* ex,
                            const RowParts* rp) noexcept nogil:
    """``scores[a] = theta_a . xt`` from the (held) head and the (caught-up) tail."""
    cdef int j, a, K = kr.K
    cdef Py_ssize_t q
    cdef const double* thh = hd.th
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


cdef inline void merge_head(const LowRankKernel* kr, LowRank* lr, Head* hd,
                            const Example* ex, RowParts* rp, double fh) noexcept nogil:
    """Merge the head part ``fh S_j (x) xh xh^T`` factor by factor: ``z =
    sqrt(fh) (L_l (x) xh)`` for each of the ``r`` factors (``merge_lazy``, or
    ``merge`` on the dense head)."""
    cdef int f, j, a, K = kr.K, nh = rp.nh
    cdef Py_ssize_t hidx
    cdef double sc = sqrt(fh)
    cdef double* z = rp.z
    cdef int* zidx = rp.zidx
    for f in range(ex.r):
        if kr.lazy_head:
            for j in range(nh):
                for a in range(K):
                    z[j * K + a] = sc * ex.Lt[f * K + a] * rp.hval[j]
                    zidx[j * K + a] = rp.hslot[j] * K + a
            merge_lazy(hd, lr, zidx, z, nh * K)
            continue
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


cdef inline void add_gradient(const LowRankKernel* kr, Head* hd, const Example* ex,
                              const RowParts* rp) noexcept nogil:
    """``mu += s_j (c_j - F[y_j]) (x) xt + alpha theta`` (once per example),
    none of ``alpha theta`` on the intercept: on the dense head for every
    coordinate, on the lazy head for the held ones here and for the others
    through ``Phi`` (``[[1, 0], [alpha, 1]] Phi``), on the tail in its lazy
    recurrence."""
    cdef int j, a, K = kr.K, hidx
    cdef Py_ssize_t q
    cdef double alpha = kr.alpha
    cdef double* mup = kr.mu
    for j in range(rp.nh):
        for a in range(K):
            hidx = rp.hslot[j] * K + a
            hd.mu[hidx] += ex.gcoef[a] * rp.hval[j]
            if kr.lazy_head and not always_explicit(hd, hidx):
                hd.mu[hidx] += alpha * hd.th[hidx]
    for j in range(rp.nt):
        q = <Py_ssize_t>rp.tfeat[j] * K
        for a in range(K):
            mup[q + a] += ex.gcoef[a] * rp.tval[j]
    if kr.lazy_head:
        hd.phi[2] += alpha * hd.phi[0]
        hd.phi[3] += alpha * hd.phi[1]
        return
    for hidx in range(kr.H):
        if not always_explicit(hd, hidx):
            hd.mu[hidx] += alpha * hd.th[hidx]


cdef inline void lowrank_example(const LowRankKernel* kr, LowRank* lr, Head* hd,
                                 Example* ex, RowParts* rp, long long step) noexcept nogil:
    """The update of one example (read by ``read_row``) before the step:
    Algorithm 1 at the current weights, its curvature split between the
    low-rank head and the diagonal tail, its gradient into ``mu``. On the
    lazy head the row's head coordinates are held explicit meanwhile."""
    cdef int j, a, K = kr.K
    cdef double fh, ft, gsplit
    split_row(kr, ex, rp, step)
    if kr.lazy_head:
        for j in range(rp.nh):
            for a in range(K):
                hold(hd, rp.hslot[j] * K + a)
    row_scores(kr, hd, ex, rp)
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
        merge_head(kr, lr, hd, ex, rp, fh)
    if rp.nt > 0 and ex.r > 0:
        bound_tail(kr, ex, rp, ft)
    add_gradient(kr, hd, ex, rp)
    if kr.lazy_head:
        for j in range(rp.nh):
            for a in range(K):
                release(hd, rp.hslot[j] * K + a)


cdef inline int head_step(const LowRankKernel* kr, LowRank* lr, Head* hd,
                          RowParts* rp) noexcept nogil:
    """Algorithm 2's step on the head, ``theta_h -= eta (V^T S V + D)^-1
    mu_h`` (the tail's is lazy): ``lazy_step``, or Woodbury on the dense head.
    Returns 0 when the Woodbury system is singular."""
    cdef Py_ssize_t hidx
    if kr.H == 0:
        return 1
    if kr.lazy_head:
        return lazy_step(hd, lr, kr.eta)
    if not woodbury_solve(lr, hd.mu, rp.phi_head):
        return 0
    for hidx in range(kr.H):
        hd.th[hidx] -= kr.eta * rp.phi_head[hidx]
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
