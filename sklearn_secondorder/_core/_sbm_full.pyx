"""Full-rank stochastic bound majorization (Choromanska & Jebara, Algorithm 2).

``M = Sigma^-1`` is a dense ``P x P`` matrix (``P = (n_features +
fit_intercept) K``). Per example: Algorithm 1 at the current weights
(``_sbm_bound``), the example's curvature into ``M`` by one Woodbury step
(``absorb_curvature``), its gradient into ``mu`` (``add_gradient``), and every
``batch_size`` examples the step ``theta -= eta M mu`` (``full_step``). The
model and the objective are described in ``_sbm_bound``.

Every example of a batch has its bound formed at the same weights, so ``M``
after the batch is ``(M^-1 + sum_j S_j (x) xt_j xt_j^T)^-1`` whatever the
order its terms are added in: with ``batch_size > 1`` the kernel adds them
at once, by one of two BLAS-3 routes chosen by their cost (``batch_route``):

- ``WOODBURY`` (``m``, the batch's factors, small against ``P``): one
  rank-``m`` Woodbury step, ``M -= R G^-1 R^T`` with ``R = M Q`` (``Q``: the
  ``m`` factor columns ``L_j[:, f] (x) xt_j``), ``G = I + Q^T R``; ``O(P^2
  m)`` in one ``dgemm``.
- ``REFACTOR``: ``Sigma`` itself (``FullRankState.Sigma``) takes the batch's
  terms (``O(K^2 nz^2)`` per row scattered, or for dense rows one ``dgemm``
  of the batch's ``vec S_j`` against its ``xt xt^T``, ``O(K^2 d^2)`` per row
  at BLAS-3 speed) and is refactored by Cholesky (``O(P^3 / 3)`` per batch);
  ``phi`` comes from the factor, and ``M`` is its inverse at the end of the
  call. An example costs ``O(K^2 d^2 + P^3 / (3 B))`` instead of the ``O(r
  P^2)`` of its own Woodbury step.

``batch_size=1`` is Algorithm 2 exactly (one Woodbury step per example,
``absorb_curvature``).

Threads (``full_epochs`` with ``threads``, the estimator's ``n_jobs``): with
``batch_size=1`` and ``P^2 r`` at least ``TEAM_MIN_WORK``, ``TeamPass`` runs
the pass on several threads that share the one state. Algorithm 2 is
sequential from example to example (each bound is formed at the weights the
previous step left), so the threads split each example's work instead: every
thread owns a contiguous range of the ``P`` coordinates (rows of ``M``,
entries of ``theta``, ``mu``, ``phi``; columns of ``(M U)^T`` and ``R^T``),
forms the example's bound itself (all alike), and does its range's share of
the gather, the triangular solve, the rank-``r`` downdate ``M -= T T^T``
(the ``O(r P^2)`` that dominates) and the step; three barriers an example.
The model is the one-thread model up to the order of a few floating-point
sums (the BLAS calls on a range instead of the whole). With batches on the
``REFACTOR`` route and several classes, ``BatchTeamPass`` forms the bounds
of a batch's rows on the threads at once (they are all formed at the same
weights), and splits the ``dgemm`` that adds the dense rows' terms to
``Sigma``; the Cholesky refactorisation and the step stay on one thread.
"""
from dataclasses import dataclass

import numpy as np

from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport dgemm, dgemv
from scipy.linalg.cython_lapack cimport dpotrf, dpotri, dpotrs

from ._dataset cimport RowDataset, row_span, row_value
from ._linalg cimport axpy, cholesky, lower_solve_rows, matmul, strided_dot
from ._numeric cimport all_finite
from ._sbm_bound cimport (
    Example, PassTotals, Workspace, check_rows, example_bound, example_init, finish_passes,
    read_row, start_totals)

from ._sbm_bound import SBMState


@dataclass(kw_only=True)
class FullRankState(SBMState):
    """The state of full-rank SBM on one problem (picklable).

    Attributes
    ----------
    n_features, n_outputs, fit_intercept, theta, t, seed, n_ref, lam, eta
        As in ``SBMState``; ``eta`` is fixed at ``start``.
    M : ndarray of shape (P, P)
        ``Sigma^-1``, symmetric (both triangles kept): the identity until
        ``start``, then ``I / lam``.
    mu, phi : ndarray of shape (P,)
        The persistent gradient sum and ``phi = M mu`` (Algorithm 2).
    lam_total : float
        The regulariser's curvature inside ``M`` (``lam`` from ``start``,
        raised by ``grow_regulariser``).
    Sigma : ndarray of shape (P, P) or None
        ``M^-1``, kept by the kernel's ``REFACTOR`` route between calls (it
        is valid while ``sigma_of is M``; anything that replaces ``M`` by
        another array makes the kernel derive it again).
    sigma_of : ndarray or None
        The ``M`` that ``Sigma`` inverts.
    m_stale : bool
        ``grow_regulariser(..., defer=True)`` raised ``Sigma`` but left
        ``M`` to the next kernel call (``REFACTOR``), which inverts
        ``Sigma`` anyway.
    """

    M: np.ndarray
    mu: np.ndarray
    phi: np.ndarray
    lam_total: float = 0.0
    Sigma: object = None
    sigma_of: object = None
    m_stale: bool = False

    @staticmethod
    def n_params(n_features, n_outputs, fit_intercept):
        """``P``, the length of ``theta`` (``M`` is ``P x P``)."""
        return (n_features + int(fit_intercept)) * n_outputs

    @classmethod
    def zeros(cls, n_features, n_outputs, fit_intercept, seed=1):
        """Zero weights and sums, ``M = I`` (scaled by ``start``)."""
        P = cls.n_params(n_features, n_outputs, fit_intercept)
        return cls(n_features=n_features, n_outputs=n_outputs,
                   fit_intercept=bool(fit_intercept), theta=np.zeros(P), M=np.eye(P),
                   mu=np.zeros(P), phi=np.zeros(P), seed=seed)

    def start(self, n_ref, lam, eta):
        """Fix ``n``, ``lam = n alpha`` and ``eta`` on the first data:
        ``M = I / lam`` (Algorithm 2's initialisation)."""
        self.n_ref = n_ref
        self.lam = lam
        self.eta = eta
        self.lam_total = lam
        self.M *= 1.0 / lam

    def grow_regulariser(self, n_ref, lam, eta, defer=False):
        """Size the regulariser for ``n_ref`` rows: raise its curvature in
        ``M`` to ``lam`` (``delta = lam - lam_total``) and take the step
        ``eta`` (the estimator's ``n_t`` schedule).

        ``M <- (Sigma + delta I)^-1 = (I + delta M)^-1 M``, symmetrised (the
        kernel's Woodbury updates keep both triangles equal); O(P^3). With
        ``Sigma`` kept (``REFACTOR``), ``Sigma += delta I`` and ``M =
        Sigma^-1``, or with ``defer`` only ``Sigma``: the caller's next
        kernel call (which must be a ``REFACTOR`` one) sets ``M``.
        """
        delta = lam - self.lam_total
        if delta > 0 and self.sigma_valid():
            self.Sigma.flat[::self.Sigma.shape[0] + 1] += delta
            if defer:
                self.m_stale = True
            else:
                self.M[:] = _spd_inverse(self.Sigma)
            self.lam_total = lam
        elif delta > 0:
            self.Sigma = self.sigma_of = None
            M = self.M
            M[:] = np.linalg.solve(np.eye(M.shape[0]) + delta * M, M)
            M[:] = 0.5 * (M + M.T)
            self.lam_total = lam
        self.n_ref, self.lam, self.eta = n_ref, lam, eta

    def sigma_valid(self):
        """Whether ``Sigma`` is ``M^-1`` (kept by the ``REFACTOR`` route)."""
        return self.Sigma is not None and self.sigma_of is self.M

    def ensure_sigma(self):
        """Make ``Sigma = M^-1`` valid (an ``O(P^3)`` inverse unless it is)."""
        if not self.sigma_valid():
            self.Sigma = _spd_inverse(self.M)
            self.sigma_of = self.M


