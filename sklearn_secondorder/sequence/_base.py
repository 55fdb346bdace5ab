"""The shared base of the sequence taggers (linear-chain CRFs).

Input handling (sklearn-crfsuite's list of sequences of feature dicts, or of
2-D arrays, or a plain 2-D array read as one-token sequences) and the fitted
state; its mixins hold the training loop (``_training_loop.py``) and
prediction with the named weights (``_predict.py``). The trainers are thin
subclasses: ``ASFSequenceTagger`` (``_asf.py``), ``PSASequenceTagger``
(``_psa.py``) and ``SGDSequenceTagger`` (``_sgd.py``).
"""
import copy
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state

from .._calibration import calibrate_crf_eta0, sample_attributes
from .._compat import Interval, StrOptions, _fit_context, check_is_fitted
from .._core._crf_sgd import CRFState
from .._mixing import mix_lazy_steps, sum_increments, weighted_mean
from .._penalty import split_alpha
from .._validation import (
    check_classes_arg,
    check_eta0,
    check_model_memory,
    draw_seed,
    remove_fitted,
    unfit_on_error,
)
from ._input import (
    KIND_DICTS,
    read_sequences,
)
from ._predict import TaggerPredictionMixin
from ._training_loop import TaggerTrainingLoopMixin


@dataclass
class TaggerState:
    """A tagger's fitted state.

    Attributes
    ----------
    crf : CRFState
        The weights and the trainers' counters.
    rng : numpy.random.RandomState
        Draws the calibration sample and the initial weights of latent states.
    pass_seconds : list of float
        Wall time of every training pass.
    feedbacks : list of int
        ASF: the pass counts after which the weights were reset to the average.
    psa : LazyStepState or None
        PSA: the per-weight step sizes and window snapshots (allocated at the
        first pass, when ``eta0_`` is known).
    pass_losses : list of float
        Mean ``-log p(y|x)`` over the last pass of every kernel call (at the
        pre-step weights): one entry per pass when passes run one at a time.
    """

    crf: CRFState
    rng: object
    pass_seconds: list = field(default_factory=list)
    feedbacks: list = field(default_factory=list)
    psa: object = None
    pass_losses: list = field(default_factory=list)


def mix_tagger_states(states, weights, start=None, *, average=True, reuse_first=False):
    """Mix taggers' states (``TaggerState``) trained on shards of the sequences.

    The CRF weights are averaged with ``weights``; with ``average``, the
    running sum of the iterates and their count sum over the sequences seen,
    as does the update counter ``t``: they are summed as increments from
    ``start`` (``sklearn_secondorder._mixing``). PSA's step-size state, when
    there is one, is mixed by ``mix_lazy_steps`` and gives the weights.

    Parameters
    ----------
    states : sequence of TaggerState
        One per model, each continued from ``start``.
    weights : sequence of float
        The models' shares of the sequences.
    start : TaggerState or None, default=None
        The state the models started from (None: zero weights and sums).
    average : bool, default=True
        Whether the running sum of the iterates is mixed (trainers that
        average).
    reuse_first : bool, default=False
        Write PSA's mixed step-size state into the first state's (the caller
        owns it and no longer needs it) instead of a copy.

    Returns
    -------
    mixed : TaggerState
        A new state (the first's for the rest: RNG, pass timings); the inputs
        are not modified.
    """
    # a deep copy of the first state without what is computed below (the
    # weights, the running sum, PSA's state: most of the bytes)
    proto = copy.copy(states[0])
    proto.psa = None
    proto.crf = copy.copy(states[0].crf)
    proto.crf.coef = None
    if average:
        proto.crf.avg = None
    out = copy.deepcopy(proto)
    if average:
        out.crf.avg = states[0].crf.avg       # (replaced by the mixed sum below)
    crfs = [s.crf for s in states]
    s_crf = None if start is None else start.crf
    if states[0].psa is None:
        out.crf.coef = weighted_mean([c.coef for c in crfs], weights)
    if average and out.crf.avg is not None:
        out.crf.avg = sum_increments([c.avg for c in crfs],
                                     0.0 if s_crf is None else s_crf.avg)
        out.crf.n_iterates = float(sum_increments(
            [c.n_iterates for c in crfs], 0.0 if s_crf is None else s_crf.n_iterates))
    out.crf.t = int(sum_increments([c.t for c in crfs], 0 if s_crf is None else s_crf.t))
    if states[0].psa is not None:
        out.psa = mix_lazy_steps([s.psa for s in states], weights,
                                 None if start is None else start.psa,
                                 out=states[0].psa if reuse_first else None)
        out.crf.coef = np.ascontiguousarray(out.psa.weights)
    return out


