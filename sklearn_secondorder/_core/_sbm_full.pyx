"""Full-rank stochastic bound majorization (Choromanska & Jebara, Algorithm 2).

``M = Sigma^-1`` is a dense ``P x P`` matrix (``P = (n_features +
fit_intercept) K``). Per example: Algorithm 1 at the current weights
(``_sbm_bound``), the example's curvature into ``M`` by one Woodbury step
(``absorb_curvature``), its gradient into ``mu`` (``add_gradient``), and every
``batch_size`` examples the step ``theta -= eta M mu`` (``full_step``). The
model and the objective are described in ``_sbm_bound``.
"""
from dataclasses import dataclass

import numpy as np

from libc.stdlib cimport free, malloc
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm, dgemv

from ._dataset cimport RowDataset
from ._linalg cimport axpy, cholesky, lower_solve_rows, matmul, strided_dot
from ._numeric cimport all_finite
from ._sbm_bound cimport (
    Example, PassTotals, example_alloc, example_bound, example_free, finish_passes, read_row,
    start_totals)


@dataclass
class FullRankState:
    """The state of full-rank SBM on one problem (picklable).

    Attributes
    ----------
    n_features, n_outputs : int
    fit_intercept : bool
    theta : ndarray of shape (P,)
        The weights, the C-order ``(n_features + fit_intercept, n_outputs)``
        block (``P`` entries): coordinate ``i * n_outputs + a`` is feature
        ``i``, output ``a``; the intercept is the last row.
    M : ndarray of shape (P, P)
        ``Sigma^-1``, symmetric (both triangles kept): the identity until
        ``start``, then ``I / lam``.
    mu, phi : ndarray of shape (P,)
        The persistent gradient sum and ``phi = M mu`` (Algorithm 2).
    t : int
        Examples processed so far.
    seed : int
        The shuffling RNG state.
    n_ref : int or None
        ``n`` in ``lam = n alpha``: the rows of the first data (None until
        ``start``).
    lam : float or None
        The paper's lambda (Eq. 1), ``n_ref alpha``.
    eta : float or None
        The step ``theta -= eta phi`` fixed at ``start``.
    lam_total : float
        The regulariser's curvature inside ``M`` (``lam`` from ``start``,
        raised by ``grow_regulariser``).
    """

    n_features: int
    n_outputs: int
    fit_intercept: bool
    theta: np.ndarray
    M: np.ndarray
    mu: np.ndarray
    phi: np.ndarray
    t: int = 0
    seed: int = 1
    n_ref: object = None
    lam: object = None
    eta: object = None
    lam_total: float = 0.0

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

    @property
    def started(self):
        """Whether ``start`` fixed the regulariser."""
        return self.n_ref is not None

    def start(self, n_ref, lam, eta):
        """Fix ``n``, ``lam = n alpha`` and ``eta`` on the first data:
        ``M = I / lam`` (Algorithm 2's initialisation)."""
        self.n_ref = n_ref
        self.lam = lam
        self.eta = eta
        self.lam_total = lam
        self.M *= 1.0 / lam

    def grow_regulariser(self, n_ref, lam, eta):
        """Size the regulariser for ``n_ref`` rows: raise its curvature in
        ``M`` to ``lam`` (``delta = lam - lam_total``) and take the step
        ``eta`` (the estimator's ``n_t`` schedule).

        ``M <- (Sigma + delta I)^-1 = (I + delta M)^-1 M``, symmetrised (the
        kernel's Woodbury updates keep both triangles equal); O(P^3).
        """
        delta = lam - self.lam_total
        if delta > 0:
            M = self.M
            M[:] = np.linalg.solve(np.eye(M.shape[0]) + delta * M, M)
            M[:] = 0.5 * (M + M.T)
            self.lam_total = lam
        self.n_ref, self.lam, self.eta = n_ref, lam, eta

    def weights(self):
        """``(coef, intercept)``: flat C-order ``(n_features, n_outputs)`` and
        ``(n_outputs,)`` (zeros without an intercept)."""
        n_coef = self.n_features * self.n_outputs
        intercept = self.theta[n_coef:] if self.fit_intercept else np.zeros(self.n_outputs)
        return self.theta[:n_coef], intercept


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


