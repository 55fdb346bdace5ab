"""ASFSequenceTagger: a linear-chain CRF trained by averaged SGD with feedback."""
from numbers import Integral

import numpy as np

from .._compat import Interval, StrOptions, check_is_fitted
from .._core._crf_sgd import CRFSGDOptions, is_feedback_pass, sgd_epochs
from .._penalty import PENALTY_CONSTRAINTS, split_alpha
from .._validation import store_init_params
from ._base import _BaseSequenceTagger


class ASFSequenceTagger(_BaseSequenceTagger):
    """Linear-chain CRF trained by averaged SGD with feedback (ASF).

    ASF (Sun, Kashima, Matsuzaki and Ueda, ICDM 2010, Fig. 1): SGD with a
    constant step ``eta0`` runs in periods ``c = 1, 2, 3, ...`` of ``c``
    passes each, so feedback happens after passes 1, 3, 6, 10, ... At the end
    of each period the weights are reset to an average of the iterates
    (the feedback), and the model returned is that average. The paper's
    average (Eq. 2) is over *all* iterates since the start of training
    (``feedback_average='all'``); by default it is over the period's own
    iterates, from the point fed back (``'period'``). The average is kept
    lazily (``S = u + C v`` with the scale trick), so a step costs O(nnz)
    and only a feedback costs O(n_parameters). The optional
    ``gamma0 / (1 + c/N)`` decay of Fig. 1 is not used: the paper notes it
    is only needed for the analysis.

    Why the period's average: with one step size for every weight, a
    feature seen in ``k`` sequences moves by about ``eta0 k`` per pass while
    the L2 penalty pulls it by ``eta0 alpha n`` (``2 c2 eta0`` in CRFsuite's
    terms) of its value, so a rare feature (a gene name's word or affix)
    needs about ``1 / (eta0 alpha n)`` passes to reach its optimum, 10 at
    CRFsuite's ``c2 = 1`` and ``eta0 = 0.05``. While the weights drift so,
    an average of all iterates since the start lags half the elapsed
    passes behind, and every feedback pulls the iterate back to it; the
    period's average lags half a period. On BC2GM gene mentions (12,574
    sentences, CRFsuite's ``c2 = 1``, a generic NER template) the entity F1
    after 10 passes went from 67.43 (all iterates, half the calibrated step)
    to 70.88 (the period's, the calibrated step), against 71.30 for CRFsuite
    L-BFGS to convergence; after 1 / 3 / 6 passes 57.42 / 63.34 / 66.01
    against 61.50 / 67.45 / 69.88 (``benchmarks/RESULTS.md``). On CoNLL-2000
    chunking and base NP and CoNLL-2003 NER (the tutorial's features and the
    NER template) it was higher too after every pass count from 1 to 10.

    One step on a sequence ``(x, y)`` is
    ``w <- (1 - eta0 alpha) w + eta0 grad log p(y | x; w)``.

    The update is ``SequenceSteps.step`` in ``_core/_sgd_fast.pyx`` (the shrink
    and the step; the pass is ``sgd_pass``, the epochs
    `sklearn_secondorder._core._crf_sgd.sgd_epochs`) on ``ScaledWeights``; the gradient is
    ``CRFContext.add_gradient`` (``_core/_crf_infer.pyx``) and the feedback
    ``ScaledWeights.reset_to_average`` (``_core/_weights.pyx``).

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
        when a step reads it and at the end of each call, so the iterate holds
        exact zeros. The average (the model, and the weights at each feedback)
        is taken on the support of the current iterate: its zeros are kept, so
        the model is as sparse as the last iterate (an average of sparse
        iterates is dense).
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
        after the pass improves (Bottou's recipe). The objective is taken at
        the average of the trial pass's iterates, the model ASF returns, and
        ASF takes the best candidate itself: the halving that plain SGD
        applies for the noise of its last iterate would only slow the rare
        features (see above).
    fit_intercept : bool, default=True
        Add a per-label bias to every token's scores (like a constant
        ``'bias'`` feature in sklearn-crfsuite; it is L2-penalised).
    shuffle : bool, default=True
        Shuffle the sequences before each pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles, the calibration sample and the random initial
        weights of latent states.
    n_latent : int, default=1
        Hidden states per label (latent-dynamic CRF / DPLVM, Section II.A).
        The gradient is ``E_p(h|y,x)[f] - E_p(h|x)[f]`` (a label-constrained
        and a free forward-backward); the weights start random (N(0, 0.1^2))
        so the hidden states of a label can separate. Decoding takes the best
        hidden-state path and maps it to labels, an approximation of the best
        label path. ``predict_marginals`` is exact.
    verbose : int, default=0
        Print the mean negative log-likelihood after each pass.
    n_jobs : int, default=None
        Threads that train the model together (the CRF kernel releases the GIL) on the
        one training state: each thread owns a share of the weight rows, which it alone
        writes; the sequences go by in rounds of 8 (``2 n_jobs`` beyond 4 threads), each
        inferred at the weights of its round's start (the forward-backward passes shared
        out between the threads), then stepped in order, every thread on its own rows.
        That is the algorithm with a sequence's gradient up to 7 updates stale (``2
        n_jobs - 1`` beyond 4 threads), not the one-thread model: on CoNLL-2000 chunking
        the chunk F1 at ``n_jobs=2`` was 0.08 below one thread's after 2 passes and 0.03
        below after 10 (see "Threads on one model" in the user guide), and on a quiet
        2-core machine 2 passes took 0.47 s against 0.72 s (1.52x). A given ``n_jobs``
        and ``random_state`` give the same model bit for bit; None and 1 are one thread,
        the model of earlier releases; -1 means all the cores, -2 all but one; 0 or a
        non-int is a ValueError. The threads need no memory beyond the one state's. With
        hidden states (``n_latent > 1``) the threads mix their copies after every pass
        instead (parameter mixing, as the perceptron-style taggers).
    feedback_average : {'period', 'all'}, default='period'
        The average fed back at the end of a period, and returned: of the
        period's iterates (its first the point fed back at its start), or of
        all iterates since the start of training (the paper's Eq. 2; the
        model of earlier releases).

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
    coef_ : ndarray of shape (n_states, n_attributes)
        The state weights (``n_states = n_labels * n_latent``).
    intercept_ : ndarray of shape (n_states,)
        The per-state bias (zero unless ``fit_intercept``).
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
    feedback_passes_ : list of int
        Pass counts after which the weights were reset to the average.

    See Also
    --------
    SGDSequenceTagger : Plain and averaged SGD on the same core.
    sklearn_crfsuite.CRF : The CRFsuite-based peer.

    References
    ----------
    X. Sun, H. Kashima, T. Matsuzaki, N. Ueda. Averaged stochastic gradient
    descent with feedback: an accurate, robust, and fast training method.
    ICDM 2010.

    Examples
    --------
    >>> from sklearn_secondorder import ASFSequenceTagger
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> tagger = ASFSequenceTagger(random_state=0).fit(X, y)
    >>> tagger.predict([[{"w": "a"}, {"w": "dog"}]])
    [['DET', 'N']]
    >>> round(tagger.eta0_, 2)          # the step size that eta0='auto' calibrated
    6.4
    """

    _parameter_constraints: dict = {
        **_BaseSequenceTagger._parameter_constraints,
        **PENALTY_CONSTRAINTS,
        "n_latent": [Interval(Integral, 1, None, closed="left")],
        "feedback_average": [StrOptions({"period", "all"})],
    }
    _averaged = True

    def __init__(self, *, penalty="l2", alpha=1e-4, l1_ratio=0.15, max_iter=10, eta0="auto",
                 fit_intercept=True, shuffle=True, random_state=None, n_latent=1, verbose=0,
                 n_jobs=None, feedback_average="period"):
        store_init_params(self, locals())

    def _n_latent(self):
        return self.n_latent

    _data_parallel = True

    @property
    def _shared_passes(self):
        # (the kernel's shared pass is the plain CRF's; latent states mix)
        return self.n_latent == 1

    def _run_passes(self, ds, n_epochs, threads=None):
        lam, l1 = split_alpha(self)
        crf = self._state.crf
        if l1 > 0 and crf.l1_q is None:    # (an L2 state, now with L1)
            crf.l1_q = np.zeros_like(crf.coef)
        options = CRFSGDOptions(eta0=self.eta0_, power=0.0, lam=lam, l1=l1, average=True,
                                feedback=True)
        done = 0
        while done < n_epochs:
            # (one kernel call per period, so that the average can restart at
            # its feedback)
            k = n_epochs - done
            if self.feedback_average == "period":
                k = min(k, _passes_to_feedback(self._state.crf.passes))
            result = sgd_epochs(ds, self._state.crf, options, n_epochs=k,
                                shuffle=self.shuffle, fit_intercept=self.fit_intercept,
                                n_latent=self.n_latent, threads=threads)
            self._state.feedbacks.extend(result.feedbacks)
            self._check_info(result)
            done += result.epochs
            crf = self._state.crf
            if self.feedback_average == "period" and is_feedback_pass(crf.passes):
                # the next period averages its own iterates, the first of
                # them the average just fed back (the iterate now)
                np.copyto(crf.avg, crf.coef)
                crf.n_iterates = 1.0
        return done

    #: The share of the calibration's best step that ASF takes (see ``eta0``).
    _best_step_share = 1.0

    def _eta0(self, batch, label_idx):
        eta0 = super()._eta0(batch, label_idx)
        if self.eta0 != "auto":
            return eta0
        # the calibration returns half its best step, plain SGD's margin for
        # the noise of its last iterate; ASF returns an average
        return 2.0 * self._best_step_share * eta0

    def _final_flat(self):
        return self._state.crf.model()

    @property
    def feedback_passes_(self):
        """Pass counts after which the weights were reset to the average."""
        check_is_fitted(self)
        return list(self._state.feedbacks)




def _passes_to_feedback(passes):
    """The passes from ``passes`` done to the next feedback (ASF's periods:
    feedback after pass 1, 3, 6, 10, ...)."""
    c = 1
    while c * (c + 1) // 2 <= passes:
        c += 1
    return c * (c + 1) // 2 - passes
