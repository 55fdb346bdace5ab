"""Weight vectors with the scale trick and lazy running averages.

``ScaledWeights`` keeps ``w = scale * v`` (Bottou 2012, "Stochastic gradient
descent tricks"; scikit-learn's ``WeightVector``): an L2 shrink multiplies the
scalar ``scale`` (O(1)), a loss step touches only the non-zeros of the row, and
``scale`` is folded back into ``v`` when it falls below ``1e-9``.

The running sum of iterates for averaging is kept lazily as
``S = u + C * v`` where ``C`` accumulates the scales of the counted iterates:
adding ``delta`` to ``v[j]`` subtracts ``C * delta`` from ``u[j]`` so past
iterates are unchanged, a shrink needs nothing, and counting the current
iterate is ``C += scale`` -- O(nnz) per step in all. Folding (``u += C v``,
``v *= scale``, ``C = 0``, ``scale = 1``) is the only O(n_features) operation;
with averaging it happens when the scale falls below 1e-4 (not 1e-9), which
bounds the cancellation in ``u + C v`` to about ``1e4`` ulps.

The L1 penalty is Tsuruoka, Tsujii and Ananiadou's cumulative penalty (ACL
2009): the total penalty ``u`` applied so far to a weight that was never
clipped, and per weight ``q``, the penalty actually applied; a weight is
caught up (``skso_l1_apply``: towards 0 by ``u + q`` or ``u - q``, clipped
at 0) when a step reads or writes it and, through ``l1_apply_all``, before
the full weights are read. Both are kept in the units of ``v``: a step's
penalty ``eta C`` on ``w`` is ``eta C / scale`` on ``v``, so a debt carried
by a weight shrinks with the L2 factor as the weight does, and the lazy
catch-up is the dense algorithm (every weight penalised at every step) to
rounding.
"""
import numpy as np
from libc.math cimport isfinite

cdef double SCALE_THRESHOLD = 1e-9
# With averaging, u = S - C v loses about eps / scale of relative precision to
# cancellation (v = w / scale grows as the scale falls), so fold earlier.
cdef double AVERAGED_SCALE_THRESHOLD = 1e-4


cdef double* _data(double[::1] a) noexcept:
    """The first item of ``a`` (NULL when it is empty)."""
    return &a[0] if a.shape[0] > 0 else NULL


cdef double[::1] _beside(double[::1] v, arr, str name):
    """``arr``, an array kept beside the weights ``v``, checked to have their shape."""
    cdef double[::1] a = arr
    if a.shape[0] != v.shape[0]:
        raise ValueError(f"{name} must have the shape of v")
    return a


