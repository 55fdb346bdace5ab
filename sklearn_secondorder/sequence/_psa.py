"""PSASequenceTagger: a linear-chain CRF trained by periodic step-size adaptation."""
from numbers import Integral, Real

import numpy as np

from .._compat import Interval, check_is_fitted
from .._core._crf_psa import psa_epochs
from .._core._lazy_steps import LazyStepState, PSAOptions, record_dtype
from .._penalty import PENALTY_CONSTRAINTS, l1_share, split_alpha
from .._validation import check_eta0, check_psa_factors, store_init_params
from ._base import _BaseSequenceTagger, mix_tagger_states


class PSASequenceTagger(_BaseSequenceTagger):
    """Linear-chain CRF trained by Periodic Step-size Adaptation (PSA).

    PSA (Hsu, Chang, Huang and Lee, 2009, Algorithm 1) is SGD with one step
    size per weight, ``w <- w - eta o (alpha w - grad log p(y | x; w))``,
    adapted every ``2 * period`` updates from the snapshots ``w(t)``,
    ``w(t + b)``, ``w(t + 2b)`` (``b = period``)::

        g_i = (w_i(t+2b) - w_i(t+b)) / (w_i(t+b) - w_i(t))          # Eq. 6
        u_i = sign(g_i) min(|g_i|, psa_kappa)                         # Eq. 7
        v_i = (m + u_i) / (m + psa_kappa + n)                         # Eq. 9
        eta_i <- v_i eta_i                                             # Eq. 8

    with ``m = kappa (a + c) / (a - c)``, ``n = 2 kappa (1 - a) / (a - c)``
    (Eq. 10; ``a = psa_alpha``, ``c = psa_beta``), so ``v_i`` lies in
    ``[psa_beta, psa_alpha]``. A weight that did not move (``0/0``) keeps its
    step size; ``x/0`` counts as ``g_i = sign(x) inf``.

    Weights not in the current sequence catch up lazily (the lazy core of
    ``PSAClassifier``, ``_core/_lazy_steps.pxd``): within a window they only
    shrink, ``(1 - eta_i alpha)^k`` in closed form, and a whole idle window
    has the shrink's ratio ``(1 - eta_i alpha)^b`` (clipped to kappa, after
    which ``K`` idle windows are one closed-form step). A pass therefore
    costs O(nnz) like plain SGD, not the paper implementation's O(n_weights)
    every ``2b`` updates, and gives the dense algorithm's result within the
    float32 rounding of the step sizes (relative 1e-6 on small problems,
    the same F1 after one pass). The paper's defaults for CRFs are the defaults here;
    the method aims at a good model in a single pass (``max_iter=1``).

    The update is `sklearn_secondorder._core._crf_psa.psa_epochs` (``_update``,
    Algorithm 1 line 5) on the lazy core ``_core/_lazy_steps.pxd`` (one
    record per weight); the step-size factor (Eqs. 6-10) is
    ``skso_psa_factor`` in ``_core/_psa_math.h``.

    Parameters
    ----------
    penalty : {'l2', 'l1', 'elasticnet'}, default='l2'
        The penalty, with scikit-learn's ``SGDClassifier`` meaning: the
        objective is ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2) +
        mean over sequences of -log p(y | x)`` (``'l2'`` is ``l1_ratio = 0``,
        ``'l1'`` is ``l1_ratio = 1``), so CRFsuite's ``c1``, ``c2`` are
        ``alpha = (c1 + 2 c2) / n`` and ``l1_ratio = c1 / (c1 + 2 c2)`` for
        ``n`` training sequences. The L1 part is Tsuruoka, Tsujii and
        Ananiadou's cumulative penalty (ACL 2009) on each weight's own steps:
        a weight is owed ``alpha l1_ratio`` times the sum of its step sizes
        since it was last caught up (in closed form with the L2 decay, as the
        lazy decay), the dense algorithm's to rounding. Every weight (bias and
        transitions included) is caught up when a step reads it and at the end
        of each call, so the model holds exact zeros.
    alpha : float, default=1e-4
        Strength of the penalty (not PSA's alpha, which is ``psa_alpha``):
        with ``penalty='l2'`` the objective is
        ``alpha/2 ||w||^2 + mean over sequences of -log p(y | x)``
        (CRFsuite's ``c2 = alpha n / 2``). The bias and transitions are
        penalised like the state weights.
    l1_ratio : float, default=0.15
        The L1 share of ``alpha`` with ``penalty='elasticnet'`` (in ``[0, 1]``;
        unused otherwise).
    period : int, default=10
        ``b``: the step sizes adapt every ``2 b`` updates. The paper suggests
        ``b ~ 0.5 n / 1000`` for large ``n``.
    eta0 : float or 'auto', default=0.1
        Initial step size of every weight (the paper's CRF setting);
        ``'auto'`` calibrates it as the other taggers do.
    psa_alpha : float, default=0.9999
        Largest discount ``v_i`` (Eq. 10), ``psa_beta < psa_alpha < 1``.
    psa_beta : float, default=0.99
        Smallest discount ``v_i`` (Eq. 10), ``0 < psa_beta < psa_alpha``.
    psa_kappa : float, default=0.9
        Bound on ``|g_i|`` (Eq. 7), ``0 < psa_kappa < 1``.
    max_iter : int, default=1
        Passes over the data in ``fit``.
    fit_intercept : bool, default=True
        Add a per-label bias to every token's scores (like a constant
        ``'bias'`` feature in sklearn-crfsuite; it is L2-penalised).
    shuffle : bool, default=True
        Shuffle the sequences before each pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles and the calibration sample.
    verbose : int, default=0
        Print the mean negative log-likelihood after each pass.
    n_jobs : int, default=None
        Threads that train the model together (the CRF kernel releases the GIL) on the
        one training state: each thread owns a share of the weight rows, which it alone
        writes; the sequences go by in rounds of ``4 n_jobs``, each inferred at the
        weights of its round's start (the forward-backward passes shared out between the
        threads), then stepped in order, every thread on its own rows. That is the
        algorithm with a sequence's gradient up to ``4 n_jobs - 1`` updates stale, not
        the one-thread model: on CoNLL-2000 chunking the chunk F1 at ``n_jobs=2`` was
        0.03 above one thread's after 2 passes and 0.04 above after 5 (see "Threads on
        one model" in the user guide), and on a quiet 2-core machine 2 passes took 0.94
        s against 1.56 s (1.65x). A given ``n_jobs`` and ``random_state`` give the same
        model bit for bit; None and 1 are one thread, the model of earlier releases; -1
        means all the cores, -2 all but one; 0 or a non-int is a ValueError. The threads
        need no memory beyond the one state's.

    Attributes
    ----------
    classes_ : ndarray of shape (n_labels,)
        The labels, sorted.
    state_features_ : dict
        ``{(attribute, label): weight}`` (non-zero weights), as sklearn-crfsuite.
    transition_features_ : dict
        ``{(label_from, label_to): weight}``, as sklearn-crfsuite.
    attributes_ : list
        Attribute names by column.
    coef_ : ndarray of shape (n_labels, n_attributes)
        The state weights.
    intercept_ : ndarray of shape (n_labels,)
        The per-label bias (zero unless ``fit_intercept``).
    vocabulary_ : dict
        Attribute name -> column (feature-dict input only). It grows in
        ``partial_fit``: a growable vocabulary rather than hashing, so
        ``state_features_`` keeps readable names and no two attributes
        collide; a later batch's new attributes get zero weights and are
        learned from then on.
    n_features_in_ : int
        Number of features of numeric input (not set for feature dicts).
    eta0_ : float
        The initial step size used (calibrated when ``eta0='auto'``).
    n_iter_ : int
        Passes made by the last call to ``fit`` or ``partial_fit``.
    t_ : int
        Sequence updates made so far.
    pass_seconds_ : list of float
        Wall time of every training pass so far.
    step_sizes_ : ndarray of shape (n_weights,)
        The current per-weight step sizes (flat layout).

    See Also
    --------
    PSAClassifier : PSA for linear classifiers, on the same lazy core.
    ASFSequenceTagger : Averaged SGD with feedback on the CRF core.

    References
    ----------
    C.-N. Hsu, Y.-M. Chang, H.-S. Huang, Y.-J. Lee. Periodic step-size
    adaptation for single-pass on-line learning. NIPS 2009.
    """

    _parameter_constraints: dict = {
        **_BaseSequenceTagger._parameter_constraints,
        **PENALTY_CONSTRAINTS,
        "period": [Interval(Integral, 1, None, closed="left")],
        "psa_alpha": [Interval(Real, 0, 1, closed="neither")],
        "psa_beta": [Interval(Real, 0, 1, closed="neither")],
        "psa_kappa": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, *, penalty="l2", alpha=1e-4, l1_ratio=0.15, period=10, eta0=0.1,
                 psa_alpha=0.9999, psa_beta=0.99, psa_kappa=0.9, max_iter=1,
                 fit_intercept=True, shuffle=True, random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())

    def _more_validate_params(self, for_partial_fit=False):
        check_psa_factors(self)

    def _bytes_per_weight(self):
        # besides the CRF's: LazyStepState's record per attribute (weights,
        # step sizes, snapshots, time)
        H = self._n_states()
        record = record_dtype(H, l1=l1_share(self) > 0).itemsize
        return super()._bytes_per_weight() + -(-record // H)

    def _grow(self, n_attributes):
        old = self._state.crf.n_attributes
        super()._grow(n_attributes)
        if n_attributes > old and self._state.psa is not None:
            self._state.psa.insert_blocks(old, n_attributes - old, self.period)

    _data_parallel = True
    _shared_passes = True

    def _run_passes(self, ds, n_epochs, threads=None):
        st = self._state
        check_eta0(self, self.eta0_)
        if st.psa is None:
            n_blocks, H = st.crf.n_attributes + self.classes_.size + 1, self.classes_.size
            allowed = getattr(st.crf, "allowed", None)
            exists = None
            if allowed is not None:
                # CRFsuite's feature set: an attribute's row holds its
                # trained labels only (the transitions and the bias all)
                exists = np.asarray(allowed, dtype=bool).reshape(n_blocks, H).copy()
                exists[st.crf.n_attributes:] = True
            st.psa = LazyStepState.zeros(n_blocks, H, self.eta0_, l1=l1_share(self) > 0,
                                         exists=exists)
        lam, l1 = split_alpha(self)
        if l1 > 0:
            st.psa.with_l1()                  # (an L2 state, now with L1)
        st.psa.prepare()
        st.psa.set_values(st.crf.coef)
        st.psa.t, st.psa.seed = st.crf.t, st.crf.seed
        options = PSAOptions(lam=lam, period=self.period, psa_alpha=self.psa_alpha,
                             psa_beta=self.psa_beta, kappa=self.psa_kappa, l1=l1)
        result = psa_epochs(ds, st.psa, options, n_epochs=n_epochs, shuffle=self.shuffle,
                            fit_intercept=self.fit_intercept,
                            allowed=getattr(st.crf, "allowed", None), threads=threads)
        st.crf.coef = np.ascontiguousarray(st.psa.weights)
        st.crf.t, st.crf.seed = st.psa.t, st.psa.seed
        st.crf.passes += result.epochs
        self._check_info(result)
        return result.epochs

    def _final_flat(self):
        return self._state.crf.coef.copy()

    def _mix_states(self, states, weights, start):
        return mix_tagger_states(states, weights, start, average=False)

    def _mix_shards(self, states, weights, start):
        # (the threads' states are the fit's own: the first's PSA state
        # takes the mix)
        return mix_tagger_states(states, weights, start, average=False, reuse_first=True)

    @property
    def step_sizes_(self):
        """Per-weight step sizes (flat layout)."""
        check_is_fitted(self)
        return self._state.psa.step_sizes.copy()
