"""LBFGSSequenceTagger: full-batch L-BFGS (OWL-QN with L1), CRFsuite's ``lbfgs``.

The estimator and its objective: one objective evaluation is one
forward-backward pass over all the sequences in Cython
(``_core/_crf_compact.compact_loglik_gradient``, nogil, on the weights that
exist in CRFsuite's feature set, ``compact_objective``). The optimiser,
``minimize_lbfgs``, is in ``_lbfgs_solver`` (its line searches in
``_line_search``); its per-iteration Python is a few dozen vector operations.
With ``n_jobs`` threads the pass is split over a fixed partition of the
sequences and the parts summed in a fixed order (``compact_objective``).
"""
from numbers import Integral, Real

import numpy as np
from scipy.linalg.blas import daxpy, ddot
from sklearn.utils.metaestimators import available_if

from .._compat import Interval, StrOptions
from .._core._crf_compact import compact_loglik_gradient, feature_table, sequence_offsets
from .._threads import ThreadRunner, balanced_chunks, effective_n_jobs
from .._validation import diverged_error, store_init_params
from ._base import _BaseSequenceTagger
from ._feature_set import observed_weights
from ._lbfgs_solver import minimize_lbfgs


def compact_objective(ds, table, n_states, lam2, runner=None):
    """``z -> (f, g)`` of CRFsuite's objective ``-sum log p(y|x) + lam2/2
    ||z||^2`` on the compact weights ``z`` (``table``: ``feature_table``'s
    CSR arrays), one Cython pass over the sequences per call.

    With a ``runner`` (``_threads.ThreadRunner``) of several threads, the
    sequences are cut once into contiguous chunks of about equal token
    counts, one per thread; every call sums each chunk on its thread (its
    own inference context and gradient buffer, without the GIL) and adds
    the chunks' sums in chunk order. The partition and the order depend on
    the data and the number of threads only, so a given ``n_jobs`` gives the
    same objective, bit for bit, on every run, and differs from one thread's
    by the rounding of the sums' order only (within 1e-12 relative,
    ``tests/test_n_jobs.py``).
    """
    attr_ptr, feat_label, trans_id, bias_id = table
    n_threads = 1 if runner is None else runner.n_threads
    bounds = balanced_chunks(sequence_offsets(ds), n_threads)
    chunks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    buffers = []      # the other chunks' gradients, allocated at the first call

    def fun(z):
        g = np.empty_like(z)
        if len(chunks) == 1:
            ll = compact_loglik_gradient(ds, z, attr_ptr, feat_label, trans_id, bias_id,
                                         n_states, g)
        else:
            if not buffers:
                buffers.extend(np.empty_like(z) for _ in chunks[1:])
            grads = [g, *buffers]      # chunk 0 writes into g directly
            parts = runner.map(
                lambda c: compact_loglik_gradient(ds, z, attr_ptr, feat_label, trans_id,
                                                  bias_id, n_states, grads[c], *chunks[c]),
                range(len(chunks)))
            ll = parts[0]
            for c in range(1, len(chunks)):      # (the fixed order of the reduction)
                ll += parts[c]
                g += buffers[c - 1]
        g *= -1.0
        if lam2:
            g = daxpy(z, g, a=lam2)
        return -ll + 0.5 * lam2 * float(ddot(z, z)), g
    return fun


def _never(self):
    return False


