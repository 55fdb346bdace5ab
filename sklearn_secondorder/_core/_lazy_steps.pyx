"""PSA's lazy state on the Python side: the record arrays, the constants.

The arithmetic is in ``_lazy_steps.pxd`` (inline, shared by the linear and
the CRF kernels); this module allocates and reshapes the state, checks it,
and turns ``PSAOptions`` into the kernels' ``LazyCore``.
"""
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from libc.math cimport expm1, log, log1p

from ._lazy_records cimport (
    AT_DSNAP,
    AT_ETA,
    AT_OWED_DOWN,
    AT_OWED_UP,
    AT_SNAP,
    AT_V,
    HELD_WIDTH_BITS,
    HELD_WIDTH_MASK,
    LAST_BYTES,
    WEIGHT_BYTES,
    WEIGHT_BYTES_L1,
)
from ._psa_math cimport SERIES_RATE_MAX

_ALIGN = 64


#: A record's fields after ``last``, in order (the table of
#: _lazy_records.h): name, format, and the offset per weight ``a``: a block
#: of ``w`` weights holds the field at byte ``LAST_BYTES + a w``, ``w``
#: wide. The last two are the L1 penalty's.
RECORD_FIELDS = (("v", "<f8", AT_V), ("eta", "<f4", AT_ETA), ("dsnap", "<f4", AT_DSNAP),
                 ("snap", "<f8", AT_SNAP), ("owed_down", "<f8", AT_OWED_DOWN),
                 ("owed_up", "<f8", AT_OWED_UP))


def _record_fields(l1):
    """``RECORD_FIELDS`` of a state with (``l1``) or without the L1 debts."""
    return RECORD_FIELDS if l1 else RECORD_FIELDS[:len(RECORD_FIELDS) - 2]


def _weight_bytes(l1):
    """The bytes one weight takes in a record (``RECORD_FIELDS``)."""
    return WEIGHT_BYTES_L1 if l1 else WEIGHT_BYTES


