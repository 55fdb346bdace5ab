# The specialisation of a lazy kernel's passes, picked once per call.
#
# Included (not cimported) by each module of passes on the lazy core
# (_psa_fast, _crf_psa, _lazy_steps), because what it calls is the
# module's own: the module defines, before the include, a cdef class
# `KernelJob` (what its passes need) and, anywhere, the fused function
#
#     cdef long long run_specialised(KernelJob job, const Penalty* pen,
#                                    const RateRule* rule) noexcept nogil
#
# and every entry point of its passes calls `run_picked`, which calls the
# specialisation that the call's constants choose: the L1 penalty or not
# (`LazyCore.with_l1`) and the rate rule (`LazyCore.series`), both decided
# by `make_core`. This is the one place where those choices become types,
# so a kernel cannot lose a specialisation in one of its entry points.


cdef long long run_picked(KernelJob job, const LazyCore* c) noexcept nogil:
    """``run_specialised(job, ...)`` for ``c``'s penalty and rate rule."""
    cdef L2Only plain
    cdef WithL1 with_l1
    if c.with_l1:
        return _pick_rate(job, c, &with_l1)
    return _pick_rate(job, c, &plain)


cdef inline long long _pick_rate(KernelJob job, const LazyCore* c,
                                 const Penalty* pen) noexcept nogil:
    """``run_picked`` for one penalty: the rate rule."""
    cdef SeriesRate series
    cdef Log1pRate general
    if c.series:
        return run_specialised(job, pen, &series)
    return run_specialised(job, pen, &general)
