"""Compiled text readers of the command line (``sklearn_secondorder.cli``).

One pass of C over a chunk of bytes, never a Python step per feature or row:

``parse_svmlight``
    svmlight / libsvm lines -> labels and CSR arrays. scikit-learn's
    ``load_svmlight_file`` reads the same lines (the tests check that both
    agree), but about five times slower than the learners consume rows.
``parse_vw``
    Vowpal Wabbit's text format -> labels, importance weights and the CSR
    arrays of the hashed features.
``scan_svmlight`` / ``scan_vw``
    The pre-scan of a file: every row's label (and, for svmlight, the
    smallest and largest feature index), so that ``classes``, the number of
    features and the size-dependent parameters are known before training.
``newline_positions`` / ``count_newlines``
    Where the lines of a block of text end (``cli._files.iter_blocks``), and
    how many there are.

The VW features are hashed by ``_hashing.murmur3_32`` (MurmurHash3_x86_32,
the hash of the command line's other featurizers): a feature ``name`` of
namespace ``ns`` goes to column
``murmurhash3_32(name, seed=murmurhash3_32(ns, 0)) mod 2**hash_bits``
(scikit-learn's ``murmurhash3_32`` with ``positive=True``; the default
namespace is the empty string).
"""
import numpy as np

cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_New
from libc.math cimport NAN
from libc.stdint cimport int64_t, uint32_t
from libc.stdlib cimport free, malloc, realloc, strtod
from libc.string cimport memchr

from ._hashing cimport murmur3_32

cnp.import_array()


cdef inline bint _space(unsigned char c) noexcept nogil:
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


cdef Py_ssize_t _count_lines(const unsigned char* b, Py_ssize_t n) noexcept nogil:
    """Lines in ``b[:n]`` (the last one may lack its newline)."""
    cdef Py_ssize_t count = 0, pos = 0
    cdef const void* p
    while pos < n:
        p = memchr(b + pos, 10, n - pos)
        count += 1
        if p == NULL:
            break
        pos = (<const unsigned char*>p - b) + 1
    return count


def newline_positions(const unsigned char[::1] buf):
    """The positions of the newlines (byte 10) of ``buf``, found without the GIL.

    ``np.flatnonzero(np.frombuffer(buf, np.uint8) == 10)``, with ``memchr``
    (about ten times faster on text lines, and other threads run meanwhile).

    Parameters
    ----------
    buf : bytes-like
        Text.

    Returns
    -------
    positions : ndarray of shape (n_newlines,), dtype int64
    """
    cdef Py_ssize_t n = buf.shape[0], count = 0, pos = 0, k
    cdef const unsigned char* b = &buf[0] if n > 0 else NULL
    cdef const void* p
    with nogil:
        if n > 0:
            count = _count_lines(b, n) - (0 if b[n - 1] == 10 else 1)
    out = np.empty(count, dtype=np.int64)
    cdef int64_t[::1] o = out
    with nogil:
        for k in range(count):
            p = memchr(b + pos, 10, n - pos)
            o[k] = <const unsigned char*>p - b
            pos = o[k] + 1
    return out


def count_newlines(const unsigned char[::1] buf):
    """The newlines (byte 10) of ``buf``, counted with ``memchr`` without the GIL."""
    cdef Py_ssize_t n = buf.shape[0], count = 0
    cdef const unsigned char* b = &buf[0] if n > 0 else NULL
    with nogil:
        if n > 0:
            count = _count_lines(b, n) - (0 if b[n - 1] == 10 else 1)
    return count


# ---- the line readers --------------------------------------------------------------
# The per-line loops run without the GIL, so that the command line's reader
# thread parses the next chunk while the learner (also nogil) trains on this
# one. They write into C buffers and report a bad token as an ``_Error``
# record; the Python wrappers raise its message and build the arrays after
# the loop, with the GIL.

