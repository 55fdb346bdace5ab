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
