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
from dataclasses import dataclass, field

cimport cython
import numpy as np
from libc.math cimport fabs, isfinite

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
        self.has_l1 = l1_q is not None
        self.l1_u = l1_u
        if self.has_l1:
            self.l1_q_arr = l1_q
            if self.l1_q_arr.shape[0] != v.shape[0]:
                raise ValueError("l1_q must have the shape of v")
            self.l1_q = &self.l1_q_arr[0] if v.shape[0] > 0 else NULL

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


from libc.math cimport log, expm1
from libc.stdlib cimport malloc, calloc, free


cdef extern from "_sweep_k1.h":
    void sweep_mid_k1 "skso_sweep_mid_k1"(
        double* ve, double* snaps, long long* last, long long* next_event,
        Py_ssize_t n, long long ev, long long b, double lam,
        Py_ssize_t unregularized) noexcept nogil
    long long sweep_end_k1 "skso_sweep_end_k1"(
        double* ve, double* snaps, long long* last, long long* next_event,
        Py_ssize_t n, long long ev, long long b, double lam, Py_ssize_t unregularized,
        double m, double kappa,
        double inv_denom, double f_lo, double f_hi, double* f_min,
        double* f_max) noexcept nogil


@dataclass
class PSAOptions:
    """The constants of a ``LazyStepWeights``: the L2 strength and PSA's
    (Hsu et al., Algorithm 1; ``period = 0`` turns adaptation off).

    Attributes
    ----------
    lam : float
        L2 strength (scikit-learn's ``alpha``).
    period : int
        ``b``: events at every multiple of ``b``, adaptation every ``2b``.
    psa_alpha, psa_beta, kappa : float
        The paper's (alpha, beta, kappa) (Eqs. 7-10).
    l1 : float
        L1 strength ``C`` (``alpha l1_ratio``): Tsuruoka et al.'s cumulative
        penalty, each weight owed ``C`` times the sum of its own steps (the
        state needs its ``l1`` array).
    """

    lam: float = 0.0
    period: int = 0
    psa_alpha: float = 0.9999
    psa_beta: float = 0.99
    kappa: float = 0.9
    l1: float = 0.0


