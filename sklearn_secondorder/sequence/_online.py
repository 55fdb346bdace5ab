"""CRFsuite's online trainers as taggers: averaged perceptron, passive-aggressive, AROW.

The kernels are ``_core/_crf_online.pyx`` (Viterbi on ``CRFContext``, sparse
updates along ``F(x, y) - F(x, Viterbi path)``, the running average in
``ScaledWeights``); this module holds the estimators.
"""
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from .._compat import Interval, check_is_fitted
from .._core._crf_online import OnlineMethod, OnlineOptions, online_epochs
from ._base import TaggerState, _BaseSequenceTagger
from ._feature_set import observed_weights

AP, PA, AROW = OnlineMethod.AP, OnlineMethod.PA, OnlineMethod.AROW


@dataclass
class OnlineTaggerState(TaggerState):
    """``TaggerState`` plus AROW's diagonal covariance.

    Attributes
    ----------
    cov : ndarray like ``crf.coef``, or None
        AROW: the variance of every weight (None for the other trainers).
    losses : list of float
        The training loss of every pass.
    exists : ndarray of bool like ``crf.coef``, or None
        The weights that exist (CRFsuite's feature set of the data seen so
        far, ``observed_weights``); the others stay at zero.
    """

    cov: object = None
    losses: list = field(default_factory=list)
    exists: object = None


def _insert_rows(a, n_old, n_new, n_states, fill):
    """``a`` with ``n_new`` attribute rows of ``fill`` after the ``n_old`` ones."""
    cut = n_old * n_states
    return np.concatenate([a[:cut], np.full(n_new * n_states, fill, dtype=a.dtype), a[cut:]])


_ONLINE_DOC_ATTRIBUTES = """
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
        Attribute name -> column (feature-dict input only); it grows in
        ``partial_fit`` (new attributes start at zero).
    n_features_in_ : int
        Number of features of numeric input (not set for feature dicts).
    n_iter_ : int
        Passes made by the last call to ``fit`` or ``partial_fit``.
    t_ : int
        Sequences visited so far.
    loss_ : list of float
        The training loss of every pass so far, summed over the sequences
        (CRFsuite's "Loss": {loss}).
    pass_seconds_ : list of float
        Wall time of every training pass so far.
"""


class _OnlineSequenceTagger(_BaseSequenceTagger):
    """The online trainers' shared estimator code: no step size, no L2.

    Subclasses set ``_method`` and implement ``_options()``.
    """

    _parameter_constraints: dict = {
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="left")],
        "all_possible_states": ["boolean"],
        "all_possible_transitions": ["boolean"],
        "fit_intercept": ["boolean"],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # No step size: the base's check of a continued partial_fit's step
    # (``check_eta0``) reads ``eta0``, and None leaves it nothing to check.
    eta0 = None
    _method = AP

    def _new_state(self, n_attributes, rng):
        super()._new_state(n_attributes, rng)
        st = self._state
        cov = None
        if self._method == AROW:
            cov = np.full(st.crf.coef.size, float(self.variance))
        self._state = OnlineTaggerState(crf=st.crf, rng=st.rng, cov=cov)
        if self._averaged:
            # CRFsuite's average counts the initial (zero) weights too
            st.crf.n_iterates = 1.0

    def _grow(self, n_attributes):
        st = self._state
        n_old, H = st.crf.n_attributes, st.crf.n_states
        super()._grow(n_attributes)
        if n_attributes > n_old:
            if st.cov is not None:
                st.cov = _insert_rows(st.cov, n_old, n_attributes - n_old, H,
                                      float(self.variance))
            st.exists = _insert_rows(st.exists, n_old, n_attributes - n_old, H, False)

    def _fit_batch(self, batch, n_epochs, first):
        label_idx = np.searchsorted(self.classes_, batch.labels).astype(np.int32)
        if first:
            self._new_state(batch.n_features, check_random_state(self.random_state))
        else:
            self._grow(batch.n_features)
        st = self._state
        crf = st.crf
        exists = observed_weights(batch, label_idx, crf.n_attributes, crf.n_states,
                                  all_possible_states=self.all_possible_states,
                                  all_possible_transitions=self.all_possible_transitions,
                                  fit_intercept=self.fit_intercept)
        st.exists = exists if st.exists is None else st.exists | exists
        ds = batch.sequence_data(crf.n_attributes, label_idx)
        self.n_iter_ = self._run_passes(ds, n_epochs)
        self.t_ = crf.t
        self._model = self._final_flat()
        return self

    def _run_passes(self, ds, n_epochs):
        st = self._state
        if st.cov is not None:
            st.cov = np.require(st.cov, requirements=["C", "W"])
        n_before = len(st.pass_seconds)
        result = online_epochs(ds, st.crf, self._options(), n_epochs=n_epochs, cov=st.cov,
                               exists=np.require(st.exists, requirements=["C"]).view(np.uint8))
        st.pass_seconds.extend(result.seconds)
        st.losses.extend(result.losses)
        if result.diverged:
            raise ValueError(
                f"{type(self).__name__}: the weights or the token scores overflowed "
                f"(non-finite values) during pass {n_before + result.epochs + 1}; scale the "
                "features (e.g. StandardScaler).")
        if self.verbose:
            for p, loss in enumerate(result.losses, start=n_before + 1):
                print(f"-- pass {p}: loss {loss:.6g}")
        return result.epochs

    def _final_flat(self):
        return self._state.crf.model()

    @property
    def loss_(self):
        """The training loss of every pass so far, summed over the sequences."""
        check_is_fitted(self)
        return list(self._state.losses)

    def _check_weight_scale(self, mean_length):
        """No penalty, so no notion of implausibly large weights."""


