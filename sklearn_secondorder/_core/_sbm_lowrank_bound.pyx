"""The low-rank bound on the head's curvature of Section 3.2, ``Sigma_head <=
V^T S V + D`` (``V``: ``k`` orthonormal rows over the ``H`` head
coordinates), and the operations on it: absorbing a rank-one term, the
Woodbury solve of Algorithm 2's step, and the per-pass
re-orthonormalisation. Two forms of the diagonal ``D``:

- per coordinate (``Dh``), the dense head: a merge
  costs O(k H) (``merge``, ``woodbury_solve``); a dropped row ``b`` goes in
  by Gershgorin, ``l b b^T <= l ||b||_1 diag(|b|)``;
- ``delta I``, the lazy head: a dropped unit row by ``l b b^T <= l I``, so
  that every head coordinate follows the same recurrence between its
  touches and the lazy head can apply it lazily (``merge_small``: the
  ``k x k`` part only; ``head_solve``). Looser: the whole dropped curvature
  lands on every head coordinate.

Both share the ``k x k`` core of a merge (``merge_core``).

The per-example operations are called through the heads of
``_sbm_heads`` (each is O(k H) or O(k^3) and more, so the call between
modules costs nothing measurable); ``_sbm_lowrank`` runs the passes. The
test hooks at the end run them on copies.
"""
import numpy as np

from libc.math cimport fabs, sqrt
from libc.string cimport memset

from ._linalg cimport (
    axpy, dot, householder_rows, householder_sandwich, matmul, scal, smallest_eigvec,
    solve_small)


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


cdef void merge(LowRank* lr, double* z) noexcept nogil:
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


cdef int merge_small(LowRank* lr, double zz) noexcept nogil:
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


cdef int woodbury_solve(LowRank* lr, const double* mu, double* phi) noexcept nogil:
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


cdef int head_solve(LowRank* lr, const double* G, const double* vmu,
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


cdef void orthonormalize(LowRank* lr) noexcept nogil:
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
