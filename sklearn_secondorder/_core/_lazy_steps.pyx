"""PSA's lazy state on the Python side: the record arrays, the constants.

The arithmetic is in ``_lazy_steps.pxd`` (inline, shared by the linear and
the CRF kernels); this module allocates and reshapes the state, checks it,
and turns ``PSAOptions`` into the kernels' ``LazyCore``.
"""
from dataclasses import dataclass, field

import numpy as np

from libc.math cimport expm1, log, log1p

_ALIGN = 64


def record_dtype(n_outputs, l1=False):
    """The record of a block of ``n_outputs`` weights (``Block`` of
    _lazy_steps.pxd): ``last``, then its fields ``n_outputs`` wide, those a
    touch reads first (``last``, ``v``, ``eta``) and those of the events
    after; 32 bytes for a binary weight (64 with ``l1``), whole cache lines
    for a wider block."""
    K = int(n_outputs)
    names = ["last", "v", "eta", "dsnap", "snap"]
    formats = ["<i8", ("<f8", (K,)), ("<f4", (K,)), ("<f4", (K,)), ("<f8", (K,))]
    offsets = [0, 8, 8 + 8 * K, 8 + 12 * K, 8 + 16 * K]
    size = 8 + 24 * K
    if l1:
        names += ["owed_down", "owed_up"]
        formats += [("<f8", (K,)), ("<f8", (K,))]
        offsets += [8 + 24 * K, 8 + 32 * K]
        size = 8 + 40 * K
    stride = 32 if size <= 32 else -(-size // _ALIGN) * _ALIGN
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": stride})


def _zeros(n_blocks, dtype):
    """``n_blocks`` zero records (padding included) starting on a cache line."""
    nbytes = n_blocks * dtype.itemsize
    buf = np.zeros(nbytes + _ALIGN, dtype=np.uint8)
    start = (-buf.ctypes.data) % _ALIGN
    return buf[start:start + nbytes].view(dtype)


def _aligned(records):
    """``records`` in a C-contiguous, writable array starting on a cache line
    (a copy only when it is not one already)."""
    if (records.flags.c_contiguous and records.flags.writeable
            and records.ctypes.data % _ALIGN == 0):
        return records
    out = _zeros(records.shape[0], records.dtype)
    out[...] = records
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


cdef Layout layout_of(state) except *:
    """Where the fields of ``state``'s records are (``state.prepare()`` first)."""
    cdef Layout L
    fields = state.records.dtype.fields
    L.base = <char*><size_t>state.records.ctypes.data
    L.stride = state.records.dtype.itemsize
    L.K = state.n_outputs
    L.off_v = fields["v"][1]
    L.off_snap = fields["snap"][1]
    L.off_eta = fields["eta"][1]
    L.off_dsnap = fields["dsnap"][1]
    L.off_down = fields["owed_down"][1] if state.has_l1 else 0
    L.off_up = fields["owed_up"][1] if state.has_l1 else 0
    L.widths = NULL
    L.labels = NULL
    cdef const int[::1] widths
    cdef const int[:, ::1] labels
    if state.widths is not None:
        widths, labels = state.widths, state.labels
        if state.n_blocks > 0:
            L.widths = &widths[0]
            L.labels = &labels[0, 0]
    return L


cdef LazyCore make_core(options, state) except *:
    """The kernels' constants from ``options`` (Eq. 10's ``m`` and ``n``, the
    clipped regime's bound, the idle windows' series denominators) and the
    largest decay rate of ``state`` (eta only decreases: a bound for the call)."""
    cdef LazyCore c
    cdef int mm
    cdef double x_max = options.lam * float(state.records["eta"].max(initial=0.0))
    cdef double alpha = options.psa_alpha, beta = options.psa_beta, kappa = options.kappa
    cdef double n
    c.b = options.period if options.period > 0 else 0
    c.clipped = False
    c.rate_max = -log1p(-x_max) if x_max < 1.0 else 1e300
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
        c.clipped = c.lam > 0 and x_max <= c.eta_clip * c.lam
        for mm in range(1, 41):
            c.inv_geo[mm] = 1.0 / (mm * -expm1(mm * c.log_alpha))
    return c


@dataclass
class LazyStepState:
    """The state of a PSA model (picklable): one record per block of weights.

    ``n_blocks`` blocks of ``n_outputs`` weights (a feature's weights, one per
    output; a CRF attribute's, one per label). A block's record
    (``record_dtype``) holds its weights ``v``, their step sizes ``eta``
    (float32), the snapshots ``snap`` at the last event and ``dsnap``, the
    current window's first-half moves (float32), each ``n_outputs`` wide, and
    ``last``, the time the block is current at; with the L1 penalty also
    what each weight is owed (``owed_down``, ``owed_up``).

    A CRF trained on its features only (CRFsuite's feature set) holds in an
    attribute's block only the weights of its trained labels, first: a touch
    costs the trained labels, not ``n_outputs`` (``widths``, ``labels``).

    Attributes
    ----------
    records : structured ndarray of shape (n_blocks,)
        ``record_dtype(n_outputs, l1)``, C-contiguous on a 64-byte boundary.
    n_outputs : int
    t : int
        Updates so far (the events are aligned on it).
    seed : int
        The shuffling RNG state.
    eta0 : float
        The initial step size of every weight.
    widths : int32 ndarray of shape (n_blocks,) or None
        How many weights each block holds (None: ``n_outputs``).
    labels : int32 ndarray of shape (n_blocks, n_outputs) or None
        The output of each held weight (``labels[j, :widths[j]]``).
    """

    records: np.ndarray
    n_outputs: int
    t: int = 0
    seed: int = 1
    eta0: float = 0.0
    widths: object = None
    labels: object = None

    @classmethod
    def zeros(cls, n_blocks, n_outputs, eta0, seed=1, l1=False, exists=None):
        """Zero weights, every step size ``eta0``, every block current at 0.

        ``exists`` (bool array of shape ``(n_blocks, n_outputs)``, or None
        for all): the weights that exist; a block holds only those.
        """
        records = _zeros(n_blocks, record_dtype(n_outputs, l1))
        records["eta"] = eta0
        state = cls(records=records, n_outputs=n_outputs, seed=seed, eta0=float(eta0))
        if exists is not None:
            exists = np.asarray(exists, dtype=bool).reshape(n_blocks, n_outputs)
            state.widths = exists.sum(axis=1).astype(np.int32)
            # (a stable sort puts the existing outputs first, in order)
            state.labels = np.ascontiguousarray(
                np.argsort(~exists, axis=1, kind="stable"), dtype=np.int32)
        return state

    def _held(self):
        """``(blocks, slots, outputs)`` of the weights the blocks hold."""
        if self.widths is None:
            return None
        held = np.arange(self.n_outputs) < self.widths[:, None]
        rows = np.nonzero(held)
        return rows[0], rows[1], self.labels[held]

    def _to_flat(self, name, fill):
        """A record field as flat per-output values (``fill`` where no weight is held)."""
        values = self.records[name]
        held = self._held()
        if held is None:
            return np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        out = np.full((self.n_blocks, self.n_outputs), fill, dtype=np.float64)
        out[held[0], held[2]] = values[held[0], held[1]]
        return out.reshape(-1)

    def _from_flat(self, name, w):
        """Set a record field from flat per-output values."""
        w = np.reshape(w, (self.n_blocks, self.n_outputs))
        held = self._held()
        if held is None:
            self.records[name] = w
        else:
            self.records[name][held[0], held[1]] = w[held[0], held[2]]

    def __setstate__(self, state):
        if "records" not in state:
            raise ValueError(
                "this PSA model was saved by an earlier version of sklearn-secondorder, "
                "whose state layout is no longer read; fit it again")
        self.__dict__.update(state)

    @property
    def has_l1(self):
        return "owed_down" in self.records.dtype.names

    @property
    def n_blocks(self):
        return self.records.shape[0]

    @property
    def weights(self):
        """The weights, flat (a copy; current at ``t`` after a kernel call)."""
        return self._to_flat("v", 0.0)

    @property
    def step_sizes(self):
        """The per-weight step sizes, flat (float64 copy)."""
        return self._to_flat("eta", self.eta0)

    @property
    def last(self):
        """The time each block is current at."""
        return self.records["last"]

    def set_values(self, w):
        """Set the weights (flat, C order), leaving the windows as they are."""
        self._from_flat("v", w)

    def set_weights(self, w, step_sizes=None):
        """Start a window at the current time from the weights ``w`` (and the
        step sizes): every snapshot is ``w``, every block current at ``t``."""
        self.set_values(w)
        self.records["snap"] = self.records["v"]
        self.records["dsnap"] = 0.0
        self.records["last"] = self.t
        if step_sizes is not None:
            self._from_flat("eta", step_sizes)

    def with_l1(self):
        """The state with L1 records (nothing owed yet)."""
        if not self.has_l1:
            new = _zeros(self.n_blocks, record_dtype(self.n_outputs, True))
            for name in self.records.dtype.names:
                new[name] = self.records[name]
            self.records = new
        return self

    def insert_blocks(self, at, n_new, period):
        """Insert ``n_new`` blocks before block ``at`` (new attributes).

        Weights that did not exist were 0 all along: their step size is
        ``eta0`` (0/0 keeps it) and they are current at ``t``.
        """
        out = _zeros(self.n_blocks + n_new, self.records.dtype)
        out[:at] = self.records[:at]
        out[at + n_new:] = self.records[at:]
        out["eta"][at:at + n_new] = self.eta0
        out["last"][at:at + n_new] = self.t
        self.records = out
        if self.widths is not None:         # (new blocks hold all their outputs)
            self.widths = np.insert(self.widths, at, np.full(n_new, self.n_outputs, np.int32))
            self.labels = np.ascontiguousarray(np.insert(
                self.labels, at, np.arange(self.n_outputs, dtype=np.int32), axis=0))

    def prepare(self):
        """Check the layout and make the records C-contiguous, writable and
        aligned (after unpickling or concatenation), as the kernels need them."""
        if self.records.dtype != record_dtype(self.n_outputs, self.has_l1):
            raise ValueError(f"unknown PSA record layout {self.records.dtype}")
        self.records = _aligned(self.records)
        if self.widths is not None:
            self.widths = np.ascontiguousarray(self.widths, dtype=np.int32)
            self.labels = np.ascontiguousarray(self.labels, dtype=np.int32)
            if self.widths.shape != (self.n_blocks,) or self.labels.shape != (
                    self.n_blocks, self.n_outputs):
                raise ValueError("the held-weights arrays do not match the records")
        return self


def catch_up_state(state, options, long long T, Py_ssize_t unregularized=-1):
    """Bring every block of ``state`` to time ``T >= t`` as if no row touched
    it (``catch_up``: the decays, the events, whole idle windows in closed
    form); block ``unregularized`` has no penalty. Sets ``state.t = T``."""
    state.prepare()
    if T < state.t:
        raise ValueError(f"T={T} is before the state's time t={state.t}")
    cdef LazyCore c = make_core(options, state)
    cdef Layout L = layout_of(state)
    cdef SeriesRate series
    cdef Log1pRate general
    cdef L2Only plain
    cdef WithL1 with_l1
    cdef bint small = c.rate_max < 1e-4
    cdef Py_ssize_t n_blocks = state.n_blocks
    if state.has_l1:
        if small:
            catch_up_all(&L, n_blocks, unregularized, T, &c, &with_l1, &series)
        else:
            catch_up_all(&L, n_blocks, unregularized, T, &c, &with_l1, &general)
    elif small:
        catch_up_all(&L, n_blocks, unregularized, T, &c, &plain, &series)
    else:
        catch_up_all(&L, n_blocks, unregularized, T, &c, &plain, &general)
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
