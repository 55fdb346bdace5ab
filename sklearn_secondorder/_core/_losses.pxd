# Losses l(p, y) of a prediction p: the margin losses (y in {-1, +1}) and the
# regression losses (y real): value, first and second derivative with respect
# to p. Multinomial log loss as free functions.

cdef class Loss:
    cdef double loss(self, double p, double y) noexcept nogil
    cdef double dloss(self, double p, double y) noexcept nogil
    cdef double curvature(self, double p, double y) noexcept nogil

cdef class LogLoss(Loss):
    pass

cdef class Hinge(Loss):
    pass

cdef class SquaredHinge(Loss):
    pass

cdef class ModifiedHuber(Loss):
    pass

cdef class SquaredError(Loss):
    pass

cdef class EpsilonLoss(Loss):
    # a regression loss with a threshold in the target's units
    cdef readonly double epsilon

cdef class Huber(EpsilonLoss):
    pass

cdef class EpsilonInsensitive(EpsilonLoss):
    pass

cdef class SquaredEpsilonInsensitive(EpsilonLoss):
    pass

cdef class Quantile(Loss):
    cdef readonly double quantile

cdef double softmax_loss(const double* scores, int label, int n_classes,
                         double* grad) noexcept nogil
cdef void softmax_curvature(const double* proba, int n_classes, double* hess) noexcept nogil