cdef enum:                      # what a bad token is, for _raise's message
    _LABEL                      # svmlight label
    _HEADER                     # VW label or importance weight
    _SCALE                      # VW namespace scale
    _VALUE                      # feature value (both formats)
    _PAIR                       # svmlight index:value pair
    _INDEX                      # svmlight feature index
    _NO_BAR                     # a VW line without '|'
    _INDEX_ZERO                 # index 0 in a one-based svmlight file
    _BEYOND                     # an index past n_features (strict_range)
    _NO_MEMORY                  # a C buffer could not grow


cdef struct _Error:
    Py_ssize_t line             # the line's number
    Py_ssize_t start, stop      # the bad token, as positions in the buffer
    int what


cdef struct _Out:               # append-only C buffers (amortised doubling)
    int* idx
    double* val
    Py_ssize_t n, cap


cdef int _out_init(_Out* o, Py_ssize_t capacity) noexcept nogil:
    o.cap = max(capacity, 16)
    o.n = 0
    o.idx = <int*>malloc(o.cap * sizeof(int))
    o.val = <double*>malloc(o.cap * sizeof(double))
    return 0 if o.idx != NULL and o.val != NULL else -1


cdef void _out_free(_Out* o) noexcept nogil:
    free(o.idx)
    free(o.val)
    o.idx = NULL
    o.val = NULL


cdef int _out_grow(_Out* o) noexcept nogil:
    cdef Py_ssize_t cap = 2 * o.cap
    cdef int* idx = <int*>realloc(o.idx, cap * sizeof(int))
    if idx == NULL:
        return -1
    o.idx = idx
    cdef double* val = <double*>realloc(o.val, cap * sizeof(double))
    if val == NULL:
        return -1
    o.val = val
    o.cap = cap
    return 0


cdef inline int _out_push(_Out* o, int idx, double val, _Error* err) noexcept nogil:
    if o.n == o.cap and _out_grow(o) < 0:
        err.what = _NO_MEMORY
        return -1
    o.idx[o.n] = idx
    o.val[o.n] = val
    o.n += 1
    return 0


cdef void _free_capsule(object capsule) noexcept:
    free(PyCapsule_GetPointer(capsule, NULL))


cdef object _owning_array(void* data, Py_ssize_t n, int typenum):
    """A 1-D array of ``n`` items over the malloc'd ``data``, which it frees."""
    cdef cnp.npy_intp dims = n
    arr = cnp.PyArray_SimpleNewFromData(1, &dims, typenum, data)
    cnp.set_array_base(arr, PyCapsule_New(data, NULL, &_free_capsule))
    return arr


cdef tuple _out_arrays(_Out* o):
    """The buffers' ``n`` items as arrays (int32 indices, float64 values),
    which take the buffers over: no copy of the parsed rows."""
    cdef Py_ssize_t n = max(o.n, 1)
    cdef void* p
    # give back what the doubling over-allocated (in place, as a rule)
    p = realloc(o.idx, n * sizeof(int))
    if p != NULL:
        o.idx = <int*>p
    p = realloc(o.val, n * sizeof(double))
    if p != NULL:
        o.val = <double*>p
    idx_a = _owning_array(o.idx, o.n, cnp.NPY_INT32)
    o.idx = NULL
    val_a = _owning_array(o.val, o.n, cnp.NPY_FLOAT64)
    o.val = NULL
    return idx_a, val_a


cdef Py_ssize_t _line_end(const unsigned char* buf, Py_ssize_t pos,
                          Py_ssize_t n) noexcept nogil:
    cdef const void* p = memchr(buf + pos, 10, n - pos)
    if p == NULL:
        return n
    return <const unsigned char*>p - buf


cdef double _parse_number(const unsigned char* start, Py_ssize_t length,
                          bint* ok) noexcept nogil:
    """``strtod`` of exactly ``start[:length]`` (``ok`` false if it is not a number)."""
    cdef char tmp[64]
    cdef char* end
    cdef Py_ssize_t i, first = 0
    cdef double v
    cdef int64_t whole = 0
    if length <= 0 or length >= 63:
        ok[0] = False
        return 0.0
    # fast path: a short integer ("1", "-1", "42") is exact in a double, as
    # strtod would give it
    if start[0] == 45 or start[0] == 43:
        first = 1
    if length - first <= 15 and length > first:
        for i in range(first, length):
            if start[i] < 48 or start[i] > 57:
                break
            whole = 10 * whole + (start[i] - 48)
        else:
            ok[0] = True
            return -<double>whole if start[0] == 45 else <double>whole
    for i in range(length):
        tmp[i] = <char>start[i]
    tmp[length] = 0
    v = strtod(tmp, &end)
    ok[0] = end == tmp + length
    return v


