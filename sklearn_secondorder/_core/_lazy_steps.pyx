"""PSA's lazy state on the Python side: the record arrays, the constants.

The arithmetic is in ``_lazy_steps.pxd`` (inline, shared by the linear and
the CRF kernels); this module allocates and reshapes the state, checks it,
and turns ``PSAOptions`` into the kernels' ``LazyCore``.
"""
from dataclasses import dataclass, field

import numpy as np

from libc.math cimport expm1, log

# One record per weight (``StepRecord`` / ``StepRecordL1`` of _lazy_steps.pxd;
# the kernels check that the sizes agree).
RECORD = np.dtype([("v", "<f8"), ("snap", "<f8"), ("eta", "<f4"), ("dsnap", "<f4"),
                   ("last", "<i8")])
RECORD_L1 = np.dtype(RECORD.descr + [("owed_down", "<f8"), ("owed_up", "<f8"),
                                     ("_pad", "<f8", (2,))])
_ALIGN = 64


def _aligned(records):
    """``records`` in a C-contiguous, writable array starting on a cache line
    (a copy only when it is not one already)."""
    if (records.flags.c_contiguous and records.flags.writeable
            and records.ctypes.data % _ALIGN == 0):
        return records
    nbytes = records.size * records.dtype.itemsize
    buf = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    start = (-buf.ctypes.data) % _ALIGN
    out = buf[start:start + nbytes].view(records.dtype)
    out[...] = records.reshape(-1)
    return out


@dataclass
class PSAOptions:
    """The constants of a PSA kernel call: the penalty and PSA's factors
    (Hsu et al., Algorithm 1; ``period = 0`` turns adaptation off).

    Attributes
    ----------
    lam : float
        L2 strength (scikit-learn's ``alpha`` times its L2 share).
    period : int
        ``b``: an event at every multiple of ``b``, an adaptation every ``2b``.
    psa_alpha, psa_beta, kappa : float
        The paper's (alpha, beta, kappa) (Eqs. 7-10).
    l1 : float
        L1 strength ``C``: Tsuruoka et al.'s cumulative penalty, each weight
        owed ``C`` times the sum of its own steps (the state needs L1 records).
    """

    lam: float = 0.0
    period: int = 0
    psa_alpha: float = 0.9999
    psa_beta: float = 0.99
    kappa: float = 0.9
    l1: float = 0.0


cdef LazyCore make_core(options) except *:
    """The kernels' constants from ``options`` (Eq. 10's ``m`` and ``n``, the
    clipped regime's bound, the idle windows' series denominators)."""
    cdef LazyCore c
    cdef int mm
    cdef double alpha = options.psa_alpha, beta = options.psa_beta, kappa = options.kappa
    cdef double n
    c.b = options.period if options.period > 0 else 0
    c.inv_b = 1.0 / c.b if c.b > 0 else 0.0
    c.lam = options.lam
    c.l1 = options.l1
    if c.b > 0 and not (0 < beta < alpha < 1 and 0 < kappa < 1):
        raise ValueError("PSA needs 0 < beta < alpha < 1 and 0 < kappa < 1")
    if c.b > 0:
        c.m = kappa * (alpha + beta) / (alpha - beta)                     # Eq. (10)
        n = 2.0 * kappa * (1.0 - alpha) / (alpha - beta)
        c.kappa = kappa
        c.inv_denom = 1.0 / (c.m + kappa + n)
        c.f_lo, c.f_hi = beta, alpha
        c.log_alpha = log(alpha)
        c.eta_clip = -expm1(log(kappa) / c.b) / c.lam if c.lam > 0 else 0.0
        for mm in range(1, 41):
            c.inv_geo[mm] = 1.0 / (mm * -expm1(mm * c.log_alpha))
    return c


