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
"""
import numpy as np
from libc.math cimport isfinite

cdef double SCALE_THRESHOLD = 1e-9
# With averaging, u = S - C v loses about eps / scale of relative precision to
# cancellation (v = w / scale grows as the scale falls), so fold earlier.
cdef double AVERAGED_SCALE_THRESHOLD = 1e-4


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
    """

    def __init__(self, double[::1] v, int n_outputs=1, avg_sum=None, double n_iterates=0.0):
        if n_outputs < 1 or v.shape[0] % n_outputs != 0:
            raise ValueError("len(v) must be a multiple of n_outputs")
        self.v_arr = v
        self.v = &v[0] if v.shape[0] > 0 else NULL
        self.n_outputs = n_outputs
        self.n_features = v.shape[0] // n_outputs
        self.scale = 1.0
        self.averaged = avg_sum is not None
        self.avg_coef = 0.0
        self.n_iterates = n_iterates
        if self.averaged:
            self.u_arr = avg_sum
            if self.u_arr.shape[0] != v.shape[0]:
                raise ValueError("avg_sum must have the shape of v")
            self.u = &self.u_arr[0] if v.shape[0] > 0 else NULL

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
        self.scale = 1.0
        self.avg_coef = 0.0

    cdef void count_iterate(self, double count) noexcept nogil:
        """Add the current ``w`` (times ``count``) to the running sum."""
        self.avg_coef += count * self.scale
        self.n_iterates += count

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