# The token code the parse and the scan paths share, so that both read a line
# the same way and stop on a bad one with the same message. The helpers that
# can fail return a position (>= 0) and signal a bad token with -1, having
# filled ``err``; those on the per-feature path are inline.

cdef inline Py_ssize_t _fail(_Error* err, Py_ssize_t start, Py_ssize_t stop,
                             Py_ssize_t line, int what) noexcept nogil:
    err.line = line
    err.start = start
    err.stop = stop
    err.what = what
    return -1


cdef inline Py_ssize_t _skip_spaces(const unsigned char* b, Py_ssize_t p,
                                    Py_ssize_t end) noexcept nogil:
    while p < end and _space(b[p]):
        p += 1
    return p


cdef inline Py_ssize_t _token_end(const unsigned char* b, Py_ssize_t p, Py_ssize_t end,
                                  unsigned char stop) noexcept nogil:
    """End of the token at ``p``: the next space, ``stop`` byte or ``end``."""
    while p < end and not _space(b[p]) and b[p] != stop:
        p += 1
    return p


cdef inline Py_ssize_t _digits_before(const unsigned char* b,
                                      Py_ssize_t colon) noexcept nogil:
    """How many digits precede ``b[colon]`` (an index's, for an error message)."""
    cdef Py_ssize_t k = 0
    while colon - k > 0 and 48 <= b[colon - k - 1] <= 57:
        k += 1
    return k


cdef inline Py_ssize_t _colon(const unsigned char* b, Py_ssize_t p,
                              Py_ssize_t end) noexcept nogil:
    """The first ``:`` of ``b[p:end]`` (``end`` if none)."""
    while p < end and b[p] != 58:
        p += 1
    return p


cdef str _text(const unsigned char* b, Py_ssize_t start, Py_ssize_t stop):
    """``b[start:stop]`` as text, for an error message."""
    return (<const char*>b)[start:stop].decode("utf-8", "replace")


# The message of each bad token (``{line}``: its line, ``{text}``: the token)
_MESSAGES = {
    _NO_BAR: "line {line}: no '|' (a VW line is '[label [weight]] |namespace features...')",
    _INDEX_ZERO: "line {line}: feature index 0 in a one-based file (pass --zero-based)",
    _BEYOND: ("line {line}: feature index {text} is beyond the training's features "
              "(svmlight indices increase along a line, and the pre-scan reads each "
              "line's first and last; sort the line's pairs, or give --n-features)"),
    _PAIR: "line {line}: {text!r} is not 'index:value'",
    _INDEX: "line {line}: feature index {text!r} is not a non-negative integer",
    _LABEL: ("line {line}: label {text!r} is not a number "
             "(multi-label files are not supported)"),
    _HEADER: "line {line}: {text!r} is not a number (label or importance weight)",
    _SCALE: "line {line}: namespace scale {text!r} is not a number",
    _VALUE: "line {line}: feature value {text!r} is not a number",
}


cdef int _raise(const unsigned char* b, const _Error* err) except -1:
    """Raise the error ``err`` records (a ValueError naming the line)."""
    if err.what == _NO_MEMORY:
        raise MemoryError("no memory for the parsed rows")
    raise ValueError(_MESSAGES[err.what].format(line=err.line,
                                                text=_text(b, err.start, err.stop)))


cdef inline int _number(const unsigned char* b, Py_ssize_t start, Py_ssize_t stop,
                        Py_ssize_t line, int what, double* value,
                        _Error* err) noexcept nogil:
    """``value[0]`` = the number ``b[start:stop]``, else -1 (``err`` names the line)."""
    cdef bint ok
    value[0] = _parse_number(b + start, stop - start, &ok)
    if not ok:
        return <int>_fail(err, start, stop, line, what)
    return 0


