"""Row access over dense and CSR data for the nogil epoch loops, and the
counters a kernel's state carries from one call to the next (``PassCounters``)."""
from dataclasses import dataclass

from libc.stdlib cimport malloc, free

import numpy as np
import scipy.sparse as sp


INT32_MAX = np.iinfo(np.int32).max

# The index of a dense row, shared by every dense dataset: the first
# ``n_features`` entries of one ``arange``, grown when a wider dataset comes
# (read, never written).
_DENSE_INDEX = np.arange(1, dtype=np.int32)


def _dense_index(Py_ssize_t n_features):
    global _DENSE_INDEX
    if _DENSE_INDEX.shape[0] < n_features:
        _DENSE_INDEX = np.arange(max(n_features, 2 * _DENSE_INDEX.shape[0]), dtype=np.int32)
    return _DENSE_INDEX[:max(n_features, 1)]


cdef class RowDataset:
    """Rows of ``X`` with targets and sample weights, in a shuffleable order.

    Construction converts ``X`` at most once: nothing is copied when the
    arrays already have the kernels' types (float64 or float32 values,
    int32 indices, int64 ``indptr``, C order), and :meth:`with_targets`
    gives further datasets over the same rows (other targets, one per
    sub-problem and pass) without converting them again.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features) or CSR matrix
        float32 values are read in place (each row widened to float64 as
        it is fetched); other dtypes are converted to float64. CSR indices
        to int32 (int64-indexed CSR is accepted when ``n_features`` fits in
        int32).
    y : ndarray of shape (n_samples,)
        Targets as float64 (class indices for multinomial kernels).
    sample_weight : ndarray of shape (n_samples,)
    """

    def __init__(self, X, y, sample_weight):
        if sp.issparse(X):
            if X.format != "csr":
                X = sp.csr_matrix(X)    # (a CSR input keeps its cached format flags)
            if X.shape[1] > INT32_MAX:
                raise ValueError(f"n_features={X.shape[1]} exceeds the int32 index range")
            if not X.has_sorted_indices:
                X = X.sorted_indices()
            self.is_sparse = True
            self.is_float32 = X.data.dtype == np.float32
            if self.is_float32:
                self.data32 = np.ascontiguousarray(X.data)
                self.data = np.zeros(1)           # (unused: a valid address)
            else:
                self.data = np.ascontiguousarray(X.data, dtype=np.float64)
            self.indices = np.ascontiguousarray(X.indices, dtype=np.int32)
            self.indptr = np.ascontiguousarray(X.indptr, dtype=np.int64)
            self.X_dense = np.zeros((0, 0))
        else:
            self.is_float32 = getattr(X, "dtype", None) == np.float32
            X = np.ascontiguousarray(X, dtype=np.float32 if self.is_float32 else np.float64)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D, got shape {X.shape}")
            self.is_sparse = False
            if self.is_float32:
                self.X_dense32 = X
                self.X_dense = np.zeros((0, 0))
            else:
                self.X_dense = X
            self.data = np.zeros(0)
            self.indices = np.zeros(0, dtype=np.int32)
            self.indptr = np.zeros(1, dtype=np.int64)
        self.n_samples, self.n_features = X.shape
        self.dense_index = _dense_index(0 if self.is_sparse else self.n_features)
        # keep arrays non-empty so the raw pointers are valid addresses
        if self.data.shape[0] == 0:
            self.data = np.zeros(1)
            self.indices = np.zeros(1, dtype=np.int32)
        if self.X_dense.shape[0] == 0 or self.X_dense.shape[1] == 0:
            self.X_dense = np.zeros((1, 1))   # sparse data (or no cells): unused
        self.dense_ptr = &self.X_dense[0, 0]
        self.data_ptr = &self.data[0]
        self.indices_ptr = &self.indices[0]
        self.indptr_ptr = &self.indptr[0]
        self.dense_index_ptr = &self.dense_index[0]
        self.row_buf_len = 0
        if self.is_float32:
            self.row_buf_len = 1
            if self.is_sparse:
                if self.data32.shape[0] == 0:
                    self.data32 = np.zeros(1, dtype=np.float32)
                self.data32_ptr = &self.data32[0]
                if self.n_samples > 0:
                    self.row_buf_len = max(1, int(np.max(np.diff(np.asarray(self.indptr)))))
            else:
                if self.X_dense32.shape[0] == 0 or self.X_dense32.shape[1] == 0:
                    self.X_dense32 = np.zeros((1, 1), dtype=np.float32)
                self.dense32_ptr = &self.X_dense32[0, 0]
                self.row_buf_len = max(1, self.n_features)
        if self.is_sparse:
            self.max_nnz = max(1, int(np.max(np.diff(np.asarray(self.indptr)), initial=0)))
        else:
            self.max_nnz = max(1, self.n_features)
        self._set_targets(y, sample_weight)

    def with_targets(self, y, sample_weight, rows=None):
        """A dataset over the same rows with other targets and sample weights.

        The rows' arrays are shared, not converted again: a fit converts
        ``X`` once however many sub-problems and passes read it. The new
        dataset has its own visiting order (the identity) and work buffer,
        so datasets of one ``X`` may run in different threads.

        Parameters
        ----------
        y, sample_weight : ndarray of shape (n_samples,)
            Indexed by the rows of ``X`` (all of them, also with ``rows``).
        rows : array-like of int or None, default=None
            Only these rows of ``X``, visited in this order: the dataset's
            ``n_samples`` is ``len(rows)`` and its order is ``rows`` (one
            thread's shard of a pass, without copying ``X``). Such a dataset
            must be passed with ``shuffle=False``: a shuffle restarts from the
            identity order of its ``n_samples`` rows.

        Returns
        -------
        ds : RowDataset
        """
        cdef RowDataset ds = RowDataset.__new__(RowDataset)
        ds.n_samples, ds.n_features = self.n_samples, self.n_features
        ds.is_sparse, ds.is_float32 = self.is_sparse, self.is_float32
        ds.X_dense, ds.data, ds.indices, ds.indptr = (self.X_dense, self.data, self.indices,
                                                      self.indptr)
        ds.dense_index = self.dense_index
        ds.dense_ptr, ds.data_ptr = self.dense_ptr, self.data_ptr
        ds.indices_ptr, ds.indptr_ptr = self.indices_ptr, self.indptr_ptr
        ds.dense_index_ptr = self.dense_index_ptr
        ds.row_buf_len = self.row_buf_len
        ds.max_nnz = self.max_nnz
        if self.is_float32 and self.is_sparse:
            ds.data32, ds.data32_ptr = self.data32, self.data32_ptr
        elif self.is_float32:
            ds.X_dense32, ds.dense32_ptr = self.X_dense32, self.dense32_ptr
        ds._set_targets(y, sample_weight)
        if rows is not None:
            order = np.array(rows, dtype=np.intp)
            if order.ndim != 1 or (order.size and (order.min() < 0
                                                   or order.max() >= self.n_samples)):
                raise ValueError(f"rows must be a 1-D array of row indices in "
                                 f"0..{self.n_samples - 1}")
            if order.size == 0:
                order = np.zeros(1, dtype=np.intp)      # (a valid address; no rows)
                ds.n_samples = 0
            else:
                ds.n_samples = order.size
            ds.order = order
            ds.order_ptr = &ds.order[0]
        return ds

    cdef _set_targets(self, y, sample_weight):
        """Targets, weights, the identity order and the float32 row buffer."""
        y = np.ascontiguousarray(y, dtype=np.float64)
        sample_weight = np.ascontiguousarray(sample_weight, dtype=np.float64)
        if y.shape[0] != self.n_samples or sample_weight.shape[0] != self.n_samples:
            raise ValueError("X, y and sample_weight must have the same number of rows")
        self.y = y
        self.sample_weight = sample_weight
        self.order = np.arange(self.n_samples, dtype=np.intp)
        self.y_ptr = &self.y[0] if self.n_samples > 0 else NULL
        self.sw_ptr = &self.sample_weight[0] if self.n_samples > 0 else NULL
        self.order_ptr = &self.order[0] if self.n_samples > 0 else NULL
        if self.row_buf_len > 0:
            self.row_buf = <double*>malloc(self.row_buf_len * sizeof(double))
            if self.row_buf == NULL:
                raise MemoryError()

    def __dealloc__(self):
        free(self.row_buf)

    cdef void row(self, Py_ssize_t k, const double** x, const int** ind, int* nnz,
                  double* y, double* sw) noexcept nogil:
        """The k-th row in the current order (pointers into the arrays)."""
        fetch_row(self, k, x, ind, nnz, y, sw)

    cdef void shuffle(self, unsigned int* seed) noexcept nogil:
        """A new visiting order: Fisher-Yates from the identity, so an epoch's
        order depends only on the seed state (``fit(max_iter=k)`` visits the
        rows as ``k`` calls to ``partial_fit`` do)."""
        shuffle_order(self.order_ptr, self.n_samples, seed)

    def shuffle_py(self, unsigned int seed):
        """Shuffle the order (test hook); returns the new seed state."""
        cdef unsigned int s = seed
        self.shuffle(&s)
        return s

    def row_py(self, Py_ssize_t k):
        """The k-th row as ``(values, indices, y, sample_weight)`` (test hook)."""
        cdef const double* x
        cdef const int* ind
        cdef int nnz
        cdef double yy, sw
        self.row(k, &x, &ind, &nnz, &yy, &sw)
        vals = np.array([x[t] for t in range(nnz)], dtype=np.float64)
        idx = np.array([ind[t] for t in range(nnz)], dtype=np.int32)
        return vals, idx, yy, sw

    @property
    def order_(self):
        return np.asarray(self.order).copy()


