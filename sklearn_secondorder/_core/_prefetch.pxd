# The kernels' software prefetches (_prefetch.h): macros, not functions
# (the header says why).
from ._dataset cimport RowDataset
from ._lazy_records cimport Layout


cdef extern from "_prefetch.h":
    void prefetch_read "SKSO_PREFETCH_READ"(const void* p) noexcept nogil
    void prefetch_lines "SKSO_PREFETCH_LINES"(const void* p, Py_ssize_t n) noexcept nogil
    # row k of the current order (its indices and values, label and weight)
    # and the offsets of row k + 1; called two rows ahead, the next row's
    # indices are in cache when a kernel prefetches what they point to
    void prefetch_row "SKSO_PREFETCH_ROW"(RowDataset ds, Py_ssize_t k) noexcept nogil
    # what a touch of a lazy state's block j reads (a held block's first
    # line); prefetch_fixed_block for a state without held blocks
    void prefetch_block "SKSO_PREFETCH_BLOCK"(const Layout* L, Py_ssize_t j) noexcept nogil
    void prefetch_fixed_block "SKSO_PREFETCH_FIXED_BLOCK"(const Layout* L,
                                                          Py_ssize_t j) noexcept nogil
