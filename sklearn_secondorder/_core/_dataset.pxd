# Rows of a dense C-contiguous array or a CSR matrix behind one interface.
# Dense rows share one ``arange(n_features)`` index, so kernels only ever see
# sparse rows ``(x, ind, nnz)``.

cdef class RowDataset:
    cdef readonly Py_ssize_t n_samples
    cdef readonly Py_ssize_t n_features
    cdef readonly bint is_sparse
    cdef const double[:, ::1] X_dense
    cdef const double[::1] data
    cdef const int[::1] indices
    cdef const long long[::1] indptr
    cdef int[::1] dense_index
    cdef const double[::1] y
    cdef const double[::1] sample_weight
    cdef Py_ssize_t[::1] order

    cdef void row(self, Py_ssize_t k, const double** x, const int** ind, int* nnz,
                  double* y, double* sw) noexcept nogil
    cdef void shuffle(self, unsigned int* seed) noexcept nogil