@dataclass
class LazyStepState:
    """The state of a PSA model (picklable): one record per weight.

    ``n_blocks`` blocks of ``n_outputs`` contiguous records (a feature's
    weights, one per output; a CRF attribute's, one per label). A record
    holds the weight ``v``, its step size ``eta`` (float32), the snapshot
    ``snap`` at the last event and ``dsnap``, the current window's first-half
    move (float32), and, in the block's first record, ``last``, the time the
    block is current at; with the L1 penalty also what the weight is owed
    (``owed_down``, ``owed_up``).

    Attributes
    ----------
    records : structured ndarray of shape (n_blocks * n_outputs,)
        ``RECORD`` or ``RECORD_L1``, C-contiguous on a 64-byte boundary.
    n_outputs : int
    t : int
        Updates so far (the events are aligned on it).
    seed : int
        The shuffling RNG state.
    eta0 : float
        The initial step size of every weight.
    """

    records: np.ndarray
    n_outputs: int
    t: int = 0
    seed: int = 1
    eta0: float = 0.0

    @classmethod
    def zeros(cls, n_blocks, n_outputs, eta0, seed=1, l1=False):
        """Zero weights, every step size ``eta0``, every block current at 0."""
        records = _aligned(np.zeros(n_blocks * n_outputs, dtype=RECORD_L1 if l1 else RECORD))
        records["eta"] = eta0
        return cls(records=records, n_outputs=n_outputs, seed=seed, eta0=float(eta0))

    def __setstate__(self, state):
        if "records" not in state:
            raise ValueError(
                "this PSA model was saved by an earlier version of sklearn-secondorder, "
                "whose state layout is no longer read; fit it again")
        self.__dict__.update(state)

    @property
    def has_l1(self):
        return self.records.dtype == RECORD_L1

    @property
    def n_blocks(self):
        return self.records.size // self.n_outputs

    @property
    def weights(self):
        """The weights, a writable view (current at ``t`` after a kernel call)."""
        return self.records["v"]

    @property
    def step_sizes(self):
        """The per-weight step sizes (float64 copy)."""
        return self.records["eta"].astype(np.float64)

    @property
    def last(self):
        """The time each block is current at."""
        return self.records["last"][::self.n_outputs]

    def set_weights(self, w, step_sizes=None):
        """Start a window at the current time from the weights ``w`` (and the
        step sizes): every snapshot is ``w``, every block current at ``t``."""
        self.records["v"] = w
        self.records["snap"] = w
        self.records["dsnap"] = 0.0
        self.records["last"] = self.t
        if step_sizes is not None:
            self.records["eta"] = step_sizes

    def with_l1(self):
        """The state with L1 records (nothing owed yet)."""
        if not self.has_l1:
            new = np.zeros(self.records.size, dtype=RECORD_L1)
            for name in RECORD.names:
                new[name] = self.records[name]
            self.records = _aligned(new)
        return self

    def insert_blocks(self, at, n_new, period):
        """Insert ``n_new`` blocks before block ``at`` (new attributes).

        Weights that did not exist were 0 all along: their step size is
        ``eta0`` (0/0 keeps it) and they are current at ``t``.
        """
        new = np.zeros(n_new * self.n_outputs, dtype=self.records.dtype)
        new["eta"] = self.eta0
        new["last"] = self.t
        cut = at * self.n_outputs
        self.records = _aligned(np.concatenate([self.records[:cut], new, self.records[cut:]]))

    def prepare(self):
        """Make the records C-contiguous, writable and aligned (after
        unpickling or concatenation), as the kernels need them."""
        if self.records.dtype not in (RECORD, RECORD_L1):
            raise ValueError(f"unknown PSA record layout {self.records.dtype}")
        self.records = _aligned(self.records)
        return self


def catch_up_state(state, options, long long T, Py_ssize_t unregularized=-1):
    """Bring every block of ``state`` to time ``T >= t`` as if no row touched
    it (``catch_up``: the decays, the events, whole idle windows in closed
    form); block ``unregularized`` has no penalty. Sets ``state.t = T``."""
    cdef LazyCore c = make_core(options)
    cdef SeriesRate series
    cdef Log1pRate general
    cdef Py_ssize_t K = state.n_outputs, n_blocks = state.n_blocks
    state.prepare()
    if T < state.t:
        raise ValueError(f"T={T} is before the state's time t={state.t}")
    cdef size_t addr = state.records.ctypes.data
    cdef bint small = c.lam * float(state.records["eta"].max(initial=0.0)) < 1e-4
    if state.has_l1:
        if small:
            catch_up_all(<StepRecordL1*>addr, n_blocks, K, unregularized, T, &c, &series)
        else:
            catch_up_all(<StepRecordL1*>addr, n_blocks, K, unregularized, T, &c, &general)
    elif small:
        catch_up_all(<StepRecord*>addr, n_blocks, K, unregularized, T, &c, &series)
    else:
        catch_up_all(<StepRecord*>addr, n_blocks, K, unregularized, T, &c, &general)
    state.t = T


def py_decay_exp(double[::1] z):
    """``decay_exp`` on each of ``z`` (tests)."""
    out = np.empty(z.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(z.shape[0]):
        o[i] = decay_exp(z[i])
    return out


@dataclass
class PSAResult:
    """What a PSA kernel reports about its passes.

    Attributes
    ----------
    epochs : int
        Passes completed.
    diverged : bool
        The weights overflowed (non-finite values).
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
    mean_loss: float = float("nan")
    seconds: list = field(default_factory=list)
    flush_seconds: list = field(default_factory=list)


if RECORD.itemsize != sizeof(StepRecord) or RECORD_L1.itemsize != sizeof(StepRecordL1):
    raise ImportError("the PSA record dtypes do not match the C records")