cdef inline Py_ssize_t _svm_label(const unsigned char* b, Py_ssize_t p, Py_ssize_t end,
                                  Py_ssize_t line, double* label,
                                  _Error* err) noexcept nogil:
    """Read the label of the svmlight line ``b[p:end]`` into ``label[0]``.

    Returns the end of the label (> 0), 0 for a blank or a comment line, -1
    for a bad label.
    """
    cdef Py_ssize_t tok = _skip_spaces(b, p, end)
    if tok == end or b[tok] == 35:
        return 0
    p = _token_end(b, tok, end, 32)
    if _number(b, tok, p, line, _LABEL, label, err) < 0:
        return -1
    return p


cdef inline Py_ssize_t _svm_pair(const unsigned char* b, Py_ssize_t* p, Py_ssize_t end,
                                 Py_ssize_t line, int64_t* idx,
                                 _Error* err) noexcept nogil:
    """Read the next ``index:value`` pair of an svmlight line, from ``p[0]`` on.

    Returns the position of its colon (> 0; the value is then
    ``b[colon + 1:p[0]]``) with the index as written in ``idx[0]``, 0 at
    the end of the line or at a comment, -1 for a bad pair. ``qid:`` pairs
    are skipped.
    """
    cdef Py_ssize_t q = p[0], tok, colon, k
    cdef int64_t i
    while True:
        q = _skip_spaces(b, q, end)
        if q >= end or b[q] == 35:
            p[0] = q
            return 0
        tok = q
        colon = _token_end(b, q, end, 58)     # one pass: to the ':', then on
        q = _token_end(b, colon, end, 32)
        if colon == q or colon == tok:
            return _fail(err, tok, q, line, _PAIR)
        if colon - tok == 3 and b[tok] == 113 and b[tok + 1] == 105 and b[tok + 2] == 100:
            continue                    # qid:
        i = 0
        for k in range(tok, colon):
            if b[k] < 48 or b[k] > 57 or i > (<int64_t>1 << 40):
                return _fail(err, tok, colon, line, _INDEX)
            i = 10 * i + (b[k] - 48)
        idx[0] = i
        p[0] = q
        return colon


cdef inline Py_ssize_t _svm_int_pair(const unsigned char* b, Py_ssize_t* p, Py_ssize_t end,
                                     int64_t* idx, double* value) noexcept nogil:
    """The common pair, in one pass over its bytes: one space, the index's
    digits, ``:``, an integer value of at most 15 digits (exact in a double,
    as ``strtod`` gives it; hashed and binary features), then a space or the
    line's end. Returns the colon's position (> 0; ``p[0]`` after the value),
    or 0 and ``p[0]`` unchanged for ``_svm_pair`` to read whatever else is
    there (any spacing, ``qid:``, a comment, a real value, an error)."""
    cdef Py_ssize_t q = p[0], k, colon
    cdef int64_t i = 0, v = 0
    if q < end and b[q] == 32:
        q += 1
    k = q
    while k < end and 48 <= b[k] <= 57 and k - q < 12:
        i = 10 * i + (b[k] - 48)
        k += 1
    if k == q or k >= end or b[k] != 58:
        return 0
    colon = k
    k += 1
    q = k + (k < end and (b[k] == 45 or b[k] == 43))
    k = q
    while k < end and 48 <= b[k] <= 57 and k - q < 15:
        v = 10 * v + (b[k] - 48)
        k += 1
    if k == q or (k < end and not _space(b[k])):
        return 0
    idx[0] = i
    value[0] = -<double>v if b[colon + 1] == 45 else <double>v
    p[0] = k
    return colon


