"""Token feature dicts -> CSR arrays, compiled (``sequence._input.vectorize_dicts``).

The loop over sequences, tokens and features of pycrfsuite's input forms with
CRFsuite's attribute names. The common form (a dict with str keys and str /
float / int / bool values) is handled here; every other form (bytes, nested
dicts, lists, sets, lists of names as tokens) goes through the Python
``flat_item`` callback, so the naming rules have one home (``_input.py``).
The arrays grow by doubling, as CRFsuite's attribute buffers.
"""
from collections.abc import Mapping

import numpy as np
from libc.stdlib cimport realloc, free


cdef struct Buffer:
    double* data
    int* indices
    long long* indptr
    long long* offsets
    Py_ssize_t n, cap, n_rows, cap_rows, n_seq, cap_seq


cdef void* _regrow(void* p, Py_ssize_t n, size_t size) except NULL:
    """``realloc`` to ``n`` items of ``size`` bytes, or ``MemoryError``."""
    cdef void* q = realloc(p, n * size)
    if q == NULL:
        raise MemoryError()
    return q


cdef int _grow(Buffer* b) except -1:
    cdef Py_ssize_t cap = 2 * b.cap if b.cap else 1024
    b.data = <double*>_regrow(b.data, cap, sizeof(double))
    b.indices = <int*>_regrow(b.indices, cap, sizeof(int))
    b.cap = cap
    return 0


cdef int _grow_rows(Buffer* b) except -1:
    cdef Py_ssize_t cap = 2 * b.cap_rows if b.cap_rows else 1024
    b.indptr = <long long*>_regrow(b.indptr, cap, sizeof(long long))
    b.cap_rows = cap
    return 0


cdef int _grow_seq(Buffer* b) except -1:
    cdef Py_ssize_t cap = 2 * b.cap_seq if b.cap_seq else 256
    b.offsets = <long long*>_regrow(b.offsets, cap, sizeof(long long))
    b.cap_seq = cap
    return 0


cdef inline int _put(Buffer* b, Py_ssize_t j, double value) except -1:
    if b.n == b.cap:
        _grow(b)
    b.data[b.n] = value
    b.indices[b.n] = <int>j
    b.n += 1
    return 0


cdef inline Py_ssize_t _column(dict vocabulary, bint grow, object key) except -2:
    """The column of ``key`` (-1: unknown and not growing)."""
    cdef object j = vocabulary.get(key)
    if j is None:
        if not grow:
            return -1
        j = len(vocabulary)
        vocabulary[key] = j
    return j


cdef inline int _add(Buffer* b, dict vocabulary, bint grow, object key,
                     double value) except -1:
    cdef Py_ssize_t j = _column(vocabulary, grow, key)
    if j >= 0:
        _put(b, j, value)
    return 0


def vectorize(X, dict vocabulary, bint grow, flat_item, is_item_sequence, str sep):
    """The loop of ``vectorize_dicts`` (same arguments and result, plus the
    ``flat_item`` / ``is_item_sequence`` helpers of ``_input.py``)."""
    cdef Buffer b
    b.data = NULL
    b.indices = NULL
    b.indptr = NULL
    b.offsets = NULL
    b.n = b.cap = b.n_rows = b.cap_rows = b.n_seq = b.cap_seq = 0
    cdef Py_ssize_t si = 0, j
    cdef object seq, tok, key, val, tv, pair, col
    cdef double value
    # key -> {str value -> column}: a known (key, value) pair costs two lookups
    # of existing strings, not the concatenation "key:value" and its hash
    cdef dict by_key = {}
    cdef dict by_value
    try:
        _grow_rows(&b)
        _grow_seq(&b)
        b.indptr[0] = 0
        b.offsets[0] = 0
        for seq in X:
            if is_item_sequence(seq):
                seq = seq.items()
            if not isinstance(seq, (list, tuple)):
                raise TypeError(f"sequence {si} of X is a {type(seq).__name__}; expected a "
                                "list of feature dicts.")
            if len(seq) == 0:
                raise ValueError(f"sequence {si} of X is empty: every sequence needs at "
                                 "least one token.")
            for tok in seq:
                if type(tok) is dict:
                    for key, val in (<dict>tok).items():
                        tv = type(val)
                        if type(key) is not str:
                            for pair in flat_item({key: val}):
                                _add(&b, vocabulary, grow, pair[0], pair[1])
                        elif tv is str:
                            by_value = by_key.get(key)
                            if by_value is None:
                                by_value = by_key[key] = {}
                            col = by_value.get(val)
                            if col is None:
                                j = _column(vocabulary, grow, (<str>key) + sep + (<str>val))
                                by_value[val] = j
                            else:
                                j = col
                            if j >= 0:
                                _put(&b, j, 1.0)
                        elif tv is float or tv is int or tv is bool:
                            value = val
                            _add(&b, vocabulary, grow, key, value)
                        else:
                            for pair in flat_item({key: val}):
                                _add(&b, vocabulary, grow, pair[0], pair[1])
                elif isinstance(tok, (Mapping, list, tuple, set, frozenset)):
                    for pair in flat_item(tok):
                        _add(&b, vocabulary, grow, pair[0], pair[1])
                else:
                    raise TypeError(f"sequence {si} of X holds a {type(tok).__name__}; "
                                    "expected feature dicts (or lists of feature names).")
                if b.n_rows + 1 == b.cap_rows:
                    _grow_rows(&b)
                b.n_rows += 1
                b.indptr[b.n_rows] = b.n
            if b.n_seq + 1 == b.cap_seq:
                _grow_seq(&b)
            b.n_seq += 1
            b.offsets[b.n_seq] = b.n_rows
            si += 1
        data = np.empty(b.n, dtype=np.float64)
        indices = np.empty(b.n, dtype=np.int32)
        indptr = np.empty(b.n_rows + 1, dtype=np.int64)
        offsets = np.empty(b.n_seq + 1, dtype=np.int64)
        if b.n:
            data[:] = <double[:b.n]>b.data
            indices[:] = <int[:b.n]>b.indices
        indptr[:] = <long long[:b.n_rows + 1]>b.indptr
        offsets[:] = <long long[:b.n_seq + 1]>b.offsets
        return data, indices, indptr, offsets
    finally:
        free(b.data)
        free(b.indices)
        free(b.indptr)
        free(b.offsets)
