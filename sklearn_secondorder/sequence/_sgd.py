"""SGDSequenceTagger: plain or averaged SGD on the CRF core (the tagger baseline)."""
import numpy as np

from .._core._crf_sgd import CRFSGDOptions, sgd_epochs
from .._penalty import PENALTY_CONSTRAINTS, split_alpha
from .._validation import store_init_params
from ._base import _BaseSequenceTagger


class SGDSequenceTagger(_BaseSequenceTagger):
    """Linear-chain CRF trained by plain or averaged SGD on the shared core.

    The baselines ASF is measured against. One step on a sequence at counter
    ``t`` is ``w <- (1 - eta_t alpha) w + eta_t grad log p(y | x; w)`` with

    * plain SGD (``average=False``): ``eta_t = eta0 / (1 + alpha eta0 t)``,
      i.e. ``1 / (alpha (t + t0))`` with ``t0 = 1 / (alpha eta0)``, the
      schedule of CRFsuite's l2sgd and Bottou's crfsgd;
    * averaged SGD (``average=True``): ``eta_t = eta0 / (1 + alpha eta0
      t)^0.75`` (Bottou's ASGD) and the model is the average of all
      iterates, kept lazily in O(nnz) per step (no feedback).

    The update is ``SequenceSteps.step`` in ``_core/_sgd_fast.pyx`` (the shrink
    and the step; the pass is ``sgd_pass``, the epochs
    `sklearn_secondorder._core._crf_sgd.sgd_epochs`) on ``ScaledWeights`` (``_core/_weights.pyx``,
    which also keeps the running average); the gradient is
    ``CRFContext.add_gradient`` (``_core/_crf_infer.pyx``).

    Parameters
    ----------
    penalty : {'l2', 'l1', 'elasticnet'}, default='l2'
        The penalty, with scikit-learn's ``SGDClassifier`` meaning: the
        objective is ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2) +
        mean over sequences of -log p(y | x)`` (``'l2'`` is ``l1_ratio = 0``,
        ``'l1'`` is ``l1_ratio = 1``), so CRFsuite's ``c1``, ``c2`` are
        ``alpha = (c1 + 2 c2) / n`` and ``l1_ratio = c1 / (c1 + 2 c2)`` for
        ``n`` training sequences. The L1 part is Tsuruoka, Tsujii and
        Ananiadou's cumulative penalty (ACL 2009), applied lazily (O(nnz)
        per step): every weight (bias and transitions included) is caught up
        when a step reads it and at the end of each call, so the model holds
        exact zeros. With ``average=True`` the average is taken on the support
        of the last iterate (its zeros are kept: an average of sparse iterates
        is dense).
    alpha : float, default=1e-4
        Strength of the penalty; with ``penalty='l2'`` the objective is
        ``alpha/2 ||w||^2 + mean over sequences of -log p(y | x)``.
        CRFsuite minimises ``-sum log p + c2 ||w||^2``, so ``c2 = alpha n / 2``
        for ``n`` training sequences. The bias and transitions are penalised
        like the state weights.
    l1_ratio : float, default=0.15
        The L1 share of ``alpha`` with ``penalty='elasticnet'`` (in ``[0, 1]``;
        unused otherwise).
    max_iter : int, default=10
        Passes over the data in ``fit`` (scikit-learn's meaning).
    eta0 : 'auto' or float, default='auto'
        Step size. ``'auto'`` calibrates it on (at most) 1000 sequences:
        one constant-step pass from the current weights per candidate, the
        candidate doubling or halving from 0.1 while the regularised objective
        after the pass improves; the best is halved (Bottou's recipe). With
        ``average=True`` the objective is taken at the average of the trial
        pass's iterates, the model returned.
    average : bool, default=False
        Return the average of all iterates (averaged SGD).
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
        Threads that train the model together (the CRF kernel releases the
        GIL): every pass's shuffled order of the sequences is cut into
        ``n_jobs`` contiguous shards of about equal work (tokens and
        non-zeros), each thread runs one kernel pass over its shard on its own
        copy of the training state, and the copies are mixed after the pass
        (parameter mixing: ``mix``'s rules, ``sklearn_secondorder._mixing``).
        That is not the one-thread model: on CoNLL-2000 chunking the chunk F1
        at ``n_jobs=2`` after 5 passes was 0.09 above one thread's (see
        "Threads on one model" in the user guide). A given ``n_jobs`` and
        ``random_state`` give the same model bit for bit; None and 1 are one
        thread, the model of earlier releases; -1 means all the cores, -2 all
        but one; 0 or a non-int is a ValueError. Each thread trains a copy of
        the state (the memory check before training counts them) and gathers
        its shard's sequences (a copy of its share of the data). Plain SGD's
        first steps are its largest: with the shared pass of the ASF and PSA
        taggers, which scores a round's sentences at its start, small data
        sets lost up to 4 points of token accuracy at two threads.

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
        The step size used (calibrated when ``eta0='auto'``).
    n_iter_ : int
        Passes made by the last call to ``fit`` or ``partial_fit``.
    t_ : int
        Sequence updates made so far.
    pass_seconds_ : list of float
        Wall time of every training pass so far.

    See Also
    --------
    ASFSequenceTagger : Averaged SGD with feedback on the same core.

    Examples
    --------
    >>> from sklearn_secondorder import SGDSequenceTagger
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> SGDSequenceTagger(random_state=0).fit(X, y).predict([[{"w": "a"}, {"w": "dog"}]])
    [['DET', 'N']]
    """

    _parameter_constraints: dict = {
        **_BaseSequenceTagger._parameter_constraints,
        **PENALTY_CONSTRAINTS,
        "average": ["boolean"],
    }

    def __init__(self, *, penalty="l2", alpha=1e-4, l1_ratio=0.15, max_iter=10, eta0="auto",
                 average=False, fit_intercept=True, shuffle=True, random_state=None, verbose=0,
                 n_jobs=None):
        store_init_params(self, locals())

    @property
    def _averaged(self):
        return self.average

    _data_parallel = True

    def _run_passes(self, ds, n_epochs, threads=None):
        lam, l1 = split_alpha(self)
        crf = self._state.crf
        if l1 > 0 and crf.l1_q is None:    # (an L2 state, now with L1)
            crf.l1_q = np.zeros_like(crf.coef)
        options = CRFSGDOptions(eta0=self.eta0_, power=0.75 if self.average else 1.0,
                                lam=lam, l1=l1, average=self.average)
        result = sgd_epochs(ds, self._state.crf, options, n_epochs=n_epochs,
                            shuffle=self.shuffle, fit_intercept=self.fit_intercept,
                            threads=threads)
        self._check_info(result)
        return result.epochs

    def _final_flat(self):
        return self._state.crf.model()
