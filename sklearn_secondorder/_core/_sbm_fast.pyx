"""Stochastic bound majorization (SBM) kernels.

Choromanska & Jebara, "Stochastic Bound Majorization" (arXiv 2013):
Algorithm 1 (the quadratic bound on a partition function), Algorithm 2 (the
stochastic full-rank update) and Section 3.2 (the low-rank version).

Model. A linear model with ``K`` outputs over the augmented row
``xt = (x, 1)`` (the 1 only with an intercept); parameters ``theta`` are the
C-order ``(n_features + fit_intercept, K)`` block, so coordinate ``i*K + a``
is feature ``i``, output ``a``.

- Multinomial (``K > 2`` classes): labels ``y = 0..K-1``, ``f(y) = e_y (x) xt``.
- Binary (``K = 1``): labels ``{-1, +1}``, ``f(-1) = 0``, ``f(+1) = xt``
  (the logistic model ``p(+1) = sigmoid(theta . xt)``).

In both cases ``f(y) = F[y] (x) xt`` for a small table ``F`` (``n_y x K``),
so Algorithm 1 runs on the coefficients: ``g = c (x) xt`` and
``l = (F[y] - c) (x) xt``, and one example's curvature is the Kronecker
product ``S_j (x) xt xt^T`` with ``S_j = sum_y beta_y u_y u_y^T`` (``K x K``,
``u_y = F[y] - c`` before the update). The kernels keep ``S_j`` as its
rank-one factors ``sqrt(beta_y) u_y`` (the first term has ``beta = 0``).

Objective. Sum form of scikit-learn's ``mean_i s_i loss_i + alpha/2 ||w||^2``:
``J = sum_i s_i loss_i + lam/2 ||w||^2`` with ``lam = n alpha`` (the paper's
lambda; ``n`` rows per pass). Per example the gradient term
``s_i (c - F[y_i]) (x) xt + alpha w`` enters ``mu`` once (Algorithm 2 as
printed adds ``-f_j + lam theta / t`` once per label ``y``, which counts it
``|Omega|`` times). The intercept is not penalised: no ``alpha w`` term; its
curvature starts at ``lam`` like every coordinate (``M = I / lam``), which is
a proximal term and keeps the quadratic an upper bound.
"""
import numpy as np

from libc.math cimport exp, log, log1p, sqrt, tanh, fabs, isfinite, INFINITY
from libc.stdlib cimport malloc, free, calloc
from libc.string cimport memset, memcpy
from scipy.linalg.cython_blas cimport dgemm, dgemv

from ._numeric cimport all_finite
from ._dataset cimport RowDataset, fetch_row, prefetch_row, SKSO_PREFETCH_READ

cdef double BETA_SERIES = 1e-3   # |log(alpha/z)| below which beta uses its series


cdef inline void _axpy(int n, double a, const double* x, double* y) noexcept nogil:
    cdef int k
    for k in range(n):
        y[k] += a * x[k]


cdef inline void _scal(int n, double a, double* x) noexcept nogil:
    cdef int k
    for k in range(n):
        x[k] *= a


cdef inline double _dot(int n, const double* x, const double* y) noexcept nogil:
    """Four interleaved partial sums (the rows here are short: a single chain of
    dependent additions would cost its latency per element)."""
    cdef int k, m = n & ~3
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    for k in range(0, m, 4):
        s0 += x[k] * y[k]
        s1 += x[k + 1] * y[k + 1]
        s2 += x[k + 2] * y[k + 2]
        s3 += x[k + 3] * y[k + 3]
    for k in range(m, n):
        s0 += x[k] * y[k]
    return (s0 + s1) + (s2 + s3)


# ----------------------------------------------------------------------------
# Algorithm 1: the bound
# ----------------------------------------------------------------------------
cdef inline double _beta(double r) noexcept nogil:
    """``tanh(r/2) / (2 r)``: even in ``r``; ``1/4`` at ``r = 0``; ``0`` at ``|r| = inf``."""
    cdef double x
    r = fabs(r)
    if r < BETA_SERIES:
        x = 0.25 * r * r          # (r/2)^2
        # tanh(h)/h = 1 - h^2/3 + 2 h^4/15 - 17 h^6/315
        return 0.25 * (1.0 - x / 3.0 + 2.0 * x * x / 15.0 - 17.0 * x * x * x / 315.0)
    if r == INFINITY:
        return 0.0
    return tanh(0.5 * r) / (2.0 * r)


cdef inline double _sigmoid(double r) noexcept nogil:
    cdef double e
    if r >= 0:
        return 1.0 / (1.0 + exp(-r))
    e = exp(r)
    return e / (1.0 + e)


cdef inline double _logaddexp(double a, double b) noexcept nogil:
    if a == -INFINITY:
        return b
    if b == -INFINITY:
        return a
    if a > b:
        return a + log1p(exp(b - a))
    return b + log1p(exp(a - b))


cdef double _bound(int n_y, int dim, const double* F, const double* logalpha,
                   double* c, double* U, double* beta) noexcept nogil:
    """Algorithm 1 in log space. Returns ``log z``.

    ``F`` (``n_y x dim``) holds ``f(y)``, ``logalpha[y] = log h(y) + theta~ . f(y)``.
    On return ``c`` is ``g`` (``dim``), row ``y`` of ``U`` is ``l_y = f(y) - g``
    (``g`` before its update) and ``beta[y]`` its weight, so that
    ``Sigma = sum_y beta[y] U[y] U[y]^T``. ``log(alpha/z)`` is formed as a
    difference of logs; the first term (``z -> 0+``) gets ``beta = 0,
    kappa = 1``; ``h(y) = 0`` (``logalpha = -inf``) terms are skipped.
    """
    cdef int y, a
    cdef double logz = -INFINITY, r, kappa, la
    for a in range(dim):
        c[a] = 0.0
    for y in range(n_y):
        la = logalpha[y]
        for a in range(dim):
            U[y * dim + a] = F[y * dim + a] - c[a]
        if la == -INFINITY:
            beta[y] = 0.0
            continue
        if logz == -INFINITY:
            beta[y] = 0.0
            kappa = 1.0
        else:
            r = la - logz
            beta[y] = _beta(r)
            kappa = _sigmoid(r)        # alpha / (z + alpha)
        for a in range(dim):
            c[a] += kappa * U[y * dim + a]
        logz = _logaddexp(logz, la)
    return logz


