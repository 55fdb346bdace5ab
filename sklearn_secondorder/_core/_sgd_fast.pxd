# SGD on ScaledWeights: the step-size schedules and the pass, shared by the
# linear (rows) and CRF (sequences) trainers.
cimport cython

from ._crf_infer cimport CRFContext
from ._dataset cimport SequenceData
from ._weights cimport ScaledWeights


cpdef enum ScheduleKind:
    CONSTANT = 0      # eta0
    OPTIMAL = 1       # 1 / (alpha (t + t0))                 (Bottou 2012)
    # (alpha: the whole penalty strength, lam + l1)
    POWER = 2         # eta0 / (1 + alpha eta0 t)^power      (power 0.75: averaged SGD)
    INVSCALING = 3    # eta0 / (t + 1)^power                 (scikit-learn's 'invscaling')


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
    if s.kind == INVSCALING:
        return s.eta0 / pow_(<double>t + 1.0, s.power)
    return s.eta0 / pow_(1.0 + s.alpha * s.eta0 * <double>t, s.power)


from libc.math cimport pow as pow_


@cython.final
cdef class SequenceSteps:
    # SGD steps on the sequences of a SequenceData (a linear-chain CRF)
    cdef Py_ssize_t n_examples
    cdef SequenceData ds
    cdef CRFContext ctx
    cdef bint fit_intercept
    cdef double lam, l1          # the L2 strength (the shrink's); the L1 strength C (0: none)

    cdef bint step(self, Py_ssize_t k, ScaledWeights w, const Schedule* sched, long long t,
                   double* loss) noexcept nogil
    cdef void count_iterate(self) noexcept nogil


cdef double sgd_pass_sequences(SequenceSteps steps, ScaledWeights w, const Schedule* sched,
                               long long* t) noexcept nogil