cdef struct FullRankWork:
    # scratch of one example's Woodbury update of M
    double* Wt              # K x P: (M U)^T, U = [e_a (x) xt]
    double* Rt              # r x P: (M U L)^T, then chol(G)^-1 (M U L)^T
    double* C               # K x K: U^T M U
    double* G               # r x r: I + L^T C L, then its Cholesky factor
    double* tmp             # r x K: L^T C
    double* wrk             # P: the surrogate's right-hand side


cdef int work_alloc(FullRankWork* w, int K, int P) noexcept nogil:
    """Allocate the scratch (``w`` zeroed first); 0 when out of memory."""
    w.Wt = <double*>malloc(<size_t>K * P * sizeof(double))
    w.Rt = <double*>malloc(<size_t>K * P * sizeof(double))
    w.C = <double*>malloc(K * K * sizeof(double))
    w.G = <double*>malloc(K * K * sizeof(double))
    w.tmp = <double*>malloc(K * K * sizeof(double))
    w.wrk = <double*>malloc(P * sizeof(double))
    return not (w.Wt == NULL or w.Rt == NULL or w.C == NULL or w.G == NULL
                or w.tmp == NULL or w.wrk == NULL)


cdef void work_free(FullRankWork* w) noexcept nogil:
    free(w.Wt)
    free(w.Rt)
    free(w.C)
    free(w.G)
    free(w.tmp)
    free(w.wrk)


cdef inline void example_scores(Example* ex, const double* th) noexcept nogil:
    """``scores[a] = theta_a . xt``: the example's ``K`` scores at ``theta``."""
    cdef int K = ex.K, j, a, row
    for a in range(K):
        ex.scores[a] = 0.0
    for j in range(ex.nz):
        row = ex.idx[j] * K
        for a in range(K):
            ex.scores[a] += ex.val[j] * th[row + a]


