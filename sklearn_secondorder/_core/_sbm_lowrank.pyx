"""Low-rank stochastic bound majorization (Choromanska & Jebara, Section 3.2).

``Sigma <= V^T S V + D_head`` on the *head* coordinates (the most frequent
features, all outputs, and the intercept; ``V``: ``k x H``), diagonal ``D``
on the others (the *tail*). A term ``S_j (x) xt xt^T`` with ``xt = xh +
xtl`` (head / tail parts) is split by ``(a + b)(a + b)^T <= (1 + g) a a^T +
(1 + 1/g) b b^T`` (``g = ||xtl|| / ||xh||``): the head part is merged factor
by factor (what leaves the rank-``k`` span goes into ``D_head``), the tail
part is bounded by ``diag(|S_j| 1) (x) ||xtl||_1 diag(|xtl|)``
(``bound_tail``). With every feature in the head this is the paper's
low-rank update.

``phi = Sigma^-1 mu`` is then block diagonal: Woodbury on the head,
``mu_i / D_i`` on the tail. The tail is applied lazily (the section "The
tail's lazy recurrence"). The head comes in two forms
(``LowRankState.lazy_head``), behind one interface (``HeadOps``, chosen once
per call by ``head_ops``):

- dense: ``D_head`` per coordinate; an example costs ``O(r k H + K nnz)``
  (``r <= K`` rank-one factors), a step ``O(k^2 H)``;
- lazy: ``D_head = delta I``, applied lazily too (the section "The
  per-example update"): an
  example costs ``O(k K nnz + r k^4)`` and a step ``O(k^3 + k K)``, whatever
  ``H`` and the number of features; every ``H`` steps, and at the end of a
  pass, the head is made explicit in ``O(k H)``. The bound is looser: a
  dropped direction's curvature lands on every head coordinate.

Sections, in the order an example meets them: the tail's lazy recurrence;
the low-rank bound ``V^T S V + D`` and its operations; the per-example
update and the two heads; the state, the passes and the test hooks. The
work buffers of a call are NumPy arrays owned by one ``Workspace``, taken
before the nogil section.
"""
from dataclasses import dataclass

import numpy as np

from libc.math cimport fabs, sqrt
from libc.string cimport memset

from ._dataset cimport RowDataset, SKSO_PREFETCH_READ, prefetch_row
from ._linalg cimport (
    axpy, dot, householder_rows, householder_sandwich, matmul, scal, smallest_eigvec,
    solve_small, strided_dot)
from ._numeric cimport all_finite
from ._sbm_bound cimport (
    Example, PassTotals, Workspace, check_rows, example_bound, example_init, finish_passes,
    read_row, start_totals)

from ._sbm_bound import SBMState


# ======================================================================================
# The tail's lazy recurrence
# ======================================================================================
# The lazy update of the diagonal (tail) coordinates of low-rank SBM
# (this module). Between two touches a tail coordinate moves only through
# ``mu += alpha theta`` and ``theta -= c mu`` with a fixed ``c = eta / D_i``:
# a linear recurrence, applied in closed form when the coordinate is next
# touched, so an example costs nothing for the features it does not have.
# Inline: ``advance_tail`` runs once per tail entry of every row.


cdef extern from *:
    """
    /* 1 / ((2j + 2)(2j + 3)) for j < 64, the denominators of the series of
       U_{n-1}(1 - eps/2), folded by the compiler: a table, not a division,
       in the series loop */
    #define SKSO_SBM_RECIP(j) (1.0 / ((2.0 * (j) + 2.0) * (2.0 * (j) + 3.0)))
    #define SKSO_SBM_RECIP4(j) SKSO_SBM_RECIP(j), SKSO_SBM_RECIP((j) + 1), \\
        SKSO_SBM_RECIP((j) + 2), SKSO_SBM_RECIP((j) + 3)
    #define SKSO_SBM_RECIP16(j) SKSO_SBM_RECIP4(j), SKSO_SBM_RECIP4((j) + 4), \\
        SKSO_SBM_RECIP4((j) + 8), SKSO_SBM_RECIP4((j) + 12)
    static const double skso_sbm_series_recip[64] = {
        SKSO_SBM_RECIP16(0), SKSO_SBM_RECIP16(16),
        SKSO_SBM_RECIP16(32), SKSO_SBM_RECIP16(48)};
    """
    const double* SERIES_RECIP "skso_sbm_series_recip"


cdef enum:
    N_SERIES_RECIP = 64


cdef inline void chebyshev_u(double eps, long long m, double* u1, double* u0) noexcept nogil:
    """``U_{m-1}(x)`` and ``U_{m-2}(x)`` at ``x = 1 - eps/2`` for ``eps m^2 <= 1`` (m >= 1).

    Series ``U_{n-1}(1 - eps/2) = sum_j (-eps)^j C(n+j, 2j+1)``, summed to
    machine precision (terms fall at least factorially when ``eps n^2 <= 1``).
    Both series run in one loop (two independent chains).
    """
    cdef long long n1 = m, n0 = m - 1, j = 0
    cdef double t1 = <double>n1, s1 = <double>n1, t0, s0, q
    cdef bint go1 = n1 > 1, go0
    if n0 <= 0:
        t0 = 0.0
        s0 = 0.0
        go0 = False
    else:
        t0 = <double>n0
        s0 = t0
        go0 = n0 > 1
    while go1 or go0:
        q = -eps * (SERIES_RECIP[j] if j < N_SERIES_RECIP
                    else 1.0 / ((2.0 * j + 2.0) * (2.0 * j + 3.0)))
        if go1:
            t1 *= q * (<double>(n1 + j + 1)) * (<double>(n1 - j - 1))
            s1 += t1
            go1 = not (fabs(t1) <= 1e-17 * fabs(s1)) and j + 2 < n1
        if go0:
            t0 *= q * (<double>(n0 + j + 1)) * (<double>(n0 - j - 1))
            s0 += t0
            go0 = not (fabs(t0) <= 1e-17 * fabs(s0)) and j + 2 < n0
        j += 1
    u1[0] = s1
    u0[0] = s0


