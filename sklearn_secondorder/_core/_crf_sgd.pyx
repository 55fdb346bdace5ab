"""SGD-type CRF trainers on the linear core's ``ScaledWeights``: plain SGD,
averaged SGD and ASF (averaged SGD with feedback, Sun et al., ICDM 2010).

One step on sequence ``(x, y)`` at counter ``t``::

    eta = eta0 / (1 + alpha eta0 t) ** power      # alpha = lam + l1
    w  <- (1 - eta lam) w + eta grad log p(y | x; w)

the shrink O(1) by the scale trick and the gradient applied sparsely by
``CRFContext.add_gradient``. ``power=1`` is plain SGD (``1 / (alpha (t +
t0))`` with ``t0 = 1 / (alpha eta0)``, CRFsuite's l2sgd and Bottou's crfsgd),
``power=0.75`` Bottou's averaged-SGD schedule, ``power=0`` a constant step
(ASF). With averaging every iterate after a step is added to the lazy running
sum. With feedback (ASF, Fig. 1) the weights are reset to the average of all
iterates after every pass whose total count is triangular (1, 3, 6, 10, ...):
period ``c`` runs ``c`` passes.

The penalty comes split once, by the estimator (``_penalty.split_alpha``):
``lam``, the L2 strength, and ``l1``, the L1 strength (CRFsuite's ``c1``);
the schedule's ``alpha`` is the whole strength ``lam + l1``. With ``l1 > 0``
each step adds ``eta l1`` to Tsuruoka et al.'s cumulative penalty
(``SequenceSteps``, ``ScaledWeights``), every weight (bias and transitions
included) caught up when a step reads it and at the end of the call. With
averaging, the average is kept on the support of the current iterate: at a
feedback (``reset_to_average``) and in the model returned
(``CRFState.model``), a weight the penalty holds at 0 is 0. The averaged
model is therefore as sparse as the last iterate; the running sum itself
counts each iterate as the lazy catch-up left it (a weight's owed penalty
enters it when applied).
"""
from dataclasses import dataclass, field

import numpy as np
from libc.math cimport sqrt

from ._crf_infer cimport CRFContext, context_for
from ._dataset cimport SequenceData
from ._numeric cimport now_seconds
from ._sgd_fast cimport CONSTANT, POWER, Schedule, SequenceSteps, sgd_pass_sequences
from ._weights cimport ScaledWeights


@dataclass
class CRFState:
    """A CRF's weights and the trainers' counters (picklable).

    Attributes
    ----------
    coef : ndarray of shape ((n_attributes + n_states + 1) * n_states,)
        The flat weights: attribute rows, transition rows (``from``), the
        bias row, ``n_states`` weights each (``CRFContext``'s layout).
    avg : ndarray like ``coef``, or None
        The running sum of the iterates (averaging trainers).
    n_states : int
    n_iterates : float
        Iterates in ``avg``.
    t : int
        Sequence updates so far.
    passes : int
        Passes so far (ASF's feedback schedule counts them).
    seed : int
        The shuffling RNG state.
    l1_q : ndarray like ``coef``, or None
        With an L1 penalty: Tsuruoka et al.'s ``q``, the penalty applied to
        each weight so far.
    l1_u : float
        Their ``u``, the total penalty so far.
    """

    coef: np.ndarray
    avg: object
    n_states: int
    n_iterates: float = 0.0
    t: int = 0
    passes: int = 0
    seed: int = 1
    l1_q: object = None
    l1_u: float = 0.0

    @classmethod
    def new(cls, n_attributes, n_states, *, averaged, seed, init=None, l1=False):
        """Weights ``init`` (a callable ``size -> array``; zeros by default)."""
        size = (n_attributes + n_states + 1) * n_states
        coef = np.zeros(size) if init is None else init(size)
        return cls(coef=coef, avg=np.zeros(size) if averaged else None,
                   n_states=n_states, seed=seed, l1_q=np.zeros(size) if l1 else None)

    @property
    def n_attributes(self):
        return self.coef.size // self.n_states - self.n_states - 1

    def add_attributes(self, n_new, init=None):
        """Insert ``n_new`` attribute rows after the existing ones, weights
        ``init(size)`` (zeros by default); the past iterates held those
        initial values too."""
        H, cut = self.n_states, self.n_attributes * self.n_states
        rows = np.zeros(n_new * H) if init is None else init(n_new * H)
        self.coef = np.concatenate([self.coef[:cut], rows, self.coef[cut:]])
        if self.avg is not None:
            self.avg = np.concatenate([self.avg[:cut], self.n_iterates * rows,
                                       self.avg[cut:]])
        if self.l1_q is not None:
            # (q = 0: a weight 0 all along owes the total u, as in the dense algorithm)
            self.l1_q = np.concatenate([self.l1_q[:cut], np.zeros(n_new * H),
                                        self.l1_q[cut:]])

    def weights(self, averaged=False, l1=False):
        """A ``ScaledWeights`` over ``coef`` (and ``avg`` when averaged, and
        the L1 penalty's ``l1_q`` when ``l1``)."""
        for name in ("coef", "avg", "l1_q"):
            if getattr(self, name) is not None:
                setattr(self, name, np.require(getattr(self, name), requirements=["C", "W"]))
        if l1 and self.l1_q is None:
            raise ValueError("an L1 penalty needs the state's l1_q")
        return ScaledWeights(self.coef, self.n_states, self.avg if averaged else None,
                             self.n_iterates, self.l1_q if l1 else None, self.l1_u)

    def model(self):
        """The weights a trainer returns: the average when it averages (with
        an L1 penalty, on the support of the last iterate: module docstring)."""
        if self.avg is None or self.n_iterates == 0:
            return self.coef.copy()
        model = self.avg / self.n_iterates
        if self.l1_q is not None:
            model[self.coef == 0.0] = 0.0
        return model


