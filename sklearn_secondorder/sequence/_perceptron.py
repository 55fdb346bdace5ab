"""CRFsuite's averaged perceptron (``ap``) as a tagger.

The kernel is ``online_epochs`` in ``_core/_crf_online.pyx``: the pass
shared by the online trainers, with its step ``ap_step``. The shared
online-tagger code is ``_online._OnlineSequenceTagger``.
"""
from .._core._crf_online import OnlineOptions
from .._validation import store_init_params
from ._online import AP, _OnlineSequenceTagger


class AveragedPerceptronSequenceTagger(_OnlineSequenceTagger):
    """Linear-chain CRF trained by the averaged perceptron: CRFsuite's ``ap``.

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
    n_jobs : int, default=None
        Threads that train the model together (the CRF kernel releases the
        GIL): every pass's shuffled order of the sequences is cut into
        ``n_jobs`` contiguous shards of about equal work (tokens and
        non-zeros), each thread runs one kernel pass over its shard on its own
        copy of the training state, and the copies are mixed after the pass
        (parameter mixing: ``mix``'s rules, ``sklearn_secondorder._mixing``).
        That is not the one-thread model: on CoNLL-2000 chunking the chunk F1
        at ``n_jobs=2`` after 5 passes was 0.20 below one thread's (see
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
        (CRFsuite's "Loss": the sum of the ratios of wrong labels).
    pass_seconds_ : list of float
        Wall time of every training pass so far.

    See Also
    --------
    PassiveAggressiveSequenceTagger : CRFsuite's ``pa``: each step sized by its cost.
    AROWSequenceTagger : CRFsuite's ``arow``: a step per weight, scaled by its variance.
    sklearn_secondorder.crfsuite.CRF : The sklearn-crfsuite interface, whose
        ``algorithm='ap'`` trains this tagger.

    References
    ----------
    M. Collins, "Discriminative training methods for hidden Markov models:
    theory and experiments with perceptron algorithms", EMNLP 2002.

    Examples
    --------
    >>> from sklearn_secondorder import AveragedPerceptronSequenceTagger
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> tagger = AveragedPerceptronSequenceTagger(max_iter=5, random_state=0).fit(X, y)
    >>> tagger.predict([[{"w": "a"}, {"w": "dog"}]])
    [['DET', 'N']]
    """

    _method = AP
    _averaged = True

    def __init__(self, *, max_iter=100, epsilon=0.0, all_possible_states=False,
                 all_possible_transitions=False, fit_intercept=True, shuffle=True,
                 random_state=None, verbose=0, n_jobs=None):
        store_init_params(self, locals())

    def _options(self):
        return OnlineOptions(method=AP, averaging=True, epsilon=self.epsilon)
