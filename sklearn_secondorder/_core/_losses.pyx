"""Losses with value, first derivative and curvature (second derivative).

Binary margin losses take the prediction ``p = w.x + b`` and a label
``y in {-1, +1}``; regression losses take a real target ``y``. ``dloss``
is ``d loss / d p`` (sign included) and ``curvature`` is ``d^2 loss / d
p^2`` where it exists (0 on the flat parts; the hinge has curvature 0
everywhere it is differentiable). The kernels read only ``dloss``: a
regressor's pass is a binary classifier's pass with another loss.

The regression losses are scikit-learn's ``SGDRegressor`` ones
(``sklearn/linear_model/_sgd_fast.pyx.tp``), with the residual ``r = p - y``:

- ``squared_error``: ``r^2 / 2``;
- ``huber``: ``r^2 / 2`` for ``|r| <= epsilon``, else ``epsilon |r| -
  epsilon^2 / 2``;
- ``epsilon_insensitive``: ``max(0, |r| - epsilon)``;
- ``squared_epsilon_insensitive``: ``max(0, |r| - epsilon)^2``;

and Vowpal Wabbit's quantile (pinball) loss, ``tau (y - p)`` for ``y >= p``,
else ``(1 - tau) (p - y)``, whose minimiser is the ``tau``-quantile of ``y``
(``tau = 0.5``: half the absolute error, the median).
"""
import numpy as np
from libc.math cimport exp, fabs, log, log1p


cdef inline double _log1pexp(double z) noexcept nogil:
    """log(1 + exp(z)) without overflow."""
    if z > 18.0:
        return z + exp(-z)
    if z < -18.0:
        return exp(z)
    return log1p(exp(z))


cdef inline double _sigmoid(double z) noexcept nogil:
    cdef double e
    if z >= 0:
        return 1.0 / (1.0 + exp(-z))
    e = exp(z)
    return e / (1.0 + e)


cdef class Loss:
    """Base class: subclasses implement ``loss``, ``dloss`` and ``curvature``."""

    cdef double loss(self, double p, double y) noexcept nogil:
        return 0.0

    cdef double dloss(self, double p, double y) noexcept nogil:
        return 0.0

    cdef double curvature(self, double p, double y) noexcept nogil:
        return 0.0

    def py_loss(self, double p, double y):
        return self.loss(p, y)

    def py_dloss(self, double p, double y):
        return self.dloss(p, y)

    def py_curvature(self, double p, double y):
        return self.curvature(p, y)

    def __reduce__(self):
        return (type(self), ())


cdef class LogLoss(Loss):
    """Logistic loss ``log(1 + exp(-y p))``."""

    cdef double loss(self, double p, double y) noexcept nogil:
        return _log1pexp(-y * p)

    cdef double dloss(self, double p, double y) noexcept nogil:
        return -y * _sigmoid(-y * p)

    cdef double curvature(self, double p, double y) noexcept nogil:
        cdef double s = _sigmoid(p)
        return s * (1.0 - s)


cdef class Hinge(Loss):
    """Hinge loss ``max(0, 1 - y p)``."""

    cdef double loss(self, double p, double y) noexcept nogil:
        cdef double z = 1.0 - y * p
        return z if z > 0.0 else 0.0

    cdef double dloss(self, double p, double y) noexcept nogil:
        return -y if y * p < 1.0 else 0.0

    cdef double curvature(self, double p, double y) noexcept nogil:
        return 0.0


cdef class SquaredHinge(Loss):
    """Squared hinge loss ``max(0, 1 - y p)^2`` (the SGD-QN and PSA papers' L2-SVM)."""

    cdef double loss(self, double p, double y) noexcept nogil:
        cdef double z = 1.0 - y * p
        return z * z if z > 0.0 else 0.0

    cdef double dloss(self, double p, double y) noexcept nogil:
        cdef double z = 1.0 - y * p
        return -2.0 * y * z if z > 0.0 else 0.0

    cdef double curvature(self, double p, double y) noexcept nogil:
        return 2.0 if y * p < 1.0 else 0.0


cdef class ModifiedHuber(Loss):
    """Modified Huber: ``max(0, 1 - y p)^2`` for ``y p >= -1``, else ``-4 y p``."""

    cdef double loss(self, double p, double y) noexcept nogil:
        cdef double z = y * p
        if z >= 1.0:
            return 0.0
        if z >= -1.0:
            return (1.0 - z) * (1.0 - z)
        return -4.0 * z

    cdef double dloss(self, double p, double y) noexcept nogil:
        cdef double z = y * p
        if z >= 1.0:
            return 0.0
        if z >= -1.0:
            return -2.0 * y * (1.0 - z)
        return -4.0 * y

    cdef double curvature(self, double p, double y) noexcept nogil:
        cdef double z = y * p
        return 2.0 if (-1.0 <= z < 1.0) else 0.0


LOSSES = {
    "log_loss": LogLoss,
    "hinge": Hinge,
    "squared_hinge": SquaredHinge,
    "modified_huber": ModifiedHuber,
}


cdef class SquaredError(Loss):
    """Squared error ``(p - y)^2 / 2``."""

    cdef double loss(self, double p, double y) noexcept nogil:
        return 0.5 * (p - y) * (p - y)

    cdef double dloss(self, double p, double y) noexcept nogil:
        return p - y

    cdef double curvature(self, double p, double y) noexcept nogil:
        return 1.0