cdef class SequenceData:
    """Sequences as one CSR matrix of token rows plus sequence offsets.

    Parameters
    ----------
    data, indices, indptr : ndarray
        CSR arrays of the ``(n_tokens, n_features)`` token matrix (float64,
        int32, int64).
    offsets : ndarray of shape (n_sequences + 1,), int64
        Sequence ``s`` holds token rows ``offsets[s]:offsets[s + 1]``.
    labels : ndarray of shape (n_tokens,), int32, or None
        Label index of every token (needed for training only).
    n_features : int
    """

    def __init__(self, const double[::1] data, const int[::1] indices,
                 const long long[::1] indptr, const long long[::1] offsets,
                 labels=None, Py_ssize_t n_features=0):
        cdef Py_ssize_t s
        cdef long long T, maxT = 0
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.offsets = offsets
        self.n_sequences = offsets.shape[0] - 1
        self.n_tokens = indptr.shape[0] - 1
        self.n_features = n_features
        if self.n_sequences < 0 or offsets[0] != 0 or offsets[self.n_sequences] != self.n_tokens:
            raise ValueError("offsets do not match the token rows")
        for s in range(self.n_sequences):
            T = offsets[s + 1] - offsets[s]
            if T <= 0:
                raise ValueError(f"sequence {s} is empty")
            if T > maxT:
                maxT = T
        if maxT > 2**30:
            raise ValueError("sequence too long")
        self.max_len = <int>maxT
        if labels is None:
            self.has_labels = False
            self.labels = np.zeros(0, dtype=np.int32)
        else:
            self.has_labels = True
            self.labels = np.ascontiguousarray(labels, dtype=np.int32)
            if self.labels.shape[0] != self.n_tokens:
                raise ValueError("labels must have one entry per token")
        self.order = np.arange(self.n_sequences, dtype=np.intp)

    cdef void shuffle(self, unsigned int* seed) noexcept nogil:
        """A new visiting order of the sequences (``shuffle_order``)."""
        shuffle_order(&self.order[0] if self.n_sequences > 0 else NULL, self.n_sequences,
                      seed)

    def py_order(self):
        return np.asarray(self.order).copy()

    def take(self, sequences):
        """A new ``SequenceData`` of the given sequences, in that order.

        The tokens of those sequences are copied (gathered), not viewed: the
        CRF kernels size their work buffers from the sequences ``0 ..
        n_sequences - 1`` of the data they get, so a shard must be a data set
        of its own. Used for one thread's shard of a pass.

        Parameters
        ----------
        sequences : array-like of int
            Sequence indices (each at most once, in visiting order).

        Returns
        -------
        ds : SequenceData
            With the same ``n_features`` and labels (if any).
        """
        seqs = np.asarray(sequences, dtype=np.int64)
        offsets = np.asarray(self.offsets)
        indptr = np.asarray(self.indptr)
        if seqs.ndim != 1 or (seqs.size and (seqs.min() < 0 or seqs.max() >= self.n_sequences)):
            raise ValueError(f"sequences must be a 1-D array of indices in "
                             f"0..{self.n_sequences - 1}")
        lengths = offsets[seqs + 1] - offsets[seqs]
        new_offsets = np.zeros(seqs.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=new_offsets[1:])
        # the token rows of the sequences, in order: a range per sequence
        # (explicit ends: no negative indices under wraparound=False)
        n_tok = int(new_offsets[seqs.size])
        tok = (np.repeat(offsets[seqs] - new_offsets[:seqs.size], lengths)
               + np.arange(n_tok, dtype=np.int64))
        row_nnz = indptr[tok + 1] - indptr[tok]
        new_indptr = np.zeros(n_tok + 1, dtype=np.int64)
        np.cumsum(row_nnz, out=new_indptr[1:])
        src = (np.repeat(indptr[tok] - new_indptr[:n_tok], row_nnz)
               + np.arange(int(new_indptr[n_tok]), dtype=np.int64))
        labels = np.asarray(self.labels)[tok] if self.has_labels else None
        return SequenceData(np.asarray(self.data)[src], np.asarray(self.indices)[src],
                            new_indptr, new_offsets, labels, self.n_features)

    def token_counts(self):
        """The number of tokens of every sequence (int64 ndarray)."""
        return np.diff(np.asarray(self.offsets))

    def nnz_counts(self):
        """The stored values of every sequence (int64 ndarray): the work of
        a sequence, for balancing the threads' shards."""
        indptr = np.asarray(self.indptr)
        return np.diff(indptr[np.asarray(self.offsets)])


