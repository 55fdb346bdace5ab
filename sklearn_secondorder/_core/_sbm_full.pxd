# Full-rank SBM (_sbm_full.pyx): the kernel's view of a FullRankState, its
# scratch, and what the passes shared by threads (_sbm_team) use of the
# one-thread kernel. Inline: what both modules do once per example inside
# their nogil loops (``example_scores``, ``woodbury_core``, ``dense_row``, and
# the pieces of an example's terms of ``mu`` and ``Sigma``).
from libc.string cimport memset

from ._linalg cimport matmul, strided_dot
from ._sbm_bound cimport Example, Workspace


cdef enum:
    DENSE_CHUNK = 256   # dense rows per dgemm into Sigma (REFACTOR)


cdef enum:
    PER_EXAMPLE = 0     # batch_size == 1: Algorithm 2, one Woodbury step per example
    WOODBURY = 1        # one rank-m Woodbury step on M per batch
    REFACTOR = 2        # Sigma += batch, Cholesky per batch, M = Sigma^-1 at the end


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


cdef struct FullRankWork:
    # scratch of one example's Woodbury update of M
    double* Wt              # K x P: (M U)^T, U = [e_a (x) xt]
    double* Rt              # r x P: (M U L)^T, then chol(G)^-1 (M U L)^T
    double* C               # K x K: U^T M U
    double* G               # r x r: I + L^T C L, then its Cholesky factor
    double* tmp             # r x K: L^T C
    double* wrk             # P: the surrogate's right-hand side


cdef inline void example_scores(Example* ex, const double* th) noexcept nogil:
    """``scores[a] = theta_a . xt``: the example's ``K`` scores at ``theta``."""
    cdef int K = ex.K, j, a, row
    for a in range(K):
        ex.scores[a] = 0.0
    for j in range(ex.nz):
        row = ex.idx[j] * K
        for a in range(K):
            ex.scores[a] += ex.val[j] * th[row + a]


cdef inline void surrogate_coef(const Example* ex, double* c) noexcept nogil:
    """The surrogate's gradient coefficients of an example: ``c = s_j (c_j -
    F[y_j]) - S_j scores_j`` (the bound's gradient minus its curvature
    ``S_j = L L^T`` times the weights it was formed at), from ``gcoef``."""
    cdef int K = ex.K, r = ex.r, a, b
    cdef double v
    for a in range(K):
        v = 0.0
        for b in range(K):
            v += strided_dot(r, ex.Lt + a, K, ex.Lt + b, K) * ex.scores[b]   # (L L^T)_ab
        c[a] = ex.gcoef[a] - v


cdef inline void woodbury_core(const Example* ex, const double* Wt, int P,
                               FullRankWork* w) noexcept nogil:
    """The small matrix of an example's Woodbury step: ``C = U^T M U``
    (``K x K``, read from ``W^T = (M U)^T``), then ``G = I + L^T C L``
    (``r x r``, with ``L^T = ex.Lt``), into ``w.C`` and ``w.G``."""
    cdef int K = ex.K, r = ex.r, a, b, j, f
    cdef double v
    for a in range(K):
        for b in range(K):
            v = 0.0
            for j in range(ex.nz):
                v += ex.val[j] * Wt[<size_t>b * P + ex.idx[j] * K + a]
            w.C[a * K + b] = v
    matmul(r, K, K, ex.Lt, K, 1, w.C, K, 1, w.tmp)
    matmul(r, r, K, w.tmp, K, 1, ex.Lt, 1, K, w.G)
    for f in range(r):
        w.G[f * r + f] += 1.0


cdef inline bint dense_row(const FullRankKernel* kr, const Example* ex) noexcept nogil:
    """Whether ``ex`` enters ``Sigma`` through the batch's ``dgemm`` (dense
    rows, several outputs) rather than scattered (``K^2 nz^2`` adds)."""
    return kr.K > 1 and 8 * ex.nz * ex.nz >= kr.d1 * kr.d1


