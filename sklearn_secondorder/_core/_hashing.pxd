# MurmurHash3_x86_32 (_hashing.pyx) for the readers that hash features in
# their nogil loops (_text_readers.parse_vw).
from libc.stdint cimport uint32_t


cdef uint32_t murmur3_32(const unsigned char* key, Py_ssize_t n,
                         uint32_t seed) noexcept nogil