cdef class ScaledWeights:
    """``w = scale * v`` over a flat ``(n_features * n_outputs)`` buffer.

    Parameters
    ----------
    v : ndarray of shape (n_features * n_outputs,)
        The weights, modified in place (the caller keeps ownership).
    n_outputs : int
        Weights per feature (1 for a binary model, K for a multinomial one).
    avg_sum : ndarray of the same shape, or None
        Running sum of the iterates (``u`` with ``C = 0``), modified in place;
        None disables averaging.
    n_iterates : float
        Number (total sample weight) of iterates already in ``avg_sum``.
    l1_q : ndarray of the same shape, or None
        Tsuruoka's ``q``, the L1 penalty applied to each weight so far,
        modified in place; None disables the L1 penalty.
    l1_u : float
        The total L1 penalty ``u`` so far (read back from ``l1_u`` after a
        ``fold``).
    """

    def __init__(self, double[::1] v, int n_outputs=1, avg_sum=None, double n_iterates=0.0,
                 l1_q=None, double l1_u=0.0):
        if n_outputs < 1 or v.shape[0] % n_outputs != 0:
            raise ValueError("len(v) must be a multiple of n_outputs")
        self.v_arr = v
        self.v = _data(v)
        self.n_outputs = n_outputs
        self.n_features = v.shape[0] // n_outputs
        self.scale = 1.0
        self.averaged = avg_sum is not None
        self.avg_coef = 0.0
        self.n_iterates = n_iterates
        if self.averaged:
            self.u_arr = _beside(v, avg_sum, "avg_sum")
            self.u = _data(self.u_arr)
        self.has_l1 = l1_q is not None
        self.l1_u = l1_u
        if self.has_l1:
            self.l1_q_arr = _beside(v, l1_q, "l1_q")
            self.l1_q = _data(self.l1_q_arr)

    cdef void dot(self, const double* x, const int* ind, int nnz, double* out) noexcept nogil:
        """``out[k] = sum_j x_j w[j, k]`` over the row's non-zeros."""
        cdef int i, k
        cdef int K = self.n_outputs
        cdef double s
        cdef const double* vj
        if K == 1:
            s = 0.0
            for i in range(nnz):
                s += self.v[ind[i]] * x[i]
            out[0] = s * self.scale
            return
        for k in range(K):
            out[k] = 0.0
        for i in range(nnz):
            vj = self.v + <Py_ssize_t>ind[i] * K
            for k in range(K):
                out[k] += vj[k] * x[i]
        for k in range(K):
            out[k] *= self.scale

    cdef void add(self, const double* x, const int* ind, int nnz, const double* c) noexcept nogil:
        """``w[j, k] += c[k] x_j`` over the row's non-zeros."""
        cdef int i, k
        cdef int K = self.n_outputs
        cdef Py_ssize_t p
        cdef double step, inv = 1.0 / self.scale
        for i in range(nnz):
            p = <Py_ssize_t>ind[i] * K
            for k in range(K):
                step = c[k] * x[i] * inv
                self.v[p + k] += step
                if self.averaged:
                    self.u[p + k] -= self.avg_coef * step

    cdef void shrink(self, double factor) noexcept nogil:
        """``w *= factor`` in O(1); folds when the scale gets small."""
        self.scale *= factor
        if self.scale < (AVERAGED_SCALE_THRESHOLD if self.averaged else SCALE_THRESHOLD):
            self.fold()

    cdef void fold(self) noexcept nogil:
        """Fold ``scale`` into ``v`` and ``C v`` into the running sum."""
        cdef Py_ssize_t p, n = self.n_features * self.n_outputs
        if self.averaged and self.avg_coef != 0.0:
            for p in range(n):
                self.u[p] += self.avg_coef * self.v[p]
        if self.scale != 1.0:
            for p in range(n):
                self.v[p] *= self.scale
            if self.has_l1:            # u and q are in the units of v
                for p in range(n):
                    self.l1_q[p] *= self.scale
                self.l1_u *= self.scale
        self.scale = 1.0
        self.avg_coef = 0.0

    cdef void count_iterate(self, double count) noexcept nogil:
        """Add the current ``w`` (times ``count``) to the running sum."""
        self.avg_coef += count * self.scale
        self.n_iterates += count

    cdef void reset_to_average(self) noexcept nogil:
        """``w <- the mean of the counted iterates`` (ASF's feedback, Sun et
        al. 2010, Fig. 1 and Eq. 2); nothing before the first iterate.

        With the L1 penalty the current iterate is caught up first, and the
        mean is kept on its support: a weight the penalty holds at 0 stays 0
        (the average of sparse iterates is dense; the support is the
        penalty's choice of features, the mean their values)."""
        cdef Py_ssize_t p, n = self.n_features * self.n_outputs
        cdef double inv
        if not self.averaged or self.n_iterates <= 0.0:
            return
        if self.has_l1:
            self.l1_apply_all()
        self.fold()
        inv = 1.0 / self.n_iterates
        for p in range(n):
            if not self.has_l1 or self.v[p] != 0.0:
                self.v[p] = self.u[p] * inv

    cdef double sq_norm(self) noexcept nogil:
        """``||w||^2``."""
        cdef Py_ssize_t p, n = self.n_features * self.n_outputs
        cdef double s = 0.0
        for p in range(n):
            s += self.v[p] * self.v[p]
        return s * self.scale * self.scale

    cdef void l1_add(self, double amount) noexcept nogil:
        """A step's L1 penalty, ``amount = eta C`` on ``w`` (after the step's
        shrink): ``u += amount / scale``."""
        self.l1_u += amount / self.scale

    cdef void l1_apply_all(self) noexcept nogil:
        """Catch every weight up with the L1 penalty (before the full weights
        are read: the end of a call, a feedback)."""
        cdef Py_ssize_t p, n = self.n_features * self.n_outputs
        for p in range(n):
            l1_apply_weight(self, p)

    cdef bint is_finite(self) noexcept nogil:
        cdef Py_ssize_t p, n = self.n_features * self.n_outputs
        if not isfinite(self.scale):
            return False
        for p in range(n):
            if not isfinite(self.v[p]):
                return False
        return True

    # ---- Python hooks (tests, state export) --------------------------------
    def py_dot(self, double[::1] x, int[::1] ind):
        out = np.empty(self.n_outputs)
        cdef double[::1] o = out
        self.dot(&x[0] if x.shape[0] else NULL, &ind[0] if ind.shape[0] else NULL,
                 <int>x.shape[0], &o[0])
        return out

    def py_add(self, double[::1] x, int[::1] ind, c):
        cdef double[::1] cc = np.ascontiguousarray(np.atleast_1d(c), dtype=np.float64)
        self.add(&x[0] if x.shape[0] else NULL, &ind[0] if ind.shape[0] else NULL,
                 <int>x.shape[0], &cc[0])

    def py_shrink(self, double factor):
        self.shrink(factor)

    def py_fold(self):
        self.fold()

    def py_count_iterate(self, double count=1.0):
        self.count_iterate(count)

    def py_reset_to_average(self):
        self.reset_to_average()

    def py_l1_add(self, double amount):
        self.l1_add(amount)

    def py_l1_apply(self, int[::1] ind):
        """Catch the listed features' weights up with the L1 penalty."""
        l1_apply_rows(self, &ind[0] if ind.shape[0] else NULL, <int>ind.shape[0])

    def py_l1_apply_all(self):
        self.l1_apply_all()

    def weights(self):
        """The current ``w`` as a new array of shape (n_features, n_outputs)."""
        return (np.asarray(self.v_arr) * self.scale).reshape(self.n_features, self.n_outputs)

    def average(self):
        """The mean of the counted iterates, shape (n_features, n_outputs)."""
        if not self.averaged:
            raise ValueError("averaging is off")
        if self.n_iterates == 0:
            return self.weights()
        s = np.asarray(self.u_arr) + self.avg_coef * np.asarray(self.v_arr)
        return (s / self.n_iterates).reshape(self.n_features, self.n_outputs)