cdef inline void batch_power(double c, double balpha, long long m, double* th,
                             double* mu) noexcept nogil:
    """Apply ``m`` full batches of the lazy tail recurrence to ``(th, mu)``.

    One batch: ``mu += b alpha th`` (``b`` examples of the regularisation
    term with ``th`` fixed), then ``th -= c mu`` (``c = eta / D_i``). The map
    ``A = [[1 - c b alpha, -c], [b alpha, 1]]`` has determinant 1, so
    ``A^m = U_{m-1} A - U_{m-2} I`` (Chebyshev polynomials of the second kind
    at ``trace(A)/2``); repeated squaring when the series would be long.
    """
    cdef double eps = c * balpha
    cdef double a11 = 1.0 - eps, a12 = -c, a21 = balpha, a22 = 1.0
    cdef double u1, u0, t0, m0
    cdef double p11, p12, p21, p22, q11, q12, q21, q22, r11, r12, r21, r22
    cdef long long _it
    if m <= 0:
        return
    if m <= 8:
        # short gaps (frequent features): step the batches directly
        t0 = th[0]
        m0 = mu[0]
        for _it in range(m):
            m0 += balpha * t0
            t0 -= c * m0
        th[0] = t0
        mu[0] = m0
        return
    if eps * (<double>m) * (<double>m) <= 1.0:
        chebyshev_u(eps, m, &u1, &u0)
        t0 = th[0]
        m0 = mu[0]
        th[0] = (u1 * a11 - u0) * t0 + u1 * a12 * m0
        mu[0] = u1 * a21 * t0 + (u1 * a22 - u0) * m0
        return
    # repeated squaring: P = A^m
    p11, p12, p21, p22 = 1.0, 0.0, 0.0, 1.0
    q11, q12, q21, q22 = a11, a12, a21, a22
    while m > 0:
        if m & 1:
            r11 = p11 * q11 + p12 * q21
            r12 = p11 * q12 + p12 * q22
            r21 = p21 * q11 + p22 * q21
            r22 = p21 * q12 + p22 * q22
            p11, p12, p21, p22 = r11, r12, r21, r22
        m >>= 1
        if m:
            r11 = q11 * q11 + q12 * q21
            r12 = q11 * q12 + q12 * q22
            r21 = q21 * q11 + q22 * q21
            r22 = q21 * q12 + q22 * q22
            q11, q12, q21, q22 = r11, r12, r21, r22
    t0 = th[0]
    m0 = mu[0]
    th[0] = p11 * t0 + p12 * m0
    mu[0] = p21 * t0 + p22 * m0