cdef Py_ssize_t _vw_header(const unsigned char* b, Py_ssize_t p, Py_ssize_t end,
                           Py_ssize_t line, double* label, double* weight,
                           _Error* err) noexcept nogil:
    """Read the header of the VW line ``b[p:end]`` (all before its first ``|``).

    ``label[0]`` is its first number (NaN if none), ``weight[0]`` the
    second (1 if none); further numbers are checked and ignored, tags
    (``'tag``, or a token glued to the ``|``) skipped. With ``weight`` NULL
    only the label is read. Returns the position after the ``|`` (> 0), 0
    for a blank line, -1 for a bad header.
    """
    cdef Py_ssize_t q, tok
    cdef const void* bar
    cdef int n_numbers = 0
    cdef double value
    p = _skip_spaces(b, p, end)
    if p == end:
        return 0
    bar = memchr(b + p, 124, end - p)
    if bar == NULL:
        return _fail(err, p, end, line, _NO_BAR)
    q = <const unsigned char*>bar - b
    label[0] = NAN
    if weight != NULL:
        weight[0] = 1.0
    while True:
        p = _skip_spaces(b, p, q)
        if p >= q:
            break
        tok = p
        p = _token_end(b, p, q, 32)
        if b[tok] == 39 or p == q:      # 'tag, or a tag glued to '|'
            continue
        if _number(b, tok, p, line, _HEADER, &value, err) < 0:
            return -1
        if n_numbers == 0:
            label[0] = value
        elif n_numbers == 1:
            weight[0] = value
        n_numbers += 1
        if weight == NULL:
            break
    return q + 1


cdef inline Py_ssize_t _vw_token(const unsigned char* b, Py_ssize_t* p, Py_ssize_t end,
                                 Py_ssize_t line, int what, double* value,
                                 _Error* err) noexcept nogil:
    """Read the VW token ``name[:number]`` at ``p[0]`` (a namespace or a feature).

    ``p[0]`` goes to the end of the token and ``value[0]`` is its number (1
    if none). Returns the end of the name (> 0: a token follows a ``|``),
    or -1 for a bad number.
    """
    cdef Py_ssize_t tok = p[0], colon
    p[0] = _token_end(b, tok, end, 124)
    colon = _colon(b, tok, p[0])
    value[0] = 1.0
    if colon < p[0] and _number(b, colon + 1, p[0], line, what, value, err) < 0:
        return -1
    return colon


cdef Py_ssize_t _vw_lines(const unsigned char* b, Py_ssize_t n, uint32_t mask,
                          Py_ssize_t line, double* labels, double* weights,
                          int64_t* indptr, _Out* out, _Error* err) noexcept nogil:
    """``parse_vw``'s loop over the lines of ``b[:n]``: the rows read, or -1."""
    cdef Py_ssize_t pos = 0, end, p, tok, colon, ns_start, n_rows = 0
    cdef uint32_t ns_hash
    cdef double value, scale
    while pos < n:
        end = _line_end(b, pos, n)
        line += 1
        p = _vw_header(b, pos, end, line, &labels[n_rows], &weights[n_rows], err)
        if p < 0:
            return -1
        if p > 0:
            while True:                     # a namespace: b[p - 1] == '|'
                ns_start = p
                colon = _vw_token(b, &p, end, line, _SCALE, &scale, err)
                if colon < 0:
                    return -1
                ns_hash = murmur3_32(b + ns_start, colon - ns_start, 0)
                while True:                 # its features
                    p = _skip_spaces(b, p, end)
                    if p >= end or b[p] == 124:
                        break
                    tok = p
                    colon = _vw_token(b, &p, end, line, _VALUE, &value, err)
                    if colon < 0:
                        return -1
                    if value == 0.0:
                        continue
                    if _out_push(out, <int>(murmur3_32(b + tok, colon - tok, ns_hash) & mask),
                                 value * scale, err) < 0:
                        return -1
                if p >= end:
                    break
                p += 1
            n_rows += 1
            indptr[n_rows] = out.n
        pos = end + 1
    return n_rows


