"""The two heads of low-rank SBM behind one interface (``HeadOps``).

The head holds the weights of the head coordinates and their bound
``V^T S V + D_head`` (``_sbm_lowrank_bound``):

- the dense head (``V^T S V + diag(Dh)``, the tighter bound) steps every
  head coordinate at every step: O(k H) an example;
- the lazy head (``LowRankState.lazy_head``) is ``V^T S V + delta I`` with
  ``V = P V~`` (``P``: ``k x k``), the matrix analogue of the scale trick: a
  merge changes ``P`` and the columns of ``V~`` of the row's coordinates
  only. Between its touches a head coordinate ``x_h = (theta_h, mu_h)``
  moves by ``mu += alpha theta`` per example and, per step, ``theta -= (eta
  / delta) mu - v~_h . g`` with ``g = (eta / delta) P^T a`` (``head_solve``'s
  ``a``): the same 2 x 2 maps for every coordinate plus a forcing linear in
  ``v~_h``. So ``x_h = Phi (y_h + Gam v~_h)`` with one shared propagator
  ``Phi`` (2 x 2) and ``Gam`` (2 x k); a coordinate stores ``y_h``, and the
  step's ``V mu`` comes from the running sums ``Y = sum v~_h y_h^T`` and
  ``W = sum v~_h v~_h^T``. The intercept's ``K`` coordinates (no ``alpha``
  term) are kept explicit.

A pass (``_sbm_lowrank.lowrank_pass``) calls a head only through the
function pointers of ``HeadOps`` (``head_ops`` picks the form once per
call), so the functions here are reached by one indirect call each, as
they were before they had a module of their own.
"""
from libc.math cimport fabs, sqrt

from ._linalg cimport householder_rows, solve_small
from ._sbm_lowrank_bound cimport head_solve, merge, merge_small, woodbury_solve


cdef inline void small_matvec(int k, const double* A, const double* x,
                              double* out) noexcept nogil:
    """``out = A x`` for a ``k x k`` row-major ``A`` (``out`` not ``x``): a
    column of ``V`` from its ``V~`` column, ``P v~_h``."""
    cdef int r, s
    cdef double v
    for r in range(k):
        v = 0.0
        for s in range(k):
            v += A[r * k + s] * x[s]
        out[r] = v


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
        small_matvec(k, hd.C, hd.vt + <size_t>h * k, q)
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


cdef void head_start(Head* hd, const LowRank* lr) noexcept nogil:
    """Start a pass from the explicit head (``th``, ``mu``, the rows ``V``):
    ``V~ = V``, ``P = I``, ``Phi = I``, ``Gam = 0``, so ``y_h = x_h``."""
    cdef int h, r, k = hd.k
    for h in range(hd.H):
        for r in range(k):
            hd.vt[<size_t>h * k + r] = lr.V[<size_t>r * hd.H + h]
        hd.held[h] = 0
    for r in range(k * k):
        hd.P[r] = 1.0 if r % (k + 1) == 0 else 0.0
    restart_propagator(hd)


cdef void head_finish(Head* hd, LowRank* lr) noexcept nogil:
    """End a pass: the head explicit again (``th``, ``mu`` and ``V = P V~``)."""
    cdef int h, r, k = hd.k
    flush_lazy(hd)
    for h in range(hd.H):
        small_matvec(k, hd.P, hd.vt + <size_t>h * k, hd.q)
        for r in range(k):
            lr.V[<size_t>r * hd.H + h] = hd.q[r]


cdef void dense_merge(LowRank* lr, Head* hd, const Example* ex, RowParts* rp,
                      double fh) noexcept nogil:
    """Merge the head part ``fh S_j (x) xh xh^T`` into the dense head factor
    by factor: ``z = sqrt(fh) (L_l (x) xh)`` for each of the ``r`` factors
    (``merge``, O(k H) each)."""
    cdef int f, j, a, K = hd.K, nh = rp.nh
    cdef Py_ssize_t hidx
    cdef double sc = sqrt(fh)
    cdef double* z = rp.z
    cdef int* zidx = rp.zidx
    for f in range(ex.r):
        for hidx in range(hd.H):
            z[hidx] = 0.0
        for j in range(nh):
            for a in range(K):
                z[rp.hslot[j] * K + a] = sc * ex.Lt[f * K + a] * rp.hval[j]
                zidx[j * K + a] = rp.hslot[j] * K + a
        lr.nzi = nh * K
        merge(lr, z)


