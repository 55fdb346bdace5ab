# The two heads of low-rank SBM (_sbm_heads.pyx) behind one interface
# (HeadOps), and the row parts they read: what the passes (_sbm_lowrank)
# call.
from ._sbm_bound cimport Example, Workspace
from ._sbm_lowrank_bound cimport LowRank


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


cdef HeadOps head_ops(bint lazy) noexcept nogil
cdef int head_init(Head* hd, Workspace ws, int k, int H) except -1