@lru_cache(maxsize=64)
def _record_dtype(K, l1):
    """``record_dtype``, built once per ``(K, l1)``."""
    fields = _record_fields(l1)
    size = LAST_BYTES + _weight_bytes(l1) * K
    stride = 32 if size <= 32 else -(-size // _ALIGN) * _ALIGN
    return np.dtype({"names": ["last"] + [name for name, _, _ in fields],
                     "formats": ["<i8"] + [(fmt, (K,)) for _, fmt, _ in fields],
                     "offsets": [0] + [LAST_BYTES + a * K for _, _, a in fields],
                     "itemsize": stride})


def record_dtype(n_outputs, l1=False):
    """The record of a block of ``n_outputs`` weights (``Block`` of
    _lazy_records.pxd, laid out by ``RECORD_FIELDS``): 32 bytes for a binary
    weight (64 with ``l1``), whole cache lines for a wider block."""
    return _record_dtype(int(n_outputs), bool(l1))


#: ``LazyStepState.record_at``: a held block's record offset (bytes), shifted
#: left by this many bits, or'd with its width.
RECORD_AT_SHIFT = HELD_WIDTH_BITS


def held_record_bytes(widths, l1=False):
    """The bytes of held blocks' records of ``widths`` weights: ``last``, the
    fields as ``record_dtype(width, l1)`` lays them out, the labels (int32),
    in whole cache lines (one for a block of one or two labels, of one
    with the L1 debts)."""
    size = LAST_BYTES + (_weight_bytes(l1) + 4) * np.asarray(widths, dtype=np.int64)
    return -(-size // _ALIGN) * _ALIGN


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
    cdef const long long[::1] record_at
    L.base = <char*><size_t>state.records.ctypes.data
    L.K = state.n_outputs
    L.record_at = NULL
    L.label_at = 0
    L.off_v = L.off_snap = L.off_eta = L.off_dsnap = L.off_down = L.off_up = 0
    if state.widths is not None:
        # (every held record is whole cache lines: one block a line for owner_of)
        L.stride = _ALIGN
        L.label_at = _weight_bytes(state.has_l1)
        record_at = state.record_at
        if state.n_blocks > 0:
            L.record_at = &record_at[0]
        return L
    fields = state.records.dtype.fields
    L.stride = state.records.dtype.itemsize
    L.off_v = fields["v"][1]
    L.off_snap = fields["snap"][1]
    L.off_eta = fields["eta"][1]
    L.off_dsnap = fields["dsnap"][1]
    L.off_down = fields["owed_down"][1] if state.has_l1 else 0
    L.off_up = fields["owed_up"][1] if state.has_l1 else 0
    return L


cdef LazyCore make_core(options, state) except *:
    """The kernels' constants from ``options`` (Eq. 10's ``m`` and ``n``, the
    clipped regime's bound, the idle windows' series denominators) and the
    largest decay rate of ``state`` (eta only decreases: a bound for the call)."""
    cdef LazyCore c
    cdef int mm
    cdef double x_max = options.lam * state.max_step_size()
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
    c.with_l1 = state.has_l1
    c.series = c.rate_max < SERIES_RATE_MAX
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
    Such a block's record is as wide as its weights (``held_record_bytes``:
    the fields of ``record_dtype(width)``, then the labels), in whole cache
    lines, so that a touch of a one- or two-label attribute reads one line
    and the state is the size of the weights that exist, not of
    ``n_outputs`` per attribute.

    Attributes
    ----------
    records : ndarray
        ``record_dtype(n_outputs, l1)`` records of shape (n_blocks,); held
        blocks: their records as bytes (``record_at``). C-contiguous on a
        64-byte boundary.
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
    record_at : int64 ndarray of shape (n_blocks,) or None
        Held blocks: each block's record offset (bytes) shifted left by
        ``RECORD_AT_SHIFT``, or'd with its width (``Layout.record_at``).
    held_l1 : bool
        Held blocks: whether the records carry the L1 debts.
    """

    records: np.ndarray
    n_outputs: int
    t: int = 0
    seed: int = 1
    eta0: float = 0.0
    widths: object = None
    labels: object = None
    record_at: object = None
    held_l1: bool = False

    @classmethod
    def zeros(cls, n_blocks, n_outputs, eta0, seed=1, l1=False, exists=None):
        """Zero weights, every step size ``eta0``, every block current at 0.

        ``exists`` (bool array of shape ``(n_blocks, n_outputs)``, or None
        for all): the weights that exist; a block holds only those.
        """
        if exists is None:
            records = _zeros(n_blocks, record_dtype(n_outputs, l1))
            records["eta"] = eta0
            return cls(records=records, n_outputs=n_outputs, seed=seed, eta0=float(eta0))
        exists = np.asarray(exists, dtype=bool).reshape(n_blocks, n_outputs)
        state = cls(records=None, n_outputs=n_outputs, seed=seed, eta0=float(eta0))
        # (a stable sort puts the existing outputs first, in order)
        state._hold(exists.sum(axis=1), np.argsort(~exists, axis=1, kind="stable"), l1)
        state._held_view("eta")[...] = eta0
        return state

    # ---- held blocks (CRFsuite's feature set) ------------------------------------
    def _hold(self, widths, labels, l1):
        """Zero held records for blocks of ``widths`` weights of ``labels``."""
        self.widths = np.ascontiguousarray(widths, dtype=np.int32)
        self.labels = np.ascontiguousarray(labels, dtype=np.int32)
        if self.widths.size and self.widths.max() > HELD_WIDTH_MASK:
            raise ValueError(f"a block of {self.widths.max()} weights: at most "
                             f"{HELD_WIDTH_MASK} are held")
        self.held_l1 = bool(l1)
        size = held_record_bytes(self.widths, l1)
        at = (np.cumsum(size) - size).astype(np.int64)
        self.record_at = (at << HELD_WIDTH_BITS) | self.widths
        buf = np.zeros(int(size.sum()) + _ALIGN, dtype=np.uint8)
        start = (-buf.ctypes.data) % _ALIGN
        self.records = buf[start:start + int(size.sum())]
        self._write_labels()

    def _write_labels(self):
        blocks, slots, outputs = self._held()
        self.records.view(np.int32)[self._positions(blocks, slots,
                                                    _weight_bytes(self.held_l1), 4)] = outputs

    def _positions(self, blocks, slots, a, itemsize):
        """Where held weights ``(blocks, slots)``' field at ``LAST_BYTES + a
        w`` is, in the records viewed as items of ``itemsize`` bytes."""
        at = self.record_at[blocks] >> HELD_WIDTH_BITS
        w = self.widths[blocks].astype(np.int64)
        return (at + LAST_BYTES + a * w + itemsize * slots) // itemsize

    def _held_view(self, name, held=None):
        """A record field of every held weight, in ``_held()``'s order: a
        writable view when assigned to (``[...] = ``), else read by value."""
        blocks, slots, _ = self._held() if held is None else held
        fmt, a = {name: (fmt, a) for name, fmt, a in RECORD_FIELDS}[name]
        dtype = np.dtype(fmt)
        return _Scattered(self.records.view(dtype),
                          self._positions(blocks, slots, a, dtype.itemsize))

    def _held_last(self):
        """Each held block's ``last``: read by value (``_held_last().values()``)
        or written (``[...] = ``)."""
        return _Scattered(self.records.view(np.int64),
                          (self.record_at >> HELD_WIDTH_BITS) // LAST_BYTES)

    def _repack(self, widths, labels, l1, old_of_new):
        """The held records rebuilt for blocks of ``widths`` weights of
        ``labels`` (with the L1 debts when ``l1``): new block ``j`` keeps old
        block ``old_of_new[j]``'s fields, weight by weight, or (``-1``) is a
        new block: zero weights, ``eta0``, current at ``t``."""
        names = [name for name, _, _ in _record_fields(self.held_l1)]
        old = {name: self._held_view(name).values() for name in names}
        old_last = self._held_last().values()
        old_start = np.concatenate(([0], np.cumsum(self.widths, dtype=np.int64)))
        self._hold(widths, labels, l1)
        held = self._held()
        src = old_of_new[held[0]]
        kept = src >= 0
        index = old_start[src[kept]] + held[1][kept]
        for name, values in old.items():
            view = self._held_view(name, held)
            view.positions = view.positions[kept]
            view[...] = values[index]
        fresh = self._held_view("eta", held)
        fresh.positions = fresh.positions[~kept]
        fresh[...] = self.eta0
        # (a new block takes t, the last entry)
        self._held_last()[...] = np.append(old_last, self.t)[
            np.where(old_of_new >= 0, old_of_new, old_last.size)]

    def _held(self):
        """``(blocks, slots, outputs)`` of the weights the blocks hold (kept
        while ``widths`` and ``labels`` are the same arrays: a fit reads and
        writes the fields several times)."""
        if self.widths is None:
            return None
        key, index = vars(self).get("_held_index", (None, None))
        if key is None or key[0] is not self.widths or key[1] is not self.labels:
            held = np.arange(self.n_outputs) < self.widths[:, None]
            rows = np.nonzero(held)
            index = rows[0], rows[1], self.labels[held]
            self._held_index = ((self.widths, self.labels), index)
        return index

    def __getstate__(self):
        state = dict(vars(self))
        state.pop("_held_index", None)        # (derived: made again when read)
        return state

    def _to_flat(self, name, fill):
        """A record field as flat per-output values (``fill`` where no weight is held)."""
        held = self._held()
        if held is None:
            return np.ascontiguousarray(self.records[name], dtype=np.float64).reshape(-1)
        out = np.full((self.n_blocks, self.n_outputs), fill, dtype=np.float64)
        out[held[0], held[2]] = self._held_view(name, held).values()
        return out.reshape(-1)

    def _from_flat(self, name, w):
        """Set a record field from flat per-output values."""
        w = np.reshape(w, (self.n_blocks, self.n_outputs))
        held = self._held()
        if held is None:
            self.records[name] = w
        else:
            self._held_view(name, held)[...] = w[held[0], held[2]]

    def __setstate__(self, state):
        if "records" not in state:
            raise ValueError(
                "this PSA model was saved by an earlier version of sklearn-secondorder, "
                "whose state layout is no longer read; fit it again")
        self.__dict__.update(state)
        if self.widths is not None and self.records.dtype.names is not None:
            # held blocks saved in records n_outputs wide: every method
            # reads the held records
            self._repack_wide(np.ascontiguousarray(self.widths, dtype=np.int32),
                              np.ascontiguousarray(self.labels, dtype=np.int32))

    @property
    def has_l1(self):
        if self.widths is not None:
            return self.held_l1
        return "owed_down" in self.records.dtype.names

    @property
    def n_blocks(self):
        return self.records.shape[0] if self.widths is None else self.widths.shape[0]

    @property
    def weights(self):
        """The weights, flat (a copy; current at ``t`` after a kernel call)."""
        return self._to_flat("v", 0.0)

    @property
    def step_sizes(self):
        """The per-weight step sizes, flat (float64 copy)."""
        return self._to_flat("eta", self.eta0)

    def max_step_size(self):
        """The largest step size of a weight (0 without weights)."""
        eta = self.records["eta"] if self.widths is None else self._held_view("eta").values()
        return float(eta.max(initial=0.0))

    @property
    def last(self):
        """The time each block is current at (held blocks: a copy)."""
        return self.records["last"] if self.widths is None else self._held_last().values()

    def set_values(self, w):
        """Set the weights (flat, C order), leaving the windows as they are."""
        self._from_flat("v", w)

    def set_weights(self, w, step_sizes=None):
        """Start a window at the current time from the weights ``w`` (and the
        step sizes): every snapshot is ``w``, every block current at ``t``."""
        self.set_values(w)
        if self.widths is None:
            self.records["snap"] = self.records["v"]
            self.records["dsnap"] = 0.0
            self.records["last"] = self.t
        else:
            held = self._held()
            self._held_view("snap", held)[...] = self._held_view("v", held).values()
            self._held_view("dsnap", held)[...] = 0.0
            self._held_last()[...] = self.t
        if step_sizes is not None:
            self._from_flat("eta", step_sizes)

    def with_l1(self):
        """The state with L1 records (nothing owed yet)."""
        if self.has_l1:
            return self
        if self.widths is not None:
            self._repack(self.widths, self.labels, True, np.arange(self.n_blocks))
            return self
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
        if self.widths is not None:         # (new blocks hold all their outputs)
            n = self.n_blocks
            self._repack(
                np.insert(self.widths, at, np.full(n_new, self.n_outputs, np.int32)),
                np.insert(self.labels, [at] * n_new, np.arange(self.n_outputs, dtype=np.int32),
                          axis=0),
                self.held_l1,
                np.concatenate((np.arange(at), np.full(n_new, -1), np.arange(at, n))))
            return
        out = _zeros(self.n_blocks + n_new, self.records.dtype)
        out[:at] = self.records[:at]
        out[at + n_new:] = self.records[at:]
        out["eta"][at:at + n_new] = self.eta0
        out["last"][at:at + n_new] = self.t
        self.records = out

    def prepare(self):
        """Check the layout and make the records C-contiguous, writable and
        aligned (after unpickling or concatenation), as the kernels need them.
        A state whose held blocks were saved in records ``n_outputs`` wide is
        given records as wide as its weights."""
        if self.widths is None:
            if self.records.dtype != record_dtype(self.n_outputs, self.has_l1):
                raise ValueError(f"unknown PSA record layout {self.records.dtype}")
            self.records = _aligned(self.records)
            return self
        widths = np.ascontiguousarray(self.widths, dtype=np.int32)
        labels = np.ascontiguousarray(self.labels, dtype=np.int32)
        if widths.ndim != 1 or labels.shape != (widths.size, self.n_outputs) or (
                widths.size and not 0 <= widths.min() <= widths.max() <= self.n_outputs):
            raise ValueError("the held-weights arrays do not match the records")
        if self.records.dtype.names is not None:
            self._repack_wide(widths, labels)
            return self
        if self.records.dtype != np.uint8 or self.record_at is None:
            raise ValueError(f"unknown PSA record layout {self.records.dtype}")
        record_at = np.ascontiguousarray(self.record_at, dtype=np.int64)
        size = held_record_bytes(widths, self.held_l1)
        expected = ((np.cumsum(size) - size).astype(np.int64) << HELD_WIDTH_BITS) | widths
        if (self.records.shape != (int(size.sum()),)
                or not np.array_equal(record_at, expected)):
            raise ValueError("the held records do not match their widths")
        self.widths, self.labels, self.record_at = widths, labels, record_at
        self.records = _aligned(self.records)
        self._write_labels()
        return self

    def _repack_wide(self, widths, labels):
        """Held blocks saved in ``record_dtype(n_outputs)`` records (their
        weights first in each field): records as wide as their weights."""
        wide = self.records
        l1 = "owed_down" in wide.dtype.names
        if wide.dtype != record_dtype(self.n_outputs, l1) or wide.shape != widths.shape:
            raise ValueError(f"unknown PSA record layout {wide.dtype}")
        self._hold(widths, labels, l1)
        held = self._held()
        for name, _, _ in _record_fields(l1):
            self._held_view(name, held)[...] = wide[name][held[0], held[1]]
        self._held_last()[...] = wide["last"]


class _Scattered:
    """Items of an array at ``positions``: ``values()`` reads them, ``[...] =``
    writes them."""

    def __init__(self, array, positions):
        self.array, self.positions = array, positions

    def values(self):
        return self.array[self.positions]

    def __setitem__(self, key, values):
        self.array[self.positions] = values


cdef class KernelJob:
    """``catch_up_state``'s call of ``catch_up_all`` (``_lazy_pick.pxi``)."""
    cdef Layout L
    cdef LazyCore c
    cdef Py_ssize_t n_blocks, unregularized
    cdef long long T


include "_lazy_pick.pxi"


cdef long long run_specialised(KernelJob job, const Penalty* pen,
                               const RateRule* rule) noexcept nogil:
    """Every block of ``job``'s state to its time ``T``."""
    catch_up_all(&job.L, job.n_blocks, job.unregularized, job.T, &job.c, pen, rule)
    return job.T


def catch_up_state(state, options, long long T, Py_ssize_t unregularized=-1):
    """Bring every block of ``state`` to time ``T >= t`` as if no row touched
    it (``catch_up``: the decays, the events, whole idle windows in closed
    form); block ``unregularized`` has no penalty. Sets ``state.t = T``."""
    state.prepare()
    if T < state.t:
        raise ValueError(f"T={T} is before the state's time t={state.t}")
    cdef KernelJob job = KernelJob.__new__(KernelJob)
    job.L, job.c = layout_of(state), make_core(options, state)
    job.n_blocks, job.unregularized, job.T = state.n_blocks, unregularized, T
    with nogil:
        run_picked(job, &job.c)
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