def bound(F, logalpha):
    """Algorithm 1 (test hook): ``(log z, g, Sigma)`` for ``f(y) = F[y]``.

    Parameters
    ----------
    F : ndarray of shape (n_y, dim)
        The feature vectors ``f(y)``.
    logalpha : ndarray of shape (n_y,)
        ``log h(y) + theta~ . f(y)``.

    Returns
    -------
    logz : float
    g : ndarray of shape (dim,)
    Sigma : ndarray of shape (dim, dim)
        With these, ``logz + d.g + d.Sigma.d / 2 >= log sum_y h(y) exp(theta.f(y))``
        for every ``theta`` (``d = theta - theta~``), Theorem 1.
    """
    cdef double[:, ::1] Fv = np.ascontiguousarray(F, dtype=np.float64)
    cdef double[::1] la = np.ascontiguousarray(logalpha, dtype=np.float64)
    cdef int n_y = Fv.shape[0], dim = Fv.shape[1]
    if la.shape[0] != n_y or n_y == 0:
        raise ValueError("F and logalpha must have the same (non-zero) length")
    cdef double[::1] c = np.zeros(dim)
    U = np.zeros((n_y, dim))
    beta = np.zeros(n_y)
    cdef double[:, ::1] Uv = U
    cdef double[::1] bv = beta
    cdef double logz = _bound(n_y, dim, &Fv[0, 0], &la[0], &c[0], &Uv[0, 0], &bv[0])
    return logz, np.asarray(c), (U.T * beta) @ U


def beta_py(double r):
    """``tanh(r/2) / (2 r)`` with its limits (test hook)."""
    return _beta(r)


# ----------------------------------------------------------------------------
# Per-example pieces shared by both kernels
# ----------------------------------------------------------------------------
cdef struct Example:
    int nz              # entries of xt (zeros skipped, intercept included)
    int* idx            # feature index of each entry (intercept = n_features)
    double* val
    double sw
    int label           # row of F
    double loss         # log loss at the current weights (unweighted)
    int r               # number of rank-one factors of S_j
    double* Lt          # r x K: rows sqrt(sw * beta_y) u_y
    double* gcoef       # K: sw * (c - F[label])
    double* scores      # K
    double* F           # n_y x K table
    double* la          # n_y
    double* c           # K
    double* U           # n_y x K
    double* beta        # n_y
    int n_y
    int K


cdef int _read_row(RowDataset ds, Py_ssize_t i, Example* ex, Py_ssize_t n_features,
                   bint fit_intercept) noexcept nogil:
    """Load row ``i``: the augmented non-zeros and the label. Returns 0 for a skipped row."""
    cdef const double* x
    cdef const int* ind
    cdef int nnz, j
    cdef double yv, sw
    fetch_row(ds, i, &x, &ind, &nnz, &yv, &sw)
    if sw == 0.0:
        return 0
    ex.nz = 0
    for j in range(nnz):
        if x[j] != 0.0:
            ex.idx[ex.nz] = ind[j]
            ex.val[ex.nz] = x[j]
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


cdef void _example_bound(Example* ex) noexcept nogil:
    """Algorithm 1 on one example at the scores in ``ex.scores``."""
    cdef int K = ex.K, y, a
    cdef double logz, s
    if K == 1:
        ex.la[0] = 0.0
        ex.la[1] = ex.scores[0]
    else:
        for y in range(K):
            ex.la[y] = ex.scores[y]
    logz = _bound(ex.n_y, K, ex.F, ex.la, ex.c, ex.U, ex.beta)
    ex.loss = logz - ex.la[ex.label]
    for a in range(K):
        ex.gcoef[a] = ex.sw * (ex.c[a] - ex.F[ex.label * K + a])
    ex.r = 0
    for y in range(ex.n_y):
        if ex.beta[y] > 0.0:
            s = sqrt(ex.sw * ex.beta[y])
            for a in range(K):
                ex.Lt[ex.r * K + a] = s * ex.U[y * K + a]
            ex.r += 1


cdef int _example_alloc(Example* ex, Py_ssize_t n_features, int K) noexcept nogil:
    cdef int a
    ex.K = K
    ex.n_y = 2 if K == 1 else K
    ex.idx = <int*>malloc((n_features + 1) * sizeof(int))
    ex.val = <double*>malloc((n_features + 1) * sizeof(double))
    ex.Lt = <double*>malloc(ex.n_y * K * sizeof(double))
    ex.gcoef = <double*>malloc(K * sizeof(double))
    ex.scores = <double*>malloc(K * sizeof(double))
    ex.F = <double*>calloc(ex.n_y * K, sizeof(double))
    ex.la = <double*>malloc(ex.n_y * sizeof(double))
    ex.c = <double*>malloc(K * sizeof(double))
    ex.U = <double*>malloc(ex.n_y * K * sizeof(double))
    ex.beta = <double*>malloc(ex.n_y * sizeof(double))
    if (ex.idx == NULL or ex.val == NULL or ex.Lt == NULL or ex.gcoef == NULL
            or ex.scores == NULL or ex.F == NULL or ex.la == NULL or ex.c == NULL
            or ex.U == NULL or ex.beta == NULL):
        return 0
    if K == 1:
        ex.F[1] = 1.0           # f(-1) = 0, f(+1) = xt
    else:
        for a in range(K):
            ex.F[a * K + a] = 1.0
    return 1


cdef void _example_free(Example* ex) noexcept nogil:
    free(ex.idx)
    free(ex.val)
    free(ex.Lt)
    free(ex.gcoef)
    free(ex.scores)
    free(ex.F)
    free(ex.la)
    free(ex.c)
    free(ex.U)
    free(ex.beta)


cdef int _cholesky(int n, double* A) noexcept nogil:
    """In-place lower Cholesky of the SPD ``n x n`` row-major ``A``; 0 on failure."""
    cdef int i, j, l
    cdef double s, inv
    for j in range(n):
        s = A[j * n + j]
        for l in range(j):
            s -= A[j * n + l] * A[j * n + l]
        if not (s > 0.0):
            return 0
        A[j * n + j] = sqrt(s)
        inv = 1.0 / A[j * n + j]
        for i in range(j + 1, n):
            s = A[i * n + j]
            for l in range(j):
                s -= A[i * n + l] * A[j * n + l]
            A[i * n + j] = s * inv
    return 1


cdef void _full_step(int P, double* M, double* mu, double* phi, double* th, double eta,
                     bint surrogate, double lam, Py_ssize_t n_reg, double* wrk) noexcept nogil:
    """``phi = M mu; theta -= eta phi`` (Algorithm 2), or with the surrogate sum
    ``phi = theta - theta_hat``, ``theta_hat = -M (b - lam theta_icpt)``."""
    cdef int inc = 1
    cdef Py_ssize_t p
    cdef double one = 1.0, zero = 0.0
    cdef char cN = b'N'
    if surrogate:
        for p in range(P):
            wrk[p] = mu[p] if p < n_reg else mu[p] - lam * th[p]
        dgemv(&cN, &P, &P, &one, M, &P, wrk, &inc, &zero, phi, &inc)
        for p in range(P):
            phi[p] += th[p]
    else:
        dgemv(&cN, &P, &P, &one, M, &P, mu, &inc, &zero, phi, &inc)
    for p in range(P):
        th[p] -= eta * phi[p]