class _BaseSequenceTagger(TaggerPredictionMixin, TaggerTrainingLoopMixin, BaseEstimator):
    """Shared input handling, state, prediction and named weights.

    Not tagged as a classifier (as sklearn-crfsuite's ``CRF``): scikit-learn's
    ``check_cv`` would otherwise pick ``StratifiedKFold``, which cannot read a
    list of label sequences, and ``GridSearchCV(cv=5)`` would fail. With no
    estimator type, an integer ``cv`` means ``KFold`` over sequences.

    Subclasses implement ``_run_passes(ds, n_epochs)`` (train on the
    ``SequenceData`` for ``n_epochs`` passes, updating ``self._state``) and
    ``_final_flat()`` (the flat weights the model exposes).
    """

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "eta0": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    _averaged = False
    _private_state = ("_state", "_model", "_kind")
    #: Whether ``n_jobs`` threads share a pass (``_sharded_passes``): the
    #: online trainers; L-BFGS threads its objective instead.
    _data_parallel = False
    #: Whether the kernel's threads share the one state (``_run_passes``
    #: takes ``threads``: no copies, no mix) rather than mixing shards.
    _shared_passes = False

    # ---- the extension protocol ---------------------------------------------------
    # Public methods for code that drives a tagger from outside its own ``fit``
    # (the Dask mixing, the sklearn-crfsuite facade): they wrap the private
    # steps of ``fit`` / ``partial_fit`` below, which stay the trainers' hooks.
    def start_model(self, classes, *, vocabulary=None, n_features=None):
        """Start a model with zero weights over known labels and attributes, without data.

        What ``fit`` sets up before its first pass, built from the label set
        and the attribute set alone: for extensions such as the Dask mixing
        (every worker continues the same start over the shared vocabulary)
        and the sklearn-crfsuite facade. Continue it with
        ``partial_fit_batch`` or ``partial_fit``. ``eta0`` must be a number:
        ``'auto'`` calibrates on data.

        Parameters
        ----------
        classes : array-like of shape (n_classes,)
            All the labels (at least two).
        vocabulary : dict, default=None
            Input of feature dicts: ``{attribute: column}``, the columns
            ``0 .. len(vocabulary) - 1`` (as ``vocabulary_`` numbers them). A
            copy becomes ``vocabulary_``.
        n_features : int, default=None
            Input of numeric arrays: the number of columns. Exactly one of
            ``vocabulary`` and ``n_features`` is given.

        Returns
        -------
        self : object
            The tagger, fitted with zero weights (``t_ = 0``, ``n_iter_ = 0``).
        """
        from ._input import KIND_ARRAYS  # (only this method names the arrays kind)

        self._validate_params()
        self._more_validate_params()
        if (vocabulary is None) == (n_features is None):
            raise ValueError("start_model takes either vocabulary (feature dicts) or "
                             "n_features (numeric arrays), and exactly one of them.")
        eta0 = getattr(self, "eta0", None)      # (the online trainers take none)
        if eta0 == "auto":
            raise ValueError("eta0='auto' calibrates the step size on data, and "
                             "start_model has none: set eta0 to a number.")
        if eta0 is not None:
            check_eta0(self, float(eta0))
        classes = self._check_labels(check_classes_arg(classes))
        if vocabulary is not None:
            vocabulary = dict(vocabulary)
            columns = np.sort(np.fromiter(vocabulary.values(), dtype=np.int64,
                                          count=len(vocabulary)))
            if not np.array_equal(columns, np.arange(len(vocabulary))):
                raise ValueError("vocabulary must number the attributes 0 .. "
                                 "len(vocabulary) - 1, each column once.")
            n_attributes = len(vocabulary)
        else:
            if isinstance(n_features, bool) or not isinstance(n_features, Integral) \
                    or n_features < 1:
                raise ValueError(f"n_features must be a positive integer, got {n_features!r}.")
            n_attributes = int(n_features)
        remove_fitted(self, self._private_state)
        with unfit_on_error(self, self._private_state):
            self.classes_ = classes
            if vocabulary is not None:
                self._kind = KIND_DICTS
                self.vocabulary_ = vocabulary
            else:
                self._kind = KIND_ARRAYS
                self.n_features_in_ = n_attributes
            self._new_state(n_attributes, check_random_state(self.random_state))
            if eta0 is not None:
                self.eta0_ = float(eta0)
            self.t_ = 0
            self.n_iter_ = 0
            self._model = self._final_flat()
        return self

    def fit_batch(self, batch, *, n_passes, allowed=None, callback=None, eta0_search=None):
        """Fit on sequences already read into a batch, for ``n_passes`` passes.

        ``fit`` without the reading: for extensions such as the
        sklearn-crfsuite facade, which reads the sequences once, derives its
        feature set from the batch, then trains. The labels are those of the
        batch; any previous model is discarded.

        Parameters
        ----------
        batch : SequenceBatch
            The sequences and their labels as ``read_sequences(self, X, y,
            fitting=True, first=True)`` reads them (``sequence._input``),
            which also sets this tagger's ``vocabulary_`` or
            ``n_features_in_``.
        n_passes : int
            The number of passes (L-BFGS: iterations).
        allowed : ndarray of uint8 of shape (n_weights,), default=None
            Restrict the model to the weights marked 1 in the flat layout
            (``flat_weights_``); the others stay zero. None: every weight.
        callback : callable, default=None
            ``callback(self)`` after every pass, with ``flat_weights_``,
            ``t_`` and ``n_iter_`` current; training stops when it returns
            True.
        eta0_search : dict, default=None
            With ``eta0='auto'``, the step-size search's settings (CRFsuite's
            calibration parameters, given by the facade): ``eta_start`` (the
            first step tried, 0.1), ``factor`` (between candidates, 2),
            ``n_samples`` (sequences of the sample, 1000), ``max_trials``
            (each way, 20). None: those defaults.

        Returns
        -------
        self : object
            The fitted tagger.
        """
        if isinstance(n_passes, bool) or not isinstance(n_passes, Integral) or n_passes < 1:
            raise ValueError(f"n_passes must be a positive integer, got {n_passes!r}.")
        # (the trainers with their own _fit_batch, L-BFGS and the online ones,
        # set up their feature set themselves and run all their passes at once)
        if (allowed is not None or callback is not None or eta0_search is not None) and \
                type(self)._fit_batch is not _BaseSequenceTagger._fit_batch:
            raise TypeError(f"{type(self).__name__} trains in one call on its own feature "
                            "set: it takes no allowed mask and no per-pass callback "
                            "(nor eta0_search).")
        unknown = set(eta0_search or ()) - {"eta_start", "factor", "n_samples", "max_trials"}
        if unknown:
            raise TypeError(f"eta0_search takes eta_start, factor, n_samples, max_trials; "
                            f"got {', '.join(sorted(unknown))}.")
        if batch.kind == KIND_DICTS:
            known = len(getattr(self, "vocabulary_", None) or ())
        else:
            known = getattr(self, "n_features_in_", None)
        if getattr(self, "_kind", None) != batch.kind or known != batch.n_features:
            raise ValueError("the batch was not read by this tagger: read it with "
                             "read_sequences(tagger, X, y, fitting=True, first=True).")
        self._eta0_search = dict(eta0_search or {})
        try:
            return self._fit_prepared(batch, n_epochs=n_passes, allowed=allowed,
                                      callback=callback)
        finally:
            del self._eta0_search

    def partial_fit_batch(self, batch, *, n_passes=1):
        """Continue training on sequences already read into a batch.

        ``partial_fit`` without the reading: for extensions such as the Dask
        mixing, whose workers vectorise their sequences once and run a pass on
        them per mixing step. Columns beyond ``n_attributes_`` get new
        weights, as in ``partial_fit``.

        Parameters
        ----------
        batch : SequenceBatch
            The sequences and their labels, vectorised with this tagger's
            ``vocabulary_`` (``read_sequences(self, X, y, fitting=True)``, or
            ``vectorize_dicts`` with the vocabulary, in ``sequence._input``).
            Every label is one of ``classes_``.
        n_passes : int, default=1
            The number of passes.

        Returns
        -------
        self : object
            The updated tagger.
        """
        check_is_fitted(self, ("classes_", "_state"))
        if not hasattr(self, "partial_fit"):     # (L-BFGS: a full-batch objective)
            raise TypeError(f"{type(self).__name__} cannot continue training: it has no "
                            "partial_fit.")
        if (batch.kind == KIND_DICTS) != (self._kind == KIND_DICTS):
            raise ValueError(f"the model was fitted on {self._kind!r} input but the batch "
                             f"holds {batch.kind!r}: numeric arrays and feature dicts "
                             "cannot be mixed.")
        labels = np.asarray(batch.labels)
        at = np.searchsorted(self.classes_, labels).clip(0, self.classes_.size - 1)
        unknown = self.classes_[at] != labels
        if np.any(unknown):
            raise ValueError(f"the batch holds labels not in classes_ {self.classes_!r}: "
                             f"{np.unique(labels[unknown])[:5]!r}.")
        if isinstance(n_passes, bool) or not isinstance(n_passes, Integral) or n_passes < 1:
            raise ValueError(f"n_passes must be a positive integer, got {n_passes!r}.")
        with unfit_on_error(self, self._private_state, continued=True):
            return self._fit_batch(batch, n_passes, first=False)

    @property
    def flat_weights_(self):
        """All the weights as one vector (a copy), in the CRF's flat layout.

        ``n_attributes_ * n_states`` state weights (row ``a`` holds attribute
        ``a``'s weight for every state), ``n_states * n_states`` transitions
        (from, to), then ``n_states`` biases: what prediction uses (the
        average of the iterates for trainers that average). For extensions
        such as the sklearn-crfsuite facade, which deploys and scores it.
        """
        check_is_fitted(self, "_model")
        return self._model.copy()

    @property
    def n_attributes_(self):
        """The number of attributes (columns) the model has weights for.

        ``len(vocabulary_)`` for feature dicts, ``n_features_in_`` for
        numeric arrays: the rows of the state block of ``flat_weights_``.
        """
        check_is_fitted(self, "_state")
        return int(self._state.crf.n_attributes)

    @property
    def pass_losses_(self):
        """Mean ``-log p(y|x)`` over the sequences, per call of the training kernel.

        Measured during the last pass of each call (at the weights before
        each step): one entry per pass when passes run one at a time, as in
        ``partial_fit`` or ``fit_batch`` with a callback. Empty for trainers
        that record their own loss instead (``loss_``). For extensions such
        as the sklearn-crfsuite facade's training log.
        """
        check_is_fitted(self, "_state")
        return list(self._state.pass_losses)

    def rebuild_exported_arrays(self):
        """Recompute the weights prediction uses from the training state.

        ``flat_weights_`` (and what it gives: ``coef_``, ``intercept_``,
        the named features) is derived from the training state after every
        pass. For extensions such as the Dask mixing, which sends models
        without it (``drop_exported_arrays``) or changes the state by mixing.

        Returns
        -------
        self : object
            The tagger, ready to predict.
        """
        check_is_fitted(self, "_state")
        self._model = self._final_flat()
        return self

    def drop_exported_arrays(self):
        """Drop the weights derived from the training state.

        To send the model lighter: ``rebuild_exported_arrays`` recomputes
        them from the state, and until then the tagger
        cannot predict. Nothing happens to an unfitted tagger. For extensions
        such as the Dask mixing.

        Returns
        -------
        self : object
            The tagger, without the exported weights.
        """
        vars(self).pop("_model", None)
        return self

    # ---- hooks ------------------------------------------------------------------
    def _n_latent(self):
        return 1

    @classmethod
    def mix(cls, models, weights, start=None):
        """Mix taggers trained on shards of the sequences into one (parameter mixing).

        The states are combined by the tagger's rule (``mix_tagger_states``,
        and for the online trainers ``mix_online_tagger_states``).

        Parameters
        ----------
        models : sequence of taggers of this class
            Fitted with the same parameters, labels and attributes, each
            continued from ``start`` on its own shard of the sequences.
        weights : sequence of float
            Each model's share of the sequences (summing to 1).
        start : tagger or None, default=None
            The model they all continued from; None when each started fresh.

        Returns
        -------
        mixed : tagger
            A new fitted tagger (``n_iter_ = 1``, ``t_`` the updates of all
            the models together); the inputs are not modified.
        """
        est = copy.deepcopy(models[0])
        est._state = est._mix_states([m._state for m in models], weights,
                                     None if start is None else start._state)
        est.t_ = est._state.crf.t
        est.n_iter_ = 1
        est._model = est._final_flat()
        return est

    def _mix_states(self, states, weights, start):
        return mix_tagger_states(states, weights, start)

    def _run_passes(self, ds, n_epochs):  # pragma: no cover - abstract
        raise NotImplementedError

    def _final_flat(self):  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- input ------------------------------------------------------------------
    def _to_data(self, X, y=None, *, fitting=False, first=False):
        """``X`` (and ``y``) as a ``SequenceBatch`` (``read_sequences``)."""
        return read_sequences(self, X, y, fitting=fitting, first=first)

    def _more_validate_params(self, for_partial_fit=False):
        """Cross-parameter checks, after the constraints (none by default)."""

    # ---- state ------------------------------------------------------------------
    def _n_states(self):
        return self.classes_.size * self._n_latent()

    def _latent_init(self, rng):
        """The initial weights of new rows: random with latent states, whose
        hidden states of one label would otherwise never separate (Sun et al.
        2010, Fig. 1, "Initialize randomly"); zeros otherwise."""
        if self._n_latent() > 1:
            return lambda size: rng.normal(scale=0.1, size=size)
        return None

    def _bytes_per_weight(self):
        """Bytes of training state per weight, for the memory check before
        allocation: the weight, its exported copy, the running average."""
        return 8 * (2 + bool(self._averaged))

    def _check_memory(self, n_attributes):
        """``check_model_memory`` for a CRF of ``n_attributes``: a row of
        ``n_states`` weights per attribute, the bias row and the transitions."""
        H = self._n_states()
        check_model_memory(self, n_attributes + H + 1, H, self._bytes_per_weight())

    def _new_state(self, n_attributes, rng, allowed=None):
        self._check_memory(n_attributes)
        crf = CRFState.new(n_attributes, self._n_states(), averaged=self._averaged, seed=0,
                           init=self._latent_init(rng))
        crf.seed = draw_seed(rng)       # (drawn after the weights, as always)
        if allowed is not None:
            crf.allowed = allowed       # read by the kernels' CRFContext (set_allowed)
        self._state = TaggerState(crf=crf, rng=rng)

    def _grow(self, n_attributes):
        """New attributes (a later ``partial_fit``): new rows, learned from now on."""
        crf = self._state.crf
        if n_attributes > crf.n_attributes:
            self._check_memory(n_attributes)
            n_new, cut = n_attributes - crf.n_attributes, crf.n_attributes * crf.n_states
            crf.add_attributes(n_new, self._latent_init(self._state.rng))
            allowed = getattr(crf, "allowed", None)
            if allowed is not None:     # (the facade's restricted model: new rows all exist)
                crf.allowed = np.concatenate([allowed[:cut],
                                              np.ones(n_new * crf.n_states, np.uint8),
                                              allowed[cut:]])

    def _eta0(self, batch, label_idx):
        if self.eta0 != "auto":
            return float(self.eta0)
        st = self._state
        n = batch.n_sequences
        # (fit_batch's eta0_search: CRFsuite's calibration parameters)
        search = dict(getattr(self, "_eta0_search", None) or {})
        n_samples = search.pop("n_samples", 1000)
        rows = np.sort(st.rng.choice(n, size=min(n, n_samples), replace=False))
        sample, sample_labels = batch.sample(rows, label_idx)
        # (the trials on the sample's attributes only: the same steps)
        X_used, coef, allowed, n_used = sample_attributes(
            sample.tokens(), st.crf.coef, getattr(st.crf, "allowed", None),
            st.crf.n_attributes, self._n_states())
        ds = sample.with_tokens(X_used).sequence_data(n_used, sample_labels)
        lam, l1 = split_alpha(self)
        return calibrate_crf_eta0(ds, coef, n_states=self._n_states(),
                                  n_latent=self._n_latent(), lam=lam,
                                  fit_intercept=self.fit_intercept, averaged=self._averaged,
                                  l1=l1, allowed=allowed, **search)

    # ---- fitting ------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the CRF with ``max_iter`` passes over the sequences.

        Parameters
        ----------
        X : list of sequences, or {array-like, sparse matrix} of shape (n_samples, n_features)
            Each sequence is a list of per-token feature dicts or a 2-D
            array / sparse matrix ``(n_tokens, n_features)``. A plain 2-D
            array is read as independent one-token sequences.
        y : list of label lists, or array-like of shape (n_samples,)
            The label of every token: one list per sequence, or one label per
            row for a plain 2-D ``X``. At least two distinct labels.

        Returns
        -------
        self : object
            The fitted tagger.
        """
        self._more_validate_params()
        self._n_threads()
        remove_fitted(self, self._private_state)
        with unfit_on_error(self, self._private_state):
            batch = self._to_data(X, y, fitting=True, first=True)
            self.classes_ = self._check_labels(np.unique(batch.labels))
            return self._fit_batch(batch, self.max_iter, first=True)

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None):
        """One pass over the given sequences, continuing the current state.

        The vocabulary grows: attributes first seen in a later batch get new
        weights (zero, so the past iterates are unchanged) and are learned.
        Invalid input is refused before anything changes (the vocabulary
        included); if the weights overflow during the pass the state cannot be
        continued and the estimator is left unfitted (the error says so).

        Parameters
        ----------
        X : list of sequences, or {array-like, sparse matrix}
            The sequences, in the form of the first call (feature dicts, or
            numeric arrays with the first call's number of features).
        y : list of label lists, or array-like of shape (n_samples,)
            The label of every token: one list per sequence, or one label per
            row for a plain 2-D ``X``.
        classes : array-like, default=None
            All the labels, given on the first call (later calls may repeat
            it). When omitted on the first call the labels of that batch are
            taken; a later batch with a label outside ``classes_`` raises a
            ValueError (no weights exist for it).

        Returns
        -------
        self : object
            The updated tagger.
        """
        first = not hasattr(self, "_state")
        if not first:
            # (_fit_context validates a first call only: the parameters may
            # have been set since, and a bad one must not touch the state)
            self._validate_params()
        self._more_validate_params(for_partial_fit=True)
        self._n_threads()
        if classes is not None:
            classes = check_classes_arg(classes)
        if not first:
            check_eta0(self, getattr(self, "eta0_", None))
            if classes is not None and not np.array_equal(classes, self.classes_):
                raise ValueError(f"classes={classes!r} is not the same as on the "
                                 f"first call to partial_fit ({self.classes_!r}).")
        vocabulary = getattr(self, "vocabulary_", None)
        n_known = len(vocabulary) if vocabulary is not None and not first else None
        try:
            batch = self._to_data(X, y, fitting=True, first=first)
            all_classes = (self.classes_ if not first else self._check_labels(
                np.unique(batch.labels) if classes is None else classes))
            unseen = np.setdiff1d(np.unique(batch.labels), all_classes)
            if unseen.size:
                raise ValueError(f"y contains labels not in classes_ {all_classes!r}: "
                                 f"{unseen[:5]!r}; pass all the labels as `classes` on "
                                 "the first call to partial_fit.")
        except BaseException:
            if first:
                remove_fitted(self, self._private_state)
            elif n_known is not None:
                while len(self.vocabulary_) > n_known:   # the attributes just added
                    self.vocabulary_.popitem()
            raise
        with unfit_on_error(self, self._private_state, continued=not first):
            if first:
                self.classes_ = all_classes
            return self._fit_batch(batch, 1, first=first)

    @staticmethod
    def _check_labels(classes):
        if classes.size < 2:
            raise ValueError(
                "a sequence tagger needs at least 2 labels, but y contains only one class: "
                f"{classes.tolist()!r} (pass all the labels as `classes` to partial_fit).")
        return classes

    @property
    def pass_seconds_(self):
        """Wall time of every training pass so far, in seconds.

        The compiled kernel only (no input conversion or step-size
        calibration), as CRFsuite's training log reports it.
        """
        check_is_fitted(self)
        return list(self._state.pass_seconds)
