"""Plain SGD on the shared core: the baseline every method here is compared to.

One step on row ``x`` (label ``y``, sample weight ``s``) at counter ``t``::

    eta  = 1 / (alpha (t + t0))            # or eta0 when learning_rate='constant'
    g    = s * dloss(w.x + b, y)           # loss derivative at the current weights
    w   *= 1 - eta alpha                   # O(1) with the scale trick
    w   -= eta g x                         # O(nnz)
    b   -= eta g intercept_decay

Zero-weight rows are skipped and do not advance ``t``. With ``n_outputs = K > 1``
the loss is the multinomial log loss over K scores.
"""
from dataclasses import dataclass

import numpy as np
from libc.stdlib cimport malloc, free

from ._dataset cimport RowDataset, fetch_row
from ._losses cimport Loss, softmax_loss
from ._numeric cimport all_finite, clip_dloss
from ._weights cimport ScaledWeights

cdef inline void _sgd_step(ScaledWeights w, double* b, Loss loss, const double* x,
                           const int* ind, int nnz, double y, double sw, double eta,
                           double alpha, bint fit_intercept, double intercept_decay,
                           double* scores, double* grad) noexcept nogil:
    """One plain SGD step."""
    cdef int k, K = w.n_outputs
    cdef double factor
    w.dot(x, ind, nnz, scores)
    for k in range(K):
        scores[k] += b[k]
    if K == 1:
        grad[0] = clip_dloss(loss.dloss(scores[0], y))
    else:
        softmax_loss(scores, <int>y, K, grad)
    for k in range(K):
        grad[k] = -eta * sw * grad[k]
    factor = 1.0 - eta * alpha
    if factor < 0.0:
        factor = 0.0
    if factor != 1.0:
        w.shrink(factor)
    w.add(x, ind, nnz, grad)
    if fit_intercept:
        for k in range(K):
            b[k] += grad[k] * intercept_decay


@dataclass
class LinearSGDState:
    """A linear model's weights and SGD counters (picklable).

    Attributes
    ----------
    coef : ndarray of shape (n_features * n_outputs,)
        C-order ``(n_features, n_outputs)`` weights.
    intercept : ndarray of shape (n_outputs,)
    avg_coef, avg_intercept : ndarray or None
        Running sums of the iterates (averaged SGD).
    n_iterates : float
        Iterates in the sums.
    t : int
        Updates so far (rows with non-zero weight); the schedule continues.
    seed : int
        The shuffling RNG state.
    eta0 : float or None
        The step size in use (None until chosen).
    """

    coef: np.ndarray
    intercept: np.ndarray
    avg_coef: object = None
    avg_intercept: object = None
    n_iterates: float = 0.0
    t: int = 0
    seed: int = 1
    eta0: object = None

    @classmethod
    def zeros(cls, n_features, n_outputs, *, average, seed):
        size = n_features * n_outputs
        state = cls(coef=np.zeros(size), intercept=np.zeros(n_outputs), seed=seed)
        if average:
            state.avg_coef, state.avg_intercept = np.zeros(size), np.zeros(n_outputs)
        return state

    def model(self):
        """``(coef, intercept)``: the average of the iterates when averaging."""
        if self.avg_coef is not None and self.n_iterates > 0:
            return self.avg_coef / self.n_iterates, self.avg_intercept / self.n_iterates
        return self.coef, self.intercept


@dataclass
class LinearSGDOptions:
    """The schedule of ``sgd_epochs`` (module docstring).

    Attributes
    ----------
    alpha : float
    learning_rate : {'optimal', 'constant'}
        ``eta_t = 1 / (alpha (t + t0))`` or ``eta0``.
    eta0, t0 : float
    shuffle, fit_intercept : bool
    intercept_decay : float
    """

    alpha: float = 1e-4
    learning_rate: str = "optimal"
    eta0: float = 0.01
    t0: float = 1.0
    shuffle: bool = True
    fit_intercept: bool = True
    intercept_decay: float = 1.0


@dataclass
class SGDResult:
    """Passes completed, and whether the weights overflowed."""

    epochs: int
    diverged: bool