# ----------------------------------------------------------------------------
# Algorithm 2, full rank
# ----------------------------------------------------------------------------
def sbm_full_epochs(RowDataset ds, double[::1] theta, double[:, ::1] M,
                    double[::1] mu, double[::1] phi, *, int n_outputs,
                    bint fit_intercept, double alpha, double eta, int batch_size=1,
                    int n_epochs=1, bint shuffle=True, unsigned int seed=1,
                    long long t=0, bint surrogate=False, double lam=0.0):
    """Full-rank stochastic bound majorization (Algorithm 2), in place.

    Per example ``j`` (at the current ``theta``): Algorithm 1 gives
    ``S_j`` and ``g_j``; ``M = Sigma^-1`` absorbs ``S_j (x) xt xt^T`` by one
    Woodbury step of rank ``r <= K`` (the ``r`` Sherman-Morrison steps of the
    paper at once); ``mu += s_j (c_j - F[y_j]) (x) xt + alpha theta`` (once per
    example); ``phi = M mu``; after every ``batch_size`` examples (and at the
    end of a pass) ``theta -= eta phi``.

    Parameters
    ----------
    ds : RowDataset
        Targets: +-1 (``n_outputs == 1``) or class indices.
    theta : ndarray of shape ((n_features + fit_intercept) * n_outputs,)
    M : ndarray of shape (P, P)
        ``Sigma^-1``, symmetric (both triangles kept).
    mu, phi : ndarray of shape (P,)
        The persistent gradient sum and ``phi = M mu``.
    eta : float
        Step on ``phi`` (the paper's 1/t).
    surrogate : bool
        Incremental majorization-minimisation instead of Algorithm 2's ``mu``:
        ``mu`` holds ``b = sum_s [s_s (c_s - F[y_s]) - S_s scores_s] (x) xt_s``
        (each bound's gradient minus its curvature times ``theta_s``), and
        ``phi = theta - theta_hat`` with ``theta_hat = -M (b - lam theta_icpt)``
        the minimiser of the sum of the bounds plus ``lam/2 ||w||^2`` (the
        intercept's ``lam`` is a proximal term at the current value).
    lam : float
        Regulariser curvature inside ``M`` (surrogate mode only).

    Returns
    -------
    info : dict
        ``t`` (examples seen), ``seed``, ``epochs``, ``mean_loss`` (log loss of
        the last pass at the pre-step weights), ``diverged``.
    """
    cdef int K = n_outputs
    cdef Py_ssize_t d = ds.n_features
    cdef int P = <int>((d + (1 if fit_intercept else 0)) * K)
    cdef Py_ssize_t n_reg = d * K        # penalised coordinates come first
    if theta.shape[0] != P or M.shape[0] != P or M.shape[1] != P:
        raise ValueError("theta / M do not match the data shape")
    if mu.shape[0] != P or phi.shape[0] != P:
        raise ValueError("mu / phi do not match the data shape")
    cdef Example ex
    memset(&ex, 0, sizeof(Example))
    cdef double* Wt = <double*>malloc(<size_t>K * P * sizeof(double))
    cdef double* Rt = <double*>malloc(<size_t>K * P * sizeof(double))
    cdef double* C = <double*>malloc(K * K * sizeof(double))
    cdef double* G = <double*>malloc(K * K * sizeof(double))
    cdef double* tmp = <double*>malloc(K * K * sizeof(double))
    cdef double* wrk = <double*>malloc(P * sizeof(double))
    cdef int ok = _example_alloc(&ex, d, K)
    cdef int epoch, epochs_run = 0, j, a, b, l, r, row, since_step = 0
    cdef Py_ssize_t i, p
    cdef double v, sc, loss_sum = 0.0, w_sum = 0.0, one = 1.0, zero = 0.0, mone = -1.0
    cdef bint diverged = False
    cdef unsigned int rng = seed if seed != 0 else 1
    cdef double* Mp = &M[0, 0]
    cdef double* th = &theta[0]
    cdef double* mup = &mu[0]
    cdef double* php = &phi[0]
    cdef int inc = 1
    cdef char cN = b'N'
    cdef char cT = b'T'
    try:
        if (not ok or Wt == NULL or Rt == NULL or C == NULL or G == NULL or tmp == NULL
                or wrk == NULL):
            raise MemoryError()
        with nogil:
            for epoch in range(n_epochs):
                if shuffle:
                    ds.shuffle(&rng)
                loss_sum = 0.0
                w_sum = 0.0
                since_step = 0
                for i in range(ds.n_samples):
                    if not _read_row(ds, i, &ex, d, fit_intercept):
                        continue
                    for a in range(K):
                        ex.scores[a] = 0.0
                    for j in range(ex.nz):
                        row = ex.idx[j] * K
                        for a in range(K):
                            ex.scores[a] += ex.val[j] * th[row + a]
                    _example_bound(&ex)
                    loss_sum += ex.sw * ex.loss
                    w_sum += ex.sw
                    r = ex.r
                    if r > 0:
                        # W^T = (M U)^T, U = [e_a (x) xt]: K rows of length P
                        memset(Wt, 0, <size_t>K * P * sizeof(double))
                        for j in range(ex.nz):
                            row = ex.idx[j] * K
                            v = ex.val[j]
                            for a in range(K):
                                _axpy(P, v, Mp + <size_t>(row + a) * P, Wt + <size_t>a * P)
                        # R^T = L^T W^T  (r x P)
                        dgemm(&cN, &cN, &P, &r, &K, &one, Wt, &P, ex.Lt, &K, &zero, Rt, &P)
                        # C = U^T M U (K x K)
                        for a in range(K):
                            for b in range(K):
                                v = 0.0
                                for j in range(ex.nz):
                                    v += ex.val[j] * Wt[<size_t>b * P + ex.idx[j] * K + a]
                                C[a * K + b] = v
                        # G = I + L^T C L (r x r)
                        for l in range(r):
                            for b in range(K):
                                v = 0.0
                                for a in range(K):
                                    v += ex.Lt[l * K + a] * C[a * K + b]
                                tmp[l * K + b] = v
                        for l in range(r):
                            for j in range(r):
                                v = 0.0
                                for b in range(K):
                                    v += tmp[l * K + b] * ex.Lt[j * K + b]
                                G[l * r + j] = v + (1.0 if l == j else 0.0)
                        if not _cholesky(r, G):
                            diverged = True
                            break
                        # T^T = H^-1 R^T (forward substitution, in place)
                        for l in range(r):
                            for j in range(l):
                                _axpy(P, -G[l * r + j], Rt + <size_t>j * P, Rt + <size_t>l * P)
                            _scal(P, 1.0 / G[l * r + l], Rt + <size_t>l * P)
                        # M -= T T^T
                        dgemm(&cN, &cT, &P, &P, &r, &mone, Rt, &P, Rt, &P, &one, Mp, &P)
                    if surrogate:
                        # b += (s (c - F[y]) - S_j scores) (x) xt: the gradient of the
                        # example's bound minus its curvature times theta_j
                        for a in range(K):
                            v = 0.0
                            for b in range(K):
                                sc = 0.0
                                for l in range(r):
                                    sc += ex.Lt[l * K + a] * ex.Lt[l * K + b]
                                v += sc * ex.scores[b]
                            ex.c[a] = ex.gcoef[a] - v
                        for j in range(ex.nz):
                            row = ex.idx[j] * K
                            for a in range(K):
                                mup[row + a] += ex.c[a] * ex.val[j]
                    else:
                        # mu += s (c - F[y]) (x) xt + alpha theta  (once per example)
                        for j in range(ex.nz):
                            row = ex.idx[j] * K
                            for a in range(K):
                                mup[row + a] += ex.gcoef[a] * ex.val[j]
                        for p in range(n_reg):
                            mup[p] += alpha * th[p]
                    t += 1
                    since_step += 1
                    if since_step == batch_size:
                        _full_step(P, Mp, mup, php, th, eta, surrogate, lam, n_reg, wrk)
                        since_step = 0
                if diverged:
                    break
                if since_step > 0:
                    _full_step(P, Mp, mup, php, th, eta, surrogate, lam, n_reg, wrk)
                    since_step = 0
                if not all_finite(th, P) or not all_finite(php, P):
                    diverged = True          # (reported as pass epochs_run + 1)
                    break
                epochs_run += 1
    finally:
        _example_free(&ex)
        free(Wt)
        free(Rt)
        free(C)
        free(G)
        free(tmp)
        free(wrk)
    return {"t": t, "seed": rng, "epochs": epochs_run + (1 if diverged else 0),
            "mean_loss": loss_sum / w_sum if w_sum > 0 else 0.0, "diverged": diverged}




