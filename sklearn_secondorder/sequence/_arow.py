"""CRFsuite's AROW trainer (``arow``) as a tagger.

The kernel is ``online_epochs`` in ``_core/_crf_online.pyx``: the pass
shared by the online trainers, with its step ``arow_step``. The shared
online-tagger code is ``_online._OnlineSequenceTagger``.
"""
from numbers import Real

from .._compat import Interval
from .._core._crf_online import OnlineOptions
from .._validation import store_init_params
from ._online import AROW, _OnlineSequenceTagger


class AROWSequenceTagger(_OnlineSequenceTagger):
    """Linear-chain CRF trained by AROW: CRFsuite's ``arow``.

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
        Stop after a pass whose mean cost is below ``epsilon``, or after a
        pass without errors (the later passes would repeat it: nothing is
        averaged). With 0, CRFsuite's test: a pass without errors.
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
        at ``n_jobs=2`` after 5 passes was 0.36 above one thread's (see
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
    PassiveAggressiveSequenceTagger : CRFsuite's ``pa``: each step sized by its cost.
    sklearn_secondorder.crfsuite.CRF : The sklearn-crfsuite interface, whose
        ``algorithm='arow'`` trains this tagger.

    References
    ----------
    K. Crammer, A. Kulesza and M. Dredze, "Adaptive regularization of weight
    vectors", NIPS 2009.

    Examples
    --------
    >>> from sklearn_secondorder import AROWSequenceTagger
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> tagger = AROWSequenceTagger(variance=1.0, gamma=1.0, random_state=0)
    >>> tagger.fit(X, y).loss_       # a pass without errors ends the training
    [2.2, 0.0]
    >>> tagger.predict([[{"w": "a"}, {"w": "dog"}]])
    [['DET', 'N']]
    """

    _method = AROW
    _averaged = False
    _parameter_constraints: dict = {
        **_OnlineSequenceTagger._parameter_constraints,
        "variance": [Interval(Real, 0, None, closed="neither")],
        "gamma": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, *, variance=1.0, gamma=1.0, max_iter=100, epsilon=0.0,
                 all_possible_states=False, all_possible_transitions=False,
                 fit_intercept=True, shuffle=True, random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())

    def _bytes_per_weight(self):
        return super()._bytes_per_weight() + 8      # the diagonal covariance

    def _options(self):
        return OnlineOptions(method=AROW, gamma=self.gamma, epsilon=self.epsilon)