class AveragedPerceptronSequenceTagger(_OnlineSequenceTagger):
    __doc__ = """Linear-chain CRF trained by the averaged perceptron: CRFsuite's ``ap``.

    Collins' structured perceptron (EMNLP 2002) with averaging: each
    sequence is decoded by Viterbi with the current weights and, when the
    best path ``v`` differs from the labels ``y``, ``w += F(x, y) - F(x, v)``
    (``F`` the feature counts: attribute values per label, bias per label,
    label bigrams). The model is the average of the initial weights and the
    weights after every sequence, kept lazily as CRFsuite does
    (``_core/_crf_online.pyx``, ``online_epochs``).

    CRFsuite's parameters are ``max_iterations`` (``max_iter``) and
    ``epsilon``; it has no ``c1``/``c2`` (no regularisation). As in
    CRFsuite, only the (attribute, label) pairs and label bigrams seen in
    the training data have weights unless ``all_possible_states`` /
    ``all_possible_transitions``.

    Parameters
    ----------
    max_iter : int, default=100
        Passes over the data in ``fit`` (CRFsuite's ``max_iterations``).
    epsilon : float, default=0.0
        Stop after a pass whose mean ratio of wrongly labelled tokens per
        sequence is below ``epsilon`` (0: never).
    all_possible_states : bool, default=False
        Give every (attribute, label) pair of the training attributes a
        weight; by default only the pairs seen in the training data have one
        (CRFsuite's ``feature.possible_states``), the others stay at zero.
    all_possible_transitions : bool, default=False
        Give every label bigram a weight; by default only the bigrams seen
        in training (CRFsuite's ``feature.possible_transitions``).
    fit_intercept : bool, default=True
        Add a per-label bias feature to every token.
    shuffle : bool, default=True
        Shuffle the sequences before each pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles.
    verbose : int, default=0
        Print the loss after each pass.
    {attributes}
    See Also
    --------
    PassiveAggressiveSequenceTagger : CRFsuite's ``pa``.
    AROWSequenceTagger : CRFsuite's ``arow``.

    References
    ----------
    M. Collins, "Discriminative training methods for hidden Markov models:
    theory and experiments with perceptron algorithms", EMNLP 2002.

    Examples
    --------
    >>> from sklearn_secondorder import AveragedPerceptronSequenceTagger
    >>> X = [[{{"w": "the"}}, {{"w": "dog"}}], [{{"w": "a"}}, {{"w": "cat"}}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> tagger = AveragedPerceptronSequenceTagger(max_iter=5, random_state=0).fit(X, y)
    >>> tagger.predict([[{{"w": "a"}}, {{"w": "dog"}}]])
    [['DET', 'N']]
    """.format(attributes=_ONLINE_DOC_ATTRIBUTES.replace("{loss}",
        "the sum of the ratios of wrong labels"))

    _method = AP
    _averaged = True

    def __init__(self, *, max_iter=100, epsilon=0.0, all_possible_states=False,
                 all_possible_transitions=False, fit_intercept=True, shuffle=True,
                 random_state=None, verbose=0):
        self.max_iter = max_iter
        self.epsilon = epsilon
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose

    def _options(self):
        return OnlineOptions(method=AP, averaging=True, epsilon=self.epsilon,
                             shuffle=self.shuffle, fit_intercept=self.fit_intercept)