# ----------------------------------------------------------------------------
# Section 3.2, low rank: Sigma <= V^T S V + D
# ----------------------------------------------------------------------------
cdef enum:
    N_RECIP = 64
cdef double _RECIP[N_RECIP]       # 1 / ((2j + 2)(2j + 3)), the series' denominators
cdef int _jr
for _jr in range(N_RECIP):
    _RECIP[_jr] = 1.0 / ((2.0 * _jr + 2.0) * (2.0 * _jr + 3.0))


cdef void _chebyshev_u(double eps, long long m, double* u1, double* u0) noexcept nogil:
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
        q = -eps * (_RECIP[j] if j < N_RECIP else 1.0 / ((2.0 * j + 2.0) * (2.0 * j + 3.0)))
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


cdef void _batch_power(double c, double balpha, long long m, double* th, double* mu) noexcept nogil:
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
    cdef long long it
    if m <= 0:
        return
    if m <= 8:
        # short gaps (frequent features): step the batches directly
        t0 = th[0]
        m0 = mu[0]
        for it in range(m):
            m0 += balpha * t0
            t0 -= c * m0
        th[0] = t0
        mu[0] = m0
        return
    if eps * (<double>m) * (<double>m) <= 1.0:
        _chebyshev_u(eps, m, &u1, &u0)
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


cdef void _advance(double* th, double* mu, double c, double alpha, long long tau,
                   long long t, long long b, long long n) noexcept nogil:
    """Apply steps ``tau .. t-1`` of one untouched (diagonal) coordinate.

    Step ``s``: ``mu += alpha th``; when ``s`` ends a batch (``(s+1) % b == 0``
    or ``s == n-1``): ``th -= c mu``. Closed form: a partial batch, ``m`` full
    batches (``_batch_power``), a partial batch. Exact, O(1) per call.
    """
    cdef long long e1, s, m, rem
    if t <= tau:
        return
    if b == 1:
        # every step ends a batch (the general path below, without its divisions)
        mu[0] += alpha * th[0]
        th[0] -= c * mu[0]
        _batch_power(c, alpha, t - tau - 1, th, mu)
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
        _batch_power(c, b * alpha, m, th, mu)
        s += m * b
    rem = t - s
    if rem > 0:
        mu[0] += rem * alpha * th[0]
        if s + rem == n:
            th[0] -= c * mu[0]


def advance_py(double th, double mu, double c, double alpha, long long tau, long long t,
               long long b, long long n):
    """``_advance`` on one coordinate (test hook): returns ``(th, mu)``."""
    _advance(&th, &mu, c, alpha, tau, t, b, n)
    return th, mu


cdef int _smallest_eigvec(int n, const double* T, double* A, double* e, double* y) noexcept nogil:
    """Approximate unit eigenvector of the smallest eigenvalue of the PSD ``T``.

    Inverse iteration from the last unit vector. Accuracy affects only the
    tightness of the merge (the residual is added back), never its validity.
    """
    cdef int i, j, it
    cdef double tr = 0.0, shift, nrm, lam, res, v, tol2
    for i in range(n):
        tr += T[i * n + i]
    shift = 1e-13 * tr + 1e-300
    cdef int factored = 0
    for it in range(8):
        for i in range(n * n):
            A[i] = T[i]
        for i in range(n):
            A[i * n + i] += shift
        if _cholesky(n, A):
            factored = 1
            break
        shift *= 100.0
    if not factored:
        return 0
    for i in range(n):
        A[i * n + i] = 1.0 / A[i * n + i]     # the solves multiply by the reciprocals
        e[i] = 0.0
    e[n - 1] = 1.0
    tol2 = (1e-12 * tr) * (1e-12 * tr)
    for it in range(30):
        # solve A y = e: L z = e, L^T y = z
        for i in range(n):
            v = e[i]
            for j in range(i):
                v -= A[i * n + j] * y[j]
            y[i] = v * A[i * n + i]
        for i in range(n - 1, -1, -1):
            v = y[i]
            for j in range(i + 1, n):
                v -= A[j * n + i] * y[j]
            y[i] = v * A[i * n + i]
        nrm = 0.0
        for i in range(n):
            nrm += y[i] * y[i]
        nrm = sqrt(nrm)
        if not (nrm > 0.0) or not isfinite(nrm):
            return 1
        nrm = 1.0 / nrm
        for i in range(n):
            e[i] = y[i] * nrm
        # residual of T e - (e.T e) e
        lam = 0.0
        for i in range(n):
            v = 0.0
            for j in range(n):
                v += T[i * n + j] * e[j]
            y[i] = v
            lam += v * e[i]
        res = 0.0
        for i in range(n):
            res += (y[i] - lam * e[i]) * (y[i] - lam * e[i])
        if res <= tol2:
            break
    return 1


