# The vector loops over a block's weights (_block_ops.h): the lazy core's
# wide blocks and ScaledWeights' L1 rows.

cdef extern from "_block_ops.h":
    void block_decay_series "skso_block_decay_series"(double* v, const float* eta, double lam,
                                                      double k, double bound,
                                                      Py_ssize_t n) noexcept nogil
    void block_emit "skso_block_emit"(double* em, const double* v, double x,
                                      Py_ssize_t n) noexcept nogil
    void block_shrink "skso_block_shrink"(double* v, const float* eta, double lam,
                                          Py_ssize_t n) noexcept nogil
    void block_shrink_factors "skso_block_shrink_factors"(double* f, const float* eta,
                                                          double lam,
                                                          Py_ssize_t n) noexcept nogil
    void block_scale "skso_block_scale"(double* v, const double* f, Py_ssize_t n) noexcept nogil
    void block_add "skso_block_add"(double* v, const float* eta, double x, const double* d,
                                    Py_ssize_t n) noexcept nogil
    void block_mid_event "skso_block_mid_event"(const double* v, double* snap, float* dsnap,
                                                Py_ssize_t n) noexcept nogil
    void block_decay_mid_event "skso_block_decay_mid_event"(
        double* v, const float* eta, double* snap, float* dsnap, double lam, double k,
        double bound, Py_ssize_t n) noexcept nogil
    void block_decay_end_event "skso_block_decay_end_event"(
        double* v, float* eta, double* snap, const float* dsnap, double lam, double k,
        double bound, double m, double kappa, double inv_denom, double f_lo, double f_hi,
        Py_ssize_t n) noexcept nogil
    void block_idle_windows "skso_block_idle_windows"(double* v, float* eta, double* snap,
                                                      double lam, double p1, double two_b,
                                                      double g1, double g2,
                                                      Py_ssize_t n) noexcept nogil
    void block_end_event "skso_block_end_event"(const double* v, double* snap,
                                                const float* dsnap, float* eta, double m,
                                                double kappa, double inv_denom, double f_lo,
                                                double f_hi, Py_ssize_t n) noexcept nogil
    void row_l1_apply "skso_row_l1_apply"(double* v, double* q, double* avg, double u,
                                          double c, Py_ssize_t K) noexcept nogil
