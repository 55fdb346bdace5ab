# SGD on ScaledWeights: the step-size schedules and the pass, shared by the
# linear (rows) and CRF (sequences) trainers.
from ._weights cimport ScaledWeights


cpdef enum ScheduleKind:
    CONSTANT = 0      # eta0
    OPTIMAL = 1       # 1 / (alpha (t + t0))                 (Bottou 2012)
    POWER = 2         # eta0 / (1 + alpha eta0 t)^power      (power 0.75: averaged SGD)


ctypedef struct Schedule:
    ScheduleKind kind
    double eta0
    double alpha
    double t0
    double power


cdef inline double step_size(const Schedule* s, long long t) noexcept nogil:
    """The step of update ``t`` under the schedule ``s``."""
    if s.kind == CONSTANT:
        return s.eta0
    if s.kind == OPTIMAL:
        return 1.0 / (s.alpha * (<double>t + s.t0))
    return s.eta0 / pow_(1.0 + s.alpha * s.eta0 * <double>t, s.power)


from libc.math cimport pow as pow_


cdef class SGDSteps:
    # The examples an SGD pass visits (rows or sequences, in their current
    # order) and the step on one: subclasses implement ``step``.
    cdef Py_ssize_t n_examples

    cdef bint step(self, Py_ssize_t k, ScaledWeights w, const Schedule* sched, long long t,
                   double* loss) noexcept nogil
    cdef void count_iterate(self) noexcept nogil


cdef double sgd_pass(SGDSteps steps, ScaledWeights w, const Schedule* sched,
                     long long* t) noexcept nogil
