# Rows of a dense C-contiguous array or a CSR matrix behind one interface.
# Dense rows share one ``arange(n_features)`` index (one for every dense
# dataset), so kernels only ever see sparse rows ``(x, ind, nnz)``.

cimport cython

from ._random cimport rand_below


cdef inline void shuffle_order(Py_ssize_t* order, Py_ssize_t n, unsigned int* seed) noexcept nogil:
    """Fisher-Yates from the identity order, so that a pass's order depends
    only on the seed state (``fit(max_iter=k)`` visits the examples as ``k``
    calls to ``partial_fit`` do). Rows and sequences are shuffled alike."""
    cdef Py_ssize_t i, j, tmp
    for i in range(n):
        order[i] = i
    for i in range(n - 1, 0, -1):
        j = rand_below(seed, i + 1)
        tmp = order[i]
        order[i] = order[j]
        order[j] = tmp


@cython.final
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
    # raw pointers into the arrays above, for the inlined row access
    cdef const double* data_ptr
    cdef const int* indices_ptr
    cdef const long long* indptr_ptr
    cdef const double* dense_ptr
    cdef const int* dense_index_ptr
    cdef const double* y_ptr
    cdef const double* sw_ptr
    cdef Py_ssize_t* order_ptr
    # float32 values are read in place: fetch_row widens one row at a time
    # into row_buf (no float64 copy of X)
    cdef readonly bint is_float32
    cdef const float[::1] data32
    cdef const float[:, ::1] X_dense32
    cdef const float* data32_ptr
    cdef const float* dense32_ptr
    cdef double* row_buf
    cdef Py_ssize_t row_buf_len     # the longest row (the buffer's length)
    cdef readonly Py_ssize_t max_nnz  # the longest row's entries (at least 1)

    cdef void row(self, Py_ssize_t k, const double** x, const int** ind, int* nnz,
                  double* y, double* sw) noexcept nogil
    cdef void shuffle(self, unsigned int* seed) noexcept nogil
    cdef _set_targets(self, y, sample_weight)


cdef inline void fetch_row(RowDataset ds, Py_ssize_t k, const double** x, const int** ind,
                           int* nnz, double* y, double* sw) noexcept nogil:
    """The k-th row in the current order (pointers into the arrays); inlined
    into the epoch loops (``RowDataset.row`` is the same as a method)."""
    cdef Py_ssize_t i = ds.order_ptr[k]
    cdef long long start
    cdef const float* src
    cdef int q
    if ds.is_sparse:
        start = ds.indptr_ptr[i]
        x[0] = ds.data_ptr + start
        ind[0] = ds.indices_ptr + start
        nnz[0] = <int>(ds.indptr_ptr[i + 1] - start)
    else:
        start = i * ds.n_features
        x[0] = ds.dense_ptr + start
        ind[0] = ds.dense_index_ptr
        nnz[0] = <int>ds.n_features
    if ds.is_float32:
        # (a kernel is done with a row before it fetches the next one)
        src = (ds.data32_ptr if ds.is_sparse else ds.dense32_ptr) + start
        for q in range(nnz[0]):
            ds.row_buf[q] = src[q]
        x[0] = ds.row_buf
    y[0] = ds.y_ptr[i]
    sw[0] = ds.sw_ptr[i]


cdef inline void row_span(RowDataset ds, Py_ssize_t k, long long* start, const int** ind,
                          int* nnz, double* y, double* sw) noexcept nogil:
    """The k-th row in the current order, its values left in place (read
    with ``row_value``): ``fetch_row`` for threads that share ``ds``, whose
    float32 rows cannot share its one widening buffer."""
    cdef Py_ssize_t i = ds.order_ptr[k]
    if ds.is_sparse:
        start[0] = ds.indptr_ptr[i]
        ind[0] = ds.indices_ptr + start[0]
        nnz[0] = <int>(ds.indptr_ptr[i + 1] - start[0])
    else:
        start[0] = i * ds.n_features
        ind[0] = ds.dense_index_ptr
        nnz[0] = <int>ds.n_features
    y[0] = ds.y_ptr[i]
    sw[0] = ds.sw_ptr[i]


cdef inline double row_value(RowDataset ds, long long start, int q) noexcept nogil:
    """Value ``q`` of the row that ``row_span`` gave ``start``."""
    if ds.is_float32:
        return (ds.data32_ptr if ds.is_sparse else ds.dense32_ptr)[start + q]
    return (ds.data_ptr if ds.is_sparse else ds.dense_ptr)[start + q]


# Sequences as one CSR matrix of token rows plus sequence offsets (the CRF's input).
cdef class SequenceData:
    cdef const double[::1] data
    cdef const int[::1] indices
    cdef const long long[::1] indptr       # token rows, length n_tokens + 1
    cdef const long long[::1] offsets      # first token of each sequence, length n_sequences + 1
    cdef const int[::1] labels             # label index per token (may be empty)
    cdef readonly Py_ssize_t n_sequences
    cdef readonly Py_ssize_t n_tokens
    cdef readonly Py_ssize_t n_features
    cdef readonly int max_len
    cdef readonly bint has_labels
    cdef Py_ssize_t[::1] order

    cdef void shuffle(self, unsigned int* seed) noexcept nogil