cdef struct LowRank:
    int k              # rank kept
    int H              # head dimension
    double* V          # (k + 1) x H: rows 0..k-1 = V, row k = work row
    double* S          # k x k
    double* Dh         # H
    double* T          # (k+1)^2
    double* T2         # (k+1)^2
    double* e          # k+1
    double* ywork      # k+1 (and more)
    double* p          # k+1
    double* hv         # H work
    const int* zi      # _merge: the non-zero entries of z (nzi of them), or nzi < 0: dense
    int nzi


cdef void _merge(LowRank* lr, double* z) noexcept nogil:
    """``V^T S V + D + z z^T <= V'^T S' V' + D'`` (one rank-one term, Section 3.2).

    With ``p = V z``, ``w = (z - V^T p) / rho`` the sum is exactly
    ``[V; w]^T T [V; w] + D`` with ``T = [[S + p p^T, rho p], [rho p^T, rho^2]]``.
    A Householder reflector ``Q`` sends an (approximate) eigenvector of the
    smallest eigenvalue of ``T`` to the last axis: ``Q T Q = [[A, c], [c^T, l]]
    <= [[A + |c| I, 0], [0, l + |c|]]``. The first ``k`` rows of ``Q [V; w]``
    become ``V'`` with ``S' = A + |c| I``; the last row ``b`` is dropped into
    ``D`` through ``(l + |c|) b b^T <= (l + |c|) ||b||_1 diag(|b|)``.
    """
    cdef int k = lr.k, H = lr.H, n = lr.k + 1, i, j, h
    cdef double* V = lr.V
    cdef double* w = lr.V + <size_t>k * H
    cdef double* T = lr.T
    cdef double* p = lr.p
    cdef double* e = lr.e
    cdef double* hv = lr.hv
    cdef double rho, v, vv, bq, vtv, nb1, lam_d, cn
    cdef double* Tv = lr.ywork
    if k == 0:
        # no low-rank part: the whole term goes to the diagonal
        nb1 = 0.0
        for h in range(H):
            nb1 += fabs(z[h])
        for h in range(H):
            lr.Dh[h] += nb1 * fabs(z[h])
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
            p[i] = _dot(H, V + <size_t>i * H, z)
    for h in range(H):
        w[h] = z[h]
    for i in range(k):
        _axpy(H, -p[i], V + <size_t>i * H, w)
    rho = sqrt(_dot(H, w, w))
    if rho == 0.0:
        for i in range(k):
            for j in range(k):
                lr.S[i * k + j] += p[i] * p[j]
        return
    _scal(H, 1.0 / rho, w)
    for i in range(k):
        for j in range(k):
            T[i * n + j] = lr.S[i * k + j] + p[i] * p[j]
        T[i * n + k] = rho * p[i]
        T[k * n + i] = rho * p[i]
    T[k * n + k] = rho * rho
    if not _smallest_eigvec(n, T, lr.T2, e, Tv):
        for i in range(n):
            e[i] = 0.0
        e[k] = 1.0
    # Householder vector v = e + sign(e_k) e_k  (so Q e = -sign(e_k) e_k)
    if e[k] >= 0:
        e[k] += 1.0
    else:
        e[k] -= 1.0
    vv = _dot(n, e, e)
    bq = 2.0 / vv
    # Q T Q = T - bq v (Tv)^T - bq (Tv) v^T + bq^2 (v^T T v) v v^T
    for i in range(n):
        v = 0.0
        for j in range(n):
            v += T[i * n + j] * e[j]
        Tv[i] = v
    vtv = _dot(n, e, Tv)
    for i in range(n):
        for j in range(n):
            T[i * n + j] += (-bq * e[i] * Tv[j] - bq * Tv[i] * e[j]
                             + bq * bq * vtv * e[i] * e[j])
    cn = 0.0
    for i in range(k):
        cn += T[i * n + k] * T[i * n + k]
    cn = sqrt(cn)
    for i in range(k):
        for j in range(k):
            lr.S[i * k + j] = 0.5 * (T[i * n + j] + T[j * n + i])
        lr.S[i * k + i] += cn
    lam_d = T[k * n + k] + cn
    # rows: [V; w] -= bq v (v^T [V; w])
    for h in range(H):
        hv[h] = 0.0
    for i in range(n):
        _axpy(H, e[i], V + <size_t>i * H, hv)
    for i in range(n):
        _axpy(H, -bq * e[i], hv, V + <size_t>i * H)
    # fold the dropped row b = V[k]
    if lam_d > 0.0:
        nb1 = 0.0
        for h in range(H):
            nb1 += fabs(w[h])
        for h in range(H):
            lr.Dh[h] += lam_d * nb1 * fabs(w[h])


cdef int _solve_small(int n, double* A, double* b) noexcept nogil:
    """Gaussian elimination with partial pivoting, ``A x = b`` in place (x in b)."""
    cdef int i, j, l, piv
    cdef double m, tmp
    for j in range(n):
        piv = j
        for i in range(j + 1, n):
            if fabs(A[i * n + j]) > fabs(A[piv * n + j]):
                piv = i
        if A[piv * n + j] == 0.0:
            return 0
        if piv != j:
            for l in range(n):
                tmp = A[j * n + l]
                A[j * n + l] = A[piv * n + l]
                A[piv * n + l] = tmp
            tmp = b[j]
            b[j] = b[piv]
            b[piv] = tmp
        for i in range(j + 1, n):
            m = A[i * n + j] / A[j * n + j]
            if m != 0.0:
                for l in range(j, n):
                    A[i * n + l] -= m * A[j * n + l]
                b[i] -= m * b[j]
    for i in range(n - 1, -1, -1):
        m = b[i]
        for l in range(i + 1, n):
            m -= A[i * n + l] * b[l]
        b[i] = m / A[i * n + i]
    return 1


