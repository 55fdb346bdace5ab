# Small numeric helpers shared by the epoch kernels (inline, no module needed).
from libc.math cimport isfinite


cdef inline double clip_dloss(double g) noexcept nogil:
    """``g`` clipped to [-1e12, 1e12]."""
    if g > 1e12:
        return 1e12
    if g < -1e12:
        return -1e12
    return g


cdef inline bint all_finite(const double* a, Py_ssize_t n) noexcept nogil:
    """Whether the ``n`` values at ``a`` are all finite (the divergence check)."""
    cdef Py_ssize_t i
    for i in range(n):
        if not isfinite(a[i]):
            return False
    return True


from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC


cdef inline double now_seconds() noexcept nogil:
    """Monotonic clock in seconds (the trainers' per-pass timings)."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + 1e-9 * <double>ts.tv_nsec