def sgd_epochs(RowDataset ds, state, options, *, Loss loss=None, int n_epochs=1):
    """Run ``n_epochs`` passes of plain SGD over ``ds``, updating ``state`` in place.

    Parameters
    ----------
    ds : RowDataset
    state : LinearSGDState
    options : LinearSGDOptions
    loss : Loss or None
        Binary margin loss (one output); None with several outputs selects
        the multinomial log loss, ``y`` then holding class indices.
    n_epochs : int

    Returns
    -------
    result : SGDResult
    """
    cdef int K = state.intercept.shape[0]
    if K == 1 and loss is None:
        raise ValueError("a binary loss is required when n_outputs == 1")
    if state.coef.shape[0] != ds.n_features * K:
        raise ValueError("coef/intercept shapes do not match the data")
    cdef bint averaged = state.avg_coef is not None
    cdef ScaledWeights w = ScaledWeights(state.coef, K, state.avg_coef, state.n_iterates)
    cdef double[::1] b = state.intercept
    cdef double[::1] bsum = state.avg_intercept if averaged else np.zeros(K)
    cdef bint constant = options.learning_rate == "constant"
    cdef double alpha = options.alpha, eta0 = options.eta0, t0 = options.t0
    cdef double intercept_decay = options.intercept_decay
    cdef bint shuffle = options.shuffle, fit_intercept = options.fit_intercept
    cdef double* scores = <double*>malloc(K * sizeof(double))
    cdef double* grad = <double*>malloc(K * sizeof(double))
    cdef const double* x
    cdef const int* ind
    cdef int nnz, k, _epoch, epochs_run = 0
    cdef Py_ssize_t i
    cdef double y, sw, eta
    cdef bint diverged = False
    cdef long long t = state.t
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    try:
        with nogil:
            for _epoch in range(n_epochs):
                if shuffle:
                    ds.shuffle(&rng)
                for i in range(ds.n_samples):
                    fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
                    if sw == 0.0:
                        continue
                    eta = eta0 if constant else 1.0 / (alpha * (<double>t + t0))
                    _sgd_step(w, &b[0], loss, x, ind, nnz, y, sw, eta, alpha,
                              fit_intercept, intercept_decay, scores, grad)
                    t += 1
                    if averaged:
                        w.count_iterate(1.0)
                        for k in range(K):
                            bsum[k] += b[k]
                epochs_run += 1
                if not w.is_finite() or not all_finite(&b[0], K):
                    diverged = True
                    break
            w.fold()
    finally:
        free(scores)
        free(grad)
    state.t, state.seed, state.n_iterates = t, rng, w.n_iterates
    return SGDResult(epochs=epochs_run, diverged=diverged)


def trial_pass(RowDataset ds, double[::1] coef, double[::1] intercept, *, Loss loss=None,
               int n_outputs=1, double alpha=1e-4, double eta=0.01, bint fit_intercept=True):
    """One pass with constant ``eta`` from (copies of) the weights; returns the
    regularized objective after the pass (``inf`` when it diverges).

    Used by the step-size calibration (Bottou's recipe): the arrays given are
    not modified.
    """
    cdef int K = n_outputs
    coef_c = np.array(coef, dtype=np.float64)
    intercept_c = np.array(intercept, dtype=np.float64)
    cdef double[::1] cc = coef_c
    cdef double[::1] ic = intercept_c
    cdef ScaledWeights w = ScaledWeights(cc, K)
    cdef double* scores = <double*>malloc(K * sizeof(double))
    cdef double* grad = <double*>malloc(K * sizeof(double))
    cdef const double* x
    cdef const int* ind
    cdef int nnz, k
    cdef Py_ssize_t i
    cdef double y, sw, obj = 0.0, wsum = 0.0, val
    try:
        with nogil:
            for i in range(ds.n_samples):
                fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
                if sw == 0.0:
                    continue
                _sgd_step(w, &ic[0], loss, x, ind, nnz, y, sw, eta, alpha,
                          fit_intercept, 1.0, scores, grad)
            w.fold()
            if not w.is_finite() or not all_finite(&ic[0], K):
                obj = 1e300
            else:
                for i in range(ds.n_samples):
                    fetch_row(ds, i, &x, &ind, &nnz, &y, &sw)
                    w.dot(x, ind, nnz, scores)
                    for k in range(K):
                        scores[k] += ic[k]
                    if K == 1:
                        val = loss.loss(scores[0], y)
                    else:
                        val = softmax_loss(scores, <int>y, K, grad)
                    obj += sw * val
                    wsum += sw
                if wsum > 0:
                    obj /= wsum
    finally:
        free(scores)
        free(grad)
    if obj >= 1e300 or not np.isfinite(obj):
        return np.inf
    return obj + 0.5 * alpha * float(np.dot(coef_c, coef_c))