cdef int _woodbury(LowRank* lr, const double* mu, double* phi, double* G, double* a,
                   double* dinv_mu) noexcept nogil:
    """``phi = (V^T S V + D)^-1 mu`` by Woodbury:
    ``D^-1 mu - D^-1 V^T (I + S V D^-1 V^T)^-1 S V D^-1 mu`` (``S`` may be singular)."""
    cdef int k = lr.k, H = lr.H, i, j, l, h
    cdef double v
    cdef double* V = lr.V
    cdef double* y = lr.ywork
    cdef double* dinv = lr.hv
    for h in range(H):
        dinv[h] = 1.0 / lr.Dh[h]
        dinv_mu[h] = mu[h] * dinv[h]
    if k == 0:
        for h in range(H):
            phi[h] = dinv_mu[h]
        return 1
    for i in range(k):
        y[i] = _dot(H, V + <size_t>i * H, dinv_mu)
        # (row k of V is workspace: V_i * D^-1 into it, then dot with the rows j <= i)
        for h in range(H):
            V[<size_t>k * H + h] = V[<size_t>i * H + h] * dinv[h]
        for j in range(i + 1):
            v = _dot(H, V + <size_t>j * H, V + <size_t>k * H)
            G[i * k + j] = v
            G[j * k + i] = v
    # A = I + S G (stored in lr.T2, k x k), rhs = S y
    for i in range(k):
        for j in range(k):
            v = 0.0
            for l in range(k):
                v += lr.S[i * k + l] * G[l * k + j]
            lr.T2[i * k + j] = v + (1.0 if i == j else 0.0)
        v = 0.0
        for l in range(k):
            v += lr.S[i * k + l] * y[l]
        a[i] = v
    if not _solve_small(k, lr.T2, a):
        return 0
    for h in range(H):
        phi[h] = mu[h]
    for i in range(k):
        _axpy(H, -a[i], V + <size_t>i * H, phi)
    for h in range(H):
        phi[h] *= dinv[h]
    return 1


def woodbury_py(double[:, ::1] V, double[:, ::1] S, double[::1] D, double[::1] mu):
    """``(V^T S V + diag(D))^-1 mu`` by the kernel's Woodbury (test hook)."""
    cdef LowRank lr
    cdef int k = V.shape[0], H = V.shape[1]
    Vw = np.zeros((k + 1, H))
    Vw[:k] = V
    cdef double[:, ::1] Vv = Vw
    cdef double[:, ::1] Sv = np.array(S, dtype=np.float64, copy=True)
    cdef double[::1] Dv = np.array(D, dtype=np.float64, copy=True)
    cdef double[::1] phi = np.zeros(H)
    cdef double[::1] G = np.zeros(max(k * k, 1))
    cdef double[::1] a = np.zeros(k + 1)
    cdef double[::1] dm = np.zeros(H)
    cdef double[::1] T2 = np.zeros((k + 1) * (k + 1))
    cdef double[::1] yw = np.zeros(k + 1)
    cdef double[::1] hv = np.zeros(H + 1)
    lr.k = k
    lr.H = H
    lr.V = &Vv[0, 0]
    lr.S = &Sv[0, 0] if k > 0 else NULL
    lr.Dh = &Dv[0]
    lr.T2 = &T2[0]
    lr.ywork = &yw[0]
    lr.hv = &hv[0]
    if not _woodbury(&lr, &mu[0], &phi[0], &G[0], &a[0], &dm[0]):
        raise np.linalg.LinAlgError("singular capacitance matrix")
    return np.asarray(phi)


def merge_py(V, S, D, z):
    """One ``_merge`` on copies (test hook): returns ``(V, S, D)`` after absorbing ``z z^T``."""
    cdef LowRank lr
    V = np.asarray(V, dtype=np.float64)
    cdef int k = V.shape[0], H = V.shape[1]
    Vw = np.zeros((k + 1, H))
    Vw[:k] = V
    Sc = np.array(S, dtype=np.float64, copy=True).reshape(k, k)
    Dc = np.array(D, dtype=np.float64, copy=True)
    zc = np.array(z, dtype=np.float64, copy=True)
    cdef double[:, ::1] Vv = Vw
    cdef double[::1] Sv = Sc.reshape(-1) if k > 0 else np.zeros(1)
    cdef double[::1] Dv = Dc
    cdef double[::1] zv = zc
    cdef double[::1] T = np.zeros((k + 1) ** 2)
    cdef double[::1] T2 = np.zeros((k + 1) ** 2)
    cdef double[::1] e = np.zeros(k + 1)
    cdef double[::1] yw = np.zeros(k + 1)
    cdef double[::1] p = np.zeros(k + 1)
    cdef double[::1] hv = np.zeros(H)
    lr.k = k
    lr.H = H
    lr.V = &Vv[0, 0]
    lr.S = &Sv[0]
    lr.Dh = &Dv[0]
    lr.T = &T[0]
    lr.T2 = &T2[0]
    lr.e = &e[0]
    lr.ywork = &yw[0]
    lr.p = &p[0]
    lr.hv = &hv[0]
    lr.nzi = -1
    lr.zi = NULL
    _merge(&lr, &zv[0])
    return Vw[:k].copy(), np.asarray(Sv).reshape(k, k).copy() if k > 0 else Sc, Dc


cdef void _orthonormalize(LowRank* lr) noexcept nogil:
    """Re-orthonormalise the rows of ``V`` (modified Gram-Schmidt, ``V = L Q``)
    and change basis exactly: ``V^T S V = Q^T (L^T S L) Q``."""
    cdef int k = lr.k, H = lr.H, i, j, l
    cdef double* V = lr.V
    cdef double* L = lr.T2        # k x k lower (T2 has room: (k+1)^2)
    cdef double* W = lr.T         # k x k scratch
    cdef double nrm, v
    for i in range(k * k):
        L[i] = 0.0
    for i in range(k):
        for j in range(i):
            v = _dot(H, V + <size_t>j * H, V + <size_t>i * H)
            L[i * k + j] = v
            _axpy(H, -v, V + <size_t>j * H, V + <size_t>i * H)
        nrm = sqrt(_dot(H, V + <size_t>i * H, V + <size_t>i * H))
        L[i * k + i] = nrm
        if nrm > 0.0:
            _scal(H, 1.0 / nrm, V + <size_t>i * H)
    # S <- L^T S L
    for i in range(k):
        for j in range(k):
            v = 0.0
            for l in range(k):
                v += lr.S[i * k + l] * L[l * k + j]
            W[i * k + j] = v
    for i in range(k):
        for j in range(k):
            v = 0.0
            for l in range(k):
                v += L[l * k + i] * W[l * k + j]
            lr.S[i * k + j] = v
    for i in range(k):
        for j in range(i):
            v = 0.5 * (lr.S[i * k + j] + lr.S[j * k + i])
            lr.S[i * k + j] = v
            lr.S[j * k + i] = v