class PassiveAggressiveSequenceTagger(_OnlineSequenceTagger):
    __doc__ = """Linear-chain CRF trained by passive-aggressive updates: CRFsuite's ``pa``.

    Crammer et al. (JMLR 2006) for structured outputs, as CRFsuite: each
    sequence is decoded by Viterbi; when the best path ``v`` differs from
    the labels ``y`` in ``d`` tokens, with ``delta = F(x, y) - F(x, v)`` and
    the cost ``l = score(v) - score(y) + sqrt(d)`` (``error_sensitive``) or
    ``+ 1``, the update is ``w += tau delta`` with

    * ``pa_type=0`` (PA): ``tau = l / ||delta||^2``;
    * ``pa_type=1`` (PA-I): ``tau = min(c, l / ||delta||^2)``;
    * ``pa_type=2`` (PA-II): ``tau = l / (||delta||^2 + 1 / (2 c))``.

    With ``averaging`` the model is the average of the initial weights and
    the weights after every sequence (as CRFsuite's). The kernel is
    ``online_epochs`` in ``_core/_crf_online.pyx``.

    CRFsuite's names: ``type`` is ``pa_type``, ``max_iterations`` is
    ``max_iter``; ``c``, ``error_sensitive``, ``averaging``, ``epsilon`` are
    the same. There is no ``c1``/``c2``: ``c`` plays the role of an inverse
    regularisation strength.

    Parameters
    ----------
    pa_type : {{0, 1, 2}}, default=1
        PA, PA-I or PA-II.
    c : float, default=1.0
        Aggressiveness (PA-I's cap on ``tau``, PA-II's slack weight).
    error_sensitive : bool, default=True
        Add ``sqrt(d)`` to the cost (else 1).
    averaging : bool, default=True
        Return the average of the iterates.
    max_iter : int, default=100
        Passes over the data in ``fit``.
    epsilon : float, default=0.0
        Stop after a pass whose mean cost is below ``epsilon`` (0: never).
    all_possible_states : bool, default=False
        Give every (attribute, label) pair of the training attributes a
        weight; by default only the pairs seen in the training data have one
        (CRFsuite's ``feature.possible_states``), the others stay at zero.
    all_possible_transitions : bool, default=False
        Give every label bigram a weight; by default only the bigrams seen
        in training (CRFsuite's ``feature.possible_transitions``).
    fit_intercept : bool, default=True
        Add a per-label bias feature to every token.
    shuffle : bool, default=True
        Shuffle the sequences before each pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles.
    verbose : int, default=0
        Print the loss after each pass.
    {attributes}
    See Also
    --------
    AveragedPerceptronSequenceTagger : CRFsuite's ``ap``.
    AROWSequenceTagger : CRFsuite's ``arow``.

    References
    ----------
    K. Crammer, O. Dekel, J. Keshet, S. Shalev-Shwartz and Y. Singer,
    "Online passive-aggressive algorithms", JMLR 7 (2006).

    Examples
    --------
    >>> from sklearn_secondorder import PassiveAggressiveSequenceTagger
    >>> X = [[{{"w": "the"}}, {{"w": "dog"}}], [{{"w": "a"}}, {{"w": "cat"}}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> tagger = PassiveAggressiveSequenceTagger(max_iter=5, random_state=0).fit(X, y)
    >>> tagger.predict([[{{"w": "a"}}, {{"w": "dog"}}]])
    [['DET', 'N']]
    """.format(attributes=_ONLINE_DOC_ATTRIBUTES.replace("{loss}", "the sum of the costs"))

    _method = PA
    _parameter_constraints: dict = {
        **_OnlineSequenceTagger._parameter_constraints,
        "pa_type": [Interval(Integral, 0, 2, closed="both")],
        "c": [Interval(Real, 0, None, closed="neither")],
        "error_sensitive": ["boolean"],
        "averaging": ["boolean"],
    }

    def __init__(self, *, pa_type=1, c=1.0, error_sensitive=True, averaging=True,
                 max_iter=100, epsilon=0.0, all_possible_states=False,
                 all_possible_transitions=False, fit_intercept=True, shuffle=True,
                 random_state=None, verbose=0):
        self.pa_type = pa_type
        self.c = c
        self.error_sensitive = error_sensitive
        self.averaging = averaging
        self.max_iter = max_iter
        self.epsilon = epsilon
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose

    @property
    def _averaged(self):
        return self.averaging

    def _options(self):
        return OnlineOptions(method=PA, pa_type=self.pa_type, c=self.c,
                             error_sensitive=self.error_sensitive, averaging=self.averaging,
                             epsilon=self.epsilon, shuffle=self.shuffle,
                             fit_intercept=self.fit_intercept)


