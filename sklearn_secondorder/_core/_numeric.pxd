# Small numeric helpers shared by the epoch kernels (inline, no module needed).
from libc.math cimport fabs, isfinite


cdef inline double clip_dloss(double g) noexcept nogil:
    """``g`` clipped to [-1e12, 1e12]."""
    if g > 1e12:
        return 1e12
    if g < -1e12:
        return -1e12
    return g


cdef inline void bound_step(double* grad, double p, double y, double h) noexcept nogil:
    """A regression step that moves the row's prediction ``p`` by ``h grad``
    moves it at most to the target ``y``: ``grad`` becomes ``(p - y) / h``
    when ``h |grad| > |p - y|`` (``h``: how far the step moves ``p`` per unit
    of ``grad``, the row's step-weighted squared norm ``sum_j eta_j x_j^2``
    with the intercept's ``eta``, and the sample weight where ``grad`` leaves
    it out). For the squared loss that is the normalised LMS step (the row's
    own loss minimised along the step) once ``h > 1``; it keeps a row with
    features far outside their usual range (an outlier) from throwing the
    weights off. The regression losses' derivatives have the sign of ``p -
    y``, so the bound only shortens the step."""
    cdef double r = p - y
    if h * fabs(grad[0]) > fabs(r):
        grad[0] = r / h


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