cdef inline void _prefetch_tail(RowDataset ds, Py_ssize_t k, const int* head_slot,
                                const double* th, const double* mup, const double* Dp,
                                const long long* taup, int K) noexcept nogil:
    """Prefetch the tail state (``theta``, ``mu``, ``D``, ``tau``) of the
    features of the k-th sparse row in the current order."""
    cdef Py_ssize_t i, q
    cdef long long kk
    cdef int f
    if not ds.is_sparse or k >= ds.n_samples:
        return
    i = ds.order_ptr[k]
    for kk in range(ds.indptr_ptr[i], ds.indptr_ptr[i + 1]):
        f = ds.indices_ptr[kk]
        if head_slot[f] < 0:
            q = <Py_ssize_t>f * K
            SKSO_PREFETCH_READ(th + q)
            SKSO_PREFETCH_READ(mup + q)
            SKSO_PREFETCH_READ(Dp + q)
            SKSO_PREFETCH_READ(taup + f)


def sbm_lowrank_epochs(RowDataset ds, double[::1] theta, double[::1] mu, double[::1] D,
                       double[::1] th_h, double[::1] mu_h, double[::1] D_h,
                       double[:, ::1] V, double[:, ::1] S, const int[::1] head_slot,
                       long long[::1] tau, *, int n_outputs, bint fit_intercept,
                       double alpha, double eta, int batch_size=1, int n_epochs=1,
                       bint shuffle=True, unsigned int seed=1, long long t=0):
    """Low-rank stochastic bound majorization (Section 3.2), in place.

    ``Sigma <= V^T S V + D``. The low-rank part ``V`` (``k x H``) lives on the
    *head* coordinates (the most frequent features, all outputs, and the
    intercept); the others (the *tail*) are diagonal. A term
    ``S_j (x) xt xt^T`` with ``xt = xh + xtl`` (head / tail parts) is split by
    ``(a + b)(a + b)^T <= (1 + g) a a^T + (1 + 1/g) b b^T`` (``g =
    ||xtl|| / ||xh||``): the head part is merged factor by factor
    (``_merge``), the tail part is bounded by
    ``diag(|S_j| 1) (x) ||xtl||_1 diag(|xtl|)``. With every feature in the head
    this is exactly the paper's low-rank update.

    ``phi = Sigma^-1 mu`` is then block diagonal: Woodbury on the head, ``mu_i
    / D_i`` on the tail. A tail coordinate changes between its touches only
    through ``mu_i += alpha theta_i`` and ``theta_i -= eta mu_i / D_i`` with
    a fixed ``D_i``, a linear recurrence applied lazily in closed form
    (``_advance``); all tail coordinates are brought up to date at the end of
    each pass. The cost of an example is ``O(r (k H) + K nnz)`` plus the small
    ``(k+1) x (k+1)`` problems, independent of the number of tail features.

    Parameters
    ----------
    theta, mu, D : ndarray of shape (P,)
        Global arrays; only tail entries are used (head values live in
        ``th_h``, ``mu_h``, ``D_h``).
    th_h, mu_h, D_h : ndarray of shape (H,)
    V : ndarray of shape (k + 1, H)
        Rows ``0..k-1``: ``V``; row ``k`` is workspace.
    S : ndarray of shape (k, k)
    head_slot : ndarray of shape (n_features + 1,)
        Head slot of each feature (index ``n_features`` is the intercept),
        -1 for tail features; head coordinate ``slot * K + a``.
    tau : ndarray of shape (n_features,)
        Per tail feature, steps of the current pass already applied (0
        between calls).
    Returns
    -------
    info : dict
        As ``sbm_full_epochs``.
    """
    cdef int K = n_outputs
    cdef Py_ssize_t d = ds.n_features
    cdef int P = <int>((d + (1 if fit_intercept else 0)) * K)
    cdef int H = <int>th_h.shape[0]
    cdef int k = <int>S.shape[0]
    cdef int int_slot = head_slot[d] if fit_intercept else -1
    cdef int icpt_lo = int_slot * K if fit_intercept else -2 * K - 1   # head block of the intercept
    if theta.shape[0] != P or mu.shape[0] != P or D.shape[0] != P:
        raise ValueError("theta / mu / D do not match the data shape")
    if mu_h.shape[0] != H or D_h.shape[0] != H or V.shape[0] != k + 1 or V.shape[1] != H:
        raise ValueError("head arrays do not match")
    if head_slot.shape[0] != d + 1 or tau.shape[0] != d:
        raise ValueError("head_slot / tau do not match the data shape")
    cdef long long n_steps = 0      # rows with non-zero weight: one pass
    cdef Py_ssize_t i0
    for i0 in range(ds.n_samples):
        if ds.sample_weight[i0] != 0.0:
            n_steps += 1
    cdef Example ex
    memset(&ex, 0, sizeof(Example))
    cdef LowRank lr
    cdef int n1 = k + 1
    lr.k = k
    lr.H = H
    lr.V = &V[0, 0] if H > 0 else NULL
    lr.S = &S[0, 0] if k > 0 else NULL
    lr.Dh = &D_h[0] if H > 0 else NULL
    lr.T = <double*>malloc(n1 * n1 * sizeof(double))
    lr.T2 = <double*>malloc(n1 * n1 * sizeof(double))
    lr.e = <double*>malloc(n1 * sizeof(double))
    lr.ywork = <double*>malloc(n1 * sizeof(double))
    lr.p = <double*>malloc(n1 * sizeof(double))
    lr.hv = <double*>malloc((H + 1) * sizeof(double))
    cdef double* z = <double*>malloc((H + 1) * sizeof(double))
    cdef int* zidx = <int*>malloc((H + 1) * sizeof(int))
    lr.zi = zidx
    lr.nzi = 0
    cdef double* phih = <double*>malloc((H + 1) * sizeof(double))
    cdef double* dm = <double*>malloc((H + 1) * sizeof(double))
    cdef double* G = <double*>malloc((k * k + 1) * sizeof(double))
    cdef double* av = <double*>malloc(n1 * sizeof(double))
    cdef double* Sj = <double*>malloc(K * K * sizeof(double))
    cdef double* rowabs = <double*>malloc(K * sizeof(double))
    cdef int* hslot = <int*>malloc((d + 2) * sizeof(int))
    cdef double* hval = <double*>malloc((d + 2) * sizeof(double))
    cdef int* tfeat = <int*>malloc((d + 2) * sizeof(int))
    cdef double* tval = <double*>malloc((d + 2) * sizeof(double))
    cdef int ok = _example_alloc(&ex, d, K)
    cdef int epoch, epochs_run = 0, j, a, b, l, r, nh, nt, slot, since = 0
    cdef Py_ssize_t i, hidx, q
    cdef long long step = 0, fb
    cdef double v, nh2, nt2, nt1, fh, ft, gsplit, sc, loss_sum = 0.0, w_sum = 0.0
    cdef bint diverged = False
    cdef unsigned int rng = seed if seed != 0 else 1
    cdef double* th = &theta[0]
    cdef double* mup = &mu[0]
    cdef double* Dp = &D[0]
    cdef double* thh = &th_h[0] if H > 0 else NULL
    cdef double* muh = &mu_h[0] if H > 0 else NULL
    cdef long long* taup = &tau[0] if d > 0 else NULL
    cdef long long bsz = batch_size
    try:
        if (not ok or lr.T == NULL or lr.T2 == NULL or lr.e == NULL or lr.ywork == NULL
                or lr.p == NULL or lr.hv == NULL or z == NULL or zidx == NULL or phih == NULL
                or dm == NULL or G == NULL or av == NULL or Sj == NULL or rowabs == NULL
                or hslot == NULL or hval == NULL or tfeat == NULL or tval == NULL):
            raise MemoryError()
        with nogil:
            for epoch in range(n_epochs):
                if shuffle:
                    ds.shuffle(&rng)
                loss_sum = 0.0
                w_sum = 0.0
                since = 0
                step = 0
                for i in range(ds.n_samples):
                    # the rows come in shuffled order: fetch row i + 2's entries,
                    # and the tail state row i + 1 will touch (its entries are in
                    # cache by now), while this row is processed
                    prefetch_row(ds, i + 2)
                    _prefetch_tail(ds, i + 1, &head_slot[0], th, mup, Dp, taup, K)
                    if not _read_row(ds, i, &ex, d, fit_intercept):
                        continue
                    # split the row into head and tail entries; catch the tail up
                    nh = 0
                    nt = 0
                    nh2 = 0.0
                    nt2 = 0.0
                    nt1 = 0.0
                    for j in range(ex.nz):
                        slot = head_slot[ex.idx[j]]
                        if slot >= 0:
                            hslot[nh] = slot
                            hval[nh] = ex.val[j]
                            nh2 += ex.val[j] * ex.val[j]
                            nh += 1
                        else:
                            tfeat[nt] = ex.idx[j]
                            tval[nt] = ex.val[j]
                            nt2 += ex.val[j] * ex.val[j]
                            nt1 += fabs(ex.val[j])
                            q = <Py_ssize_t>ex.idx[j] * K
                            for a in range(K):
                                _advance(th + q + a, mup + q + a, eta / Dp[q + a], alpha,
                                         taup[ex.idx[j]], step, bsz, n_steps)
                            taup[ex.idx[j]] = step
                            nt += 1
                    for a in range(K):
                        ex.scores[a] = 0.0
                    for j in range(nh):
                        for a in range(K):
                            ex.scores[a] += hval[j] * thh[hslot[j] * K + a]
                    for j in range(nt):
                        q = <Py_ssize_t>tfeat[j] * K
                        for a in range(K):
                            ex.scores[a] += tval[j] * th[q + a]
                    _example_bound(&ex)
                    loss_sum += ex.sw * ex.loss
                    w_sum += ex.sw
                    r = ex.r
                    if nt == 0:
                        fh = 1.0
                        ft = 0.0
                    elif nh == 0:
                        fh = 0.0
                        ft = 1.0
                    else:
                        gsplit = sqrt(nt2 / nh2)
                        fh = 1.0 + gsplit
                        ft = 1.0 + 1.0 / gsplit
                    # head: merge each factor sqrt(fh) (L_l (x) xh)
                    if nh > 0 and r > 0:
                        sc = sqrt(fh)
                        for l in range(r):
                            for hidx in range(H):
                                z[hidx] = 0.0
                            for j in range(nh):
                                for a in range(K):
                                    z[hslot[j] * K + a] = sc * ex.Lt[l * K + a] * hval[j]
                                    zidx[j * K + a] = hslot[j] * K + a
                            lr.nzi = nh * K
                            _merge(&lr, z)
                    # tail: D_i += ft (|S_j| 1)_a ||xtl||_1 |x_i|
                    if nt > 0 and r > 0:
                        for a in range(K):
                            v = 0.0
                            for b in range(K):
                                sc = 0.0
                                for l in range(r):
                                    sc += ex.Lt[l * K + a] * ex.Lt[l * K + b]
                                v += fabs(sc)
                            rowabs[a] = v
                        for j in range(nt):
                            q = <Py_ssize_t>tfeat[j] * K
                            for a in range(K):
                                Dp[q + a] += ft * rowabs[a] * nt1 * fabs(tval[j])
                    # mu: the example's gradient term, once
                    for j in range(nh):
                        for a in range(K):
                            muh[hslot[j] * K + a] += ex.gcoef[a] * hval[j]
                    for j in range(nt):
                        q = <Py_ssize_t>tfeat[j] * K
                        for a in range(K):
                            mup[q + a] += ex.gcoef[a] * tval[j]
                    for hidx in range(H):
                        if hidx < icpt_lo or hidx >= icpt_lo + K:
                            muh[hidx] += alpha * thh[hidx]
                    step += 1
                    t += 1
                    since += 1
                    if since == batch_size or step == n_steps:
                        if H > 0:
                            if not _woodbury(&lr, muh, phih, G, av, dm):
                                diverged = True
                                break
                            for hidx in range(H):
                                thh[hidx] -= eta * phih[hidx]
                        since = 0
                if diverged:
                    break
                # bring every tail coordinate to the end of the pass
                for fb in range(d):
                    if head_slot[fb] >= 0:
                        continue
                    q = <Py_ssize_t>fb * K
                    for a in range(K):
                        if th[q + a] != 0.0 or mup[q + a] != 0.0:
                            _advance(th + q + a, mup + q + a, eta / Dp[q + a], alpha,
                                     taup[fb], n_steps, bsz, n_steps)
                    taup[fb] = 0
                _orthonormalize(&lr)
                if not all_finite(th, P) or (H > 0 and not all_finite(thh, H)):
                    diverged = True          # (reported as pass epochs_run + 1)
                    break
                epochs_run += 1
    finally:
        _example_free(&ex)
        free(lr.T)
        free(lr.T2)
        free(lr.e)
        free(lr.ywork)
        free(lr.p)
        free(lr.hv)
        free(z)
        free(zidx)
        free(phih)
        free(dm)
        free(G)
        free(av)
        free(Sj)
        free(rowabs)
        free(hslot)
        free(hval)
        free(tfeat)
        free(tval)
    return {"t": t, "seed": rng, "epochs": epochs_run + (1 if diverged else 0),
            "mean_loss": loss_sum / w_sum if w_sum > 0 else 0.0, "diverged": diverged}
