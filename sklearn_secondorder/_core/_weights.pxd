# Weight vectors for the SGD-type kernels.
#
# ScaledWeights: w = scale * v with O(1) shrink, O(nnz) dot and add, and an
# optional lazy running sum of the iterates (averaged SGD, ASF). Parameters are
# laid out as a C-order (n_features, n_outputs) block so that one feature owns
# n_outputs contiguous weights (n_outputs = 1 for binary models).

cdef class ScaledWeights:
    cdef double[::1] v_arr
    cdef double* v
    cdef readonly Py_ssize_t n_features
    cdef readonly int n_outputs
    cdef readonly double scale
    cdef readonly bint averaged
    cdef double[::1] u_arr
    cdef double* u
    cdef readonly double avg_coef        # C in  sum_of_iterates = u + C * v
    cdef readonly double n_iterates

    cdef void dot(self, const double* x, const int* ind, int nnz, double* out) noexcept nogil
    cdef void add(self, const double* x, const int* ind, int nnz, const double* c) noexcept nogil
    cdef void shrink(self, double factor) noexcept nogil
    cdef void fold(self) noexcept nogil
    cdef void count_iterate(self, double count) noexcept nogil
    cdef bint is_finite(self) noexcept nogil


# LazyStepWeights: per-coordinate step sizes eta_p with lazy (just-in-time)
# catch-up of the L2 decay (1 - eta_p lam)^k for coordinates untouched for k
# steps, and, when period b > 0, PSA's step-size adaptation every 2b updates
# (Hsu et al., Algorithm 1) applied lazily too. Blocks of n_outputs weights
# share their touch times; block `unregularized` (the intercept) has no L2.

cdef class LazyStepWeights:
    cdef double* v
    cdef double* eta
    cdef double* snap0
    cdef double* snap1
    cdef long long* last
    cdef long long* next_event
    cdef object _arrays
    cdef readonly Py_ssize_t n_blocks
    cdef readonly int n_outputs
    cdef readonly double lam
    cdef readonly long long period
    cdef readonly double psa_alpha, psa_beta, kappa, m, n
    cdef double factor_hi, log_alpha, eta_clip
    cdef readonly Py_ssize_t unregularized
    cdef readonly double min_factor, max_factor
    cdef readonly long long n_adaptations

    cdef void catch_up(self, Py_ssize_t j, long long T) noexcept nogil
    cdef void catch_up_all(self, long long T) noexcept nogil
    cdef void _decay(self, Py_ssize_t j, double lam, long long k) noexcept nogil
    cdef void _event(self, Py_ssize_t j, long long tau) noexcept nogil
    cdef void _skip_windows(self, Py_ssize_t j, double lam, long long k) noexcept nogil
    cdef void _adapt(self, Py_ssize_t p) noexcept nogil
    cdef void _decay_one(self, Py_ssize_t p, double lam, long long k) noexcept nogil
    cdef bint is_finite(self) noexcept nogil