cdef void lazy_merge(LowRank* lr, Head* hd, const Example* ex, RowParts* rp,
                     double fh) noexcept nogil:
    """``dense_merge`` on the lazy head: ``z`` packed on the row's (held)
    coordinates, ``merge_lazy``, O(k nz + k^4) each."""
    cdef int f, j, a, K = hd.K, nh = rp.nh
    cdef double sc = sqrt(fh)
    cdef double* z = rp.z
    cdef int* zidx = rp.zidx
    for f in range(ex.r):
        for j in range(nh):
            for a in range(K):
                z[j * K + a] = sc * ex.Lt[f * K + a] * rp.hval[j]
                zidx[j * K + a] = rp.hslot[j] * K + a
        merge_lazy(hd, lr, zidx, z, nh * K)


cdef void dense_regularise(Head* hd, const RowParts* rp, double alpha) noexcept nogil:
    """``mu_h += alpha theta_h`` on every head coordinate but the intercept's."""
    cdef int hidx
    for hidx in range(hd.H):
        if not always_explicit(hd, hidx):
            hd.mu[hidx] += alpha * hd.th[hidx]


cdef void lazy_regularise(Head* hd, const RowParts* rp, double alpha) noexcept nogil:
    """``mu_h += alpha theta_h``: explicitly on the held coordinates, for the
    others through ``Phi`` (``[[1, 0], [alpha, 1]] Phi``)."""
    cdef int j, a, hidx, K = hd.K
    for j in range(rp.nh):
        for a in range(K):
            hidx = rp.hslot[j] * K + a
            if not always_explicit(hd, hidx):
                hd.mu[hidx] += alpha * hd.th[hidx]
    hd.phi[2] += alpha * hd.phi[0]
    hd.phi[3] += alpha * hd.phi[1]


cdef void no_pass_op(Head* hd, const LowRank* lr) noexcept nogil:
    pass


cdef void no_row_op(Head* hd, const RowParts* rp) noexcept nogil:
    pass


cdef void no_finish(Head* hd, LowRank* lr) noexcept nogil:
    pass


cdef void hold_row(Head* hd, const RowParts* rp) noexcept nogil:
    cdef int j, a, K = hd.K
    for j in range(rp.nh):
        for a in range(K):
            hold(hd, rp.hslot[j] * K + a)


cdef void release_row(Head* hd, const RowParts* rp) noexcept nogil:
    cdef int j, a, K = hd.K
    for j in range(rp.nh):
        for a in range(K):
            release(hd, rp.hslot[j] * K + a)


cdef int dense_step(Head* hd, LowRank* lr, RowParts* rp, double eta) noexcept nogil:
    """Algorithm 2's step on the dense head, ``theta_h -= eta (V^T S V +
    diag(Dh))^-1 mu_h`` by Woodbury. Returns 0 when its system is singular."""
    cdef Py_ssize_t hidx
    if not woodbury_solve(lr, hd.mu, rp.phi_head):
        return 0
    for hidx in range(hd.H):
        hd.th[hidx] -= eta * rp.phi_head[hidx]
    return 1


cdef int lazy_head_step(Head* hd, LowRank* lr, RowParts* rp, double eta) noexcept nogil:
    return lazy_step(hd, lr, eta)


cdef HeadOps head_ops(bint lazy) noexcept nogil:
    """The lazy head's operations, or the dense head's."""
    cdef HeadOps ops
    if lazy:
        ops.begin, ops.enter, ops.merge = head_start, hold_row, lazy_merge
        ops.regularise, ops.leave = lazy_regularise, release_row
        ops.step, ops.finish = lazy_head_step, head_finish
    else:
        ops.begin, ops.enter, ops.merge = no_pass_op, no_row_op, dense_merge
        ops.regularise, ops.leave = dense_regularise, no_row_op
        ops.step, ops.finish = dense_step, no_finish
    return ops


cdef int head_init(Head* hd, Workspace ws, int k, int H) except -1:
    """Give ``hd`` its buffers from ``ws`` (``th`` and ``mu`` are the state's)."""
    cdef size_t kk = <size_t>k * k
    hd.vt = ws.doubles(<size_t>H * k)
    hd.held = ws.flags(H)
    hd.P = ws.doubles(kk)
    hd.gam = ws.doubles(2 * k)
    hd.Y = ws.doubles(2 * k)
    hd.W = ws.doubles(kk)
    hd.q = ws.doubles(k)
    hd.u = ws.doubles(k)
    hd.M = ws.doubles(kk)
    hd.Pn = ws.doubles(kk)
    hd.C = ws.doubles((k + 1) * k)
    hd.f = ws.doubles(k + 1)
    hd.work = ws.doubles(k + 1)
    return 0