@dataclass
class CRFSGDOptions:
    """The constants of a CRF ``sgd_epochs`` call (module docstring).

    Attributes
    ----------
    eta0 : float
    power : float
        0 (constant), 0.75 (averaged SGD) or 1 (plain SGD).
    lam : float
        L2 strength (scikit-learn's ``alpha`` times its L2 share).
    l1 : float
        L1 strength (``alpha`` times ``l1_ratio``; 0: L2 only, else the state
        needs ``l1_q``).
    average : bool
        Keep the running sum of the iterates.
    feedback : bool
        ASF's feedback (needs ``average``).
    """

    eta0: float
    power: float = 0.0
    lam: float = 1e-4
    l1: float = 0.0
    average: bool = False
    feedback: bool = False


@dataclass
class CRFSGDResult:
    """What the CRF ``sgd_epochs`` reports.

    Attributes
    ----------
    epochs : int
    diverged : bool
    mean_loss : float
        Mean ``-log p(y|x)`` of the last pass, at the pre-step weights.
    seconds : list of float
        Wall time of each pass.
    feedbacks : list of int
        The pass counts after which the weights were reset to the average.
    """

    epochs: int
    diverged: bool
    mean_loss: float
    seconds: list = field(default_factory=list)
    feedbacks: list = field(default_factory=list)


cdef inline bint _is_triangular(long long p) noexcept nogil:
    """Whether ``p = c (c + 1) / 2`` for some integer c >= 1 (ASF feedback points)."""
    cdef long long c = <long long>((sqrt(8.0 * <double>p + 1.0) - 1.0) / 2.0)
    cdef long long k
    for k in range(c - 1, c + 2):
        if k >= 1 and k * (k + 1) // 2 == p:
            return True
    return False


def is_feedback_pass(long long p):
    """Whether ASF feeds back after pass ``p`` (1, 3, 6, 10, ...)."""
    return bool(_is_triangular(p))


def sgd_epochs(SequenceData ds, state, options, *, int n_epochs=1, bint shuffle=True,
               bint fit_intercept=True, int n_latent=1):
    """Run ``n_epochs`` SGD passes on the CRF log-likelihood.

    Parameters
    ----------
    ds : SequenceData (with labels)
    state : CRFState
        Updated in place (weights, running sum, counters).
    options : CRFSGDOptions
    n_epochs : int
    shuffle : bool
        Shuffle the sequences before each pass.
    fit_intercept : bool
        Train the bias row.
    n_latent : int
        Hidden states per label.

    Returns
    -------
    result : CRFSGDResult
    """
    if not ds.has_labels:
        raise ValueError("labels are required for training")
    if options.feedback and not options.average:
        raise ValueError("feedback needs averaged weights")
    cdef double lam = options.lam, l1 = options.l1
    if not (options.eta0 > 0 and options.eta0 * (lam + l1) < 1.0):
        raise ValueError(f"eta0={options.eta0} must be positive with eta0 * alpha < 1")
    cdef ScaledWeights w = state.weights(averaged=options.average, l1=l1 > 0)
    cdef CRFContext ctx = context_for(w, n_latent, ds.max_len, getattr(state, "allowed", None))
    if ds.n_features > ctx.n_attributes:
        raise ValueError("the data have more attributes than the weights")
    cdef SequenceSteps steps = SequenceSteps()
    steps.ds, steps.ctx, steps.n_examples = ds, ctx, ds.n_sequences
    steps.fit_intercept = fit_intercept
    steps.lam, steps.l1 = lam, l1
    cdef Schedule sched
    sched.kind = CONSTANT if options.power == 0.0 else POWER
    sched.eta0, sched.alpha, sched.t0, sched.power = options.eta0, lam + l1, 0.0, options.power
    cdef bint feedback = options.feedback
    cdef long long t = state.t, passes = state.passes
    cdef unsigned int rng = state.seed if state.seed != 0 else 1
    cdef int _epoch, epochs_run = 0
    cdef double loss_sum = 0.0, t_start
    cdef bint diverged = False, fb_now
    result = CRFSGDResult(epochs=0, diverged=False, mean_loss=0.0)
    with nogil:
        for _epoch in range(n_epochs):
            t_start = now_seconds()
            if shuffle:
                ds.shuffle(&rng)
            loss_sum = sgd_pass_sequences(steps, w, &sched, &t)
            if loss_sum != loss_sum:
                diverged = True
                break
            epochs_run += 1
            passes += 1
            fb_now = feedback and _is_triangular(passes)
            if fb_now:
                w.reset_to_average()
            with gil:
                result.seconds.append(now_seconds() - t_start)
                if fb_now:
                    result.feedbacks.append(passes)
            if not w.is_finite():
                diverged = True
                break
        if w.has_l1:
            w.l1_apply_all()
        w.fold()
    state.t, state.passes, state.seed, state.n_iterates = t, passes, rng, w.n_iterates
    if w.has_l1:
        state.l1_u = w.l1_u
    result.epochs, result.diverged = epochs_run, diverged
    result.mean_loss = loss_sum / ds.n_sequences if ds.n_sequences and not diverged else 0.0
    return result
