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

Threads (``full_epochs`` with ``threads``, the estimator's ``n_jobs``): the
passes that several threads share on the one state are in ``_sbm_team``
(``TeamPass`` for ``batch_size=1``, ``BatchTeamPass`` for batches on the
``REFACTOR`` route with several classes); ``full_epochs`` hands them the call
where ``_sbm_team.team_route`` says the split pays. They use this module's
kernel view, scratch and steps, declared in ``_sbm_full.pxd``.
"""
from dataclasses import dataclass

import numpy as np

from libc.string cimport memcpy, memset

from ._dataset cimport RowDataset
from ._linalg cimport (
    axpy, cholesky, dgemm_t, dgemv_t, dpotrf_t, dpotri_t, dpotrs_t, lower_solve_rows, scipy_dgemm,
    scipy_dgemv, scipy_dpotrf, scipy_dpotri, scipy_dpotrs)
from ._numeric cimport all_finite
from ._sbm_bound cimport (
    Example, PassTotals, Workspace, check_rows, example_bound, example_init, finish_passes,
    read_row, start_totals)

from ._sbm_bound import SBMState

# SciPy's BLAS and LAPACK (looked up at import: _linalg.pxd)
cdef dgemm_t dgemm = scipy_dgemm()
cdef dgemv_t dgemv = scipy_dgemv()
cdef dpotrf_t dpotrf = scipy_dpotrf()
cdef dpotri_t dpotri = scipy_dpotri()
cdef dpotrs_t dpotrs = scipy_dpotrs()


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

    @classmethod
    def zeros(cls, n_features, n_outputs, fit_intercept, seed=1):
        """Zero weights and sums, ``M = I`` (``P x P``, ``P = n_params(...)``;
        scaled by ``start``)."""
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


cdef void sigma_add(const FullRankKernel* kr, BatchWork* b, const Example* ex) noexcept nogil:
    """``Sigma += S_j (x) xt xt^T`` (``S_j = Lt^T Lt``): scattered now into the
    upper triangle, or for a dense row kept (``vec S_j``, dense ``xt``) for
    the batch's ``dgemm``."""
    cdef int K = ex.K, P = kr.P, d1 = kr.d1, j, k, i, i2
    cdef double v, vj
    cdef double* S = b.Skk
    cdef double* Sig = kr.Sigma
    if ex.r == 0:
        return
    if dense_row(kr, ex):
        S = b.S + <size_t>b.n_dense * K * K
    bound_curvature(ex, S)
    if dense_row(kr, ex):
        dense_xt(ex, d1, b.Xd + <size_t>b.n_dense * d1)
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
    scatter_sparse(Sig, P, K, S, ex.idx, ex.val, ex.nz)


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
    cdef double* Out = b.Out
    cdef double* Sig = kr.Sigma
    cdef size_t base
    if n == 0:
        return
    for e in range(n):
        dense_pairs(b.Xd + <size_t>e * d1, d1, Z + <size_t>e * N)
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
    cdef int K = kr.K, P = kr.P, r = ex.r
    cdef double one = 1.0, zero = 0.0
    cdef char cN = b'N'
    cdef double* Wt = w.Wt
    gather_rows(kr.M, P, K, ex.idx, ex.val, ex.nz, Wt)      # W^T = (M U)^T
    # R^T = L^T W^T  (r x P)
    dgemm(&cN, &cN, &P, &r, &K, &one, Wt, &P, ex.Lt, &K, &zero, w.Rt, &P)
    woodbury_core(ex, Wt, P, w)                              # C, then G
    return woodbury_downdate(kr.M, P, w.G, r, w.Rt)


cdef void add_gradient(const FullRankKernel* kr, Example* ex, bint with_reg) noexcept nogil:
    """The example's term of ``mu``.

    Algorithm 2: ``mu += s_j (c_j - F[y_j]) (x) xt + alpha theta`` (once per
    example; the intercept is not penalised). Surrogate mode: ``b += (s_j
    (c_j - F[y_j]) - S_j scores_j) (x) xt``, the gradient of the example's
    bound minus its curvature times the weights it was formed at, so that
    ``b`` and ``M`` define the sum of the bounds as a quadratic.
    """
    cdef Py_ssize_t p
    cdef double alpha = kr.alpha
    cdef double* mup = kr.mu
    cdef const double* th = kr.theta
    if kr.surrogate:
        surrogate_coef(ex, ex.c)                # (c is free after example_bound)
        add_outer(mup, kr.K, ex.c, ex.idx, ex.val, ex.nz)
        return
    add_outer(mup, kr.K, ex.gcoef, ex.idx, ex.val, ex.nz)
    if with_reg:
        for p in range(kr.n_reg):
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
    cdef double one = 1.0, zero = 0.0
    cdef char cN = b'N'
    cdef char cL = b'L'
    if kr.surrogate:
        surrogate_rhs(kr, wrk)
    else:
        memcpy(wrk, kr.mu, P * sizeof(double))
    if Lw != NULL:
        memcpy(kr.phi, wrk, P * sizeof(double))
        dpotrs(&cL, &P, &one_rhs, <double*>Lw, &P, kr.phi, &P, &info)
    else:
        # (M is symmetric: BLAS's column-major M^T mu is M mu)
        dgemv(&cN, &P, &P, &one, kr.M, &P, wrk, &inc, &zero, kr.phi, &inc)
    theta_step(kr, 0, P)


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
        With two threads or more and ``_sbm_team.team_route`` true, the
        threads share each pass (``_sbm_team.team_epochs``: the one-thread
        model up to the order of a few sums); otherwise the passes run on
        the calling thread. If a thread fails, its error is raised and the
        state is half-updated.

    Returns
    -------
    result : SBMResult
    """
    cdef Py_ssize_t stop_ = check_rows(ds, state, start, stop)
    if threads is not None and n_epochs > 0 and getattr(opts, "route", "auto") == "auto":
        # (imported here: _sbm_team cimports this module)
        from ._sbm_team import team_epochs, team_route
        if team_route(opts.batch_size, state.n_outputs, state.theta.size, threads.n_threads):
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
    cdef unsigned int rng = state.rng_state()
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
