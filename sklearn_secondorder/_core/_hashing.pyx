"""MurmurHash3 for the command line's feature hashing (``sklearn_secondorder.cli``).

The hash is MurmurHash3_x86_32 (Appleby's public-domain algorithm, the one
scikit-learn's ``FeatureHasher`` and Vowpal Wabbit use), on little-endian
blocks as the reference:

``murmur3_32``
    The C function (``noexcept nogil``, declared in ``_hashing.pxd``) that
    ``_text_readers.parse_vw`` calls on every feature of its lines.
``murmurhash3_bytes``
    The hash of one ``bytes`` object, for tests and the featurizers.
``hash_strings``
    The hash of every item of a fixed-width byte array (the CoNLL column
    values and the CRF++ template features built from their hashes).
"""
import numpy as np

from libc.stdint cimport uint32_t


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