class LBFGSSequenceTagger(_BaseSequenceTagger):
    """Linear-chain CRF trained by full-batch L-BFGS (OWL-QN for L1): CRFsuite's ``lbfgs``.

    Minimises the regularised conditional log-likelihood

    ``alpha * (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2) + mean over
    sequences of -log p(y | x)``

    (scikit-learn's elastic net: ``l1_ratio`` sets the mix, as in
    ``LogisticRegression``; ``penalty`` may force pure L2 or L1) by L-BFGS
    (Nocedal 1980), or by OWL-QN (Andrew and Gao, ICML 2007) when there is an
    L1 term. Each evaluation of
    the objective is one forward-backward pass over all the sequences in
    Cython (``compact_loglik_gradient``, ``_core/_crf_compact.pyx``); the two-loop
    recursion is NumPy over BLAS and the orthant-wise steps are
    ``_core/_owlqn.pyx``. The algorithm, line searches and stopping rules are
    liblbfgs's, the library CRFsuite calls, on CRFsuite's scaling of the
    objective (the sum over sequences: ``n`` times the mean above), so
    ``epsilon`` means what it means in CRFsuite.

    As in CRFsuite, only the (attribute, label) pairs and label bigrams seen
    in the training data have weights (unless ``all_possible_states`` /
    ``all_possible_transitions``); L-BFGS and the gradient pass
    (``_core/_crf_compact.pyx``) work on those only, as CRFsuite's do.

    CRFsuite's ``lbfgs`` with ``c1``, ``c2`` on ``n`` sequences is
    ``alpha = (c1 + 2 c2) / n``, ``l1_ratio = c1 / (c1 + 2 c2)``. There is no
    ``partial_fit``: L-BFGS minimises a fixed full-batch objective, and its
    curvature pairs describe that objective only, so a call on new data would
    restart from scratch.

    Parameters
    ----------
    alpha : float, default=1e-4
        Regularisation strength (the mean-scaled objective above).
    penalty : {'l2', 'l1', 'elasticnet'} or None, default=None
        ``'l2'`` forces ``l1_ratio=0``, ``'l1'`` forces ``l1_ratio=1``;
        ``'elasticnet'`` and None use ``l1_ratio``.
    l1_ratio : float, default=0.0
        The L1 share of ``alpha``, in [0, 1] (0: L2 only, L-BFGS; > 0:
        OWL-QN).
    max_iter : int, default=100
        L-BFGS iterations (CRFsuite's ``max_iterations``).
    num_memories : int, default=6
        Curvature pairs kept (CRFsuite's ``num_memories``).
    epsilon : float, default=1e-5
        Stop when ``||g|| / max(1, ||w||) <= epsilon``, ``g`` the gradient
        (pseudo-gradient with L1) of the summed objective (CRFsuite's).
    period : int, default=10
        Stop when the objective decreased by less than ``delta`` (relative)
        over the last ``period`` iterations; 0 turns the test off.
    delta : float, default=1e-5
        See ``period``.
    linesearch : {'MoreThuente', 'Backtracking', 'StrongBacktracking'}, default='MoreThuente'
        The line search without L1: More and Thuente's (strong Wolfe
        conditions), or liblbfgs's backtracking to the Wolfe or strong Wolfe
        conditions. With L1 the search is always OWL-QN's projected
        backtracking (as in CRFsuite).
    max_linesearch : int, default=20
        Objective evaluations per line search.
    all_possible_states : bool, default=False
        Give every (attribute, label) pair of the training attributes a
        weight; by default only the pairs seen in the training data have one
        (CRFsuite's ``feature.possible_states``), the others stay at zero.
    all_possible_transitions : bool, default=False
        Give every label bigram a weight; by default only the bigrams seen
        in training (CRFsuite's ``feature.possible_transitions``).
    fit_intercept : bool, default=True
        Add a per-label bias to every token's scores (penalised like the
        other weights; CRFsuite has none).
    verbose : int, default=0
        Print the objective after each iteration.
    n_jobs : int, default=None
        Threads that evaluate the objective and its gradient together, the
        sum over the sequences cut into ``n_jobs`` contiguous chunks of
        about equal token counts (each thread with its own buffers, without
        the GIL) and added in a fixed order. None means 1 (the single-thread
        pass, whatever the ``joblib`` context), -1 all the cores, -2 all but
        one. Any ``n_jobs`` is deterministic: the same data and parameters
        give the same model, bit for bit, on every run. Different ``n_jobs``
        add the same terms in a different order, so their objective and
        gradient agree to about 1e-12 relative, and L-BFGS's iterates agree
        closely but not bit for bit (the final objectives after 50
        iterations on CoNLL-2000 differ by about 1e-13 relative,
        ``benchmarks/bench_jobs.py``). Each extra thread holds one more
        gradient vector (8 bytes per weight, counted by the memory check).

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
        Attribute name -> column (feature-dict input only).
    n_features_in_ : int
        Number of features of numeric input (not set for feature dicts).
    n_iter_ : int
        L-BFGS iterations made.
    n_evals_ : int
        Objective evaluations (forward-backward passes) made.
    objective_ : float
        The final objective (the mean-scaled one above).
    stop_reason_ : str
        ``'converged'`` (``epsilon``), ``'delta'`` (``period`` / ``delta``),
        ``'max_iter'``, or ``'linesearch'`` (no acceptable step: the last
        accepted point is kept, as CRFsuite does).
    loss_ : list of float
        The objective after every iteration in CRFsuite's scaling
        (``n_sequences * objective``: the "Loss" of CRFsuite's training log).
    pass_seconds_ : list of float
        Wall time of every iteration.

    See Also
    --------
    SGDSequenceTagger : SGD on the same objective (L2).
    AveragedPerceptronSequenceTagger : CRFsuite's ``ap``.

    References
    ----------
    J. Nocedal, "Updating quasi-Newton matrices with limited storage",
    Mathematics of Computation 35 (1980). G. Andrew and J. Gao, "Scalable
    training of L1-regularized log-linear models", ICML 2007.

    Examples
    --------
    >>> from sklearn_secondorder import LBFGSSequenceTagger
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> LBFGSSequenceTagger().fit(X, y).predict([[{"w": "a"}, {"w": "dog"}]])
    [['DET', 'N']]
    """

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left")],
        "penalty": [StrOptions({"l2", "l1", "elasticnet"}), None],
        "l1_ratio": [Interval(Real, 0, 1, closed="both")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "num_memories": [Interval(Integral, 1, None, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="left")],
        "period": [Interval(Integral, 0, None, closed="left")],
        "delta": [Interval(Real, 0, None, closed="left")],
        "linesearch": [StrOptions({"MoreThuente", "Backtracking", "StrongBacktracking"})],
        "max_linesearch": [Interval(Integral, 1, None, closed="left")],
        "all_possible_states": ["boolean"],
        "all_possible_transitions": ["boolean"],
        "fit_intercept": ["boolean"],
        "verbose": ["verbose"],
        "n_jobs": [Interval(Integral, None, -1, closed="right"),
                   Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, *, alpha=1e-4, penalty=None, l1_ratio=0.0, max_iter=100,
                 num_memories=6, epsilon=1e-5, period=10, delta=1e-5,
                 linesearch="MoreThuente", max_linesearch=20, all_possible_states=False,
                 all_possible_transitions=False, fit_intercept=True, verbose=0,
                 n_jobs=None):
        store_init_params(self, locals())

    @available_if(_never)
    def partial_fit(self, X, y, classes=None):
        """Not available: L-BFGS minimises a fixed full-batch objective.

        Parameters
        ----------
        X : list of sequences
            Unused.
        y : list of label lists
            Unused.
        classes : array-like, default=None
            Unused.

        Returns
        -------
        self : object
            Never returned.
        """
        raise AttributeError("partial_fit")   # pragma: no cover - hidden by available_if

    def _bytes_per_weight(self):
        # besides the CRF's: the iterate, the gradient and its previous
        # value, num_memories (s, y) pairs, and a gradient buffer per extra
        # thread
        n_threads = effective_n_jobs(self.n_jobs)
        return super()._bytes_per_weight() + 8 * (3 + 2 * self.num_memories
                                                  + n_threads - 1)

    def _effective_l1_ratio(self):
        return {"l2": 0.0, "l1": 1.0}.get(self.penalty, self.l1_ratio)

    def _fit_batch(self, batch, n_epochs, first):
        label_idx = np.searchsorted(self.classes_, batch.labels).astype(np.int32)
        # no randomness: the weights start at zero, as CRFsuite's
        self._new_state(batch.n_features, np.random.RandomState(0))
        crf = self._state.crf
        ds = batch.sequence_data(crf.n_attributes, label_idx)
        exists = observed_weights(batch, label_idx, crf.n_attributes, crf.n_states,
                                  all_possible_states=self.all_possible_states,
                                  all_possible_transitions=self.all_possible_transitions,
                                  fit_intercept=self.fit_intercept)
        n = batch.n_sequences
        l1_ratio = self._effective_l1_ratio()
        c1 = n * self.alpha * l1_ratio
        lam2 = n * self.alpha * (1.0 - l1_ratio)

        def report(k, x, f):
            if self.verbose:
                print(f"-- iteration {k}: objective {f / n:.8g}")

        # L-BFGS works on the existing weights only, one entry each (CRFsuite's
        # layout): its vectors and the gradient pass's work scale with them
        idx, *table = feature_table(exists.view(np.uint8), crf.n_attributes, crf.n_states)
        with ThreadRunner(effective_n_jobs(self.n_jobs)) as runner:
            fun = compact_objective(ds, table, crf.n_states, lam2, runner)
            res = minimize_lbfgs(fun, np.zeros(idx.size), c1=c1,
                                 num_memories=self.num_memories, epsilon=self.epsilon,
                                 period=self.period, delta=self.delta, max_iter=n_epochs,
                                 linesearch=self.linesearch,
                                 max_linesearch=self.max_linesearch, callback=report)
        if not np.all(np.isfinite(res.x)) or not np.isfinite(res.fun):
            raise diverged_error(type(self).__name__, res.n_iter + 1,
                                 remedy="check the feature values")
        crf.coef[:] = 0.0
        crf.coef[idx] = res.x
        self._state.pass_seconds.extend(res.seconds)
        self.n_iter_ = res.n_iter
        self.n_evals_ = res.n_evals
        self.objective_ = res.fun / n
        self.loss_ = list(res.history)
        self.stop_reason_ = res.stop_reason
        self._model = crf.coef.copy()
        self._check_weight_scale(batch.n_tokens / batch.n_sequences)
        return self
