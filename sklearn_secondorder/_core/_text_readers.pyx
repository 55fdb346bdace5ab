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
``hash_strings``
    MurmurHash3 of every item of a fixed-width byte array (the CoNLL column
    values and the CRF++ template features built from their hashes).

The hash is MurmurHash3_x86_32 (Appleby's public-domain algorithm, the one
scikit-learn's ``FeatureHasher`` and Vowpal Wabbit use). A VW feature
``name`` of namespace ``ns`` goes to column
``murmurhash3_32(name, seed=murmurhash3_32(ns, 0)) mod 2**hash_bits``
(the default namespace is the empty string).
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t, uint32_t
from libc.stdlib cimport strtod
from libc.string cimport memchr

cnp.import_array()


cdef inline uint32_t _rotl32(uint32_t x, int r) noexcept nogil:
    return (x << r) | (x >> (32 - r))


cdef uint32_t murmur3_32(const unsigned char* key, Py_ssize_t n,
                         uint32_t seed) noexcept nogil:
    """MurmurHash3_x86_32 of ``key[:n]`` (little-endian blocks, as the reference)."""
    cdef uint32_t h = seed, k
    cdef uint32_t c1 = 0xcc9e2d51U, c2 = 0x1b873593U
    cdef Py_ssize_t i, nblocks = n // 4
    cdef const unsigned char* p
    for i in range(nblocks):
        p = key + 4 * i
        k = (<uint32_t>p[0]) | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) \
            | (<uint32_t>p[3] << 24)
        k *= c1
        k = _rotl32(k, 15)
        k *= c2
        h ^= k
        h = _rotl32(h, 13)
        h = h * 5 + 0xe6546b64U
    p = key + 4 * nblocks
    k = 0
    i = n & 3
    if i == 3:
        k ^= <uint32_t>p[2] << 16
    if i >= 2:
        k ^= <uint32_t>p[1] << 8
    if i >= 1:
        k ^= <uint32_t>p[0]
        k *= c1
        k = _rotl32(k, 15)
        k *= c2
        h ^= k
    h ^= <uint32_t>n
    h ^= h >> 16
    h *= 0x85ebca6bU
    h ^= h >> 13
    h *= 0xc2b2ae35U
    h ^= h >> 16
    return h


cdef inline bint _space(unsigned char c) noexcept nogil:
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


def murmurhash3_bytes(bytes key, unsigned int seed=0):
    """MurmurHash3_x86_32 of ``key`` (unsigned), for tests and the featurizers.

    Parameters
    ----------
    key : bytes
        The bytes to hash.
    seed : int, default=0
        The hash seed.

    Returns
    -------
    h : int
        The 32-bit hash, in ``[0, 2**32)``.
    """
    return murmur3_32(<const unsigned char*>key, len(key), seed)


def hash_strings(const unsigned char[:, ::1] items, unsigned int seed=0,
                 bint stop_at_nul=True):
    """MurmurHash3 of every item of a fixed-width byte array.

    Parameters
    ----------
    items : ndarray of shape (n_items, width), dtype uint8
        A NumPy ``'S<width>'`` array viewed as bytes (each item ends at its
        first NUL), or rows of raw bytes (``stop_at_nul=False``: the whole
        row is hashed).
    seed : int, default=0
        The hash seed.
    stop_at_nul : bool, default=True
        Whether an item ends at its first NUL byte.

    Returns
    -------
    hashes : ndarray of shape (n_items,), dtype uint32
    """
    cdef Py_ssize_t n = items.shape[0], width = items.shape[1], i, length
    out = np.empty(n, dtype=np.uint32)
    cdef uint32_t[::1] h = out
    cdef const unsigned char* row
    with nogil:
        for i in range(n):
            row = &items[i, 0] if width > 0 else NULL
            length = width
            if stop_at_nul:
                length = 0
                while length < width and row[length] != 0:
                    length += 1
            h[i] = murmur3_32(row, length, seed)
    return out


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


cdef class _Growing:
    """Append-only int32 / float64 buffers (amortised doubling)."""

    cdef public object idx, val
    cdef int[::1] idx_v
    cdef double[::1] val_v
    cdef Py_ssize_t n

    def __init__(self, Py_ssize_t capacity):
        capacity = max(capacity, 16)
        self.idx = np.empty(capacity, dtype=np.int32)
        self.val = np.empty(capacity, dtype=np.float64)
        self.idx_v = self.idx
        self.val_v = self.val
        self.n = 0

    cdef void grow(self):
        cdef Py_ssize_t cap = 2 * self.idx_v.shape[0]
        self.idx = np.resize(self.idx, cap)
        self.val = np.resize(self.val, cap)
        self.idx_v = self.idx
        self.val_v = self.val