cdef int absorb_curvature(const FullRankKernel* kr, Example* ex,
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
    cdef int K = kr.K, P = kr.P, r = ex.r, j, a, b, f, row
    cdef double v, one = 1.0, zero = 0.0, mone = -1.0
    cdef char cN = b'N'
    cdef char cT = b'T'
    cdef double* M = kr.M
    cdef double* Wt = w.Wt
    cdef double* Rt = w.Rt
    cdef double* C = w.C
    cdef double* G = w.G
    cdef double* tmp = w.tmp
    # W^T = (M U)^T: K rows of length P
    memset(Wt, 0, <size_t>K * P * sizeof(double))
    for j in range(ex.nz):
        row = ex.idx[j] * K
        v = ex.val[j]
        for a in range(K):
            axpy(P, v, M + <size_t>(row + a) * P, Wt + <size_t>a * P)
    # R^T = L^T W^T  (r x P)
    dgemm(&cN, &cN, &P, &r, &K, &one, Wt, &P, ex.Lt, &K, &zero, Rt, &P)
    # C = U^T M U (K x K)
    for a in range(K):
        for b in range(K):
            v = 0.0
            for j in range(ex.nz):
                v += ex.val[j] * Wt[<size_t>b * P + ex.idx[j] * K + a]
            C[a * K + b] = v
    # G = I + L^T C L (r x r), with L^T = Lt (r x K)
    matmul(r, K, K, ex.Lt, K, 1, C, K, 1, tmp)
    matmul(r, r, K, tmp, K, 1, ex.Lt, 1, K, G)
    for f in range(r):
        G[f * r + f] += 1.0
    if not cholesky(r, G):
        return 0
    lower_solve_rows(r, G, P, Rt)         # T^T = chol(G)^-1 R^T
    # M -= T T^T
    dgemm(&cN, &cT, &P, &P, &r, &mone, Rt, &P, Rt, &P, &one, M, &P)
    return 1


cdef void add_gradient(const FullRankKernel* kr, Example* ex) noexcept nogil:
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
        for p in range(n_reg):
            mup[p] += alpha * th[p]


cdef void full_step(const FullRankKernel* kr, double* wrk) noexcept nogil:
    """The step on the weights: ``theta -= eta phi``.

    Algorithm 2: ``phi = M mu``, the batch majorization step (Eq. 2) over
    the examples seen. Surrogate mode: ``phi = theta - theta_hat`` with
    ``theta_hat = -M (b - lam theta_icpt)`` the minimiser of the sum of the
    bounds plus ``lam/2 ||w||^2`` (the intercept's ``lam`` inside ``M`` is a
    proximal term at the current value, hence its ``lam theta_icpt``).
    """
    cdef int P = kr.P, inc = 1
    cdef Py_ssize_t p, n_reg = kr.n_reg
    cdef double one = 1.0, zero = 0.0, eta = kr.eta, lam = kr.lam
    cdef char cN = b'N'
    cdef double* M = kr.M
    cdef double* mu = kr.mu
    cdef double* phi = kr.phi
    cdef double* th = kr.theta
    # (M is symmetric: BLAS's column-major M^T mu is M mu)
    if kr.surrogate:
        for p in range(P):
            wrk[p] = mu[p] if p < n_reg else mu[p] - lam * th[p]
        dgemv(&cN, &P, &P, &one, M, &P, wrk, &inc, &zero, phi, &inc)
        for p in range(P):
            phi[p] += th[p]
    else:
        dgemv(&cN, &P, &P, &one, M, &P, mu, &inc, &zero, phi, &inc)
    for p in range(P):
        th[p] -= eta * phi[p]


cdef int full_pass(RowDataset ds, const FullRankKernel* kr, Example* ex, FullRankWork* w,
                   PassTotals* tot) noexcept nogil:
    """One pass of Algorithm 2 over the rows in their current order.

    A step after every ``batch_size`` examples and after the last one.
    Returns 0 when a curvature update failed (then the pass stops there).
    """
    cdef Py_ssize_t i
    cdef int since_step = 0
    tot.loss_sum = 0.0
    tot.w_sum = 0.0
    for i in range(ds.n_samples):
        if not read_row(ds, i, ex, kr.n_features, kr.fit_intercept):
            continue
        example_scores(ex, kr.theta)
        example_bound(ex)
        tot.loss_sum += ex.sw * ex.loss
        tot.w_sum += ex.sw
        if ex.r > 0 and not absorb_curvature(kr, ex, w):
            return 0
        add_gradient(kr, ex)
        tot.t += 1
        since_step += 1
        if since_step == kr.batch_size:
            full_step(kr, w.wrk)
            since_step = 0
    if since_step > 0:
        full_step(kr, w.wrk)
    return 1


def full_epochs(RowDataset ds, state, opts):
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

    Returns
    -------
    result : SBMResult
    """
    if ds.n_features != state.n_features:
        raise ValueError(f"the data have {ds.n_features} features, the state "
                         f"{state.n_features}")
    if not state.started:
        raise ValueError("FullRankState.start must be called before the first pass")
    cdef double[::1] theta = state.theta
    cdef double[:, ::1] M = state.M
    cdef double[::1] mu = state.mu
    cdef double[::1] phi = state.phi
    cdef FullRankKernel kr
    kr.K = state.n_outputs
    kr.n_features = ds.n_features
    kr.fit_intercept = state.fit_intercept
    kr.P = <int>((kr.n_features + (1 if kr.fit_intercept else 0)) * kr.K)
    kr.n_reg = kr.n_features * kr.K
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
    cdef int n_epochs = opts.n_epochs, _epoch, epochs_run = 0
    cdef bint shuffle = opts.shuffle, diverged = False
    cdef unsigned int seed = state.seed
    cdef unsigned int rng = seed if seed != 0 else 1
    cdef PassTotals tot = start_totals(state.t)
    cdef Example ex
    cdef FullRankWork w
    memset(&ex, 0, sizeof(Example))
    memset(&w, 0, sizeof(FullRankWork))
    try:
        if not example_alloc(&ex, kr.n_features, kr.K) or not work_alloc(&w, kr.K, kr.P):
            raise MemoryError()
        with nogil:
            for _epoch in range(n_epochs):
                if shuffle:
                    ds.shuffle(&rng)
                if not full_pass(ds, &kr, &ex, &w, &tot):
                    diverged = True
                    break
                if not all_finite(kr.theta, kr.P) or not all_finite(kr.phi, kr.P):
                    diverged = True          # (reported as pass epochs_run + 1)
                    break
                epochs_run += 1
    finally:
        example_free(&ex)
        work_free(&w)
    return finish_passes(state, tot, rng, epochs_run, diverged)