@dataclass
class LazyStepState:
    """The arrays behind a ``LazyStepWeights`` and the pass state (picklable).

    ``n_blocks`` blocks of ``n_outputs`` weights; a block's weights share
    their touch time.

    Attributes
    ----------
    ve : ndarray of shape (n_blocks * n_outputs, 2)
        Weights (column 0) and their step sizes (column 1), interleaved so
        that the common path reads both from one cache line.
    snaps : ndarray of shape (n_blocks * n_outputs, 2)
        The window-start and mid-window snapshots.
    times : int64 ndarray of shape (n_blocks, 2)
        Per block the time it is current at (column 0, ``last``) and its next
        pending event (column 1, ``next_event``), interleaved so that a touch
        reads both from one cache line.
    n_outputs : int
    t : int
        Updates so far (the events are aligned on it).
    seed : int
        The shuffling RNG state.
    eta0 : float
        The initial step size of every weight.
    l1 : ndarray of shape (n_blocks * n_outputs, 2) or None
        With the L1 penalty: what each weight is owed, ``(u + q, u - q)``
        (Tsuruoka et al.'s total ``u`` of the weight's own steps and ``q``,
        the penalty applied to it), in the weight's units; both ``>= 0``, the
        side matching the weight's sign 0 once it is caught up.
    """

    ve: np.ndarray
    snaps: np.ndarray
    times: np.ndarray
    n_outputs: int
    t: int = 0
    seed: int = 1
    eta0: float = 0.0
    l1: object = None

    @classmethod
    def zeros(cls, n_blocks, n_outputs, eta0, seed=1, l1=False):
        """Zero weights, every step size ``eta0``, every block current at 0
        (and nothing owed when ``l1``)."""
        size = n_blocks * n_outputs
        ve = np.zeros((size, 2))
        ve[:, 1] = eta0
        # (np.full, not np.zeros: the pages are written now, not at first use)
        return cls(ve=ve, snaps=np.full((size, 2), 0.0),
                   times=np.zeros((n_blocks, 2), dtype=np.int64),
                   n_outputs=n_outputs, seed=seed, eta0=float(eta0),
                   l1=np.full((size, 2), 0.0) if l1 else None)

    @property
    def last(self):
        """The time each block is current at, a view of ``times``."""
        return self.times[:, 0]

    @property
    def next_event(self):
        """Each block's next pending event, a view of ``times``."""
        return self.times[:, 1]

    def __setstate__(self, state):
        if "times" not in state:           # (a state pickled before ``times``)
            state = dict(state)
            state["times"] = np.column_stack([state.pop("last"), state.pop("next_event")])
        self.__dict__.update(state)

    @property
    def weights(self):
        """The weights, a flat view (current at ``t`` after a pass)."""
        return self.ve[:, 0]

    @property
    def step_sizes(self):
        """The per-weight step sizes, a flat view."""
        return self.ve[:, 1]

    def insert_blocks(self, at, n_new, period):
        """Insert ``n_new`` blocks before block ``at`` (new attributes).

        Weights that did not exist were 0 all along: their step size is
        ``eta0`` (0/0 keeps it), they are current at ``t``, and their next
        event is the first multiple of ``period`` after ``t``, as every block's.
        """
        K, cut = self.n_outputs, at * self.n_outputs
        new_ve = np.zeros((n_new * K, 2))
        new_ve[:, 1] = self.eta0
        self.ve = np.concatenate([self.ve[:cut], new_ve, self.ve[cut:]])
        self.snaps = np.concatenate([self.snaps[:cut], np.zeros((n_new * K, 2)),
                                     self.snaps[cut:]])
        if self.l1 is not None:            # (0 all along: nothing to clip, nothing owed)
            self.l1 = np.concatenate([self.l1[:cut], np.zeros((n_new * K, 2)),
                                      self.l1[cut:]])
        new_times = np.empty((n_new, 2), dtype=np.int64)
        new_times[:, 0] = self.t
        new_times[:, 1] = (self.t // period + 1) * period
        self.times = np.concatenate([self.times[:at], new_times, self.times[at:]])

    def writable(self):
        """Make every array C-contiguous and writable (after unpickling)."""
        for name in ("ve", "snaps", "times", "l1"):
            if getattr(self, name) is not None:
                setattr(self, name, np.require(getattr(self, name), requirements=["C", "W"]))


@dataclass
class PSAResult:
    """What a PSA kernel reports about its passes.

    Attributes
    ----------
    epochs : int
        Passes completed.
    diverged : bool
        The weights overflowed (non-finite values).
    min_factor, max_factor : float
        The extreme step-size factors applied so far (Eq. 9).
    n_adaptations : int
        Step-size adaptations applied so far.
    mean_loss : float
        Mean loss over the last pass, at the pre-step weights (NaN when the
        kernel does not track it).
    seconds : list of float
        Wall time of each pass.
    flush_seconds : list of float
        Of which the end-of-pass catch-up of every block.
    """

    epochs: int
    diverged: bool
    min_factor: float
    max_factor: float
    n_adaptations: int
    mean_loss: float = float("nan")
    seconds: list = field(default_factory=list)
    flush_seconds: list = field(default_factory=list)

    @classmethod
    def of(cls, w, epochs, diverged, **kw):
        """The result of the passes made on ``w``."""
        return cls(epochs=epochs, diverged=diverged, min_factor=w.min_factor,
                   max_factor=w.max_factor, n_adaptations=w.n_adaptations, **kw)


@cython.final
cdef class LazyStepWeights:
    """Weights with per-coordinate step sizes and lazy L2 decay (PSA's state).

    Dense semantics being reproduced, for every step ``t`` (one update)::

        theta_p(t+1) = (1 - eta_p lam) theta_p(t) - eta_p g_p(t)
        if (t + 1) mod 2b == 0:                     # Algorithm 1, lines 6-10
            gamma_p = (theta_p(t+1) - theta_p(t+1-b)) / (theta_p(t+1-b) - theta_p(t+1-2b))
            u_p = sign(gamma_p) min(|gamma_p|, kappa)              # Eq. (7)
            eta_p *= (m + u_p) / (m + kappa + n)                   # Eqs. (8)-(9)

    with ``m = kappa (alpha+beta)/(alpha-beta)`` and
    ``n = 2 kappa (1-alpha)/(alpha-beta)`` (Eq. 10), so the factor lies in
    ``[beta, alpha]``. ``g_p`` is non-zero only on the coordinates of the
    current row, so the others are caught up when next touched or read:

    - between events, ``eta_p`` is constant, so ``k`` untouched steps are one
      ``(1 - eta_p lam)^k``;
    - the snapshots ``theta(t)``, ``theta(t+b)`` of the window a coordinate
      was last touched in are recorded at the event times as it is caught up,
      so its window-end adaptation is the dense one;
    - whole untouched windows: a zero coordinate has ``0/0`` and keeps its
      step (decision of algorithms.md); a non-zero one moved only by the
      shrink, whose ratio is ``(1 - eta_p lam)^b``. When that is ``>= kappa``
      the clipped factor is ``alpha`` for this and every later window (eta
      only decreases), so ``k`` windows are ``eta_p *= alpha^k`` and a decay
      ``prod_i (1 - eta_p alpha^i lam)^(2b)``, summed as a convergent series
      in ``eta_p lam`` (O(1) per coordinate); otherwise the windows are
      replayed one by one (the same arithmetic as the dense path).

    Each weight caches its decay log-rate ``log(1 - eta_p lam)`` (``log_decay``),
    updated with ``eta_p``, so a decay is one ``decay_factor``; when every
    ``eta_p lam < 1e-4`` and there is no L1 the rate is the series of
    ``eta_p lam`` and is derived from eta instead (``rate_from_eta``). ``sweep``
    applies one event to a list of blocks at once (the kernel's eager path for
    the blocks in use; the same arithmetic as ``catch_up``). Multi-output
    blocks then run a catch-up's events as vector loops over their weights
    (``row_events``, ``_catch_up_rows``; the same bits).

    ``period = 0`` turns adaptation off (fixed per-coordinate steps, lazy decay).

    The L1 penalty (``options.l1 = C > 0``) is Tsuruoka et al.'s cumulative
    penalty with each weight's own steps: dense, every step adds ``eta_p C``
    to the weight's total ``u_p`` and clips it (``skso_l1_apply``), the L2
    decay shrinking ``u_p`` and ``q_p`` with the weight. Untouched for ``k``
    steps at a constant ``eta_p`` that is ``C/lam (1 - (1 - eta_p lam)^k)``
    (``decay_weight_l1``), applied with the decay wherever the decay is
    (catch-up, events, whole idle windows: ``_skip_param_l1``). The lazy and
    dense weights agree to rounding, snapshots and adaptation included. The
    vectorised sweeps of ``_sweep_k1.h`` and ``sweep`` carry no L1: kernels
    with the L1 penalty use the lazy schedule.

    Parameters
    ----------
    state : LazyStepState
        The arrays (weights and step sizes, snapshots, times), modified in
        place.
    options : PSAOptions or None
        L2 strength and PSA's constants; None: no L2, no adaptation.
    unregularized : int
        Index of a block without L2 (the intercept), or -1.
    """

    def __init__(self, state, options=None, Py_ssize_t unregularized=-1):
        if options is None:
            options = PSAOptions()
        cdef double[:, ::1] ve = state.ve
        cdef double[:, ::1] snaps = state.snaps
        cdef long long[:, ::1] times = state.times
        cdef int n_outputs = state.n_outputs
        cdef double lam = options.lam
        cdef long long period = options.period
        cdef double psa_alpha = options.psa_alpha, psa_beta = options.psa_beta
        cdef double kappa = options.kappa
        cdef Py_ssize_t size = ve.shape[0]
        cdef int mm
        cdef double[:, ::1] l1_view
        if (ve.shape[1] != 2 or snaps.shape[0] != size or snaps.shape[1] != 2
                or size != times.shape[0] * n_outputs or times.shape[1] != 2):
            raise ValueError("inconsistent LazyStepWeights array sizes")
        if period > 0 and not (0 < psa_beta < psa_alpha < 1 and 0 < kappa < 1):
            raise ValueError("PSA needs 0 < beta < alpha < 1 and 0 < kappa < 1")
        self._arrays = (ve, snaps, times)  # keep them alive
        # interleaved storage: the common path (catch-up without events, the
        # step) reads v and eta from the same cache lines
        self.v = &ve[0, 0]
        self.eta = &ve[0, 1]
        self.snap0 = &snaps[0, 0]
        self.snap1 = &snaps[0, 1]
        self.last = &times[0, 0]
        self.next_event = &times[0, 1]
        self.n_blocks = times.shape[0]
        self.n_outputs = n_outputs
        self.lam = lam
        self.period = period
        self.psa_alpha, self.psa_beta, self.kappa = psa_alpha, psa_beta, kappa
        if period > 0:
            self.m = kappa * (psa_alpha + psa_beta) / (psa_alpha - psa_beta)        # Eq. (10)
            self.n = 2.0 * kappa * (1.0 - psa_alpha) / (psa_alpha - psa_beta)
            self.consts.m = self.m
            self.consts.kappa = kappa
            self.consts.inv_denom = 1.0 / (self.m + kappa + self.n)
            self.consts.f_lo = psa_beta
            self.consts.f_hi = psa_alpha
            self.factor_hi = psa_alpha        # the factor at u = kappa
            self.log_alpha = log(psa_alpha)
            # (1 - eta lam)^b >= kappa  <=>  eta <= eta_clip: the clipped regime
            self.eta_clip = -expm1(log(kappa) / period) / lam if lam > 0 else 0.0
            for mm in range(1, 37):
                self.geo_den[mm] = expm1(mm * self.log_alpha)   # alpha^m - 1
        self.unregularized = unregularized
        self.l1 = getattr(options, "l1", 0.0)
        self.has_l1 = self.l1 > 0.0
        cdef Py_ssize_t p
        cdef double max_rate = 0.0, max_x = 0.0, eta_prev = -1.0, rate_prev = 0.0
        for p in range(size):
            max_x = max(max_x, self.eta[2 * p] * lam)
        # (every x below log_decay's series threshold: the rate is the series
        # of eta lam, the same bits)
        self.rate_from_eta = max_x < 1e-4 and not self.has_l1
        # the decay log-rates, derived from eta and kept in step with it (none
        # with rate_from_eta: nothing reads them, rate_of derives them)
        self._rate_arr = np.zeros(1 if self.rate_from_eta else max(size, 1))
        self.rate = NULL if self.rate_from_eta else &self._rate_arr[0]
        for p in range(size):
            if lam != 0.0 and p // n_outputs != unregularized:
                # (most weights still have a step seen just before: eta0 for
                # the untouched features of a large model)
                if self.eta[2 * p] != eta_prev:
                    eta_prev = self.eta[2 * p]
                    rate_prev = log_decay(eta_prev * lam)
                max_rate = max(max_rate, -rate_prev)
                if self.rate != NULL:
                    self.rate[p] = rate_prev
        # eta only decreases, so these hold for the object's lifetime: a decay
        # over <= b steps is decay_factor's Taylor branch, log_decay its series
        self.taylor_ok = period > 0 and period * max_rate < 5e-4 and max_x < 1e-4
        self.max_rate = max_rate
        self.l1d = NULL
        if self.has_l1:
            l1_state = getattr(state, "l1", None)
            if l1_state is None or l1_state.shape != (size, 2):
                raise ValueError("the L1 penalty needs the state's l1 array of shape "
                                 "(n_weights, 2)")
            l1_view = l1_state
            self._arrays = self._arrays + (l1_view,)
            self.l1d = &l1_view[0, 0] if size > 0 else NULL
            self.l1_over_lam = self.l1 / lam if lam > 0 else 0.0
            self.taylor_ok = False         # (_sweep_k1.h carries no L1)
        # (eta only decreases, so every eta lam stays below 1e-4: each rate is
        # the series of eta lam, which the vector loops re-derive from eta)
        self.row_events = n_outputs > 1 and period > 0 and lam > 0 and self.rate_from_eta
        self._row_scratch_arr = np.zeros(4 * n_outputs if self.row_events else 1)
        self._row_scratch = &self._row_scratch_arr[0]
        self.min_factor = 1.0
        self.max_factor = 0.0
        self.n_adaptations = 0

    cdef void _decay(self, Py_ssize_t j, double lam, long long k) noexcept nogil:
        """``k`` untouched steps of block ``j``: ``v *= (1 - eta lam)^k``."""
        if k <= 0 or lam == 0.0:
            return
        decay_block(self, j, k)

    cdef void _decay_l1(self, Py_ssize_t j, long long k) noexcept nogil:
        """``_decay`` with the L1 penalty (none on the unregularized block)."""
        if k <= 0 or j == self.unregularized:
            return
        decay_block_l1(self, j, k)

    cdef void _adapt(self, Py_ssize_t p, double lam) noexcept nogil:
        """Window-end step-size update of coordinate ``p`` (Eqs. 6-9); ``lam``
        is its L2 (0 for the unregularized block)."""
        cdef double f = adapt_step(&self.eta[2 * p], rate_slot(self, p), self.v[2 * p],
                                   self.snap1[2 * p], self.snap0[2 * p], lam, self.consts)
        if f == 0.0:
            return
        self.n_adaptations += 1
        if f < self.min_factor:
            self.min_factor = f
        if f > self.max_factor:
            self.max_factor = f

    cdef void _skip_param(self, Py_ssize_t p, double lam, long long k, double* geo,
                          int* n_geo) noexcept nogil:
        """``k`` whole untouched windows of weight ``p``, from just after a
        window-start event to just after the event ``k`` windows later.

        In the clipped regime (``eta_p <= eta_clip``) the factor is ``alpha``
        in every window and the decay is ``exp(2b sum_{i<k} log1p(-x alpha^i))``
        with ``x = eta_p lam``, i.e. ``-2b sum_m x^m / m G_m`` with the
        geometric sums ``G_m = sum_{i<k} alpha^(m i)`` (a few terms: x is
        small). ``geo[:n_geo]`` caches the ``G_m / m`` for this ``k`` across the
        weights of a block. Otherwise the windows are replayed one by one.
        """
        cdef long long _i, b = self.period
        cdef double x, total, fk
        if self.v[2 * p] == 0.0 or lam == 0.0:
            # 0/0 (or no decay at all): theta and eta stay as they are
            self.snap0[2 * p] = self.v[2 * p]
            self.snap1[2 * p] = self.v[2 * p]
            return
        x = self.eta[2 * p] * lam
        if self.eta[2 * p] <= self.eta_clip and x < 0.05 and k > 2:
            total = self._clipped_decay(p, x, k, geo, n_geo)
            fk = geo[39]
            self.v[2 * p] *= self._exp(-2.0 * <double>b * total)
            self.eta[2 * p] *= fk
            if not self.rate_from_eta:
                self.rate[p] = log_decay(self.eta[2 * p] * lam)
            self.n_adaptations += k
            if self.factor_hi < self.min_factor:
                self.min_factor = self.factor_hi
            if self.factor_hi > self.max_factor:
                self.max_factor = self.factor_hi
            self.snap0[2 * p] = self.v[2 * p]
            self.snap1[2 * p] = self.v[2 * p]
        else:
            for _i in range(k):              # replay window by window
                self._decay_one(p, lam, b)
                self.snap1[2 * p] = self.v[2 * p]
                self._decay_one(p, lam, b)
                self._adapt(p, lam)
                self.snap0[2 * p] = self.v[2 * p]

    cdef inline double _clipped_decay(self, Py_ssize_t p, double x, long long k, double* geo,
                                      int* n_geo) noexcept nogil:
        """``sum_{i<k} -log1p(-x alpha^i)`` (``x = eta_p lam``): the log-decay
        of ``k`` windows in the clipped regime over ``2b``, as the series
        ``sum_m x^m / m G_m``; sets ``geo[39] = alpha^k`` (``_skip_param``)."""
        cdef int mm
        cdef double total, term, xm, fk
        if n_geo[0] == 0:
            geo[37] = expm1(<double>k * self.log_alpha)   # alpha^k - 1
            geo[38] = geo[37]                             # P_1
            geo[39] = 1.0 + geo[37]                       # alpha^k
        fk = geo[39]
        total = 0.0
        xm = 1.0
        for mm in range(1, 37):
            xm *= x
            if mm > n_geo[0]:
                # G_m = P_m / (alpha^m - 1), P_m = alpha^(mk) - 1 by the
                # recurrence P_m = P_(m-1) alpha^k + P_1 (no cancellation)
                if mm > 1:
                    geo[38] = geo[38] * fk + geo[37]
                geo[mm - 1] = geo[38] / self.geo_den[mm] / mm     # G_m / m
                n_geo[0] = mm
            term = xm * geo[mm - 1]
            total += term
            if term < 1e-18 * total:
                break
        return total

    cdef bint _closed_windows(self, Py_ssize_t p, double lam, long long k, double* geo,
                              int* n_geo, double* f, double* owed,
                              double* fk) noexcept nogil:
        """The closed form of ``k`` whole idle windows of non-zero weight ``p``
        with the L1 penalty, valid while the weight does not reach 0 (see
        ``_skip_param_l1``): the total decay ``f``, the penalty ``owed`` and
        the step factor ``fk = alpha^k``. False outside the clipped regime."""
        cdef long long b = self.period
        cdef double x = self.eta[2 * p] * lam, total
        if lam == 0.0:
            fk[0] = 1.0 + expm1(<double>k * self.log_alpha)
            f[0] = 1.0
            owed[0] = (2.0 * <double>b * self.l1 * self.eta[2 * p]
                       * (expm1(<double>k * self.log_alpha) / self.geo_den[1]))
            return True
        if not (self.eta[2 * p] <= self.eta_clip and x < 0.05):
            return False
        total = self._clipped_decay(p, x, k, geo, n_geo)
        fk[0] = geo[39]
        f[0] = self._exp(-2.0 * <double>b * total)
        owed[0] = self.l1_over_lam * one_minus_decay(-2.0 * <double>b * total)
        return True

    cdef bint _stays_nonzero(self, Py_ssize_t p, double lam, long long k) noexcept nogil:
        """Whether non-zero weight ``p`` is still non-zero after ``k`` whole
        idle windows by the closed form (its magnitude after the decay exceeds
        what it is owed on its side then)."""
        cdef double geo[40]
        cdef int n_geo = 0
        cdef double f, owed, fk, z = self.v[2 * p]
        cdef double side = self.l1d[2 * p] if z > 0.0 else self.l1d[2 * p + 1]
        if not self._closed_windows(p, lam, k, geo, &n_geo, &f, &owed, &fk):
            return False
        return fabs(z) * f > side * f + owed

    cdef void _skip_param_l1(self, Py_ssize_t p, double lam, long long k, double* geo,
                             int* n_geo) noexcept nogil:
        """``_skip_param`` with the L1 penalty (``lam`` is the L2, possibly 0).

        A weight at 0 stays there (0/0: it keeps its step), owing more: one
        ``l1_settle`` over the ``2 b k`` steps. A non-zero one moves by the
        decay and the penalty; while it does not reach 0 its window ratio is
        the decay's, ``(1 - eta lam)^b`` (the penalty ``C/lam`` shifts the
        weight's decaying part), or exactly 1 without L2: so in the clipped
        regime every window's factor is ``alpha``, the decay is
        ``_clipped_decay``'s and the penalty owed is ``C/lam (1 - F)`` for the
        total decay ``F`` (the steps' ``eta C`` shrunk by the later decays, as
        ``eta C = C/lam (1 - (1 - eta lam))``), ``2 b C eta (1 - alpha^k) /
        (1 - alpha)`` without L2 (``_closed_windows``). If the weight reaches 0
        within the ``k`` windows, the closed form covers the windows before
        (the last window count it holds for, found by bisection: reaching 0 is
        monotone), the window that reaches 0 is replayed, and the rest are the
        zero case; outside the clipped regime windows are replayed one by one
        until the weight is 0."""
        cdef long long i, lo, hi, mid, b = self.period
        cdef double f, owed, fk
        cdef int n_loc = 0
        cdef double loc[40]
        cdef long long done = 0
        if self.v[2 * p] != 0.0 and (lam == 0.0 or (self.eta[2 * p] <= self.eta_clip
                                                    and self.eta[2 * p] * lam < 0.05)):
            if self._stays_nonzero(p, lam, k):
                done = k
            else:                              # bisection: the last count that holds
                lo, hi = 0, k
                while hi - lo > 1:
                    mid = lo + (hi - lo) // 2
                    if self._stays_nonzero(p, lam, mid):
                        lo = mid
                    else:
                        hi = mid
                done = lo
            if done > 0:
                if done == k:
                    self._closed_windows(p, lam, k, geo, n_geo, &f, &owed, &fk)
                else:
                    self._closed_windows(p, lam, done, loc, &n_loc, &f, &owed, &fk)
                l1_settle(self, p, f, owed)
                self.eta[2 * p] *= fk
                if lam > 0.0:
                    self.rate[p] = log_decay(self.eta[2 * p] * lam)
                self.n_adaptations += done
                if self.factor_hi < self.min_factor:
                    self.min_factor = self.factor_hi
                if self.factor_hi > self.max_factor:
                    self.max_factor = self.factor_hi
                self.snap0[2 * p] = self.v[2 * p]
        for i in range(done, k):
            if self.v[2 * p] == 0.0:           # at 0 from here on: eta kept
                decay_weight_l1(self, p, 2 * b * (k - i))
                break
            decay_weight_l1(self, p, b)
            self.snap1[2 * p] = self.v[2 * p]
            decay_weight_l1(self, p, b)
            self._adapt(p, lam)
            self.snap0[2 * p] = self.v[2 * p]
        self.snap0[2 * p] = self.v[2 * p]
        self.snap1[2 * p] = self.v[2 * p]

    cdef void _decay_one(self, Py_ssize_t p, double lam, long long k) noexcept nogil:
        if lam != 0.0:
            self.v[2 * p] *= decay_factor_of(self, rate_of(self, p, lam), k)

    cdef void catch_up(self, Py_ssize_t j, long long T) noexcept nogil:
        """Bring block ``j`` to time ``T``: decay, and the events at times <= T
        (``_catch_up`` without the L1 penalty; ``_catch_up_rows``, the same
        arithmetic, for the regularized blocks under ``row_events``)."""
        if self.row_events and j != self.unregularized:
            self._catch_up_rows(j, T)
        else:
            self._catch_up(j, T, False)

    cdef void _catch_up_rows(self, Py_ssize_t j, long long T) noexcept nogil:
        """``_catch_up(j, T, False)`` of a regularized multi-output block as
        vector loops over its weights (``row_events``): each event's decay,
        snapshot and adaptation (``decay_block``, ``row_snap1``, ``row_adapt``)
        and whole idle windows (``_skip_rows``), with the scalar path's bits."""
        cdef long long tau = self.last[2 * j], ev = self.next_event[2 * j]
        cdef long long b = self.period, two_b = 2 * self.period
        cdef int K = self.n_outputs
        cdef Py_ssize_t p0 = j * K
        cdef double* ve = self.v + 2 * p0
        cdef double* sn = self.snap0 + 2 * p0
        cdef bint at_window_end = ev <= T and (ev // b) % 2 == 0   # events alternate
        cdef double f_min, f_max
        while ev <= T:
            self._decay(j, self.lam, ev - tau)
            tau = ev
            if at_window_end:
                if ev > 0:
                    f_min, f_max = self.min_factor, self.max_factor
                    self.n_adaptations += row_adapt(
                        ve, sn, self._row_scratch, K, self.lam, self.consts.m,
                        self.consts.kappa, self.consts.inv_denom, self.consts.f_lo,
                        self.consts.f_hi, &f_min, &f_max)
                    self._note_factors(f_min, f_max)
                else:
                    row_snap0(ve, sn, K)
                if T - tau >= two_b:             # whole untouched windows
                    self._skip_rows(j, (T - tau) // two_b)
                    tau += two_b * ((T - tau) // two_b)
                    ev = tau + b
                    at_window_end = False
                    continue
            else:
                row_snap1(ve, sn, K)
            ev += b
            at_window_end = not at_window_end
        self._decay(j, self.lam, T - tau)
        self.last[2 * j] = T
        self.next_event[2 * j] = ev

    cdef void _skip_rows(self, Py_ssize_t j, long long k) noexcept nogil:
        """``_skip_param`` on each weight of regularized block ``j``. When every
        non-zero weight is in the clipped regime (and ``k > 2``), the closed
        form as vector loops (``row_skip_closed``: ``_clipped_decay``'s series
        a term at a time for every weight, each stopping where the scalar loop
        breaks). With ``k <= 2`` every weight replays its windows, as row loops
        (a zero weight's replay is its ``0/0``: it keeps eta). A block mixing
        the two regimes goes weight by weight."""
        cdef int q, K = self.n_outputs
        cdef Py_ssize_t p0 = j * K, p, n_moved
        cdef double lam = self.lam
        cdef double* ve = self.v + 2 * p0
        cdef double* sn = self.snap0 + 2 * p0
        cdef double geo[40]
        cdef int n_geo = 0
        cdef long long _i
        cdef double f_min, f_max
        cdef bint closed = True
        if k <= 2:
            for _i in range(k):
                self._decay(j, lam, self.period)
                row_snap1(ve, sn, K)
                self._decay(j, lam, self.period)
                f_min, f_max = self.min_factor, self.max_factor
                self.n_adaptations += row_adapt(
                    ve, sn, self._row_scratch, K, lam, self.consts.m, self.consts.kappa,
                    self.consts.inv_denom, self.consts.f_lo, self.consts.f_hi, &f_min, &f_max)
                self._note_factors(f_min, f_max)
            return
        for q in range(K):
            p = p0 + q
            if self.v[2 * p] != 0.0 and not (self.eta[2 * p] <= self.eta_clip
                                             and self.eta[2 * p] * lam < 0.05):
                closed = False
        if not closed:
            for q in range(K):
                self._skip_param(p0 + q, lam, k, geo, &n_geo)
            return
        n_moved = row_skip_closed(ve, sn, self._row_scratch, K, lam, -2.0 * <double>self.period,
                                  expm1(<double>k * self.log_alpha), self.geo_den)
        if n_moved > 0:
            self.n_adaptations += k * n_moved
            self._note_factors(self.factor_hi, self.factor_hi)

    cdef inline double _exp(self, double z) noexcept nogil:
        """The exp of a decay: ``small_exp_v`` in a multi-output model, else
        ``small_exp`` (``decay_factor_of``)."""
        return small_exp_v(z) if self.n_outputs > 1 else small_exp(z)

    cdef inline void _note_factors(self, double f_min, double f_max) noexcept nogil:
        if f_min < self.min_factor:
            self.min_factor = f_min
        if f_max > self.max_factor:
            self.max_factor = f_max

    cdef void catch_up_l1(self, Py_ssize_t j, long long T) noexcept nogil:
        """``catch_up`` with the L1 penalty: the decays are ``_decay_l1``'s
        and the whole idle windows ``_skip_param_l1``'s."""
        self._catch_up(j, T, True)

    cdef inline void _catch_up(self, Py_ssize_t j, long long T, bint with_l1) noexcept nogil:
        """Bring block ``j`` to time ``T``: decay, and the events at times <= T.

        Event-major: each event is decided once for the block, then applied to
        its ``n_outputs`` weights; whole untouched windows go to
        ``_skip_param`` (``_skip_param_l1`` with the L1 penalty, the
        unregularised bias excepted), which shares its series coefficients
        across them. ``with_l1`` is a constant at each caller, so the L2 path
        compiles without the L1 branches.
        """
        cdef long long tau = self.last[2 * j], ev = self.next_event[2 * j]
        cdef long long b = self.period, two_b = 2 * self.period, k
        cdef double lam = 0.0 if j == self.unregularized else self.lam
        cdef int q, K = self.n_outputs
        cdef Py_ssize_t p0 = j * K, p
        cdef bint at_window_end = ev <= T and (ev // b) % 2 == 0   # events alternate
        cdef bint skip_l1 = with_l1 and j != self.unregularized
        cdef double geo[40]
        cdef int n_geo = 0
        if b == 0:
            self._decay_either(j, lam, T - tau, with_l1)
            self.last[2 * j] = T
            self.next_event[2 * j] = NO_EVENT
            return
        while ev <= T:
            self._decay_either(j, lam, ev - tau, with_l1)
            tau = ev
            if at_window_end:
                for q in range(K):
                    p = p0 + q
                    if ev > 0:
                        self._adapt(p, lam)
                    self.snap0[2 * p] = self.v[2 * p]
                if T - tau >= two_b:             # whole untouched windows
                    k = (T - tau) // two_b
                    for q in range(K):
                        if skip_l1:
                            self._skip_param_l1(p0 + q, lam, k, geo, &n_geo)
                        else:
                            self._skip_param(p0 + q, lam, k, geo, &n_geo)
                    tau += two_b * k
                    ev = tau + b
                    at_window_end = False
                    continue
            else:
                for q in range(K):
                    p = p0 + q
                    self.snap1[2 * p] = self.v[2 * p]
            ev += b
            at_window_end = not at_window_end
        self._decay_either(j, lam, T - tau, with_l1)
        self.last[2 * j] = T
        self.next_event[2 * j] = ev

    cdef inline void _decay_either(self, Py_ssize_t j, double lam, long long k,
                                   bint with_l1) noexcept nogil:
        if with_l1:
            self._decay_l1(j, k)
        else:
            self._decay(j, lam, k)

    cdef Py_ssize_t sweep(self, const Py_ssize_t* due, Py_ssize_t n_due, Py_ssize_t* keep,
                          unsigned char* idle, int max_idle, long long ev) noexcept nogil:
        """``catch_up(j, ev)`` for the blocks ``j`` in ``due[:n_due]``, all due
        exactly at the event ``ev`` (``next_event[j] == ev``, ``last[j] <= ev``).

        The same arithmetic as ``catch_up`` (decay to ``ev``, then the mid-window
        snapshot or the window-end adaptation of ``_adapt``), batched: a kernel
        sweeps the blocks in use at each event instead of catching each one up
        at its next touch. ``idle[j]`` counts the sweeps since block ``j`` was
        last touched (``last[j] > ev - b``); the blocks idle for at most
        ``max_idle`` sweeps are written to ``keep``, whose length is returned.
        Fields are read into locals once (extensions are compiled with
        ``-fno-strict-aliasing``, so every store would otherwise reload them).
        """
        cdef long long b = self.period, k
        cdef bint window_end = (ev // b) % 2 == 0
        cdef bint adapt = window_end and ev > 0
        cdef int q, K = self.n_outputs
        cdef Py_ssize_t a, j, p, n_keep = 0, unreg = self.unregularized
        cdef double lam, vv, f
        cdef double* v = self.v
        cdef double* eta = self.eta
        cdef double* snap0 = self.snap0
        cdef double* snap1 = self.snap1
        cdef long long* last = self.last
        cdef long long* next_event = self.next_event
        cdef double lam0 = self.lam
        cdef PSAConstants consts = self.consts
        cdef double f_min = self.min_factor, f_max = self.max_factor
        cdef long long n_adapt = 0
        cdef unsigned char idl
        for a in range(n_due):
            j = due[a]
            k = ev - last[2 * j]
            idl = 0 if k < b else idle[j] + 1
            idle[j] = idl
            keep[n_keep] = j
            n_keep += idl <= max_idle
            last[2 * j] = ev
            next_event[2 * j] = ev + b
            lam = 0.0 if j == unreg else lam0
            for q in range(K):
                p = j * K + q
                # rate = 0 (no L2) or k = 0 give a factor of exactly 1
                vv = v[2 * p] * decay_factor_of(self, rate_of(self, p, lam), k)
                v[2 * p] = vv
                if not window_end:
                    snap1[2 * p] = vv
                    continue
                if adapt:
                    f = adapt_step(&eta[2 * p], rate_slot(self, p), vv, snap1[2 * p],
                                   snap0[2 * p], lam,
                                   consts)
                    if f != 0.0:
                        n_adapt += 1
                        f_min = f if f < f_min else f_min
                        f_max = f if f > f_max else f_max
                snap0[2 * p] = vv
        self.n_adaptations += n_adapt
        self.min_factor = f_min
        self.max_factor = f_max
        return n_keep

    cdef void sweep_all(self, long long ev) noexcept nogil:
        """``catch_up(j, ev)`` for every block, all due exactly at the event
        ``ev`` (``next_event[j] == ev``): the dense schedule for small models.

        Binary models (``n_outputs == 1``) with ``taylor_ok`` run the
        vectorised loops of ``_sweep_k1.h``, in storage order; the others go
        through ``sweep`` with every block listed. Either way the arithmetic
        is ``catch_up``'s.
        """
        cdef long long b = self.period
        cdef bint window_end = (ev // b) % 2 == 0
        cdef Py_ssize_t j, nb = self.n_blocks
        if self.n_outputs == 1 and self.taylor_ok and (ev > 0 or not window_end):
            if not window_end:
                sweep_mid_k1(self.v, self.snap0, self.last, self.next_event, nb, ev, b,
                             self.lam, self.unregularized)
                return
            self.n_adaptations += sweep_end_k1(
                self.v, self.snap0, self.last, self.next_event, nb, ev, b,
                self.lam, self.unregularized, self.consts.m, self.consts.kappa,
                self.consts.inv_denom, self.consts.f_lo, self.consts.f_hi, &self.min_factor,
                &self.max_factor)
            return
        if self._every_block == NULL:          # first use: the list of all blocks
            self._every_block = <Py_ssize_t*>malloc(nb * sizeof(Py_ssize_t))
            self._kept = <Py_ssize_t*>malloc(nb * sizeof(Py_ssize_t))
            self._idle = <unsigned char*>calloc(nb, sizeof(unsigned char))
            for j in range(nb):
                self._every_block[j] = j
        self.sweep(self._every_block, nb, self._kept, self._idle, 255, ev)

    def __dealloc__(self):
        free(self._every_block)
        free(self._kept)
        free(self._idle)

    cdef void catch_up_all(self, long long T) noexcept nogil:
        """``catch_up(j, T)`` for every block (the end-of-pass flush).

        A block whose weights and snapshots are all 0 (never stepped: most
        of a hashed model) only moves its times: its decays are of 0 and its
        window ends are ``0/0`` (eta kept), so the O(n_blocks) flush costs a
        scan, not the event arithmetic. With the L1 penalty a zero weight
        still owes its steps' penalty: every block goes the general way.
        """
        cdef Py_ssize_t j
        cdef long long b = self.period
        cdef long long next_ev = NO_EVENT if b == 0 else (T // b + 1) * b
        if self.has_l1:
            for j in range(self.n_blocks):
                self.catch_up_l1(j, T)
            return
        for j in range(self.n_blocks):
            if self._is_zero_block(j):
                self.last[2 * j] = T
                if self.next_event[2 * j] <= T:
                    self.next_event[2 * j] = next_ev
            else:
                self.catch_up(j, T)

    cdef inline bint _is_zero_block(self, Py_ssize_t j) noexcept nogil:
        cdef int q
        cdef Py_ssize_t p
        for q in range(self.n_outputs):
            p = j * self.n_outputs + q
            if self.v[2 * p] != 0.0 or self.snap0[2 * p] != 0.0 or self.snap1[2 * p] != 0.0:
                return False
        return True

    cdef bint is_finite(self) noexcept nogil:
        cdef Py_ssize_t p
        for p in range(self.n_blocks * self.n_outputs):
            if not isfinite(self.v[2 * p]) or not isfinite(self.eta[2 * p]):
                return False
        return True

    # ---- Python hooks (tests) --------------------------------------------------
    def py_catch_up(self, Py_ssize_t j, long long T):
        if self.has_l1:
            lazy_catch_up_l1(self, j, T)
        else:
            lazy_catch_up(self, j, T)

    def py_catch_up_all(self, long long T):
        self.catch_up_all(T)

    def py_sweep_all(self, long long ev, long long repeat=1):
        """``sweep_all(ev)`` (every block must be due at ``ev``); ``repeat``
        sweeps the events ``ev, ev + b, ...``."""
        cdef long long r
        for r in range(repeat):
            self.sweep_all(ev + r * self.period)

    def py_sweep(self, long long ev, Py_ssize_t[::1] blocks):
        """``sweep`` (the scalar loops) over ``blocks``, all due at ``ev``."""
        cdef Py_ssize_t n = blocks.shape[0]
        kept = np.empty(max(n, 1), dtype=np.intp)
        idle = np.zeros(max(self.n_blocks, 1), dtype=np.uint8)
        cdef Py_ssize_t[::1] kv = kept
        cdef unsigned char[::1] iv = idle
        self.sweep(&blocks[0] if n else NULL, n, &kv[0], &iv[0], 255, ev)

    def py_step(self, long long T, int[::1] ind, double[::1] g):
        """Eager step at time T on blocks ``ind`` (after catching them up):
        ``v_p = (1 - eta_p lam) v_p - eta_p g_p``, with ``g`` of shape
        (len(ind) * n_outputs,), then the step's L1 penalty (``l1_penalize``)."""
        cdef Py_ssize_t a, j, p
        cdef int q
        cdef double lam, c
        for a in range(ind.shape[0]):
            j = ind[a]
            if self.has_l1:
                lazy_catch_up_l1(self, j, T)
            else:
                lazy_catch_up(self, j, T)
            lam = 0.0 if j == self.unregularized else self.lam
            for q in range(self.n_outputs):
                p = j * self.n_outputs + q
                c = 1.0 - self.eta[2 * p] * lam
                c = c if c > 0.0 else 0.0
                self.v[2 * p] = c * self.v[2 * p] - self.eta[2 * p] * g[a * self.n_outputs + q]
                if self.has_l1 and j != self.unregularized:
                    l1_penalize(self, p, c, self.eta[2 * p] * self.l1)
            self.last[2 * j] = T + 1


def py_small_exp(double[::1] z):
    """``small_exp_v`` (``_psa_math.h``) of each element: the exp of the
    multi-output decays and their vector loops, for tests."""
    out = np.empty(z.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(z.shape[0]):
        o[i] = small_exp_v(z[i])
    return out