cdef Py_ssize_t _line_end(const unsigned char* buf, Py_ssize_t pos,
                          Py_ssize_t n) noexcept nogil:
    cdef const void* p = memchr(buf + pos, 10, n - pos)
    if p == NULL:
        return n
    return <const unsigned char*>p - buf


cdef double _parse_number(const unsigned char* start, Py_ssize_t length, bint* ok) noexcept:
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


def parse_vw(const unsigned char[::1] buf, int hash_bits, Py_ssize_t first_line=1):
    """Parse Vowpal Wabbit text lines into hashed CSR rows.

    A line is ``[label [importance]] ['tag]|ns[:scale] f[:v] f ... |ns2 ...``.
    Everything before the first ``|`` is the header: the first numeric
    token is the label, the second the importance weight; a token starting
    with ``'`` (or glued to the ``|``) is a tag and is ignored. A namespace
    name follows a ``|`` directly (none: the default namespace); ``:scale``
    multiplies the values of its features. Blank lines are skipped.

    Parameters
    ----------
    buf : bytes-like
        Whole lines of text (the last may lack its newline).
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
    cdef Py_ssize_t n = buf.shape[0], pos = 0, end, p, q, tok, line = first_line - 1
    cdef Py_ssize_t n_rows = 0, header_end, ns_start, ns_len, colon
    cdef const unsigned char* b = &buf[0] if n > 0 else NULL
    cdef uint32_t mask = <uint32_t>((<int64_t>1 << hash_bits) - 1), ns_hash
    cdef double value, scale
    cdef bint ok, have_label, have_weight
    cdef double label, weight
    cdef Py_ssize_t n_lines = _count_lines(b, n)
    labels_a = np.empty(n_lines, dtype=np.float64)
    weights_a = np.empty(n_lines, dtype=np.float64)
    indptr_a = np.zeros(n_lines + 1, dtype=np.int64)
    cdef double[::1] labels = labels_a, weights = weights_a
    cdef int64_t[::1] indptr = indptr_a
    cdef _Growing out = _Growing(n // 4)
    while pos < n:
        end = _line_end(b, pos, n)
        line += 1
        p = pos
        while p < end and _space(b[p]):
            p += 1
        if p == end:                       # blank line
            pos = end + 1
            continue
        # header: up to the first '|'
        q = p
        while q < end and b[q] != 124:
            q += 1
        if q == end:
            raise ValueError(f"line {line}: no '|' (a VW line is "
                             "'[label [weight]] |namespace features...')")
        header_end = q
        have_label = False
        have_weight = False
        label = float("nan")
        weight = 1.0
        while p < header_end:
            while p < header_end and _space(b[p]):
                p += 1
            if p >= header_end:
                break
            tok = p
            while p < header_end and not _space(b[p]):
                p += 1
            if b[tok] == 39 or p == header_end:   # 'tag, or a tag glued to '|'
                continue
            value = _parse_number(b + tok, p - tok, &ok)
            if not ok:
                raise ValueError(f"line {line}: "
                                 f"{bytes(buf[tok:p]).decode(errors='replace')!r} is not "
                                 "a number (label or importance weight)")
            if not have_label:
                label = value
                have_label = True
            elif not have_weight:
                weight = value
                have_weight = True
        # namespaces
        p = header_end
        while p < end:                      # b[p] == '|'
            p += 1
            ns_start = p
            while p < end and not _space(b[p]) and b[p] != 124:
                p += 1
            ns_len = p - ns_start
            scale = 1.0
            colon = ns_start
            while colon < p and b[colon] != 58:
                colon += 1
            if colon < p:
                scale = _parse_number(b + colon + 1, p - colon - 1, &ok)
                if not ok:
                    raise ValueError(f"line {line}: namespace scale "
                                     f"{bytes(buf[colon + 1:p]).decode(errors='replace')!r} "
                                     "is not a number")
                ns_len = colon - ns_start
            ns_hash = murmur3_32(b + ns_start, ns_len, 0)
            while p < end and b[p] != 124:
                while p < end and _space(b[p]):
                    p += 1
                if p >= end or b[p] == 124:
                    break
                tok = p
                while p < end and not _space(b[p]) and b[p] != 124:
                    p += 1
                colon = tok
                while colon < p and b[colon] != 58:
                    colon += 1
                value = 1.0
                if colon < p:
                    value = _parse_number(b + colon + 1, p - colon - 1, &ok)
                    if not ok:
                        raise ValueError(
                            f"line {line}: feature value "
                            f"{bytes(buf[colon + 1:p]).decode(errors='replace')!r} is not "
                            "a number")
                if value == 0.0:
                    continue
                if out.n == out.idx_v.shape[0]:
                    out.grow()
                out.idx_v[out.n] = <int>(murmur3_32(b + tok, colon - tok, ns_hash) & mask)
                out.val_v[out.n] = value * scale
                out.n += 1
        labels[n_rows] = label
        weights[n_rows] = weight
        n_rows += 1
        indptr[n_rows] = out.n
        pos = end + 1
    return (labels_a[:n_rows].copy(), weights_a[:n_rows].copy(), indptr_a[:n_rows + 1].copy(),
            out.idx[:out.n].copy(), out.val[:out.n].copy())


def parse_svmlight(const unsigned char[::1] buf, bint zero_based, Py_ssize_t n_features,
                   Py_ssize_t first_line=1):
    """Parse svmlight / libsvm lines into CSR arrays.

    ``label index:value index:value ... [# comment]``; ``qid:`` pairs are
    skipped, as are comment (``#``) and blank lines (as
    ``sklearn.datasets.load_svmlight_file`` reads them). Values go through
    ``strtod``, as there.

    Parameters
    ----------
    buf : bytes-like
        Whole lines of text.
    zero_based : bool
        Whether the indices start at 0 (else at 1, and 0 is an error).
    n_features : int
        Columns kept: features of a larger index are dropped (a file to
        predict may have features the model never saw).
    first_line : int, default=1
        Line number of the first line, for the error messages.

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
    cdef Py_ssize_t n = buf.shape[0], pos = 0, end, p, tok, line = first_line - 1
    cdef const unsigned char* b = &buf[0] if n > 0 else NULL
    cdef Py_ssize_t n_rows = 0, colon, k
    cdef int64_t idx
    cdef bint ok
    cdef double value
    cdef Py_ssize_t n_lines = _count_lines(b, n)
    labels_a = np.empty(n_lines, dtype=np.float64)
    indptr_a = np.zeros(n_lines + 1, dtype=np.int64)
    cdef double[::1] labels = labels_a
    cdef int64_t[::1] indptr = indptr_a
    cdef _Growing out = _Growing(n // 6)
    while pos < n:
        end = _line_end(b, pos, n)
        line += 1
        p = pos
        while p < end and _space(b[p]):
            p += 1
        if p == end or b[p] == 35:
            pos = end + 1
            continue
        tok = p
        while p < end and not _space(b[p]):
            p += 1
        value = _parse_number(b + tok, p - tok, &ok)
        if not ok:
            raise ValueError(f"line {line}: label "
                             f"{bytes(buf[tok:p]).decode(errors='replace')!r} is not a "
                             "number (multi-label files are not supported)")
        labels[n_rows] = value
        while p < end:
            while p < end and _space(b[p]):
                p += 1
            if p >= end or b[p] == 35:
                break
            tok = p
            while p < end and not _space(b[p]):
                p += 1
            colon = tok
            while colon < p and b[colon] != 58:
                colon += 1
            if colon == p or colon == tok:
                raise ValueError(f"line {line}: "
                                 f"{bytes(buf[tok:p]).decode(errors='replace')!r} is not "
                                 "'index:value'")
            if colon - tok == 3 and b[tok] == 113 and b[tok + 1] == 105 and b[tok + 2] == 100:
                continue                    # qid:
            idx = 0
            for k in range(tok, colon):
                if b[k] < 48 or b[k] > 57 or idx > (<int64_t>1 << 40):
                    raise ValueError(
                        f"line {line}: feature index "
                        f"{bytes(buf[tok:colon]).decode(errors='replace')!r} is not a "
                        "non-negative integer")
                idx = 10 * idx + (b[k] - 48)
            if not zero_based:
                if idx == 0:
                    raise ValueError(f"line {line}: feature index 0 in a one-based file "
                                     "(pass --zero-based)")
                idx -= 1
            value = _parse_number(b + colon + 1, p - colon - 1, &ok)
            if not ok:
                raise ValueError(f"line {line}: feature value "
                                 f"{bytes(buf[colon + 1:p]).decode(errors='replace')!r} is "
                                 "not a number")
            if idx >= n_features or value == 0.0:
                continue
            if out.n == out.idx_v.shape[0]:
                out.grow()
            out.idx_v[out.n] = <int>idx
            out.val_v[out.n] = value
            out.n += 1
        n_rows += 1
        indptr[n_rows] = out.n
        pos = end + 1
    return (labels_a[:n_rows].copy(), indptr_a[:n_rows + 1].copy(), out.idx[:out.n].copy(),
            out.val[:out.n].copy())


def scan_svmlight(const unsigned char[::1] buf, Py_ssize_t first_line=1):
    """The labels and the feature-index range of svmlight lines.

    Comment lines (``#``) and blank lines are skipped, as
    ``sklearn.datasets.load_svmlight_file`` does; ``qid:`` is ignored.
    Values are not parsed (``parse_svmlight`` checks them).

    Parameters
    ----------
    buf : bytes-like
        Whole lines of text.
    first_line : int, default=1
        Line number of the first line, for the error messages.

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
    cdef Py_ssize_t n = buf.shape[0], pos = 0, end, p, tok, line = first_line - 1
    cdef const unsigned char* b = &buf[0] if n > 0 else NULL
    cdef int64_t idx, lo = -1, hi = -1
    cdef Py_ssize_t k, colon, n_rows = 0
    cdef bint ok
    labels_a = np.empty(_count_lines(b, n), dtype=np.float64)
    cdef double[::1] labels = labels_a
    while pos < n:
        end = _line_end(b, pos, n)
        line += 1
        p = pos
        while p < end and _space(b[p]):
            p += 1
        if p == end or b[p] == 35:
            pos = end + 1
            continue
        tok = p
        while p < end and not _space(b[p]):
            p += 1
        labels[n_rows] = _parse_number(b + tok, p - tok, &ok)
        if not ok:
            raise ValueError(f"line {line}: label "
                             f"{bytes(buf[tok:p]).decode(errors='replace')!r} is not a "
                             "number (multi-label files are not supported)")
        n_rows += 1
        while p < end:
            while p < end and _space(b[p]):
                p += 1
            if p >= end or b[p] == 35:
                break
            tok = p
            while p < end and not _space(b[p]) and b[p] != 58:
                p += 1
            colon = p
            while p < end and not _space(b[p]):
                p += 1
            if colon == p or colon == tok:
                raise ValueError(f"line {line}: "
                                 f"{bytes(buf[tok:p]).decode(errors='replace')!r} is not "
                                 "'index:value'")
            if colon - tok == 3 and b[tok] == 113 and b[tok + 1] == 105 and b[tok + 2] == 100:
                continue                    # qid:
            idx = 0
            for k in range(tok, colon):
                if b[k] < 48 or b[k] > 57 or idx > (<int64_t>1 << 40):
                    raise ValueError(
                        f"line {line}: feature index "
                        f"{bytes(buf[tok:colon]).decode(errors='replace')!r} is not a "
                        "non-negative integer")
                idx = 10 * idx + (b[k] - 48)
            if lo < 0 or idx < lo:
                lo = idx
            if idx > hi:
                hi = idx
        pos = end + 1
    return labels_a[:n_rows].copy(), lo, hi


def scan_vw(const unsigned char[::1] buf, Py_ssize_t first_line=1):
    """The labels of Vowpal Wabbit lines (the header before the first ``|``).

    Parameters
    ----------
    buf : bytes-like
        Whole lines of text.
    first_line : int, default=1
        Line number of the first line, for the error messages.

    Returns
    -------
    labels : ndarray of shape (n_rows,)
        NaN where a row has no label.

    Raises
    ------
    ValueError
        As ``parse_vw`` for the header.
    """
    cdef Py_ssize_t n = buf.shape[0], pos = 0, end, p, q, tok, line = first_line - 1
    cdef const unsigned char* b = &buf[0] if n > 0 else NULL
    cdef bint ok
    cdef double label
    cdef Py_ssize_t n_rows = 0
    labels_a = np.empty(_count_lines(b, n), dtype=np.float64)
    cdef double[::1] labels = labels_a
    while pos < n:
        end = _line_end(b, pos, n)
        line += 1
        p = pos
        while p < end and _space(b[p]):
            p += 1
        if p == end:
            pos = end + 1
            continue
        q = <Py_ssize_t>(<const unsigned char*>memchr(b + p, 124, end - p) - b) \
            if memchr(b + p, 124, end - p) != NULL else end
        if q == end:
            raise ValueError(f"line {line}: no '|' (a VW line is "
                             "'[label [weight]] |namespace features...')")
        label = float("nan")
        while p < q:
            while p < q and _space(b[p]):
                p += 1
            if p >= q:
                break
            tok = p
            while p < q and not _space(b[p]):
                p += 1
            if b[tok] == 39 or p == q:
                continue
            label = _parse_number(b + tok, p - tok, &ok)
            if not ok:
                raise ValueError(f"line {line}: "
                                 f"{bytes(buf[tok:p]).decode(errors='replace')!r} is not "
                                 "a number (label or importance weight)")
            break
        labels[n_rows] = label
        n_rows += 1
        pos = end + 1
    return labels_a[:n_rows].copy()