cdef class EpsilonLoss(Loss):
    """Base of the losses with a threshold ``epsilon`` (the target's units)."""

    def __init__(self, double epsilon=0.1):
        self.epsilon = epsilon

    def __reduce__(self):
        return (type(self), (self.epsilon,))


cdef class Huber(EpsilonLoss):
    """Huber: ``r^2 / 2`` for ``|r| <= epsilon``, else ``epsilon |r| - epsilon^2 / 2``."""

    cdef double loss(self, double p, double y) noexcept nogil:
        cdef double r = p - y, a = fabs(r)
        if a <= self.epsilon:
            return 0.5 * r * r
        return self.epsilon * a - 0.5 * self.epsilon * self.epsilon

    cdef double dloss(self, double p, double y) noexcept nogil:
        cdef double r = p - y
        if r > self.epsilon:
            return self.epsilon
        if r < -self.epsilon:
            return -self.epsilon
        return r

    cdef double curvature(self, double p, double y) noexcept nogil:
        return 1.0 if fabs(p - y) <= self.epsilon else 0.0


cdef class EpsilonInsensitive(EpsilonLoss):
    """``max(0, |p - y| - epsilon)`` (the SVR loss)."""

    cdef double loss(self, double p, double y) noexcept nogil:
        cdef double z = fabs(p - y) - self.epsilon
        return z if z > 0.0 else 0.0

    cdef double dloss(self, double p, double y) noexcept nogil:
        cdef double r = p - y
        if r > self.epsilon:
            return 1.0
        if r < -self.epsilon:
            return -1.0
        return 0.0


cdef class SquaredEpsilonInsensitive(EpsilonLoss):
    """``max(0, |p - y| - epsilon)^2``."""

    cdef double loss(self, double p, double y) noexcept nogil:
        cdef double z = fabs(p - y) - self.epsilon
        return z * z if z > 0.0 else 0.0

    cdef double dloss(self, double p, double y) noexcept nogil:
        cdef double r = p - y
        if r > self.epsilon:
            return 2.0 * (r - self.epsilon)
        if r < -self.epsilon:
            return 2.0 * (r + self.epsilon)
        return 0.0

    cdef double curvature(self, double p, double y) noexcept nogil:
        return 2.0 if fabs(p - y) > self.epsilon else 0.0


cdef class Quantile(Loss):
    """Pinball loss: ``tau (y - p)`` for ``y >= p``, else ``(1 - tau) (p - y)``."""

    def __init__(self, double quantile=0.5):
        self.quantile = quantile

    cdef double loss(self, double p, double y) noexcept nogil:
        cdef double r = y - p
        return self.quantile * r if r >= 0.0 else (self.quantile - 1.0) * r

    cdef double dloss(self, double p, double y) noexcept nogil:
        # (0 at the kink, as Vowpal Wabbit's: a row predicted exactly moves nothing)
        if y > p:
            return -self.quantile
        if y < p:
            return 1.0 - self.quantile
        return 0.0

    def __reduce__(self):
        return (type(self), (self.quantile,))


#: The regression losses by ``SGDRegressor``'s names; each takes its one
#: parameter (``epsilon``, or ``quantile`` for the pinball loss), if any.
REGRESSION_LOSSES = {
    "squared_error": SquaredError,
    "huber": Huber,
    "epsilon_insensitive": EpsilonInsensitive,
    "squared_epsilon_insensitive": SquaredEpsilonInsensitive,
    "quantile": Quantile,
}


cdef double softmax_loss(const double* scores, int label, int n_classes,
                         double* grad) noexcept nogil:
    """Multinomial log loss ``logsumexp(s) - s[label]``; ``grad = softmax(s) - e_label``."""
    cdef int k
    cdef double m = scores[0], z = 0.0
    for k in range(1, n_classes):
        if scores[k] > m:
            m = scores[k]
    for k in range(n_classes):
        grad[k] = exp(scores[k] - m)
        z += grad[k]
    for k in range(n_classes):
        grad[k] /= z
    grad[label] -= 1.0
    return m + log(z) - scores[label]


cdef void softmax_curvature(const double* proba, int n_classes, double* hess) noexcept nogil:
    """Hessian of the multinomial log loss in the scores: ``diag(p) - p p^T``."""
    cdef int a, b
    for a in range(n_classes):
        for b in range(n_classes):
            hess[a * n_classes + b] = -proba[a] * proba[b]
        hess[a * n_classes + a] += proba[a]


def py_softmax_loss(double[::1] scores, int label):
    """Multinomial log loss and its gradient in the scores (test hook)."""
    cdef double[::1] grad = np.empty(scores.shape[0])
    cdef double val = softmax_loss(&scores[0], label, <int>scores.shape[0], &grad[0])
    return val, np.asarray(grad)


def py_softmax_curvature(double[::1] proba):
    """``diag(p) - p p^T`` (test hook)."""
    cdef int K = <int>proba.shape[0]
    cdef double[::1] hess = np.empty(K * K)
    softmax_curvature(&proba[0], K, &hess[0])
    return np.asarray(hess).reshape(K, K)
