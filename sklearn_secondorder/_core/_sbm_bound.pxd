# Algorithm 1 of Choromanska & Jebara (the quadratic bound on a partition
# function) and the per-example terms both SBM kernels build from it
# (``_sbm_full``, ``_sbm_lowrank``). Inline: the kernels call these once per
# example inside their nogil loops. The Python-level pieces (test hooks,
# options, result) are in ``_sbm_bound.pyx``.
from libc.math cimport INFINITY, exp, fabs, log1p, sqrt, tanh

from ._dataset cimport RowDataset, row_span, row_value


cdef extern from *:
    """
    /* |log(alpha/z)| below which beta uses its series: tanh(r/2)/(2r) loses
       digits to cancellation there, and is 0/0 at r = 0 */
    #define SKSO_SBM_BETA_SERIES 1e-3
    """
    const double BETA_SERIES "SKSO_SBM_BETA_SERIES"


cdef inline double bound_beta(double r) noexcept nogil:
    """Algorithm 1's ``beta = tanh(r/2) / (2 r)`` at ``r = log(alpha/z)``.

    Even in ``r``; ``1/4`` at ``r = 0`` (the series), ``0`` at ``|r| = inf``.
    """
    cdef double x
    r = fabs(r)
    if r < BETA_SERIES:
        x = 0.25 * r * r          # (r/2)^2
        # tanh(h)/h = 1 - h^2/3 + 2 h^4/15 - 17 h^6/315
        return 0.25 * (1.0 - x / 3.0 + 2.0 * x * x / 15.0 - 17.0 * x * x * x / 315.0)
    if r == INFINITY:
        return 0.0
    return tanh(0.5 * r) / (2.0 * r)


cdef inline double sigmoid(double r) noexcept nogil:
    """``1 / (1 + exp(-r))`` without overflow: Algorithm 1's ``kappa = alpha /
    (z + alpha)`` at ``r = log(alpha/z)``."""
    cdef double e
    if r >= 0:
        return 1.0 / (1.0 + exp(-r))
    e = exp(r)
    return e / (1.0 + e)


cdef inline double logaddexp(double a, double b) noexcept nogil:
    """``log(exp(a) + exp(b))`` without overflow; ``-inf`` is exp's zero."""
    if a == -INFINITY:
        return b
    if b == -INFINITY:
        return a
    if a > b:
        return a + log1p(exp(b - a))
    return b + log1p(exp(a - b))


cdef inline double partition_bound(int n_y, int dim, const double* F, const double* logalpha,
                                   double* c, double* U, double* beta) noexcept nogil:
    """Algorithm 1 (the bound of Theorem 1) in log space. Returns ``log z``.

    ``F`` (``n_y x dim``) holds ``f(y)``, ``logalpha[y] = log h(y) + theta~ . f(y)``.
    On return ``c`` is ``g`` (``dim``), row ``y`` of ``U`` is ``l_y = f(y) - g``
    (``g`` before its update) and ``beta[y]`` its weight, so that
    ``Sigma = sum_y beta[y] U[y] U[y]^T``. ``log(alpha/z)`` is formed as a
    difference of logs so large scores cannot overflow; the first term
    (``z -> 0+``) gets ``beta = 0, kappa = 1``; ``h(y) = 0``
    (``logalpha = -inf``) terms are skipped.
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
            beta[y] = bound_beta(r)
            kappa = sigmoid(r)        # alpha / (z + alpha)
        for a in range(dim):
            c[a] += kappa * U[y * dim + a]
        logz = logaddexp(logz, la)
    return logz


cdef class Workspace:
    # The work buffers of one kernel call, owned by this object: NumPy arrays
    # allocated before the nogil section (as scikit-learn's ``_sag_fast``),
    # freed with it; nothing to free by hand, no NULL to test.
    cdef list arrays
    cdef double* doubles(self, Py_ssize_t n) except NULL
    cdef int* ints(self, Py_ssize_t n) except NULL
    cdef unsigned char* flags(self, Py_ssize_t n) except NULL


# One example of the linear model with ``K`` outputs over ``xt = (x, 1)``:
# ``f(y) = F[y] (x) xt`` for the small table ``F`` (``n_y x K``), so Algorithm 1
# runs on the ``K`` coefficients and the example's curvature is
# ``S_j (x) xt xt^T`` with ``S_j = Lt^T Lt`` (``r`` rank-one factors).
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


cdef int example_init(Example* ex, Workspace ws, Py_ssize_t n_features, int K) except -1


cdef inline int read_row(RowDataset ds, Py_ssize_t i, Example* ex, Py_ssize_t n_features,
                         bint fit_intercept) noexcept nogil:
    """Load the ``i``-th row (current order): the non-zeros of ``xt`` and the label.

    Returns 0 for a row of weight 0, which takes no part (as if left out).
    The values are read in place (``row_span``), so threads that share
    ``ds`` may call it at once.
    """
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


cdef inline void example_bound(Example* ex) noexcept nogil:
    """Algorithm 1 on one example at the scores in ``ex.scores``: its loss,
    gradient coefficients ``sw (g - F[y])`` and the factors of ``sw S_j``."""
    cdef int K = ex.K, y, a
    cdef double logz, s
    if K == 1:
        ex.la[0] = 0.0
        ex.la[1] = ex.scores[0]
    else:
        for y in range(K):
            ex.la[y] = ex.scores[y]
    logz = partition_bound(ex.n_y, K, ex.F, ex.la, ex.c, ex.U, ex.beta)
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


cdef struct PassTotals:
    # what a pass of either kernel sums up
    double loss_sum         # sum_j s_j loss_j over the pass
    double w_sum            # sum_j s_j over the pass
    long long t             # examples processed so far


cdef inline PassTotals start_totals(long long t) noexcept nogil:
    """Empty pass sums, the step counter continuing from ``t``."""
    cdef PassTotals tot
    tot.loss_sum = 0.0
    tot.w_sum = 0.0
    tot.t = t
    return tot


cdef object finish_passes(object state, PassTotals tot, unsigned int rng, int epochs_run,
                          bint diverged)
cpdef Py_ssize_t check_rows(ds, state, Py_ssize_t start, object stop) except -1
