# The low-rank bound V^T S V + D of low-rank SBM (_sbm_lowrank_bound.pyx):
# the struct and the operations the heads (_sbm_heads) and the passes
# (_sbm_lowrank) call.
from ._sbm_bound cimport Workspace


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


cdef int lowrank_scratch(LowRank* lr, Workspace ws) except -1
cdef void merge(LowRank* lr, double* z) noexcept nogil
cdef int merge_small(LowRank* lr, double zz) noexcept nogil
cdef int woodbury_solve(LowRank* lr, const double* mu, double* phi) noexcept nogil
cdef int head_solve(LowRank* lr, const double* G, const double* vmu,
                    double* a) noexcept nogil
cdef void orthonormalize(LowRank* lr) noexcept nogil