cdef inline void advance_tail(double* th, double* mu, double c, double alpha, long long tau,
                              long long t, long long b, long long n) noexcept nogil:
    """Apply steps ``tau .. t-1`` of one untouched (diagonal) coordinate.

    Step ``s``: ``mu += alpha th``; when ``s`` ends a batch (``(s+1) % b == 0``
    or ``s == n-1``): ``th -= c mu``. Closed form: a partial batch, ``m`` full
    batches (``batch_power``), a partial batch. Exact, O(1) per call.
    """
    cdef long long e1, s, m, rem
    if t <= tau:
        return
    if b == 1:
        # every step ends a batch (the general path below, without its divisions)
        mu[0] += alpha * th[0]
        th[0] -= c * mu[0]
        batch_power(c, alpha, t - tau - 1, th, mu)
        return
    e1 = (tau // b + 1) * b
    if e1 > n:
        e1 = n
    if t < e1:
        mu[0] += (t - tau) * alpha * th[0]
        return
    mu[0] += (e1 - tau) * alpha * th[0]
    th[0] -= c * mu[0]
    s = e1
    if s >= t:
        return
    m = (t - s) // b
    if m > 0:
        batch_power(c, b * alpha, m, th, mu)
        s += m * b
    rem = t - s
    if rem > 0:
        mu[0] += rem * alpha * th[0]
        if s + rem == n:
            th[0] -= c * mu[0]


# ======================================================================================
# The low-rank bound V^T S V + D
# ======================================================================================
# The low-rank bound on the head's curvature of Section 3.2, ``Sigma_head <=
# V^T S V + D`` (``V``: ``k`` orthonormal rows over the ``H`` head
# coordinates), and the operations on it: absorbing a rank-one term, the
# Woodbury solve of Algorithm 2's step, and the per-pass
# re-orthonormalisation. Two forms of the diagonal ``D``:
#
# - per coordinate (``Dh``), the dense head: a merge
#   costs O(k H) (``merge``, ``woodbury_solve``); a dropped row ``b`` goes in
#   by Gershgorin, ``l b b^T <= l ||b||_1 diag(|b|)``;
# - ``delta I``, the lazy head: a dropped unit row by ``l b b^T <= l I``, so
#   that every head coordinate follows the same recurrence between its
#   touches and the lazy head can apply it lazily (``merge_small``: the
#   ``k x k`` part only; ``head_solve``). Looser: the whole dropped curvature
#   lands on every head coordinate.
#
# Both share the ``k x k`` core of a merge (``merge_core``).


cdef struct LowRank:
    int k              # rank kept
    int H              # head dimension
    # (k + 1) x H: rows 0..k-1 = V, row k = work row; explicit on the dense
    # head, and on the lazy head between passes
    double* V
    double* S          # k x k, positive semi-definite
    double* Dh         # H: the dense head's diagonal
    double delta       # the lazy head's diagonal is delta I
    # the reflector of the last merge_small: Q = I - bq e e^T on k + 1 rows
    double bq
    double rho         # the norm of z's residual off the span of V
    # scratch
    double* T          # (k+1)^2
    double* T2         # (k+1)^2
    double* e          # k+1
    double* ywork      # k+1
    double* p          # k+1: V z
    double* hv         # H + 1
    double* G          # k x k (+1)
    double* a          # k+1
    double* dinv_mu    # H + 1
    const int* zi      # merge: the non-zero entries of z (nzi of them), or nzi < 0: dense
    int nzi


cdef int lowrank_scratch(LowRank* lr, Workspace ws) except -1:
    """Give ``lr`` its scratch for its ``k`` and ``H`` from ``ws``."""
    cdef int n1 = lr.k + 1, H = lr.H, k = lr.k
    lr.T = ws.doubles(n1 * n1)
    lr.T2 = ws.doubles(n1 * n1)
    lr.e = ws.doubles(n1)
    lr.ywork = ws.doubles(n1)
    lr.p = ws.doubles(n1)
    lr.hv = ws.doubles(H + 1)
    lr.G = ws.doubles(k * k + 1)
    lr.a = ws.doubles(n1)
    lr.dinv_mu = ws.doubles(H + 1)
    return 0


cdef inline void fold_into_diagonal(int H, double scale, const double* b,
                                    double* Dh) noexcept nogil:
    """``Dh += scale ||b||_1 |b|``: a dropped term ``scale b b^T`` bounded by
    ``scale ||b||_1 diag(|b|)`` (Gershgorin: the difference is diagonally
    dominant), so the quadratic stays an upper bound."""
    cdef int h
    cdef double nb1 = 0.0
    for h in range(H):
        nb1 += fabs(b[h])
    for h in range(H):
        Dh[h] += scale * nb1 * fabs(b[h])


cdef inline double merge_core(LowRank* lr, double rho) noexcept nogil:
    """The ``k x k`` part of ``V^T S V + D + z z^T <= V'^T S' V' + D'``.

    Takes ``p = V z`` (``lr.p``) and ``rho``, the norm of ``z``'s residual
    off the span of ``V``. With ``w = (z - V^T p) / rho`` the sum is exactly
    ``[V; w]^T T [V; w] + D`` with ``T = [[S + p p^T, rho p], [rho p^T,
    rho^2]]``. A Householder reflector ``Q`` sends an (approximate)
    eigenvector of the smallest eigenvalue of ``T`` to the last axis: ``Q T Q
    = [[A, c], [c^T, l]] <= [[A + |c| I, 0], [0, l + |c|]]``. Sets ``S' = A +
    |c| I`` and the reflector (``lr.bq``, ``lr.e``) that the caller applies
    to the rows ``[V; w]``: the first ``k`` become ``V'``, the last (``b``, a
    unit vector) is dropped into ``D`` with the returned weight ``l + |c|``.
    """
    cdef int k = lr.k, n = lr.k + 1, i, j
    cdef double* T = lr.T
    cdef double* p = lr.p
    cdef double* e = lr.e
    cdef double cn
    lr.rho = rho
    for i in range(k):
        for j in range(k):
            T[i * n + j] = lr.S[i * k + j] + p[i] * p[j]
        T[i * n + k] = rho * p[i]
        T[k * n + i] = rho * p[i]
    T[k * n + k] = rho * rho
    if not smallest_eigvec(n, T, lr.T2, e, lr.ywork):
        for i in range(n):
            e[i] = 0.0
        e[k] = 1.0
    # Householder vector v = e + sign(e_k) e_k  (so Q e = -sign(e_k) e_k)
    if e[k] >= 0:
        e[k] += 1.0
    else:
        e[k] -= 1.0
    lr.bq = householder_sandwich(n, T, e, lr.ywork)
    cn = 0.0
    for i in range(k):
        cn += T[i * n + k] * T[i * n + k]
    cn = sqrt(cn)
    for i in range(k):
        for j in range(k):
            lr.S[i * k + j] = 0.5 * (T[i * n + j] + T[j * n + i])
        lr.S[i * k + i] += cn
    return T[k * n + k] + cn


cdef inline void merge(LowRank* lr, double* z) noexcept nogil:
    """The dense head's merge of ``z z^T`` (``z``: ``H``, its non-zeros in
    ``lr.zi`` unless ``lr.nzi < 0``), in O(k H): ``[V; w] <- Q [V; w]``
    (``merge_core``), the dropped row ``b = V[k]`` into ``Dh`` by
    Gershgorin (``fold_into_diagonal``)."""
    cdef int k = lr.k, H = lr.H, i, j, h
    cdef double* V = lr.V
    cdef double* w = lr.V + <size_t>k * H
    cdef double* p = lr.p
    cdef double rho, v, lam_d
    if k == 0:
        # no low-rank part: the whole term goes to the diagonal
        fold_into_diagonal(H, 1.0, z, lr.Dh)
        return
    if lr.nzi >= 0:
        # p = V z over the non-zeros of z (a row's head features)
        for i in range(k):
            v = 0.0
            for j in range(lr.nzi):
                h = lr.zi[j]
                v += V[<size_t>i * H + h] * z[h]
            p[i] = v
    else:
        for i in range(k):
            p[i] = dot(H, V + <size_t>i * H, z)
    for h in range(H):
        w[h] = z[h]
    for i in range(k):
        axpy(H, -p[i], V + <size_t>i * H, w)
    rho = sqrt(dot(H, w, w))
    if rho == 0.0:
        # z is in the span of V: the term is exact in S
        for i in range(k):
            for j in range(k):
                lr.S[i * k + j] += p[i] * p[j]
        return
    scal(H, 1.0 / rho, w)
    lam_d = merge_core(lr, rho)
    householder_rows(k + 1, H, lr.bq, lr.e, V, lr.hv)        # the rows [V; w] <- Q [V; w]
    if lam_d > 0.0:
        fold_into_diagonal(H, lam_d, w, lr.Dh)    # the dropped row b = V[k]


cdef inline int merge_small(LowRank* lr, double zz) noexcept nogil:
    """The lazy head's merge of ``z z^T`` into ``V^T S V + delta I``, its
    ``k x k`` part: takes ``p = V z`` (``lr.p``) and ``zz = ||z||^2``, so
    ``rho^2 = zz - ||p||^2``; the dropped row goes into ``delta``.

    Returns 1 when the caller must apply the reflector of ``merge_core`` to
    the rows ``[V; w]`` and keep the first ``k``; 0 when ``z`` is
    (numerically) in the span of ``V``: then ``(a + b)(a + b)^T <= (1 + g) a
    a^T + (1 + 1/g) b b^T`` (``a = V^T p``, ``b`` the residual, ``g = rho /
    ||p||``) puts ``(1 + g) p p^T`` into ``S`` and ``rho^2 + rho ||p||``
    into ``delta``.
    """
    cdef int k = lr.k, i, j
    cdef double* p = lr.p
    cdef double pp = 0.0, rho2, rho, pn, g, lam_d
    if k == 0:
        lr.delta += zz                     # no low-rank part: z z^T <= ||z||^2 I
        return 0
    for i in range(k):
        pp += p[i] * p[i]
    rho2 = zz - pp
    # in the span when the residual's square is below 1e-10 ||z||^2 (a square
    # difference cancels there; the residual is folded, never dropped)
    if rho2 <= 1e-10 * zz:
        rho = sqrt(rho2) if rho2 > 0.0 else 0.0
        pn = sqrt(pp)
        g = rho / pn if pn > 0.0 else 0.0
        for i in range(k):
            for j in range(k):
                lr.S[i * k + j] += (1.0 + g) * p[i] * p[j]
        if rho > 0.0:
            lr.delta += rho2 + rho * pn
        return 0
    lam_d = merge_core(lr, sqrt(rho2))
    if lam_d > 0.0:
        lr.delta += lam_d
    return 1


cdef inline void merge_dense(LowRank* lr, const double* z) noexcept nogil:
    """``merge_small`` on the explicit rows ``V`` and a dense ``z`` (``H``):
    the lazy head's merge written densely (the oracle's, a test hook)."""
    cdef int k = lr.k, H = lr.H, i, h
    cdef double* V = lr.V
    cdef double* w = lr.V + <size_t>k * H
    for i in range(k):
        lr.p[i] = dot(H, V + <size_t>i * H, z)
    if not merge_small(lr, dot(H, z, z)):
        return
    for h in range(H):
        w[h] = z[h]
    for i in range(k):
        axpy(H, -lr.p[i], V + <size_t>i * H, w)
    scal(H, 1.0 / lr.rho, w)
    householder_rows(k + 1, H, lr.bq, lr.e, V, lr.hv)


cdef inline int woodbury_solve(LowRank* lr, const double* mu, double* phi) noexcept nogil:
    """``phi = (V^T S V + D)^-1 mu``: the head block of Algorithm 2's step.

    Woodbury in the form ``D^-1 mu - D^-1 V^T (I + S V D^-1 V^T)^-1 S V
    D^-1 mu``, which needs no ``S^-1`` (``S`` may be singular, e.g. while the
    rank is not used up). Returns 0 when the ``k x k`` system is singular.
    """
    cdef int k = lr.k, H = lr.H, i, j, m, h
    cdef double v
    cdef double* V = lr.V
    cdef double* y = lr.ywork
    cdef double* dinv = lr.hv
    cdef double* G = lr.G
    cdef double* a = lr.a
    cdef double* dinv_mu = lr.dinv_mu
    for h in range(H):
        dinv[h] = 1.0 / lr.Dh[h]
        dinv_mu[h] = mu[h] * dinv[h]
    if k == 0:
        for h in range(H):
            phi[h] = dinv_mu[h]
        return 1
    for i in range(k):
        y[i] = dot(H, V + <size_t>i * H, dinv_mu)
        # (row k of V is workspace: V_i * D^-1 into it, then dot with the rows j <= i)
        for h in range(H):
            V[<size_t>k * H + h] = V[<size_t>i * H + h] * dinv[h]
        for j in range(i + 1):
            v = dot(H, V + <size_t>j * H, V + <size_t>k * H)
            G[i * k + j] = v
            G[j * k + i] = v
    # A = I + S G (stored in lr.T2, k x k), rhs = S y
    for i in range(k):
        for j in range(k):
            v = 0.0
            for m in range(k):
                v += lr.S[i * k + m] * G[m * k + j]
            lr.T2[i * k + j] = v + (1.0 if i == j else 0.0)
        v = 0.0
        for m in range(k):
            v += lr.S[i * k + m] * y[m]
        a[i] = v
    if not solve_small(k, lr.T2, a):
        return 0
    for h in range(H):
        phi[h] = mu[h]
    for i in range(k):
        axpy(H, -a[i], V + <size_t>i * H, phi)
    for h in range(H):
        phi[h] *= dinv[h]
    return 1


cdef inline int head_solve(LowRank* lr, const double* G, const double* vmu,
                           double* a) noexcept nogil:
    """The ``k x k`` system of the head's step: ``(delta I + S G) a = S v``.

    With ``G = V V^T`` and ``v = V mu``, Woodbury gives ``(V^T S V + delta
    I)^-1 mu = (mu - V^T a) / delta`` without ``S^-1`` (``S`` may be
    singular, e.g. while the rank is not used up) and without assuming ``V``
    orthonormal. Returns 0 when the system is singular.
    """
    cdef int k = lr.k, i, j, m
    cdef double v
    cdef double* A = lr.T2
    for i in range(k):
        for j in range(k):
            v = 0.0
            for m in range(k):
                v += lr.S[i * k + m] * G[m * k + j]
            A[i * k + j] = v + (lr.delta if i == j else 0.0)
        v = 0.0
        for m in range(k):
            v += lr.S[i * k + m] * vmu[m]
        a[i] = v
    return solve_small(k, A, a)


cdef inline void orthonormalize(LowRank* lr) noexcept nogil:
    """Re-orthonormalise the rows of ``V`` (modified Gram-Schmidt, ``V = L Q``)
    and change basis exactly: ``V^T S V = Q^T (L^T S L) Q``. Once per pass:
    the merges keep ``V`` orthonormal only up to rounding."""
    cdef int k = lr.k, H = lr.H, i, j
    cdef double* V = lr.V
    cdef double* L = lr.T2        # k x k lower (T2 has room: (k+1)^2)
    cdef double* W = lr.T         # k x k scratch
    cdef double nrm, v
    for i in range(k * k):
        L[i] = 0.0
    for i in range(k):
        for j in range(i):
            v = dot(H, V + <size_t>j * H, V + <size_t>i * H)
            L[i * k + j] = v
            axpy(H, -v, V + <size_t>j * H, V + <size_t>i * H)
        nrm = sqrt(dot(H, V + <size_t>i * H, V + <size_t>i * H))
        L[i * k + i] = nrm
        if nrm > 0.0:
            scal(H, 1.0 / nrm, V + <size_t>i * H)
    # S <- L^T (S L)
    matmul(k, k, k, lr.S, k, 1, L, k, 1, W)
    matmul(k, k, k, L, 1, k, W, k, 1, lr.S)
    for i in range(k):
        for j in range(i):
            v = 0.5 * (lr.S[i * k + j] + lr.S[j * k + i])
            lr.S[i * k + j] = v
            lr.S[j * k + i] = v


# ======================================================================================
# The per-example update and the two heads
# ======================================================================================
# The per-example update of low-rank SBM (Section 3.2), inlined into the
# pass (``lowrank_pass``): the row split into head and tail, the
# example's curvature into the low-rank head (the section above) and the
# diagonal tail, its gradient into ``mu``, and the step. With the lazy head
# both parts are lazy, so an example costs O(k nnz) plus ``k x k`` work,
# whatever ``H`` and the number of features:
#
# - a tail coordinate moves between its touches by a fixed linear recurrence
#   (the first section), applied in closed form when it is next touched;
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
    """``mu += s_j (c_j - F[y_j]) (x) xt`` on the row's head and tail
    coordinates; the ``alpha theta`` term (once per example, none on the
    intercept) is the head's ``regularise`` and, on the tail, its lazy
    recurrence."""
    cdef int j, a, K = kr.K
    cdef Py_ssize_t q
    cdef double* mup = kr.mu
    for j in range(rp.nh):
        for a in range(K):
            hd.mu[rp.hslot[j] * K + a] += ex.gcoef[a] * rp.hval[j]
    for j in range(rp.nt):
        q = <Py_ssize_t>rp.tfeat[j] * K
        for a in range(K):
            mup[q + a] += ex.gcoef[a] * rp.tval[j]


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


cdef inline void lowrank_example(const LowRankKernel* kr, const HeadOps* ops, LowRank* lr,
                                 Head* hd, Example* ex, RowParts* rp,
                                 long long step) noexcept nogil:
    """The update of one example (read by ``read_row``) before the step:
    Algorithm 1 at the current weights, its curvature split between the
    low-rank head and the diagonal tail, its gradient into ``mu``. The
    head's form (``ops``) holds the row's head coordinates explicit
    meanwhile if it keeps them lazy."""
    cdef double fh, ft, gsplit
    split_row(kr, ex, rp, step)
    ops.enter(hd, rp)
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
        ops.merge(lr, hd, ex, rp, fh)
    if rp.nt > 0 and ex.r > 0:
        bound_tail(kr, ex, rp, ft)
    add_gradient(kr, hd, ex, rp)
    ops.regularise(hd, rp, kr.alpha)
    ops.leave(hd, rp)


# ---- the two heads behind one interface ---------------------------------------------
cdef struct HeadOps:
    # what a pass asks of the head, in the dense or the lazy form (``head_ops``)
    void (*begin)(Head* hd, const LowRank* lr) noexcept nogil     # a pass starts
    void (*enter)(Head* hd, const RowParts* rp) noexcept nogil    # an example reads its row
    void (*merge)(LowRank* lr, Head* hd, const Example* ex, RowParts* rp,
                  double fh) noexcept nogil                        # its curvature
    void (*regularise)(Head* hd, const RowParts* rp, double alpha) noexcept nogil
    void (*leave)(Head* hd, const RowParts* rp) noexcept nogil    # the example is done
    int (*step)(Head* hd, LowRank* lr, RowParts* rp, double eta) noexcept nogil
    void (*finish)(Head* hd, LowRank* lr) noexcept nogil          # the pass ends (or fails)


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


# ======================================================================================
# The state, the passes, the test hooks
# ======================================================================================


@dataclass(kw_only=True)
class LowRankState(SBMState):
    """The state of low-rank SBM on one problem (picklable).

    All arrays but ``theta`` are allocated by ``start``, which chooses the
    head. Head coordinate ``slot * n_outputs + a`` is output ``a`` of the
    feature in head slot ``slot`` (the intercept last).

    Attributes
    ----------
    n_features, n_outputs, fit_intercept, theta, t, seed, n_ref, lam, eta
        As in ``SBMState`` (``theta`` is current at the end of every pass).
    head_slot : int32 ndarray of shape (n_features + 1,)
        Head slot of each feature (index ``n_features``: the intercept), -1
        for tail features.
    head_coords : intp ndarray of shape (H,)
        The coordinate of ``theta`` of each head coordinate.
    mu, D : ndarray of shape (P,)
        The gradient sum and the diagonal bound; only their tail entries are
        used (the head's are ``mu_head``, ``D_head``).
    mu_head, D_head : ndarray of shape (H,)
        ``D_head``: the head's diagonal; with the lazy head every entry is
        ``delta``.
    V : ndarray of shape (k + 1, H)
        Rows ``0..k-1``: the orthonormal ``V``; row ``k`` is workspace.
    S : ndarray of shape (k, k)
    tau : int64 ndarray of shape (n_features,)
        Per tail feature, steps of the current pass already applied (0
        between calls).
    lazy_head : bool
        The head's form (``HeadOps``): lazy, ``D_head = delta
        I`` and O(k nnz) an example, or dense, ``D_head`` per coordinate
        (tighter) and O(k H) an example.
    """

    head_slot: np.ndarray = None
    head_coords: np.ndarray = None
    mu: np.ndarray = None
    D: np.ndarray = None
    mu_head: np.ndarray = None
    D_head: np.ndarray = None
    V: np.ndarray = None
    S: np.ndarray = None
    tau: np.ndarray = None
    lazy_head: bool = False

    @classmethod
    def zeros(cls, n_features, n_outputs, fit_intercept, seed=1):
        """Zero weights; the curvature comes with ``start``."""
        P = (n_features + int(fit_intercept)) * n_outputs
        return cls(n_features=n_features, n_outputs=n_outputs,
                   fit_intercept=bool(fit_intercept), theta=np.zeros(P), seed=seed)

    def start(self, n_ref, lam, eta, head, rank, lazy_head=False):
        """Fix ``n``, ``lam = n alpha``, ``eta`` and the head on the first data.

        Parameters
        ----------
        n_ref : int
        lam : float
            Initial curvature of every coordinate (``Sigma = lam I``).
        eta : float
        head : array-like of int
            The head features, sorted (the intercept joins them).
        rank : int
            ``k``, capped at the head's dimension ``H``; ``V`` starts as the
            first ``k`` unit vectors with ``S = 0``.
        lazy_head : bool
            The head's form (see the class).
        """
        d, K = self.n_features, self.n_outputs
        head = np.asarray(head, dtype=np.intp)
        self.n_ref, self.lam, self.eta = n_ref, lam, eta
        slots = np.full(d + 1, -1, dtype=np.int32)
        slots[head] = np.arange(head.size, dtype=np.int32)
        feats = list(head)
        if self.fit_intercept:
            slots[d] = head.size
            feats.append(d)
        feats = np.asarray(feats, dtype=np.intp)
        H = feats.size * K
        k = min(rank, H)
        V = np.zeros((k + 1, H))
        V[np.arange(k), np.arange(k)] = 1.0
        self.head_slot = slots
        self.head_coords = (feats[:, None] * K + np.arange(K)).ravel()
        self.mu = np.zeros(self.theta.size)
        self.D = np.full(self.theta.size, lam)
        self.mu_head = np.zeros(H)
        self.D_head = np.full(H, lam)
        self.V = V
        self.S = np.zeros((k, k))
        self.tau = np.zeros(d, dtype=np.int64)
        self.lazy_head = bool(lazy_head)

    def grow_regulariser(self, n_ref, lam, eta):
        """Size the regulariser for ``n_ref`` rows: raise every coordinate's
        curvature to ``lam`` (``D += lam - self.lam``: the diagonal of
        ``V^T S V + D``) and take the step ``eta`` (the estimator's ``n_t``
        schedule). Between passes only: the tail is current then."""
        delta = lam - self.lam
        if delta > 0:
            self.D += delta
            self.D_head += delta
        self.n_ref, self.lam, self.eta = n_ref, lam, eta


cdef int parts_init(RowParts* rp, Workspace ws, Py_ssize_t n_features, int H,
                    int K) except -1:
    """Give ``rp`` its buffers from ``ws``."""
    rp.hslot = ws.ints(n_features + 2)
    rp.hval = ws.doubles(n_features + 2)
    rp.tfeat = ws.ints(n_features + 2)
    rp.tval = ws.doubles(n_features + 2)
    rp.z = ws.doubles(H + 1)
    rp.zidx = ws.ints(H + 1)
    rp.rowabs = ws.doubles(K)
    rp.phi_head = ws.doubles(H + 1)
    return 0


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


cdef int lowrank_pass(RowDataset ds, Py_ssize_t start, Py_ssize_t stop,
                      const LowRankKernel* kr, const HeadOps* ops, LowRank* lr, Head* hd,
                      Example* ex, RowParts* rp, PassTotals* tot) noexcept nogil:
    """One pass over the rows ``start:stop`` in their current order (a step
    after every ``batch_size`` examples and after the last one), then the
    tail and the head brought up to date and ``V`` re-orthonormalised.
    Returns 0 when a step failed (then the pass stops there)."""
    cdef Py_ssize_t i
    cdef long long step = 0
    cdef int since = 0
    tot.loss_sum = 0.0
    tot.w_sum = 0.0
    if hd.H > 0:
        ops.begin(hd, lr)
    for i in range(start, stop):
        # the rows come in shuffled order: fetch row i + 2's entries, and the
        # tail state row i + 1 will touch (its entries are in cache by now),
        # while this row is processed
        prefetch_row(ds, i + 2)
        prefetch_tail(ds, i + 1, kr)
        if not read_row(ds, i, ex, kr.n_features, kr.fit_intercept):
            continue
        lowrank_example(kr, ops, lr, hd, ex, rp, step)
        tot.loss_sum += ex.sw * ex.loss
        tot.w_sum += ex.sw
        step += 1
        tot.t += 1
        since += 1
        if since == kr.batch_size or step == kr.n_steps:
            if hd.H > 0 and not ops.step(hd, lr, rp, kr.eta):
                ops.finish(hd, lr)
                return 0
            since = 0
    finish_tail(kr)
    if hd.H > 0:
        ops.finish(hd, lr)
    orthonormalize(lr)
    return 1


def lowrank_epochs(RowDataset ds, state, opts, Py_ssize_t start=0, stop=None):
    """Low-rank stochastic bound majorization (Section 3.2), in place.

    Per example (``lowrank_example``): the tail coordinates of the row are
    caught up (``advance_tail``), Algorithm 1 runs at the current weights,
    the example's curvature is split between the low-rank head
    (``HeadOps.merge``) and the diagonal tail (``bound_tail``), and its
    gradient enters ``mu`` (``add_gradient``, ``HeadOps.regularise``); on
    the lazy head the row's head coordinates are made explicit for the
    example and lazy again after it (``HeadOps.enter``, ``HeadOps.leave``).
    After every ``batch_size`` examples (and the last of a pass) the head
    steps by Woodbury (``HeadOps.step``). The head's form (``HeadOps``) is
    chosen once per call from ``state.lazy_head`` (``head_ops``).

    Parameters
    ----------
    ds : RowDataset
        Targets: +-1 (``n_outputs == 1``) or class indices.
    state : LowRankState
        Started (``state.start``); its arrays, ``t`` and ``seed`` are updated
        in place.
    opts : SBMOptions
        ``surrogate`` must be False.
    start, stop : int
        The passes visit the rows ``start:stop`` of ``ds``'s current order
        (all by default; a block of a shuffled pass without copying it, then
        with ``opts.shuffle`` False: the block is a set of rows).

    Returns
    -------
    result : SBMResult
    """
    if opts.surrogate:
        raise ValueError("the surrogate update is implemented for full rank only")
    cdef Py_ssize_t stop_ = check_rows(ds, state, start, stop)
    if opts.shuffle and (start, stop_) != (0, ds.n_samples):
        raise ValueError("a block of rows (start:stop) is passed in its order: "
                         "opts.shuffle must be False")
    # the head's weights during the passes (written back at the end)
    theta_head = state.theta[state.head_coords]
    cdef LowRankKernel kr
    cdef LowRank lr
    cdef Head hd
    cdef Workspace ws = Workspace()
    bind_lowrank(&kr, &lr, &hd, ws, state, opts, theta_head)
    cdef Py_ssize_t i
    kr.n_steps = 0
    for i in range(start, stop_):
        if ds.sample_weight[ds.order_ptr[i]] != 0.0:
            kr.n_steps += 1
    cdef Example ex
    cdef RowParts rp
    example_init(&ex, ws, kr.n_features, kr.K)
    parts_init(&rp, ws, kr.n_features, kr.H, kr.K)
    lr.zi = rp.zidx
    lr.nzi = 0
    cdef HeadOps ops = head_ops(kr.lazy_head)
    cdef int n_epochs = opts.n_epochs, _epoch, epochs_run = 0
    cdef bint shuffle = opts.shuffle, diverged = False
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef PassTotals tot = start_totals(state.t)
    with nogil:
        for _epoch in range(n_epochs):
            if shuffle:
                ds.shuffle(&rng)
            if not lowrank_pass(ds, start, stop_, &kr, &ops, &lr, &hd, &ex, &rp, &tot):
                diverged = True
                break
            if not all_finite(kr.theta, kr.P) or (kr.H > 0 and not all_finite(hd.th, kr.H)):
                diverged = True          # (reported as pass epochs_run + 1)
                break
            epochs_run += 1
    state.theta[state.head_coords] = theta_head
    if kr.lazy_head:
        state.D_head[:] = lr.delta
    return finish_passes(state, tot, rng, epochs_run, diverged)


cdef int bind_lowrank(LowRankKernel* kr, LowRank* lr, Head* hd, Workspace ws, state, opts,
                      theta_head) except -1:
    """The kernel's view of ``state`` (its arrays) and ``opts``; ``lr`` and
    ``hd`` on the head's arrays, with their scratch from ``ws``."""
    cdef double[::1] theta = state.theta
    cdef double[::1] mu = state.mu
    cdef double[::1] D = state.D
    cdef double[::1] th_h = theta_head
    cdef double[::1] mu_h = state.mu_head
    cdef double[::1] D_h = state.D_head
    cdef double[:, ::1] V = state.V
    cdef double[:, ::1] S = state.S
    cdef const int[::1] head_slot = state.head_slot
    cdef long long[::1] tau = state.tau
    cdef Py_ssize_t d = state.n_features
    memset(lr, 0, sizeof(LowRank))
    memset(hd, 0, sizeof(Head))
    kr.K = hd.K = state.n_outputs
    kr.n_features = d
    kr.fit_intercept = state.fit_intercept
    kr.P = <int>((d + (1 if kr.fit_intercept else 0)) * kr.K)
    kr.H = lr.H = hd.H = <int>th_h.shape[0]
    lr.k = hd.k = <int>S.shape[0]
    if theta.shape[0] != kr.P or mu.shape[0] != kr.P or D.shape[0] != kr.P:
        raise ValueError("theta / mu / D do not match the data shape")
    if (mu_h.shape[0] != kr.H or D_h.shape[0] != kr.H or V.shape[0] != lr.k + 1
            or V.shape[1] != kr.H):
        raise ValueError("the head arrays do not match")
    if head_slot.shape[0] != d + 1 or tau.shape[0] != d:
        raise ValueError("head_slot / tau do not match the data shape")
    # (no intercept: a block no head coordinate falls in)
    hd.icpt_lo = head_slot[d] * kr.K if kr.fit_intercept else -2 * kr.K - 1
    kr.batch_size = opts.batch_size
    kr.lazy_head = state.lazy_head
    kr.alpha = opts.alpha
    kr.eta = opts.eta
    kr.head_slot = &head_slot[0]
    kr.theta = &theta[0]
    kr.mu = &mu[0]
    kr.D = &D[0]
    kr.tau = &tau[0] if d > 0 else NULL
    hd.th = &th_h[0] if kr.H > 0 else NULL
    hd.mu = &mu_h[0] if kr.H > 0 else NULL
    lr.V = &V[0, 0] if kr.H > 0 else NULL
    lr.S = &S[0, 0] if lr.k > 0 else NULL
    lr.Dh = &D_h[0] if kr.H > 0 else NULL
    lr.delta = float(np.max(state.D_head)) if kr.H > 0 else state.lam
    lowrank_scratch(lr, ws)
    head_init(hd, ws, lr.k, kr.H)
    return 0


# ----------------------------------------------------------------------------
# test hooks
# ----------------------------------------------------------------------------
cdef class _BoundCopy:
    """A ``LowRank`` on copies of ``V`` (with its work row), ``S`` and ``D``
    and its scratch: what the test hooks run the kernel's operations on."""
    cdef LowRank lr
    cdef Workspace ws
    cdef readonly object V, S, D

    def __init__(self, V, S, D=None, double delta=0.0):
        V = np.asarray(V, dtype=np.float64)
        cdef int k = V.shape[0], H = V.shape[1]
        self.V = np.zeros((k + 1, H))
        self.V[:k] = V
        self.S = np.array(S, dtype=np.float64, copy=True).reshape(k, k)
        self.D = None if D is None else np.array(D, dtype=np.float64, copy=True)
        cdef double[:, ::1] Vv = self.V
        cdef double[:, ::1] Sv = self.S
        cdef double[::1] Dv
        memset(&self.lr, 0, sizeof(LowRank))
        self.lr.k = k
        self.lr.H = H
        self.lr.delta = delta
        self.lr.V = &Vv[0, 0]
        self.lr.S = &Sv[0, 0] if k > 0 else NULL
        if self.D is not None:
            Dv = self.D
            self.lr.Dh = &Dv[0]
        self.ws = Workspace()
        lowrank_scratch(&self.lr, self.ws)

    def rows(self):
        """``V`` without its work row, and ``S`` (copies)."""
        return self.V[:self.lr.k].copy(), self.S.copy()


def merge_py(V, S, D, z):
    """One ``merge`` on copies (test hook): returns ``(V, S, D)`` after absorbing ``z z^T``."""
    cdef _BoundCopy b = _BoundCopy(V, S, D)
    cdef double[::1] zv = np.array(z, dtype=np.float64, copy=True)
    b.lr.nzi = -1                       # z is dense
    merge(&b.lr, &zv[0])
    return (*b.rows(), b.D)


def merge_isotropic_py(V, S, double delta, z):
    """The lazy head's merge written densely, on copies (test hook): returns
    ``(V, S, delta)`` after absorbing ``z z^T`` into ``V^T S V + delta I``."""
    cdef _BoundCopy b = _BoundCopy(V, S, None, delta)
    cdef double[::1] zv = np.array(z, dtype=np.float64, copy=True)
    merge_dense(&b.lr, &zv[0])
    return (*b.rows(), b.lr.delta)


def woodbury_py(V, S, D, double[::1] mu):
    """``(V^T S V + diag(D))^-1 mu`` by the kernel's Woodbury (test hook)."""
    cdef _BoundCopy b = _BoundCopy(V, S, D)
    phi = np.zeros(b.lr.H)
    cdef double[::1] pv = phi
    if not woodbury_solve(&b.lr, &mu[0], &pv[0]):
        raise np.linalg.LinAlgError("singular capacitance matrix")
    return phi


def head_solve_py(V, S, double delta, mu):
    """``(V^T S V + delta I)^-1 mu`` by the lazy head's ``head_solve`` (test hook)."""
    cdef _BoundCopy b = _BoundCopy(V, S, None, delta)
    V = b.V[:b.lr.k]
    mu = np.asarray(mu, dtype=np.float64)
    cdef double[:, ::1] G = V @ V.T
    cdef double[::1] vmu = V @ mu
    a = np.zeros(b.lr.k + 1)
    cdef double[::1] av = a
    if not head_solve(&b.lr, &G[0, 0], &vmu[0], &av[0]):
        raise np.linalg.LinAlgError("singular capacitance matrix")
    return (mu - V.T @ a[:b.lr.k]) / delta


def advance_py(double th, double mu, double c, double alpha, long long tau, long long t,
               long long b, long long n):
    """``advance_tail`` on one coordinate (test hook): returns ``(th, mu)``."""
    advance_tail(&th, &mu, c, alpha, tau, t, b, n)
    return th, mu
