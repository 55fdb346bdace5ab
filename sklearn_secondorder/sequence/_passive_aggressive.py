"""CRFsuite's passive-aggressive trainer (``pa``) as a tagger.

The kernel is ``online_epochs`` in ``_core/_crf_online.pyx``: the pass
shared by the online trainers, with the step ``pa0_step``, ``pa1_step`` or
``pa2_step`` (by ``pa_type``). The shared online-tagger code is
``_online._OnlineSequenceTagger``.
"""
from numbers import Integral, Real

from .._compat import Interval
from .._core._crf_online import OnlineOptions
from .._validation import store_init_params
from ._online import PA, _OnlineSequenceTagger


class PassiveAggressiveSequenceTagger(_OnlineSequenceTagger):
    """Linear-chain CRF trained by passive-aggressive updates: CRFsuite's ``pa``.

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
    pa_type : {0, 1, 2}, default=1
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
        Stop after a pass whose mean cost is below ``epsilon`` (0: never),
        or, without ``averaging``, after a pass without errors (the later
        passes would repeat it).
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
    n_jobs : int, default=None
        Threads that train the model together (the CRF kernel releases the
        GIL): every pass's shuffled order of the sequences is cut into
        ``n_jobs`` contiguous shards of about equal work (tokens and
        non-zeros), each thread runs one kernel pass over its shard on its own
        copy of the training state, and the copies are mixed after the pass
        (parameter mixing: ``mix``'s rules, ``sklearn_secondorder._mixing``).
        That is not the one-thread model: on CoNLL-2000 chunking the chunk F1
        at ``n_jobs=2`` after 5 passes was 0.19 below one thread's (see
        "Threads on one model" in the user guide). A given ``n_jobs`` and
        ``random_state`` give the same model bit for bit; None and 1 are one
        thread, the model of earlier releases; -1 means all the cores, -2 all
        but one; 0 or a non-int is a ValueError. Each thread trains a copy of
        the state (the memory check before training counts them) and gathers
        its shard's sequences (a copy of its share of the data).

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
        (CRFsuite's "Loss": the sum of the costs).
    pass_seconds_ : list of float
        Wall time of every training pass so far.

    See Also
    --------
    AveragedPerceptronSequenceTagger : CRFsuite's ``ap``: unit steps, averaged.
    AROWSequenceTagger : CRFsuite's ``arow``: a step per weight, scaled by its variance.
    sklearn_secondorder.crfsuite.CRF : The sklearn-crfsuite interface, whose
        ``algorithm='pa'`` trains this tagger.

    References
    ----------
    K. Crammer, O. Dekel, J. Keshet, S. Shalev-Shwartz and Y. Singer,
    "Online passive-aggressive algorithms", JMLR 7 (2006).

    Examples
    --------
    >>> from sklearn_secondorder import PassiveAggressiveSequenceTagger
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> pa2 = PassiveAggressiveSequenceTagger(pa_type=2, c=0.5, max_iter=5, random_state=0)
    >>> pa2.fit(X, y).predict([[{"w": "a"}, {"w": "dog"}]])
    [['DET', 'N']]
    """

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
                 random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())

    @property
    def _averaged(self):
        return self.averaging

    def _options(self):
        return OnlineOptions(method=PA, pa_type=self.pa_type, c=self.c,
                             error_sensitive=self.error_sensitive, averaging=self.averaging,
                             epsilon=self.epsilon)
