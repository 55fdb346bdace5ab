# Margin losses l(p, y) with y in {-1, +1}: value, first and second derivative
# with respect to the prediction p. Multinomial log loss as free functions.

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

cdef double softmax_loss(const double* scores, int label, int n_classes,
                         double* grad) noexcept nogil
cdef void softmax_curvature(const double* proba, int n_classes, double* hess) noexcept nogil