cdef tuple _parse(const unsigned char[::1] buf, Py_ssize_t first_line, bint vw,
                  int hash_bits, bint zero_based, Py_ssize_t n_features,
                  bint strict_range):
    """``parse_vw`` (``vw``: labels, weights and the CSR arrays) and
    ``parse_svmlight`` (labels and the CSR arrays)."""
    cdef Py_ssize_t n = buf.shape[0], n_rows, n_lines
    cdef const unsigned char* b = &buf[0] if n > 0 else NULL
    cdef uint32_t mask = <uint32_t>((<int64_t>1 << hash_bits) - 1)
    cdef _Out out
    cdef _Error err
    with nogil:
        n_lines = _count_lines(b, n)
    # (one spare label and weight, so that the pointers are valid without lines)
    labels_a = np.empty(n_lines + 1, dtype=np.float64)
    weights_a = np.empty(n_lines + 1 if vw else 1, dtype=np.float64)
    indptr_a = np.zeros(n_lines + 1, dtype=np.int64)
    cdef double[::1] labels = labels_a, weights = weights_a
    cdef int64_t[::1] indptr = indptr_a
    # (a first capacity by the text's size; the buffers double as needed)
    if _out_init(&out, n // 4 if vw else n // 6) < 0:
        _out_free(&out)
        raise MemoryError("no memory for the parsed rows")
    try:
        with nogil:
            if vw:
                n_rows = _vw_lines(b, n, mask, first_line - 1, &labels[0], &weights[0],
                                   &indptr[0], &out, &err)
            else:
                n_rows = _svm_lines(b, n, zero_based, n_features, strict_range,
                                    first_line - 1, &labels[0], &indptr[0], &out, &err)
        if n_rows < 0:
            _raise(b, &err)
        indices, data = _out_arrays(&out)
    finally:
        _out_free(&out)
    labels_a, indptr_a = labels_a[:n_rows].copy(), indptr_a[:n_rows + 1].copy()
    if vw:
        return labels_a, weights_a[:n_rows].copy(), indptr_a, indices, data
    return labels_a, indptr_a, indices, data


def parse_vw(const unsigned char[::1] buf, int hash_bits, Py_ssize_t first_line=1):
    """Parse Vowpal Wabbit text lines into hashed CSR rows.

    A line is ``[label [importance]] ['tag]|ns[:scale] f[:v] f ... |ns2 ...``.
    Everything before the first ``|`` is the header: the first numeric
    token is the label, the second the importance weight; a token starting
    with ``'`` (or glued to the ``|``) is a tag and is ignored. A namespace
    name follows a ``|`` directly (none: the default namespace); ``:scale``
    multiplies the values of its features. Blank lines are skipped. The
    lines are read without the GIL (other threads run meanwhile).

    Parameters
    ----------
    buf : bytes-like
        Whole VW lines (the last may lack its newline).
    hash_bits : int
        Features are hashed to ``2**hash_bits`` columns (see the module
        docstring); colliding features of a row are summed later.
    first_line : int, default=1
        Line number of the first line, for the error messages.

    Returns
    -------
    labels : ndarray of shape (n_rows,)
        NaN where a row has no label.
    weights : ndarray of shape (n_rows,)
        Importance weights (1 by default).
    indptr, indices, data : ndarray
        The CSR arrays (int64, int32, float64) of the rows.

    Raises
    ------
    ValueError
        On a line without ``|``, a label, importance, value or scale that is
        not a number, naming the line.
    """
    return _parse(buf, first_line, True, hash_bits, False, 0, False)


cdef Py_ssize_t _svm_lines(const unsigned char* b, Py_ssize_t n, bint zero_based,
                           Py_ssize_t n_features, bint strict_range, Py_ssize_t line,
                           double* labels, int64_t* indptr, _Out* out,
                           _Error* err) noexcept nogil:
    """``parse_svmlight``'s loop over the lines of ``b[:n]``: the rows read, or -1."""
    cdef Py_ssize_t pos = 0, end, p, colon, n_rows = 0
    cdef int64_t idx = 0
    cdef double value
    while pos < n:
        end = _line_end(b, pos, n)
        line += 1
        p = _svm_label(b, pos, end, line, &labels[n_rows], err)
        if p < 0:
            return -1
        if p > 0:
            while True:
                colon = _svm_int_pair(b, &p, end, &idx, &value)
                if colon == 0:
                    colon = _svm_pair(b, &p, end, line, &idx, err)
                    if colon < 0:
                        return -1
                    if colon == 0:
                        break
                    if not zero_based and idx == 0:
                        return _fail(err, 0, 0, line, _INDEX_ZERO)
                    if _number(b, colon + 1, p, line, _VALUE, &value, err) < 0:
                        return -1
                if not zero_based:
                    if idx == 0:
                        return _fail(err, 0, 0, line, _INDEX_ZERO)
                    idx -= 1
                if idx >= n_features and strict_range:
                    return _fail(err, colon - _digits_before(b, colon), colon, line,
                                 _BEYOND)
                if idx >= n_features or value == 0.0:
                    continue
                if _out_push(out, <int>idx, value, err) < 0:
                    return -1
            n_rows += 1
            indptr[n_rows] = out.n
        pos = end + 1
    return n_rows


def parse_svmlight(const unsigned char[::1] buf, bint zero_based, Py_ssize_t n_features,
                   Py_ssize_t first_line=1, bint strict_range=False):
    """Parse svmlight / libsvm lines into CSR arrays.

    ``label index:value index:value ... [# comment]``; ``qid:`` pairs are
    skipped, as are comment (``#``) and blank lines (as
    ``sklearn.datasets.load_svmlight_file`` reads them). Values go through
    ``strtod``, as there. The lines are read without the GIL (other threads
    run meanwhile).

    Parameters
    ----------
    buf : bytes-like
        Whole svmlight lines (the last may lack its newline).
    zero_based : bool
        Whether the indices start at 0 (else at 1, and 0 is an error).
    n_features : int
        Columns kept: features of a larger index are dropped (a file to
        predict may have features the model never saw).
    first_line : int, default=1
        Line number of the first line, for the error messages.
    strict_range : bool, default=False
        Refuse a feature of a larger index instead of dropping it
        (training: the columns come from the pre-scan, ``scan_svmlight``).

    Returns
    -------
    labels : ndarray of shape (n_rows,)
    indptr, indices, data : ndarray
        The CSR arrays (int64, int32, float64); indices as in the file
        (sorted if the file's are).

    Raises
    ------
    ValueError
        On a label, index or value that is not a number, naming the line.
    """
    return _parse(buf, first_line, False, 0, zero_based, n_features, strict_range)


cdef Py_ssize_t _last_index(const unsigned char* b, Py_ssize_t p, Py_ssize_t end,
                            int64_t* idx) noexcept nogil:
    """The index of the last ``index:value`` pair of ``b[p:end]``, read from
    the line's end: 1 (``idx[0]`` set), 0 if no pair follows ``p``, -1 when
    the tail is not a plain pair (a comment, ``qid:``, a bad token: the
    caller reads the pairs one by one, and reports the error)."""
    cdef Py_ssize_t q = end, tok, colon, k
    cdef int64_t i = 0
    if memchr(b + p, 35, end - p) != NULL:
        return -1
    while q > p and _space(b[q - 1]):
        q -= 1
    if q == p:
        return 0
    tok = q
    while tok > p and not _space(b[tok - 1]):
        tok -= 1
    colon = _colon(b, tok, q)
    if colon == tok or colon >= q - 1 or colon - tok > 13:
        return -1
    for k in range(tok, colon):
        if b[k] < 48 or b[k] > 57:
            return -1                   # (qid: too)
        i = 10 * i + (b[k] - 48)
    idx[0] = i
    return 1


cdef Py_ssize_t _scan_lines(const unsigned char* b, Py_ssize_t n, Py_ssize_t line,
                            bint vw, bint every_pair, double* labels, int64_t* lo,
                            int64_t* hi, _Error* err) noexcept nogil:
    """``_scan``'s loop over the lines of ``b[:n]``: the rows read, or -1.

    Without ``every_pair``, an svmlight line's index range is its first and
    its last index (the format's indices increase along a line: libsvm and
    scikit-learn refuse others); the pairs between are read by the parse.
    """
    cdef Py_ssize_t pos = 0, end, p, colon, n_rows = 0, tail
    cdef int64_t idx = 0
    cdef bint tail_tried
    while pos < n:
        end = _line_end(b, pos, n)
        line += 1
        if vw:
            p = _vw_header(b, pos, end, line, &labels[n_rows], NULL, err)
        else:
            p = _svm_label(b, pos, end, line, &labels[n_rows], err)
        if p < 0:
            return -1
        if p > 0:
            n_rows += 1
            tail_tried = every_pair
            while not vw:
                colon = _svm_pair(b, &p, end, line, &idx, err)
                if colon < 0:
                    return -1
                if colon == 0:
                    break
                if lo[0] < 0 or idx < lo[0]:
                    lo[0] = idx
                if idx > hi[0]:
                    hi[0] = idx
                if not tail_tried:
                    tail_tried = True
                    tail = _last_index(b, p, end, &idx)
                    if tail == 0:
                        break
                    if tail == 1:
                        if idx > hi[0]:
                            hi[0] = idx
                        break
        pos = end + 1
    return n_rows


cdef tuple _scan(const unsigned char[::1] buf, Py_ssize_t first_line, bint vw,
                 bint every_pair):
    """``scan_svmlight`` (``vw`` false) and ``scan_vw``: labels, min and max index."""
    cdef Py_ssize_t n = buf.shape[0], n_rows, n_lines
    cdef const unsigned char* b = &buf[0] if n > 0 else NULL
    cdef int64_t lo = -1, hi = -1
    cdef _Error err
    with nogil:
        n_lines = _count_lines(b, n)
    # (one spare item, so that the pointer is valid without lines)
    labels_a = np.empty(n_lines + 1, dtype=np.float64)
    cdef double[::1] labels = labels_a
    with nogil:
        n_rows = _scan_lines(b, n, first_line - 1, vw, every_pair, &labels[0], &lo, &hi,
                             &err)
    if n_rows < 0:
        _raise(b, &err)
    return labels_a[:n_rows].copy(), lo, hi


def scan_svmlight(const unsigned char[::1] buf, Py_ssize_t first_line=1,
                  bint every_pair=False):
    """The labels and the feature-index range of svmlight lines.

    Comment lines (``#``) and blank lines are skipped, as
    ``sklearn.datasets.load_svmlight_file`` does; ``qid:`` is ignored.
    Values are not parsed (``parse_svmlight`` checks them). A line's range
    is its first and its last index: svmlight indices increase along a line
    (libsvm and ``load_svmlight_file`` refuse other lines), so the scan
    finds each line's end with ``memchr`` and reads two pairs, several
    times faster than reading them all. A parse with ``strict_range`` then
    refuses an index beyond the range, should a line break the order.

    Parameters
    ----------
    buf : bytes-like
        Whole svmlight lines, as ``parse_svmlight`` reads them.
    first_line : int, default=1
        Line number of the first line, for the error messages.
    every_pair : bool, default=False
        Read every pair of a line (the exact range of unordered lines, and
        an error for a bad pair anywhere on the line).

    Returns
    -------
    labels : ndarray of shape (n_rows,)
        The label of every row.
    min_index, max_index : int
        The smallest and largest feature index (-1 and -1 without features).

    Raises
    ------
    ValueError
        On a label or an index that is not a number, naming the line.
    """
    return _scan(buf, first_line, False, every_pair)


def scan_vw(const unsigned char[::1] buf, Py_ssize_t first_line=1):
    """The labels of Vowpal Wabbit lines (the header before the first ``|``).

    Parameters
    ----------
    buf : bytes-like
        Whole VW lines, as ``parse_vw`` reads them (only their header, up
        to the first ``|``, is read here).
    first_line : int, default=1
        Line number of the first line, for the error messages.

    Returns
    -------
    labels : ndarray of shape (n_rows,), dtype float64
        NaN where a row has no label.

    Raises
    ------
    ValueError
        As ``parse_vw`` for the header.
    """
    return _scan(buf, first_line, True, False)[0]
