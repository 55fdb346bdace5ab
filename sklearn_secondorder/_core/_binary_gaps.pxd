# A binary state's gaps, eight at a time (_binary_gaps.h: why a second form
# of the lazy walk, and its test against the first).

cdef extern from "_binary_gaps.h":
    ctypedef struct GapConsts "skso_gap_consts":
        double b, inv_b, lam, rate_max, log_alpha, g1, g2
        double m, kappa, inv_denom, f_lo, f_hi
        Py_ssize_t stride, off_v, off_eta, off_dsnap, off_snap
    Py_ssize_t binary_gaps "skso_binary_gaps"(char* base, const int* idx, Py_ssize_t n,
                                              double T, double ev, const GapConsts* c,
                                              int* left) noexcept nogil