class AROWSequenceTagger(_OnlineSequenceTagger):
    __doc__ = """Linear-chain CRF trained by AROW: CRFsuite's ``arow``.

    Adaptive regularisation of weight vectors (Crammer, Kulesza and Dredze,
    NIPS 2009) with a diagonal covariance ``Sigma`` (every weight starts at
    ``variance``), for sequences as CRFsuite: when the Viterbi path ``v``
    differs from ``y`` in ``d`` tokens, with ``delta = F(x, y) - F(x, v)``
    and the cost ``l = score(v) - score(y) + d``::

        beta = 1 / (gamma + sum_k Sigma_k delta_k^2)
        w_k += l beta Sigma_k delta_k
        1 / Sigma_k += delta_k^2 / gamma

    No averaging (CRFsuite returns the mean vector ``w``). The kernel is
    ``online_epochs`` in ``_core/_crf_online.pyx``.

    Parameters
    ----------
    variance : float, default=1.0
        The initial variance of every weight.
    gamma : float, default=1.0
        The trade-off (``r`` in the paper): larger values change the
        weights less per update.
    max_iter : int, default=100
        Passes over the data in ``fit``.
    epsilon : float, default=0.0
        Stop after a pass whose mean cost is at most ``epsilon`` (with 0: a
        pass without errors).
    all_possible_states : bool, default=False
        Give every (attribute, label) pair of the training attributes a
        weight; by default only the pairs seen in the training data have one
        (CRFsuite's ``feature.possible_states``), the others stay at zero.
    all_possible_transitions : bool, default=False
        Give every label bigram a weight; by default only the bigrams seen
        in training (CRFsuite's ``feature.possible_transitions``).
    fit_intercept : bool, default=True
        Add a per-label bias feature to every token.
    shuffle : bool, default=True
        Shuffle the sequences before each pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles.
    verbose : int, default=0
        Print the loss after each pass.
    {attributes}
    See Also
    --------
    AveragedPerceptronSequenceTagger : CRFsuite's ``ap``.
    PassiveAggressiveSequenceTagger : CRFsuite's ``pa``.

    References
    ----------
    K. Crammer, A. Kulesza and M. Dredze, "Adaptive regularization of weight
    vectors", NIPS 2009.

    Examples
    --------
    >>> from sklearn_secondorder import AROWSequenceTagger
    >>> X = [[{{"w": "the"}}, {{"w": "dog"}}], [{{"w": "a"}}, {{"w": "cat"}}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> tagger = AROWSequenceTagger(max_iter=5, random_state=0).fit(X, y)
    >>> tagger.predict([[{{"w": "a"}}, {{"w": "dog"}}]])
    [['DET', 'N']]
    """.format(attributes=_ONLINE_DOC_ATTRIBUTES.replace("{loss}", "the sum of the costs"))

    _method = AROW
    _averaged = False
    _parameter_constraints: dict = {
        **_OnlineSequenceTagger._parameter_constraints,
        "variance": [Interval(Real, 0, None, closed="neither")],
        "gamma": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, *, variance=1.0, gamma=1.0, max_iter=100, epsilon=0.0,
                 all_possible_states=False, all_possible_transitions=False,
                 fit_intercept=True, shuffle=True, random_state=None, verbose=0):
        self.variance = variance
        self.gamma = gamma
        self.max_iter = max_iter
        self.epsilon = epsilon
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose

    def _options(self):
        return OnlineOptions(method=AROW, gamma=self.gamma, epsilon=self.epsilon,
                             shuffle=self.shuffle, fit_intercept=self.fit_intercept)