cdef inline void surrogate_rhs(const FullRankKernel* kr, double* wrk) noexcept nogil:
    """The surrogate's right-hand side ``b - lam theta_icpt`` into ``wrk``
    (``full_step``: the intercept's ``lam`` inside ``M`` is a proximal term
    at its current value)."""
    cdef Py_ssize_t p
    for p in range(kr.P):
        wrk[p] = kr.mu[p] if p < kr.n_reg else kr.mu[p] - kr.lam * kr.theta[p]


cdef inline void theta_step(const FullRankKernel* kr, Py_ssize_t lo,
                            Py_ssize_t hi) noexcept nogil:
    """``theta -= eta phi`` on the coordinates ``lo:hi``, ``phi`` first made
    ``theta - theta_hat`` in surrogate mode (``full_step``)."""
    cdef Py_ssize_t p
    cdef double eta = kr.eta
    cdef double* th = kr.theta
    cdef double* phi = kr.phi
    for p in range(lo, hi):
        if kr.surrogate:
            phi[p] += th[p]
        th[p] -= eta * phi[p]


cdef inline void add_outer(double* mu, int K, const double* coef, const int* idx,
                           const double* val, int nz) noexcept nogil:
    """``mu += coef (x) xt``: ``mu[i K + a] += coef[a] x_i`` over the row's
    non-zeros (an example's gradient term)."""
    cdef int j, a, row
    for j in range(nz):
        row = idx[j] * K
        for a in range(K):
            mu[row + a] += coef[a] * val[j]


cdef inline void bound_curvature(const Example* ex, double* S) noexcept nogil:
    """``S_j = L L^T`` (``K x K``, both triangles; ``L^T = ex.Lt``): the
    curvature of the example's bound (zeros when ``r == 0``)."""
    cdef int K = ex.K, r = ex.r, a, c
    cdef double v
    for a in range(K):
        for c in range(a, K):
            v = strided_dot(r, ex.Lt + a, K, ex.Lt + c, K)
            S[a * K + c] = v
            S[c * K + a] = v


cdef inline void scatter_sparse(double* Sig, int P, int K, const double* S, const int* idx,
                                const double* val, int nz) noexcept nogil:
    """``Sigma += S (x) xt xt^T`` scattered into the upper triangle (the
    blocks ``(i, k >= i)``), over the pairs of the row's non-zeros."""
    cdef int a, c, j, k, i, i2
    cdef size_t ra
    cdef double v
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


cdef inline void dense_xt(const Example* ex, int d1, double* x) noexcept nogil:
    """The example's row ``xt`` as a dense vector of length ``d1``."""
    cdef int j
    memset(x, 0, d1 * sizeof(double))
    for j in range(ex.nz):
        x[ex.idx[j]] = ex.val[j]


cdef inline void dense_pairs(const double* x, int d1, double* Z) noexcept nogil:
    """``Z[q] = x_i x_k`` for the pairs ``q = (i, k >= i)`` in row-major order
    (``d1 (d1 + 1) / 2`` of them): a dense row's column of ``dense_flush``'s
    ``dgemm``."""
    cdef int i, k, q = 0
    for i in range(d1):
        for k in range(i, d1):
            Z[q] = x[i] * x[k]
            q += 1


cdef int work_init(FullRankWork* w, Workspace ws, int K, int P) except -1
cdef int bind_kernel(FullRankKernel* kr, state, opts, Py_ssize_t n_features) except -1
cdef void add_batch_regulariser(const FullRankKernel* kr, int n) noexcept nogil
cdef void full_step(const FullRankKernel* kr, double* wrk, const double* Lw) noexcept nogil
cdef int refactor_flush(const FullRankKernel* kr, BatchWork* b) noexcept nogil
cdef void refactor_finish(const FullRankKernel* kr, BatchWork* b) noexcept nogil