@dataclass(kw_only=True)
class PassCounters:
    """The counters every kernel's state carries from one call to the next
    (the states of SGD, SGD-QN and SBM derive from it; picklable).

    Attributes
    ----------
    t : int
        Updates so far (rows of non-zero weight); the step-size schedule
        continues from it.
    seed : int
        The state of the generator that shuffles the rows
        (``shuffle_order``); a call starts from ``rng_state()``.
    """

    t: int = 0
    seed: int = 1

    def rng_state(self):
        """The shuffling generator's state for a call (``seed``; 0, a fixed
        point of the xorshift generator, is read as 1)."""
        return self.seed if self.seed != 0 else 1


def shuffled_order(Py_ssize_t n, unsigned int seed):
    """The visiting order a kernel's shuffle draws from ``seed``, and the new seed.

    The kernels shuffle with ``shuffle_order`` from their state's seed (0 is
    read as 1); this is the same draw, so the threads' shards of a pass are
    contiguous pieces of the order one thread would visit.

    Parameters
    ----------
    n : int
        The number of rows or sequences.
    seed : int
        The state's shuffling seed.

    Returns
    -------
    order : ndarray of intp of shape (n,)
    seed : int
        The seed after the shuffle.
    """
    cdef unsigned int rng = seed if seed != 0 else 1
    order = np.empty(max(n, 1), dtype=np.intp)
    cdef Py_ssize_t[::1] o = order
    with nogil:
        shuffle_order(&o[0], n, &rng)
    return order[:n], int(rng)


def stream_rows(RowDataset ds, int n_epochs=1):
    """Read every stored value once per epoch (in the current order) and return
    their sum: the memory-bandwidth floor of an epoch, for the benchmarks."""
    cdef const double* x
    cdef const int* ind
    cdef int nnz, j, _epoch
    cdef Py_ssize_t i
    cdef double y, sw, total = 0.0
    with nogil:
        for _epoch in range(n_epochs):
            for i in range(ds.n_samples):
                ds.row(i, &x, &ind, &nnz, &y, &sw)
                for j in range(nnz):
                    total += x[j] * sw + ind[j]
    return total