def _spd_inverse(A):
    """The inverse of a symmetric positive definite matrix by Cholesky, both
    triangles filled (C-contiguous)."""
    from scipy.linalg.lapack import dpotrf, dpotri
    c, info = dpotrf(A, lower=1)
    if info == 0:
        c, info = dpotri(c, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError("Sigma is not positive definite")
    inv = np.tril(c)
    inv += np.tril(c, -1).T
    return np.ascontiguousarray(inv)


cdef enum:
    DENSE_CHUNK = 256   # dense rows per dgemm into Sigma (REFACTOR)


cdef enum:
    PER_EXAMPLE = 0     # batch_size == 1: Algorithm 2, one Woodbury step per example
    WOODBURY = 1        # one rank-m Woodbury step on M per batch
    REFACTOR = 2        # Sigma += batch, Cholesky per batch, M = Sigma^-1 at the end


def batch_route(int batch_size, int n_outputs, Py_ssize_t P):
    """How a batch's curvature enters ``M``: ``'per_example'`` (``batch_size
    = 1``), ``'woodbury'`` or ``'refactor'``.

    A rank-``m`` Woodbury step costs about ``2 P^2 m`` (``m = batch_size
    r``, ``r`` factors per example: 1 for two classes, ``K - 1`` for ``K``);
    a Cholesky refactorisation ``P^3 / 3`` plus ``O(K^2 d^2)`` per row to add
    the terms to ``Sigma``. Woodbury while ``6 m < P``.
    """
    cdef int r = 1 if n_outputs == 1 else n_outputs - 1
    if batch_size == 1:
        return "per_example"
    return "woodbury" if 6 * batch_size * r < P else "refactor"


cdef struct FullRankKernel:
    # the kernel's view of a FullRankState and its SBMOptions
    int K                   # outputs
    int P                   # parameters, (n_features + fit_intercept) K
    Py_ssize_t n_features
    Py_ssize_t n_reg        # penalised coordinates: the first n_features K
    bint fit_intercept
    bint surrogate
    int batch_size
    double alpha
    double eta
    double lam              # regulariser curvature inside M (surrogate only)
    double* M               # P x P
    double* theta
    double* mu
    double* phi
    int route               # PER_EXAMPLE, WOODBURY or REFACTOR
    int d1                  # n_features + fit_intercept
    double* Sigma           # P x P (REFACTOR)


cdef struct BatchWork:
    # a batch's examples (bounds formed at the same weights)
    int n                   # examples stored
    int m                   # their factors (WOODBURY)
    int* nz                 # B: entries of xt
    int* idx                # B x d1
    double* val             # B x d1
    int* r                  # B: factors
    double* Lt              # B x n_y x K: rows of the factors
    double* Rt              # m_max x P: (M Q)^T, then chol(G)^-1 (M Q)^T
    double* G               # m_max x m_max
    double* S               # B x K^2: vec S_j (dense rows, REFACTOR)
    double* Xd              # B x d1: dense xt (dense rows, REFACTOR)
    double* Z               # B x d1^2: xt xt^T (dense rows, REFACTOR)
    double* Out             # K^2 x d1^2 (dense rows, REFACTOR)
    double* Skk             # K x K
    double* Lw              # P x P: Cholesky factor of Sigma (REFACTOR)
    int n_dense             # dense rows stored (REFACTOR)
    bint factored           # Lw holds chol(Sigma) of the current Sigma


cdef int batch_init(BatchWork* b, Workspace ws, int route, int B, int n_y, int K, int d1,
                    int P) except -1:
    """Give ``b`` the batch scratch of ``route`` from ``ws``. ``REFACTOR``
    keeps at most ``DENSE_CHUNK`` dense rows between two ``dgemm``
    (``dense_flush``), whatever the batch size."""
    cdef size_t mm = <size_t>B * n_y
    cdef size_t ch = min(B, DENSE_CHUNK)
    memset(b, 0, sizeof(BatchWork))
    if route == PER_EXAMPLE:
        return 0
    b.Skk = ws.doubles(<size_t>K * K)
    if route == WOODBURY:
        b.nz = ws.ints(B)
        b.idx = ws.ints(<size_t>B * d1)
        b.val = ws.doubles(<size_t>B * d1)
        b.r = ws.ints(B)
        b.Lt = ws.doubles(<size_t>B * n_y * K)
        b.Rt = ws.doubles(mm * P)
        b.G = ws.doubles(mm * mm)
        return 0
    b.Lw = ws.doubles(<size_t>P * P)
    if K > 1:
        b.S = ws.doubles(ch * K * K)
        b.Xd = ws.doubles(ch * d1)
        b.Z = ws.doubles(ch * d1 * d1)
        b.Out = ws.doubles(<size_t>K * K * d1 * d1)
    return 0


cdef void batch_store(const FullRankKernel* kr, BatchWork* b, const Example* ex) noexcept nogil:
    """Keep the row and the factors of ``ex`` for the batch's Woodbury step."""
    cdef int n = b.n, K = kr.K, d1 = kr.d1
    b.nz[n] = ex.nz
    memcpy(b.idx + <size_t>n * d1, ex.idx, ex.nz * sizeof(int))
    memcpy(b.val + <size_t>n * d1, ex.val, ex.nz * sizeof(double))
    b.r[n] = ex.r
    memcpy(b.Lt + <size_t>n * ex.n_y * K, ex.Lt, ex.r * K * sizeof(double))
    b.m += ex.r
    b.n += 1


cdef inline int woodbury_downdate(double* M, int P, double* G, int m,
                                  double* Rt) noexcept nogil:
    """The last move of a rank-``m`` Woodbury step, ``M -= R G^-1 R^T`` (``R^T``:
    the ``m x P`` rows ``Rt``, ``G``: ``m x m`` positive definite), applied as
    ``M -= T T^T`` with ``T^T = chol(G)^-1 R^T``: one triangular solve, one
    ``dgemm``. Overwrites ``G`` and ``Rt``; returns 0 when ``G`` is not
    numerically positive definite."""
    cdef double one = 1.0, mone = -1.0
    cdef char cN = b'N'
    cdef char cT = b'T'
    if not cholesky(m, G):
        return 0
    lower_solve_rows(m, G, P, Rt)
    dgemm(&cN, &cT, &P, &P, &m, &mone, Rt, &P, Rt, &P, &one, M, &P)
    return 1


cdef int woodbury_flush(const FullRankKernel* kr, BatchWork* b, FullRankWork* w,
                        int n_y) noexcept nogil:
    """``M <- (M^-1 + Q Q^T)^-1`` for the batch's ``m`` factor columns ``Q``
    by one rank-``m`` Woodbury step: ``R = M Q`` (``nz K`` rows of ``M`` per
    example, then its factors), ``G = I + Q^T R``, ``M -= T T^T`` with ``T^T =
    chol(G)^-1 R^T`` (one ``dgemm``). Returns 0 when ``G`` is not positive
    definite."""
    cdef int K = kr.K, P = kr.P, d1 = kr.d1, m = b.m, e, j, a, f, g, off, row, r
    cdef double v, c, one = 1.0, zero = 0.0
    cdef char cN = b'N'
    cdef double* M = kr.M
    cdef double* Wt = w.Wt
    cdef double* Rt = b.Rt
    cdef double* G = b.G
    cdef const int* idx
    cdef const double* val
    cdef const double* Lt
    if m == 0:
        b.n = 0
        return 1
    # R^T rows: per example, (M U)^T gathered, times its factors
    off = 0
    for e in range(b.n):
        r = b.r[e]
        if r == 0:
            continue
        gather_rows(M, P, K, b.idx + <size_t>e * d1, b.val + <size_t>e * d1, b.nz[e], Wt)
        dgemm(&cN, &cN, &P, &r, &K, &one, Wt, &P, b.Lt + <size_t>e * n_y * K, &K, &zero,
              Rt + <size_t>off * P, &P)
        off += r
    # G = I + Q^T R: column f of Q is Lt_f (x) xt of its example
    memset(G, 0, <size_t>m * m * sizeof(double))
    off = 0
    for e in range(b.n):
        idx = b.idx + <size_t>e * d1
        val = b.val + <size_t>e * d1
        Lt = b.Lt + <size_t>e * n_y * K
        for f in range(b.r[e]):
            for j in range(b.nz[e]):
                row = idx[j] * K
                for a in range(K):
                    c = val[j] * Lt[f * K + a]
                    if c == 0.0:
                        continue
                    for g in range(m):
                        G[(off + f) * m + g] += c * Rt[<size_t>g * P + row + a]
        off += b.r[e]
    for f in range(m):
        G[f * m + f] += 1.0
        for g in range(f):              # (symmetric up to rounding: make it exact)
            v = 0.5 * (G[f * m + g] + G[g * m + f])
            G[f * m + g] = v
            G[g * m + f] = v
    b.n = 0
    b.m = 0
    return woodbury_downdate(M, P, G, m, Rt)


cdef inline bint dense_row(const FullRankKernel* kr, const Example* ex) noexcept nogil:
    """Whether ``ex`` enters ``Sigma`` through the batch's ``dgemm`` (dense
    rows, several outputs) rather than scattered (``K^2 nz^2`` adds)."""
    return kr.K > 1 and 8 * ex.nz * ex.nz >= kr.d1 * kr.d1


cdef void sigma_add(const FullRankKernel* kr, BatchWork* b, const Example* ex) noexcept nogil:
    """``Sigma += S_j (x) xt xt^T`` (``S_j = Lt^T Lt``): scattered now into the
    upper triangle, or for a dense row kept (``vec S_j``, dense ``xt``) for
    the batch's ``dgemm``."""
    cdef int K = ex.K, r = ex.r, P = kr.P, d1 = kr.d1, a, c, j, k, i, i2
    cdef size_t ra
    cdef double v, vj
    cdef double* S = b.Skk
    cdef double* Sig = kr.Sigma
    if r == 0:
        return
    if dense_row(kr, ex):
        S = b.S + <size_t>b.n_dense * K * K
    for a in range(K):
        for c in range(a, K):
            v = strided_dot(r, ex.Lt + a, K, ex.Lt + c, K)
            S[a * K + c] = v
            S[c * K + a] = v
    if dense_row(kr, ex):
        memset(b.Xd + <size_t>b.n_dense * d1, 0, d1 * sizeof(double))
        for j in range(ex.nz):
            b.Xd[<size_t>b.n_dense * d1 + ex.idx[j]] = ex.val[j]
        b.n_dense += 1
        if b.n_dense == min(kr.batch_size, DENSE_CHUNK):
            dense_flush(kr, b)
        return
    # the upper triangle (row-major) only: the one Cholesky reads, mirrored
    # at the end of the call (refactor_finish)
    if K == 1:
        v = S[0]
        for j in range(ex.nz):
            vj = v * ex.val[j]
            i = ex.idx[j]
            for k in range(j, ex.nz):
                i2 = ex.idx[k]
                if i <= i2:
                    Sig[<size_t>i * P + i2] += vj * ex.val[k]
                else:
                    Sig[<size_t>i2 * P + i] += vj * ex.val[k]
        return
    for j in range(ex.nz):
        vj = ex.val[j]
        for k in range(j, ex.nz):
            v = vj * ex.val[k]
            i = ex.idx[j]
            i2 = ex.idx[k]
            if i > i2:
                i, i2 = i2, i
            for a in range(K):
                ra = (i * K + a) * P + i2 * K
                for c in range(K):
                    Sig[ra + c] += v * S[a * K + c]


cdef void dense_flush(const FullRankKernel* kr, BatchWork* b) noexcept nogil:
    """Add the dense rows kept to ``Sigma`` by one ``dgemm``: ``Out[(a,c), q]
    = sum_j S_j[a,c] xt_ji xt_jk`` for the pairs ``q = (i, k >= i)``, then
    scattered to ``Sigma[(i,a), (k,c)]`` (the blocks ``k >= i``: the upper
    triangle, as ``sigma_add``)."""
    cdef int K = kr.K, P = kr.P, d1 = kr.d1, n = b.n_dense, KK = K * K
    cdef int N = d1 * (d1 + 1) // 2
    cdef int e, i, k, a, c, q
    cdef double one = 1.0, zero = 0.0
    cdef char cN = b'N'
    cdef char cT = b'T'
    cdef double* Z = b.Z
    cdef double* x
    cdef double* Out = b.Out
    cdef double* Sig = kr.Sigma
    cdef size_t base
    if n == 0:
        return
    for e in range(n):
        x = b.Xd + <size_t>e * d1
        q = 0
        for i in range(d1):
            for k in range(i, d1):
                Z[<size_t>e * N + q] = x[i] * x[k]
                q += 1
    # column-major: Out^T (N x KK) = Z^T (N x n) . S (n x KK)
    dgemm(&cN, &cT, &N, &KK, &n, &one, Z, &N, b.S, &KK, &zero, Out, &N)
    q = 0
    for i in range(d1):
        for k in range(i, d1):
            for a in range(K):
                base = <size_t>(i * K + a) * P + k * K
                for c in range(K):
                    Sig[base + c] += Out[<size_t>(a * K + c) * N + q]
            q += 1
    b.n_dense = 0


cdef int refactor_flush(const FullRankKernel* kr, BatchWork* b) noexcept nogil:
    """The batch's dense rows into ``Sigma`` (``dense_flush``), then ``Sigma =
    L L^T`` into ``Lw``. Returns 0 when ``Sigma`` is not numerically positive
    definite."""
    cdef int P = kr.P, info = 0
    cdef char cL = b'L'
    dense_flush(kr, b)
    memcpy(b.Lw, kr.Sigma, <size_t>P * P * sizeof(double))
    dpotrf(&cL, &P, b.Lw, &P, &info)
    b.factored = info == 0
    return info == 0


cdef void refactor_finish(const FullRankKernel* kr, BatchWork* b) noexcept nogil:
    """``M = Sigma^-1`` from the last factor (both triangles); ``Sigma``'s
    lower triangle from its upper one."""
    cdef int P = kr.P, info = 0, i, j
    cdef char cL = b'L'
    cdef double* M = kr.M
    cdef double* Lw = b.Lw
    cdef double* Sig = kr.Sigma
    for i in range(P):
        for j in range(i + 1, P):
            Sig[<size_t>j * P + i] = Sig[<size_t>i * P + j]
    if not b.factored:
        return
    dpotri(&cL, &P, Lw, &P, &info)
    # column-major lower = row-major upper: entries (i, j >= i) of Lw row-major
    for i in range(P):
        for j in range(i, P):
            M[<size_t>i * P + j] = Lw[<size_t>i * P + j]
            M[<size_t>j * P + i] = Lw[<size_t>i * P + j]


cdef struct FullRankWork:
    # scratch of one example's Woodbury update of M
    double* Wt              # K x P: (M U)^T, U = [e_a (x) xt]
    double* Rt              # r x P: (M U L)^T, then chol(G)^-1 (M U L)^T
    double* C               # K x K: U^T M U
    double* G               # r x r: I + L^T C L, then its Cholesky factor
    double* tmp             # r x K: L^T C
    double* wrk             # P: the surrogate's right-hand side


cdef int work_init(FullRankWork* w, Workspace ws, int K, int P) except -1:
    """Give ``w`` its scratch from ``ws``."""
    w.Wt = ws.doubles(<size_t>K * P)
    w.Rt = ws.doubles(<size_t>K * P)
    w.C = ws.doubles(K * K)
    w.G = ws.doubles(K * K)
    w.tmp = ws.doubles(K * K)
    w.wrk = ws.doubles(P)
    return 0


cdef inline void gather_rows(const double* M, int P, int K, const int* idx,
                             const double* val, int nz, double* Wt) noexcept nogil:
    """``Wt = (M U)^T`` for ``U = [e_a (x) xt]`` (``K`` rows of length ``P``):
    the ``nz K`` rows of ``M`` of the row's coordinates, weighted."""
    cdef int j, a, row
    memset(Wt, 0, <size_t>K * P * sizeof(double))
    for j in range(nz):
        row = idx[j] * K
        for a in range(K):
            axpy(P, val[j], M + <size_t>(row + a) * P, Wt + <size_t>a * P)


cdef inline void example_scores(Example* ex, const double* th) noexcept nogil:
    """``scores[a] = theta_a . xt``: the example's ``K`` scores at ``theta``."""
    cdef int K = ex.K, j, a, row
    for a in range(K):
        ex.scores[a] = 0.0
    for j in range(ex.nz):
        row = ex.idx[j] * K
        for a in range(K):
            ex.scores[a] += ex.val[j] * th[row + a]


cdef int absorb_curvature(const FullRankKernel* kr, const Example* ex,
                          FullRankWork* w) noexcept nogil:
    """``M <- (M^-1 + S_j (x) xt xt^T)^-1`` by one rank-``r`` Woodbury step.

    The ``r`` Sherman-Morrison steps of Algorithm 2 (``N = M q q^T M / (1 +
    q^T M q)``, ``M -= N``) at once: with ``U = [e_a (x) xt]`` (``P x K``) and
    ``S_j = L L^T`` (``L = Lt^T``, ``K x r``), ``M -= (M U L) G^-1 (M U
    L)^T`` with ``G = I + L^T (U^T M U) L``, applied as ``T T^T`` with
    ``T^T = chol(G)^-1 (M U L)^T``. ``M U`` gathers ``nz K`` rows of ``M``:
    ``O(nz K P)`` besides the rank-``r`` update.

    Returns 0 when ``G`` is not numerically positive definite (non-finite
    values), 1 otherwise.
    """
    cdef int K = kr.K, P = kr.P, r = ex.r, j, a, b, f
    cdef double v, one = 1.0, zero = 0.0
    cdef char cN = b'N'
    cdef double* Wt = w.Wt
    cdef double* C = w.C
    gather_rows(kr.M, P, K, ex.idx, ex.val, ex.nz, Wt)      # W^T = (M U)^T
    # R^T = L^T W^T  (r x P)
    dgemm(&cN, &cN, &P, &r, &K, &one, Wt, &P, ex.Lt, &K, &zero, w.Rt, &P)
    # C = U^T M U (K x K)
    for a in range(K):
        for b in range(K):
            v = 0.0
            for j in range(ex.nz):
                v += ex.val[j] * Wt[<size_t>b * P + ex.idx[j] * K + a]
            C[a * K + b] = v
    # G = I + L^T C L (r x r), with L^T = Lt (r x K)
    matmul(r, K, K, ex.Lt, K, 1, C, K, 1, w.tmp)
    matmul(r, r, K, w.tmp, K, 1, ex.Lt, 1, K, w.G)
    for f in range(r):
        w.G[f * r + f] += 1.0
    return woodbury_downdate(kr.M, P, w.G, r, w.Rt)


cdef void add_gradient(const FullRankKernel* kr, Example* ex, bint with_reg) noexcept nogil:
    """The example's term of ``mu``.

    Algorithm 2: ``mu += s_j (c_j - F[y_j]) (x) xt + alpha theta`` (once per
    example; the intercept is not penalised). Surrogate mode: ``b += (s_j
    (c_j - F[y_j]) - S_j scores_j) (x) xt``, the gradient of the example's
    bound minus its curvature times the weights it was formed at, so that
    ``b`` and ``M`` define the sum of the bounds as a quadratic.
    """
    cdef int K = kr.K, r = ex.r, j, a, b, row
    cdef Py_ssize_t p, n_reg = kr.n_reg
    cdef double v, sc, alpha = kr.alpha
    cdef double* mup = kr.mu
    cdef const double* th = kr.theta
    if kr.surrogate:
        for a in range(K):
            v = 0.0
            for b in range(K):
                sc = strided_dot(r, ex.Lt + a, K, ex.Lt + b, K)     # (L L^T)_ab
                v += sc * ex.scores[b]
            ex.c[a] = ex.gcoef[a] - v           # (c is free after example_bound)
        for j in range(ex.nz):
            row = ex.idx[j] * K
            for a in range(K):
                mup[row + a] += ex.c[a] * ex.val[j]
    else:
        for j in range(ex.nz):
            row = ex.idx[j] * K
            for a in range(K):
                mup[row + a] += ex.gcoef[a] * ex.val[j]
        if with_reg:
            for p in range(n_reg):
                mup[p] += alpha * th[p]


cdef void add_batch_regulariser(const FullRankKernel* kr, int n) noexcept nogil:
    """``mu += n alpha theta`` (intercept excluded): the ``alpha theta`` terms
    of a batch's ``n`` examples, all at the same ``theta`` (Algorithm 2)."""
    cdef Py_ssize_t p
    cdef double c = n * kr.alpha
    if kr.surrogate:
        return
    for p in range(kr.n_reg):
        kr.mu[p] += c * kr.theta[p]


cdef void full_step(const FullRankKernel* kr, double* wrk, const double* Lw) noexcept nogil:
    """The step on the weights: ``theta -= eta phi``.

    Algorithm 2: ``phi = M mu``, the batch majorization step (Eq. 2) over
    the examples seen. Surrogate mode: ``phi = theta - theta_hat`` with
    ``theta_hat = -M (b - lam theta_icpt)`` the minimiser of the sum of the
    bounds plus ``lam/2 ||w||^2`` (the intercept's ``lam`` inside ``M`` is a
    proximal term at the current value, hence its ``lam theta_icpt``).
    ``Lw`` not NULL (``REFACTOR``): ``M`` is applied as ``Sigma^-1`` from the
    Cholesky factor ``Lw`` (two triangular solves).
    """
    cdef int P = kr.P, inc = 1, one_rhs = 1, info = 0
    cdef Py_ssize_t p, n_reg = kr.n_reg
    cdef double one = 1.0, zero = 0.0, eta = kr.eta, lam = kr.lam
    cdef char cN = b'N'
    cdef char cL = b'L'
    cdef double* M = kr.M
    cdef double* mu = kr.mu
    cdef double* phi = kr.phi
    cdef double* th = kr.theta
    if kr.surrogate:
        for p in range(P):
            wrk[p] = mu[p] if p < n_reg else mu[p] - lam * th[p]
    else:
        memcpy(wrk, mu, P * sizeof(double))
    if Lw != NULL:
        memcpy(phi, wrk, P * sizeof(double))
        dpotrs(&cL, &P, &one_rhs, <double*>Lw, &P, phi, &P, &info)
    else:
        # (M is symmetric: BLAS's column-major M^T mu is M mu)
        dgemv(&cN, &P, &P, &one, M, &P, wrk, &inc, &zero, phi, &inc)
    if kr.surrogate:
        for p in range(P):
            phi[p] += th[p]
    for p in range(P):
        th[p] -= eta * phi[p]


# ---- one route per batch mode, chosen once per call (``route_of``) ----------------
ctypedef int (*keep_fn)(const FullRankKernel* kr, BatchWork* b, FullRankWork* w,
                        const Example* ex) noexcept nogil
ctypedef int (*flush_fn)(const FullRankKernel* kr, BatchWork* b, FullRankWork* w,
                         int n_y) noexcept nogil


cdef struct Route:
    keep_fn keep            # an example's curvature: into M now, or kept for the batch
    flush_fn flush          # the batch's kept curvature into M (or Sigma)
    bint per_example        # mu's alpha theta per example (else once per batch)


cdef int keep_per_example(const FullRankKernel* kr, BatchWork* b, FullRankWork* w,
                          const Example* ex) noexcept nogil:
    return ex.r == 0 or absorb_curvature(kr, ex, w)


cdef int keep_woodbury(const FullRankKernel* kr, BatchWork* b, FullRankWork* w,
                       const Example* ex) noexcept nogil:
    batch_store(kr, b, ex)
    return 1


cdef int keep_refactor(const FullRankKernel* kr, BatchWork* b, FullRankWork* w,
                       const Example* ex) noexcept nogil:
    sigma_add(kr, b, ex)
    return 1


cdef int flush_nothing(const FullRankKernel* kr, BatchWork* b, FullRankWork* w,
                       int n_y) noexcept nogil:
    return 1


cdef int flush_refactor(const FullRankKernel* kr, BatchWork* b, FullRankWork* w,
                        int n_y) noexcept nogil:
    return refactor_flush(kr, b)


cdef Route route_of(int route):
    """``PER_EXAMPLE``: Algorithm 2, each example's own Woodbury step;
    ``WOODBURY``: the batch's factors kept for one rank-``m`` step;
    ``REFACTOR``: the batch's terms into ``Sigma``, refactored at its end."""
    cdef Route rt
    rt.per_example = route == PER_EXAMPLE
    if route == PER_EXAMPLE:
        rt.keep, rt.flush = keep_per_example, flush_nothing
    elif route == WOODBURY:
        rt.keep, rt.flush = keep_woodbury, woodbury_flush
    else:
        rt.keep, rt.flush = keep_refactor, flush_refactor
    return rt


cdef inline int end_batch(const FullRankKernel* kr, const Route* rt, BatchWork* b,
                          FullRankWork* w, int n, int n_y) noexcept nogil:
    """The batch's curvature (if kept), its regulariser, then the step (from
    ``Sigma``'s factor when ``REFACTOR`` made one). Returns 0 on failure."""
    if not rt.per_example:
        add_batch_regulariser(kr, n)
    if not rt.flush(kr, b, w, n_y):
        return 0
    full_step(kr, w.wrk, b.Lw)
    return 1


cdef int full_pass(RowDataset ds, Py_ssize_t start, Py_ssize_t stop,
                   const FullRankKernel* kr, const Route* rt, Example* ex, FullRankWork* w,
                   BatchWork* b, PassTotals* tot) noexcept nogil:
    """One pass of Algorithm 2 over the rows ``start:stop`` in their current order.

    A step after every ``batch_size`` examples and after the last one; the
    route (``route_of``) puts each example's curvature into ``M`` at once
    (``PER_EXAMPLE``) or keeps it for the batch's end (``WOODBURY``,
    ``REFACTOR``). Returns 0 when a curvature update failed (then the pass
    stops there).
    """
    cdef Py_ssize_t i
    cdef int since_step = 0
    tot.loss_sum = 0.0
    tot.w_sum = 0.0
    for i in range(start, stop):
        if not read_row(ds, i, ex, kr.n_features, kr.fit_intercept):
            continue
        example_scores(ex, kr.theta)
        example_bound(ex)
        tot.loss_sum += ex.sw * ex.loss
        tot.w_sum += ex.sw
        if not rt.keep(kr, b, w, ex):
            return 0
        add_gradient(kr, ex, rt.per_example)
        tot.t += 1
        since_step += 1
        if since_step == kr.batch_size:
            if not end_batch(kr, rt, b, w, since_step, ex.n_y):
                return 0
            since_step = 0
    if since_step > 0 and not end_batch(kr, rt, b, w, since_step, ex.n_y):
        return 0
    return 1


def full_epochs(RowDataset ds, state, opts, Py_ssize_t start=0, stop=None, *,
                int n_epochs=1, bint shuffle=True, threads=None):
    """Full-rank stochastic bound majorization (Algorithm 2), in place.

    Per example ``j`` (at the current ``theta``): Algorithm 1 gives
    ``S_j`` and ``g_j``; ``M = Sigma^-1`` absorbs ``S_j (x) xt xt^T``
    (``absorb_curvature``); ``mu += s_j (c_j - F[y_j]) (x) xt + alpha theta``
    (``add_gradient``); after every ``batch_size`` examples (and at the end
    of a pass) ``theta -= eta M mu`` (``full_step``).

    With ``opts.surrogate`` (incremental majorization-minimisation instead of
    Algorithm 2's ``mu``): ``mu`` holds ``b = sum_s [s_s (c_s - F[y_s]) - S_s
    scores_s] (x) xt_s`` and the step moves ``theta`` towards the minimiser
    of the sum of the bounds plus the regulariser, whose curvature inside
    ``M`` is ``state.lam_total`` (raised by ``grow_regulariser``).

    Parameters
    ----------
    ds : RowDataset
        Targets: +-1 (``n_outputs == 1``) or class indices.
    state : FullRankState
        Started (``state.start``); its arrays, ``t`` and ``seed`` are
        updated in place.
    opts : SBMOptions
    start, stop : int
        The passes visit the rows ``start:stop`` of ``ds``'s current order
        (all by default; a block of a shuffled pass without copying it).
    n_epochs : int
        Passes over the rows.
    shuffle : bool
        Shuffle the rows before each pass.
    threads : ThreadRunner or None
        With two threads or more and ``team_route`` true, the threads share
        each pass (``TeamPass``: the one-thread model up to the order of a
        few sums); otherwise the passes run on the calling thread. If a
        thread fails, its error is raised and the state is half-updated.

    Returns
    -------
    result : SBMResult
    """
    cdef Py_ssize_t stop_ = check_rows(ds, state, start, stop)
    if (threads is not None and n_epochs > 0 and getattr(opts, "route", "auto") == "auto"
            and team_route(opts.batch_size, state.n_outputs, state.theta.size,
                           threads.n_threads)):
        return team_epochs(ds, state, opts, start, stop_, n_epochs, shuffle, threads)
    cdef FullRankKernel kr
    cdef Workspace ws = Workspace()
    cdef Example ex
    cdef FullRankWork w
    cdef BatchWork b
    bind_kernel(&kr, state, opts, ds.n_features)
    cdef bint m_stale = kr.route == REFACTOR and state.m_stale
    example_init(&ex, ws, kr.n_features, kr.K)
    work_init(&w, ws, kr.K, kr.P)
    batch_init(&b, ws, kr.route, kr.batch_size, ex.n_y, kr.K, kr.d1, kr.P)
    cdef int _epoch, epochs_run = 0
    cdef bint diverged = False
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef PassTotals tot = start_totals(state.t)
    cdef Route rt = route_of(kr.route)
    with nogil:
        for _epoch in range(n_epochs):
            if shuffle:
                ds.shuffle(&rng)
            if not full_pass(ds, start, stop_, &kr, &rt, &ex, &w, &b, &tot):
                diverged = True
                break
            if not all_finite(kr.theta, kr.P) or not all_finite(kr.phi, kr.P):
                diverged = True          # (reported as pass epochs_run + 1)
                break
            epochs_run += 1
        if kr.route == REFACTOR and not diverged:
            if not b.factored and m_stale:      # (no row: Sigma grew only)
                refactor_flush(&kr, &b)
            refactor_finish(&kr, &b)
    if kr.route == REFACTOR:
        # (M is Sigma^-1 again; after a failure Sigma holds terms M has not)
        state.sigma_of = None if diverged else state.M
        state.m_stale = False
    return finish_passes(state, tot, rng, epochs_run, diverged)


cdef int bind_kernel(FullRankKernel* kr, state, opts, Py_ssize_t n_features) except -1:
    """``kr``: the kernel's view of ``state`` (its arrays) and ``opts``, and
    the route of its batch mode; with ``REFACTOR``, ``Sigma`` made valid."""
    cdef double[::1] theta = state.theta
    cdef double[:, ::1] M = state.M
    cdef double[::1] mu = state.mu
    cdef double[::1] phi = state.phi
    cdef double[:, ::1] Sigma
    kr.K = state.n_outputs
    kr.n_features = n_features
    kr.fit_intercept = state.fit_intercept
    kr.d1 = <int>(n_features + (1 if kr.fit_intercept else 0))
    kr.P = kr.d1 * kr.K
    kr.n_reg = n_features * kr.K
    if (theta.shape[0] != kr.P or M.shape[0] != kr.P or M.shape[1] != kr.P
            or mu.shape[0] != kr.P or phi.shape[0] != kr.P):
        raise ValueError("the state's arrays do not match its shape")
    kr.surrogate = opts.surrogate
    kr.batch_size = opts.batch_size
    kr.alpha = opts.alpha
    kr.eta = opts.eta
    kr.lam = state.lam_total if kr.surrogate else 0.0
    kr.M = &M[0, 0]
    kr.theta = &theta[0]
    kr.mu = &mu[0]
    kr.phi = &phi[0]
    route = getattr(opts, "route", "auto")
    if route not in ("auto", "woodbury", "refactor"):
        raise ValueError(f"route must be 'auto', 'woodbury' or 'refactor', got {route!r}")
    if route == "auto" or kr.batch_size == 1:
        route = batch_route(kr.batch_size, kr.K, kr.P)
    kr.route = (PER_EXAMPLE if route == "per_example" else
                WOODBURY if route == "woodbury" else REFACTOR)
    kr.Sigma = NULL
    if kr.route != REFACTOR and state.m_stale:
        raise ValueError("M was left stale by grow_regulariser(defer=True) for a "
                         "batch_size that does not refactor")
    if kr.route == REFACTOR:
        state.ensure_sigma()
        Sigma = state.Sigma
        kr.Sigma = &Sigma[0, 0]
    return 0


# ---- a pass shared by threads (``n_jobs``) ----------------------------------------
cdef extern from "_barrier.h" nogil:
    ctypedef struct TeamBarrier "skso_barrier":
        int n
    void team_barrier_init "skso_barrier_init"(TeamBarrier* b, int n)
    void team_barrier_abort "skso_barrier_abort"(TeamBarrier* b)
    bint team_barrier_wait "skso_barrier_wait"(TeamBarrier* b, int* local_sense)


#: The least ``P^2 r`` (the multiply-adds of one example's downdate ``M -= T
#: T^T``) for which the threads share a ``batch_size=1`` pass: below it three
#: barriers an example cost more than the split saves (see ``team_route``). On
#: 2 cores one pass at two threads took 0.95x as long as one thread on a9a
#: (``P^2 r = 1.5e4``), 1.74x on w8a (``9.1e4``), 1.59x on letter (``4.9e6``).
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


cdef class TeamPass:
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

    cdef FullRankKernel kr
    cdef RowDataset ds
    cdef object state
    cdef Py_ssize_t start, stop
    cdef readonly int n_threads
    cdef TeamBarrier barrier
    cdef Workspace shared
    cdef list spaces
    cdef Example* ex            # one per thread
    cdef FullRankWork* w        # one per thread
    cdef PassTotals* tot        # one per thread
    cdef int* lo                # n_threads + 1 range bounds
    cdef int* status            # per thread: 1 done, 0 a curvature update failed, -1 aborted
    cdef double* Wt             # K x P, shared
    cdef double* Rt             # K x P, shared

    def __cinit__(self, RowDataset ds, state, opts, Py_ssize_t start, Py_ssize_t stop,
                  int n_threads):
        cdef int k, P, step
        bind_kernel(&self.kr, state, opts, ds.n_features)
        if self.kr.route != PER_EXAMPLE:
            raise ValueError("a TeamPass runs batch_size=1 passes only")
        self.ds, self.state = ds, state
        self.start, self.stop = start, stop
        self.n_threads = n_threads
        team_barrier_init(&self.barrier, n_threads)
        self.shared = Workspace()
        self.spaces = [None] * n_threads
        P = self.kr.P
        self.ex = <Example*>self.shared.flags(n_threads * sizeof(Example))
        self.w = <FullRankWork*>self.shared.flags(n_threads * sizeof(FullRankWork))
        self.tot = <PassTotals*>self.shared.flags(n_threads * sizeof(PassTotals))
        self.lo = self.shared.ints(n_threads + 1)
        self.status = self.shared.ints(n_threads)
        self.Wt = self.shared.doubles(<size_t>self.kr.K * P)
        self.Rt = self.shared.doubles(<size_t>self.kr.K * P)
        for k in range(n_threads + 1):
            step = <int>((<long long>P * k) // n_threads)
            self.lo[k] = min(P, (step + 4) // 8 * 8) if 0 < k < n_threads else step
        for k in range(n_threads):
            self.status[k] = -1
            self.tot[k] = start_totals(state.t)

    def run(self, int k):
        """Thread ``k``'s part of the pass (its buffers made here, then the
        pass without the GIL). If anything fails before it starts, the
        other threads are released and the error raised."""
        try:
            ws = thread_workspace(k)
            example_init(&self.ex[k], ws, self.kr.n_features, self.kr.K)
            work_init(&self.w[k], ws, self.kr.K, self.kr.P)
            self.spaces[k] = ws
        except BaseException:
            team_barrier_abort(&self.barrier)
            raise
        with nogil:
            self.status[k] = team_pass(self, k)

    def abort(self):
        """Release the threads waiting in the pass."""
        team_barrier_abort(&self.barrier)

    def result(self):
        """``(status, totals)``: 1 when every thread finished, 0 when a
        curvature update failed, -1 when the pass was aborted; thread 0's
        totals (all threads count alike)."""
        cdef int k, status = 1
        for k in range(self.n_threads):
            status = min(status, self.status[k])
        return status, self.tot[0]


cdef inline void own_gradient(const FullRankKernel* kr, Example* ex, int lo,
                              int hi) noexcept nogil:
    """``add_gradient`` (per example, ``batch_size=1``) on the coordinates
    ``lo:hi`` only: the same operations on each of them."""
    cdef int K = kr.K, r = ex.r, j, a, b, row, q
    cdef Py_ssize_t p
    cdef double v, sc, alpha = kr.alpha
    cdef double* mup = kr.mu
    cdef const double* th = kr.theta
    cdef const double* coef = ex.gcoef
    if kr.surrogate:
        for a in range(K):
            v = 0.0
            for b in range(K):
                sc = strided_dot(r, ex.Lt + a, K, ex.Lt + b, K)
                v += sc * ex.scores[b]
            ex.c[a] = ex.gcoef[a] - v
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


cdef inline int read_row_shared(RowDataset ds, Py_ssize_t i, Example* ex,
                                Py_ssize_t n_features, bint fit_intercept) noexcept nogil:
    """``read_row`` for threads that share ``ds`` (``row_span``: float32 rows
    are widened here, not in the dataset's one buffer); the same values."""
    cdef long long start
    cdef const int* ind
    cdef int nnz, j
    cdef double yv, sw, x
    row_span(ds, i, &start, &ind, &nnz, &yv, &sw)
    if sw == 0.0:
        return 0
    ex.nz = 0
    for j in range(nnz):
        x = row_value(ds, start, j)
        if x != 0.0:
            ex.idx[ex.nz] = ind[j]
            ex.val[ex.nz] = x
            ex.nz += 1
    if fit_intercept:
        ex.idx[ex.nz] = <int>n_features
        ex.val[ex.nz] = 1.0
        ex.nz += 1
    ex.sw = sw
    if ex.K == 1:
        ex.label = 1 if yv > 0 else 0
    else:
        ex.label = <int>yv
    return 1


cdef int team_pass(TeamPass tp, int k) noexcept nogil:
    """Thread ``k``'s part of ``tp``'s pass (``TeamPass``). Returns 1 at the
    end, 0 when ``G`` was not positive definite (every thread stops at the
    same example: they all factor the same ``G``), -1 when aborted."""
    cdef const FullRankKernel* kr = &tp.kr
    cdef Example* ex = &tp.ex[k]
    cdef FullRankWork* w = &tp.w[k]
    cdef PassTotals* tot = &tp.tot[k]
    cdef TeamBarrier* bar = &tp.barrier
    cdef int lo = tp.lo[k], hi = tp.lo[k + 1], n = hi - lo
    cdef int K = kr.K, P = kr.P, r, j, a, b, f, sense = 0, inc = 1
    cdef Py_ssize_t i, p
    cdef double v, one = 1.0, zero = 0.0, mone = -1.0, eta = kr.eta, lam = kr.lam
    cdef char cN = b'N'
    cdef char cT = b'T'
    cdef double* M = kr.M
    cdef double* Wt = tp.Wt
    cdef double* Rt = tp.Rt
    cdef double* C = w.C
    cdef double* th = kr.theta
    cdef double* phi = kr.phi
    cdef double* rhs = kr.mu
    tot.loss_sum = 0.0
    tot.w_sum = 0.0
    for i in range(tp.start, tp.stop):
        if not read_row_shared(tp.ds, i, ex, kr.n_features, kr.fit_intercept):
            continue
        example_scores(ex, th)
        example_bound(ex)
        tot.loss_sum += ex.sw * ex.loss
        tot.w_sum += ex.sw
        r = ex.r
        if r > 0 and n > 0:
            # own columns of W^T = (M U)^T, from M's own rows (M is symmetric:
            # its rows stay in this thread's cache), summed in gather_rows' order
            for p in range(lo, hi):
                own_gather(M + <size_t>p * P, K, ex.idx, ex.val, ex.nz, Wt + p, P)
            # own columns of R^T = L^T W^T
            dgemm(&cN, &cN, &n, &r, &K, &one, Wt + lo, &P, ex.Lt, &K, &zero, Rt + lo, &P)
        own_gradient(kr, ex, lo, hi)
        if not team_barrier_wait(bar, &sense):
            return -1
        if r > 0:
            # C = U^T M U, G = I + L^T C L and its factor: alike on every thread
            for a in range(K):
                for b in range(K):
                    v = 0.0
                    for j in range(ex.nz):
                        v += ex.val[j] * Wt[<size_t>b * P + ex.idx[j] * K + a]
                    C[a * K + b] = v
            matmul(r, K, K, ex.Lt, K, 1, C, K, 1, w.tmp)
            matmul(r, r, K, w.tmp, K, 1, ex.Lt, 1, K, w.G)
            for f in range(r):
                w.G[f * r + f] += 1.0
            if not cholesky(r, w.G):
                return 0
            lower_solve_cols(r, w.G, n, P, Rt + lo)
        if kr.surrogate:
            # the step's right-hand side, whole on every thread (theta is not
            # written before the next barrier)
            for p in range(P):
                w.wrk[p] = kr.mu[p] if p < kr.n_reg else kr.mu[p] - lam * th[p]
            rhs = w.wrk
        if not team_barrier_wait(bar, &sense):
            return -1
        if n > 0:
            if r > 0:       # own rows of M -= T T^T
                dgemm(&cN, &cT, &P, &n, &r, &mone, Rt, &P, Rt + lo, &P, &one,
                      M + <size_t>lo * P, &P)
            # own rows of phi = M rhs (M symmetric: its own rows, not its columns)
            dgemv(&cT, &P, &n, &one, M + <size_t>lo * P, &P, rhs, &inc, &zero, phi + lo,
                  &inc)
            for p in range(lo, hi):
                if kr.surrogate:
                    phi[p] += th[p]
                th[p] -= eta * phi[p]
        tot.t += 1
        if not team_barrier_wait(bar, &sense):
            return -1
    return 1


def team_epochs(RowDataset ds, state, opts, Py_ssize_t start, Py_ssize_t stop, int n_epochs,
                bint shuffle, threads):
    """``full_epochs`` on ``threads`` (a ``ThreadRunner``): each pass one
    ``TeamPass`` (``batch_size=1``) or ``BatchTeamPass``. The state is
    updated in place; after a failure in a thread (an error raised) it is
    half-updated, and the caller must discard it."""
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
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
cdef class BatchTeamPass:
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

    cdef FullRankKernel kr
    cdef RowDataset ds
    cdef object state
    cdef readonly int n_threads
    cdef TeamBarrier barrier
    cdef Workspace shared
    cdef list spaces
    cdef BatchWork b
    cdef Example* ex            # one per thread
    cdef FullRankWork* w        # one per thread (thread 0's wrk for the step)
    cdef double** xd            # one d1 scratch per thread
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
    cdef int* status            # per thread
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
        self.ds, self.state = ds, state
        self.n_threads = n_threads
        team_barrier_init(&self.barrier, n_threads)
        self.shared = Workspace()
        self.spaces = [None] * n_threads
        K, d1 = self.kr.K, self.kr.d1
        self.KK = K * K
        self.N = d1 * (d1 + 1) // 2
        self.G = min(self.kr.batch_size, DENSE_CHUNK)
        memset(&self.b, 0, sizeof(BatchWork))
        self.b.Lw = self.shared.doubles(<size_t>self.kr.P * self.kr.P)
        self.b.Out = self.shared.doubles(<size_t>self.KK * self.N)
        self.ex = <Example*>self.shared.flags(n_threads * sizeof(Example))
        self.w = <FullRankWork*>self.shared.flags(n_threads * sizeof(FullRankWork))
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
        self.status = self.shared.ints(n_threads)
        for k in range(n_threads + 1):
            self.klo[k] = <int>((<long long>self.KK * k) // n_threads)
        for k in range(n_threads):
            self.status[k] = -1
        self.tot = start_totals(state.t)
        self.failed = 0

    def run(self, int k):
        """Thread ``k``'s part of the pass (``TeamPass.run``)."""
        cdef Workspace ws
        try:
            ws = thread_workspace(k)
            example_init(&self.ex[k], ws, self.kr.n_features, self.kr.K)
            work_init(&self.w[k], ws, self.kr.K, self.kr.P)
            self.xd[k] = ws.doubles(self.kr.d1)
            self.spaces[k] = ws
        except BaseException:
            team_barrier_abort(&self.barrier)
            raise
        with nogil:
            self.status[k] = batch_team_pass(self, k)

    def abort(self):
        """Release the threads waiting in the pass."""
        team_barrier_abort(&self.barrier)

    def result(self):
        """``(status, totals)`` as ``TeamPass.result``."""
        cdef int k, status = 1
        for k in range(self.n_threads):
            status = min(status, self.status[k])
        return status, self.tot

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
    cdef int K = kr.K, d1 = kr.d1, r = ex.r, a, c, b, j, i, k, q
    cdef double v, sc
    cdef double* S = tp.s_S + <size_t>s * tp.KK
    cdef double* Z = tp.s_Z + <size_t>s * tp.N
    cdef double* coef = tp.s_coef + <size_t>s * K
    tp.s_nz[s] = ex.nz
    tp.s_r[s] = r
    memcpy(tp.s_idx + <size_t>s * d1, ex.idx, ex.nz * sizeof(int))
    memcpy(tp.s_val + <size_t>s * d1, ex.val, ex.nz * sizeof(double))
    tp.s_loss[s] = ex.loss
    tp.s_sw[s] = ex.sw
    if kr.surrogate:
        for a in range(K):
            v = 0.0
            for b in range(K):
                sc = strided_dot(r, ex.Lt + a, K, ex.Lt + b, K)
                v += sc * ex.scores[b]
            coef[a] = ex.gcoef[a] - v
    else:
        memcpy(coef, ex.gcoef, K * sizeof(double))
    for a in range(K):
        for c in range(a, K):
            v = strided_dot(r, ex.Lt + a, K, ex.Lt + c, K) if r > 0 else 0.0
            S[a * K + c] = v
            S[c * K + a] = v
    tp.s_dense[s] = r > 0 and dense_row(kr, ex)
    if not tp.s_dense[s]:
        memset(Z, 0, tp.N * sizeof(double))
        return
    memset(xd, 0, d1 * sizeof(double))
    for j in range(ex.nz):
        xd[ex.idx[j]] = ex.val[j]
    q = 0
    for i in range(d1):
        for k in range(i, d1):
            Z[q] = xd[i] * xd[k]
            q += 1


cdef void slot_scatter(const FullRankKernel* kr, const double* S, const int* idx,
                       const double* val, int nz) noexcept nogil:
    """``Sigma += S_j (x) xt xt^T`` scattered into the upper triangle
    (``sigma_add``'s sparse rows, the same operations)."""
    cdef int K = kr.K, P = kr.P, a, c, j, k, i, i2
    cdef size_t ra
    cdef double v
    cdef double* Sig = kr.Sigma
    for j in range(nz):
        for k in range(j, nz):
            v = val[j] * val[k]
            i = idx[j]
            i2 = idx[k]
            if i > i2:
                i, i2 = i2, i
            for a in range(K):
                ra = (i * K + a) * P + i2 * K
                for c in range(K):
                    Sig[ra + c] += v * S[a * K + c]


cdef int batch_team_pass(BatchTeamPass tp, int k) noexcept nogil:
    """Thread ``k``'s part of ``tp``'s pass (``BatchTeamPass``). Returns 1 at
    the end, 0 when ``Sigma`` was not positive definite, -1 when aborted."""
    cdef FullRankKernel* kr = &tp.kr
    cdef Example* ex = &tp.ex[k]
    cdef FullRankWork* w = &tp.w[k]
    cdef TeamBarrier* bar = &tp.barrier
    cdef int J = tp.n_threads, K = kr.K, P = kr.P, d1 = kr.d1, B = kr.batch_size
    cdef int N = tp.N, KK = tp.KK, c0 = tp.klo[k], nc = tp.klo[k + 1] - tp.klo[k]
    cdef int n, s, s0, s1, j, a, row, col, q, i, kk, sense = 0, any_dense, info = 0
    cdef Py_ssize_t pos = 0, bend, gend
    cdef double one = 1.0, zero = 0.0
    cdef char cN = b'N'
    cdef char cT = b'T'
    cdef char cL = b'L'
    cdef const double* coef
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
            read_row_shared(tp.ds, tp.wrows[pos + s], ex, kr.n_features, kr.fit_intercept)
            example_scores(ex, kr.theta)
            example_bound(ex)
            slot_fill(tp, s, ex, tp.xd[k])
        if not team_barrier_wait(bar, &sense):
            return -1
        # 2. thread 0: sums, mu, sparse rows into Sigma, in order; all: own columns of Out
        if k == 0:
            for s in range(n):
                tp.tot.loss_sum += tp.s_sw[s] * tp.s_loss[s]
                tp.tot.w_sum += tp.s_sw[s]
                tp.tot.t += 1
                coef = tp.s_coef + <size_t>s * K
                idx = tp.s_idx + <size_t>s * d1
                val = tp.s_val + <size_t>s * d1
                for j in range(tp.s_nz[s]):
                    row = idx[j] * K
                    for a in range(K):
                        kr.mu[row + a] += coef[a] * val[j]
                if tp.s_r[s] > 0 and not tp.s_dense[s]:
                    slot_scatter(kr, tp.s_S + <size_t>s * KK, idx, val, tp.s_nz[s])
        any_dense = 0
        for s in range(n):
            any_dense = any_dense or tp.s_dense[s]
        if any_dense and nc > 0:
            # column-major: Out^T[:, own] (N x nc) = Z^T (N x n) . S[:, own] (n x nc)
            dgemm(&cN, &cT, &N, &nc, &n, &one, tp.s_Z, &N, tp.s_S + c0, &KK, &zero,
                  Out + <size_t>c0 * N, &N)
        if not team_barrier_wait(bar, &sense):
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
            if not team_barrier_wait(bar, &sense):
                return -1
            # 4. the batch's end: regulariser, refactorisation, step (thread 0)
            if k == 0:
                add_batch_regulariser(kr, <int>(bend - (bend - 1) // B * B))
                memcpy(tp.b.Lw, Sig, <size_t>P * P * sizeof(double))
                dpotrf(&cL, &P, tp.b.Lw, &P, &info)
                tp.b.factored = info == 0
                if info != 0:
                    tp.failed = 1
                else:
                    full_step(kr, w.wrk, tp.b.Lw)
            if not team_barrier_wait(bar, &sense):
                return -1
            if tp.failed:
                return 0
        pos = gend
    return 1
