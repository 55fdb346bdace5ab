"""Sequence taggers (linear-chain CRFs) on the shared Cython CRF core.

``ASFSequenceTagger`` trains a CRF with averaged SGD with feedback (Sun et
al., ICDM 2010); ``PSASequenceTagger`` with periodic step-size adaptation
(Hsu et al., 2009); ``SGDSequenceTagger`` with plain or averaged SGD on the
same core (the baselines). Both take sklearn-crfsuite's input (a list of sequences
of feature dicts, or of 2-D arrays) and give its outputs (``predict``,
``predict_marginals``, ``state_features_``, ``transition_features_``).
"""
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets

from ._base import (check_classes_arg, check_label_types, check_psa_factors,
                    diverged_error, now_unfitted, remove_fitted)
from ._calibration import search_step
from ._compat import Interval, StrOptions, check_is_fitted, validate_data
from ._core._psa_crf_fast import new_psa_state, psa_epochs
from ._core._crf_fast import (
    CRFWeights,
    SequenceData,
    label_marginals,
    objective,
    sgd_epochs,
    viterbi_decode,
)
from ._sequence import (
    KIND_ARRAYS,
    KIND_DICTS,
    KIND_FLAT,
    csr_arrays,
    flatten_labels,
    input_kind,
    stack_arrays,
    subset,
    vectorize_dicts,
)

MAX_SEED = np.iinfo(np.int32).max


def calibrate_eta0(ds_sample, coef, *, n_attributes, n_labels, n_latent, alpha,
                   fit_intercept, averaged=False, eta_start=0.1, factor=2.0, max_trials=20):
    """Bottou's step-size calibration on a sample of sequences.

    From (a copy of) the current weights, run one pass with a constant step
    ``eta`` over the sample and measure the regularised objective
    ``alpha/2 ||w||^2 + mean -log p(y|x)`` after it. Starting at
    ``eta_start``, double ``eta`` while the objective improves, else halve it
    while it improves; return half of the best ``eta`` for safety (Bottou
    2012, "Stochastic gradient descent tricks"; CRFsuite's l2sgd calibration
    uses the same start 0.1 and rate 2). With ``averaged=True`` the objective
    is measured at the average of the trial pass's iterates, the model an
    averaging method returns (ASF after its first period, averaged SGD).

    Returns
    -------
    eta0 : float
    """
    def trial(eta):
        if alpha > 0 and eta * alpha >= 1.0:
            return np.inf
        v = np.array(coef, dtype=np.float64)
        u = np.zeros_like(v) if averaged else None
        w = CRFWeights(v, n_attributes, n_labels, n_latent, u)
        info = sgd_epochs(ds_sample, w, eta0=eta, power=0.0, alpha=alpha, n_epochs=1,
                          shuffle=False, fit_intercept=fit_intercept)
        if info["diverged"]:
            return np.inf
        if averaged:
            w = CRFWeights(w.average(), n_attributes, n_labels, n_latent)
        return objective(ds_sample, w, alpha)

    return search_step(trial, eta_start=eta_start, factor=factor, max_trials=max_trials) / 2.0


class _BaseSequenceTagger(BaseEstimator):
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

    # ---- hooks ------------------------------------------------------------------
    def _n_latent(self):
        return 1

    def _run_passes(self, ds, n_epochs):  # pragma: no cover - abstract
        raise NotImplementedError

    def _final_flat(self):  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- input ------------------------------------------------------------------
    def _to_data(self, X, y=None, *, fitting=False, first=False):
        """``X`` (and ``y``) -> ``(SequenceData, kind, offsets)``.

        ``fitting`` grows the vocabulary; ``first`` resets the input kind and
        the feature checks (``fit`` and the first ``partial_fit``).
        """
        kind = input_kind(X)
        if first:
            for attr in ("n_features_in_", "feature_names_in_", "vocabulary_"):
                if hasattr(self, attr):
                    delattr(self, attr)
            self._kind = kind
        elif (kind == KIND_DICTS) != (self._kind == KIND_DICTS):
            raise ValueError(
                f"the model was fitted on {self._kind!r} input but X is {kind!r}: numeric "
                "arrays and feature dicts cannot be mixed.")
        labels = None
        if kind == KIND_FLAT:
            if fitting:
                check_label_types(y, "y")
                X, yy = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                                      reset=first)
                check_classification_targets(yy)
                labels = np.asarray(yy)
            else:
                X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
            data, indices, indptr = csr_arrays(X)
            offsets = np.arange(X.shape[0] + 1, dtype=np.int64)
            n_features = X.shape[1]
        elif kind == KIND_ARRAYS:
            expected = None if first else getattr(self, "n_features_in_", None)
            data, indices, indptr, offsets, n_features = stack_arrays(X, expected)
            if first:
                self.n_features_in_ = n_features
        else:
            if first:
                self.vocabulary_ = {}
            data, indices, indptr, offsets = vectorize_dicts(X, self.vocabulary_, grow=fitting)
            n_features = len(self.vocabulary_)
        if fitting and kind != KIND_FLAT:
            labels = flatten_labels(y, np.diff(offsets))
            check_classification_targets(labels)
        return data, indices, indptr, offsets, labels, n_features, kind

    # ---- state ------------------------------------------------------------------
    def _new_state(self, n_attributes, rng):
        L, nl = self.classes_.size, self._n_latent()
        H = L * nl
        size = (n_attributes + H + 1) * H
        coef = np.zeros(size)
        if nl > 1:
            # Latent states of one label start identical unless initialised
            # randomly (they would never separate): Fig. 1 "Initialize randomly".
            coef[:] = rng.normal(scale=0.1, size=size)
        self._state = {
            "coef": coef, "avg": np.zeros(size) if self._averaged else None,
            "n_iterates": 0.0, "n_attributes": n_attributes, "t": 0, "passes": 0,
            "seed": int(rng.randint(1, MAX_SEED)), "rng": rng,
        }

    def _grow(self, n_attributes):
        """Append zero (or random, for latent states) rows for new attributes."""
        st = self._state
        old = st["n_attributes"]
        if n_attributes <= old:
            return
        H = self.classes_.size * self._n_latent()
        n_new = (n_attributes - old) * H
        if self._n_latent() > 1:
            new_rows = st["rng"].normal(scale=0.1, size=n_new)
        else:
            new_rows = np.zeros(n_new)
        cut = old * H
        st["coef"] = np.concatenate([st["coef"][:cut], new_rows, st["coef"][cut:]])
        if st["avg"] is not None:
            # the past iterates held the initial value of the new weights
            st["avg"] = np.concatenate([st["avg"][:cut], st["n_iterates"] * new_rows,
                                        st["avg"][cut:]])
        st["n_attributes"] = n_attributes

    def _weights(self, flat, averaged=False):
        st = self._state
        return CRFWeights(flat, st["n_attributes"], self.classes_.size, self._n_latent(),
                          st["avg"] if averaged else None, st["n_iterates"])

    def _eta0(self, data, indices, indptr, offsets, labels):
        if self.eta0 != "auto":
            return float(self.eta0)
        st = self._state
        n = offsets.size - 1
        rows = np.sort(st["rng"].choice(n, size=min(n, 1000), replace=False))
        d, i, p, o, lab = subset(data, indices, indptr, offsets, labels, rows)
        ds = SequenceData(d, i, p, o, lab, st["n_attributes"])
        return calibrate_eta0(ds, st["coef"], n_attributes=st["n_attributes"],
                              n_labels=self.classes_.size, n_latent=self._n_latent(),
                              alpha=self.alpha, fit_intercept=self.fit_intercept,
                              averaged=self._averaged)

    # ---- fitting ------------------------------------------------------------------
    def fit(self, X, y):
        """Fit the CRF with ``max_iter`` passes over the sequences.

        Parameters
        ----------
        X : list of sequences, or {array-like, sparse matrix} of shape (n_samples, n_features)
            Each sequence is a list of per-token feature dicts or a 2-D
            array / sparse matrix ``(n_tokens, n_features)``. A plain 2-D
            array is read as independent one-token sequences.
        y : list of label lists, or array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        self._validate_params()
        try:
            self._unfit()
            batch = self._to_data(X, y, fitting=True, first=True)
            self.classes_ = self._check_labels(np.unique(batch[4]))
            return self._fit_batch(batch, self.max_iter, first=True)
        except BaseException:
            self._unfit()
            raise

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
        y : list of label lists, or array-like of shape (n_samples,)
        classes : array-like, default=None
            All the labels, given on the first call (later calls may repeat
            it). When omitted on the first call the labels of that batch are
            taken; a later batch with a label outside ``classes_`` raises a
            ValueError (no weights exist for it).

        Returns
        -------
        self : object
        """
        self._validate_params()
        first = not hasattr(self, "_state")
        if classes is not None:
            classes = check_classes_arg(classes)
        if not first:
            self._check_step()
            if classes is not None and not np.array_equal(classes, self.classes_):
                raise ValueError(f"classes={classes!r} is not the same as on the "
                                 f"first call to partial_fit ({self.classes_!r}).")
        vocabulary = getattr(self, "vocabulary_", None)
        n_known = len(vocabulary) if vocabulary is not None and not first else None
        try:
            batch = self._to_data(X, y, fitting=True, first=first)
            all_classes = (self.classes_ if not first else self._check_labels(
                np.unique(batch[4]) if classes is None else classes))
            unseen = np.setdiff1d(np.unique(batch[4]), all_classes)
            if unseen.size:
                raise ValueError(f"y contains labels not in classes_ {all_classes!r}: "
                                 f"{unseen[:5]!r}; pass all the labels as `classes` on "
                                 "the first call to partial_fit.")
        except BaseException:
            if first:
                self._unfit()
            elif n_known is not None:
                while len(self.vocabulary_) > n_known:   # the attributes just added
                    self.vocabulary_.popitem()
            raise
        try:
            if first:
                self.classes_ = all_classes
            return self._fit_batch(batch, 1, first=first)
        except BaseException as exc:
            self._unfit()
            if isinstance(exc, ValueError) and not first:
                raise now_unfitted(exc) from exc
            raise

    def _unfit(self):
        """Remove every fitted attribute (a failed call leaves no partial model)."""
        remove_fitted(self, ("_state", "_model", "_kind"))

    def _check_step(self):
        """The step in use (``eta0_``, perhaps calibrated) against the current
        ``alpha``, before a later ``partial_fit`` changes anything."""
        eta0 = getattr(self, "eta0_", None)
        if eta0 is not None and not eta0 * self.alpha < 1.0:
            raise ValueError(
                f"the step in use, eta0_={eta0:.4g}, must satisfy eta0 * alpha < 1 "
                f"(alpha={self.alpha!r}): the shrink of every step would wipe the weights.")

    @staticmethod
    def _check_labels(classes):
        if classes.size < 2:
            raise ValueError(
                "a sequence tagger needs at least 2 labels, but y contains only one class: "
                f"{classes.tolist()!r} (pass all the labels as `classes` to partial_fit).")
        return classes

    def _fit_batch(self, batch, n_epochs, first):
        data, indices, indptr, offsets, labels, n_features, kind = batch
        label_idx = np.searchsorted(self.classes_, labels).astype(np.int32)
        if first:
            self._new_state(n_features, check_random_state(self.random_state))
        else:
            self._grow(n_features)
        st = self._state
        for key in ("coef", "avg"):
            if st[key] is not None:
                st[key] = np.require(st[key], requirements=["C", "W"])
        if first:
            self.eta0_ = self._eta0(data, indices, indptr, offsets, label_idx)
        ds = SequenceData(data, indices, indptr, offsets, label_idx, st["n_attributes"])
        self.n_iter_ = self._run_passes(ds, n_epochs)
        self.t_ = st["t"]
        self._model = self._final_flat()
        self._check_weight_scale(float(np.mean(np.diff(offsets))))
        return self

    def _check_weight_scale(self, mean_length):
        """Warn when the weights are implausibly large without overflowing:
        at the optimum ``alpha/2 ||w||^2 <= P(0)``, the mean ``-log p(y|x)`` at
        zero weights, ``T log H`` for a sequence of ``T`` tokens and ``H``
        states (as ``LinearClassifierBase._check_weight_scale``)."""
        with np.errstate(over="ignore", invalid="ignore"):
            penalty = 0.5 * self.alpha * float(np.dot(self._model, self._model))
        limit = 10.0 * mean_length * np.log(max(self.classes_.size * self._n_latent(), 2))
        if not penalty <= limit:
            warnings.warn(
                f"{type(self).__name__}: the weights are implausibly large (alpha/2 ||w||^2 "
                f"= {penalty:.3g}, while the cost of w = 0 is {limit / 10:.3g}): the steps "
                "were too large for the scale of the feature values. Scale them (e.g. "
                "StandardScaler) consistently across calls, or use a smaller eta0.",
                UserWarning, stacklevel=4)

    def _check_info(self, info):
        st = self._state
        st["t"], st["passes"], st["seed"] = info["t"], info["passes_done"], info["seed"]
        st.setdefault("pass_seconds", []).extend(info["seconds"])
        if info["diverged"]:
            raise diverged_error(type(self).__name__, st["passes"] + 1)
        if self.verbose:
            print(f"-- pass {st['passes']}: mean -log p(y|x) {info['mean_loss']:.6g}, "
                  f"updates {st['t']}")

    @property
    def pass_seconds_(self):
        """Wall time of every training pass so far (compiled kernel only: no
        input conversion or step-size calibration), as CRFsuite's training log."""
        check_is_fitted(self)
        return list(self._state.get("pass_seconds", []))

    # ---- prediction -------------------------------------------------------------
    def _model_weights(self):
        # an unpickled model may hold read-only (memory-mapped) arrays
        return self._weights(np.require(self._model, requirements=["C", "W"]))

    def _predict_data(self, X):
        check_is_fitted(self)
        data, indices, indptr, offsets, _, _, kind = self._to_data(X)
        ds = SequenceData(data, indices, indptr, offsets, None, self._state["n_attributes"])
        return ds, offsets, kind

    def predict(self, X):
        """Best label sequence of each sequence (Viterbi).

        With ``n_latent > 1`` the best hidden-state path is decoded and mapped
        to its labels (an approximation of the most probable label path).

        Parameters
        ----------
        X : list of sequences, or {array-like, sparse matrix}

        Returns
        -------
        y_pred : list of lists of labels, or ndarray of shape (n_samples,)
            An array when ``X`` is a plain 2-D array / sparse matrix.
        """
        ds, offsets, kind = self._predict_data(X)
        labels = self.classes_[viterbi_decode(ds, self._model_weights())]
        if kind == KIND_FLAT:
            return labels
        return [labels[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]

    def predict_single(self, xseq):
        """Predict one sequence (sklearn-crfsuite's ``predict_single``)."""
        return self.predict([xseq])[0]

    def predict_marginals(self, X):
        """Marginal probability of each label at each token (forward-backward).

        Parameters
        ----------
        X : list of sequences, or {array-like, sparse matrix}

        Returns
        -------
        marginals : list of lists of dict
            ``{label: p(y_t = label | x)}`` for every token of every sequence
            (one-token sequences for a plain 2-D array).
        """
        ds, offsets, _ = self._predict_data(X)
        P = label_marginals(ds, self._model_weights())
        names = self.classes_.tolist()
        return [[dict(zip(names, row)) for row in P[a:b].tolist()]
                for a, b in zip(offsets[:-1], offsets[1:])]

    def score(self, X, y):
        """Flat token accuracy of ``predict(X)`` against ``y``.

        Parameters
        ----------
        X : list of sequences, or {array-like, sparse matrix}
        y : list of label lists, or array-like of shape (n_samples,)

        Returns
        -------
        score : float
        """
        y_pred = self.predict(X)
        if isinstance(y_pred, np.ndarray):
            return float(np.mean(np.asarray(y).ravel() == y_pred))
        true = flatten_labels(y, [len(s) for s in y_pred])
        pred = np.asarray([lab for s in y_pred for lab in s])
        return float(np.mean(true == pred))

    # ---- named weights ------------------------------------------------------------
    def _state_names(self):
        nl = self._n_latent()
        names = self.classes_.tolist()
        if nl == 1:
            return names
        return [(lab, k) for lab in names for k in range(nl)]

    @property
    def attributes_(self):
        """Attribute names, by column (feature dicts) or column indices."""
        check_is_fitted(self)
        if self._kind == KIND_DICTS:
            names = [None] * len(self.vocabulary_)
            for key, j in self.vocabulary_.items():
                names[j] = key
            return names
        if hasattr(self, "feature_names_in_"):
            return self.feature_names_in_.tolist()
        return list(range(self._state["n_attributes"]))

    def _blocks(self):
        check_is_fitted(self)
        A = self._state["n_attributes"]
        H = self.classes_.size * self._n_latent()
        w = self._model
        return (w[:A * H].reshape(A, H), w[A * H:A * H + H * H].reshape(H, H),
                w[A * H + H * H:])

    @property
    def state_features_(self):
        """``{(attribute, label): weight}`` for the non-zero state weights.

        With ``n_latent > 1`` the label is ``(label, k)``, the k-th hidden
        state of the label.
        """
        W, _, _ = self._blocks()
        attrs, states = self.attributes_, self._state_names()
        rows, cols = np.nonzero(W)
        return {(attrs[r], states[c]): float(W[r, c]) for r, c in zip(rows, cols)}

    @property
    def transition_features_(self):
        """``{(label_from, label_to): weight}`` for all transitions."""
        _, A, _ = self._blocks()
        states = self._state_names()
        H = len(states)
        return {(states[i], states[j]): float(A[i, j]) for i in range(H) for j in range(H)}

    @property
    def intercept_(self):
        """Per-label bias added to every token's scores (zero unless ``fit_intercept``)."""
        return self._blocks()[2].copy()

    @property
    def coef_(self):
        """State weights as an array of shape (n_states, n_attributes)."""
        return self._blocks()[0].T.copy()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        return tags


_COMMON_PARAMS_DOC = """
    alpha : float, default=1e-4
        L2 strength: the objective is
        ``alpha/2 ||w||^2 + mean over sequences of -log p(y | x)``.
        CRFsuite minimises ``-sum log p + c2 ||w||^2``, so ``c2 = alpha n / 2``
        for ``n`` training sequences. The bias and transitions are penalised
        like the state weights.
    max_iter : int, default={max_iter}
        Passes over the data in ``fit`` (scikit-learn's meaning).
    eta0 : 'auto' or float, default='auto'
        Step size. ``'auto'`` calibrates it on (at most) 1000 sequences:
        one constant-step pass from the current weights per candidate, the
        candidate doubling or halving from 0.1 while the regularised objective
        after the pass improves; the best is halved (Bottou's recipe). For
        the averaging taggers (ASF, averaged SGD) the objective is taken at
        the average of the trial pass's iterates, the model they return.
    fit_intercept : bool, default=True
        Add a per-label bias to every token's scores (like a constant
        ``'bias'`` feature in sklearn-crfsuite; it is L2-penalised).
    shuffle : bool, default=True
        Shuffle the sequences before each pass.
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffles, the calibration sample (and latent initialisation).
    verbose : int, default=0
        Print the mean negative log-likelihood after each pass."""

_COMMON_ATTRS_DOC = """
    classes_ : ndarray of shape (n_labels,)
    state_features_ : dict
        ``{(attribute, label): weight}`` (non-zero weights), as sklearn-crfsuite.
    transition_features_ : dict
        ``{(label_from, label_to): weight}``, as sklearn-crfsuite.
    attributes_ : list
        Attribute names by column.
    coef_ : ndarray of shape (n_states, n_attributes)
    intercept_ : ndarray of shape (n_states,)
    vocabulary_ : dict
        Attribute name -> column (feature-dict input only). It grows in
        ``partial_fit``: a growable vocabulary rather than hashing, so
        ``state_features_`` keeps readable names and no two attributes
        collide; a later batch's new attributes get zero weights and are
        learned from then on.
    n_features_in_ : int
        Numeric input only.
    eta0_ : float
        The step size used (calibrated when ``eta0='auto'``).
    n_iter_ : int
        Passes made by the last call to ``fit`` or ``partial_fit``.
    t_ : int
        Sequence updates made so far."""


class ASFSequenceTagger(_BaseSequenceTagger):
    __doc__ = """Linear-chain CRF trained by averaged SGD with feedback (ASF).

    ASF (Sun, Kashima, Matsuzaki and Ueda, ICDM 2010, Fig. 1): SGD with a
    constant step ``eta0`` runs in periods ``c = 1, 2, 3, ...`` of ``c``
    passes each, so feedback happens after passes 1, 3, 6, 10, ... At the end
    of each period the weights are reset to the average of *all* iterates
    since the start of training (Eq. 2; Eqs. 3-5 give the resulting model).
    The average is kept lazily (``S = u + C v`` with the scale trick), so a
    step costs O(nnz) and only a feedback costs O(n_parameters). The model
    returned is the average. The optional ``gamma0 / (1 + c/N)`` decay of
    Fig. 1 is not used: the paper notes it is only needed for the analysis.

    One step on a sequence ``(x, y)`` is
    ``w <- (1 - eta0 alpha) w + eta0 grad log p(y | x; w)``.

    Parameters
    ----------{params}
    n_latent : int, default=1
        Hidden states per label (latent-dynamic CRF / DPLVM, Section II.A).
        The gradient is ``E_p(h|y,x)[f] - E_p(h|x)[f]`` (a label-constrained
        and a free forward-backward); the weights start random (N(0, 0.1^2))
        so the hidden states of a label can separate. Decoding takes the best
        hidden-state path and maps it to labels, an approximation of the best
        label path. ``predict_marginals`` is exact.

    Attributes
    ----------{attrs}

    See Also
    --------
    SGDSequenceTagger : plain and averaged SGD on the same core.
    sklearn_crfsuite.CRF : the CRFsuite-based peer.

    References
    ----------
    X. Sun, H. Kashima, T. Matsuzaki, N. Ueda. Averaged stochastic gradient
    descent with feedback: an accurate, robust, and fast training method.
    ICDM 2010.

    Examples
    --------
    >>> from sklearn_secondorder import ASFSequenceTagger
    >>> X = [[{{"w": "the"}}, {{"w": "dog"}}], [{{"w": "a"}}, {{"w": "cat"}}]]
    >>> y = [["DET", "N"], ["DET", "N"]]
    >>> ASFSequenceTagger(random_state=0).fit(X, y).predict([[{{"w": "a"}}, {{"w": "dog"}}]])
    [['DET', 'N']]
    """.format(params=_COMMON_PARAMS_DOC.format(max_iter=10), attrs=_COMMON_ATTRS_DOC)

    _parameter_constraints: dict = {
        **_BaseSequenceTagger._parameter_constraints,
        "n_latent": [Interval(Integral, 1, None, closed="left")],
    }
    _averaged = True

    def __init__(self, *, alpha=1e-4, max_iter=10, eta0="auto", fit_intercept=True,
                 shuffle=True, random_state=None, n_latent=1, verbose=0):
        self.alpha = alpha
        self.max_iter = max_iter
        self.eta0 = eta0
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.n_latent = n_latent
        self.verbose = verbose

    def _n_latent(self):
        return self.n_latent

    def _run_passes(self, ds, n_epochs):
        st = self._state
        w = self._weights(st["coef"], averaged=True)
        info = sgd_epochs(ds, w, eta0=self.eta0_, power=0.0, alpha=self.alpha, t=st["t"],
                          n_epochs=n_epochs, shuffle=self.shuffle, seed=st["seed"],
                          fit_intercept=self.fit_intercept, feedback=True,
                          passes_done=st["passes"])
        st["n_iterates"] = w.n_iterates
        st.setdefault("feedbacks", []).extend(info["feedbacks"])
        self._check_info(info)
        return info["epochs"]

    def _final_flat(self):
        st = self._state
        if st["n_iterates"] == 0:
            return st["coef"].copy()
        return st["avg"] / st["n_iterates"]

    @property
    def feedback_passes_(self):
        """Pass counts after which the weights were reset to the average."""
        check_is_fitted(self)
        return list(self._state.get("feedbacks", []))


class SGDSequenceTagger(_BaseSequenceTagger):
    __doc__ = """Linear-chain CRF trained by plain or averaged SGD on the shared core.

    The baselines ASF is measured against. One step on a sequence at counter
    ``t`` is ``w <- (1 - eta_t alpha) w + eta_t grad log p(y | x; w)`` with

    * plain SGD (``average=False``): ``eta_t = eta0 / (1 + alpha eta0 t)``,
      i.e. ``1 / (alpha (t + t0))`` with ``t0 = 1 / (alpha eta0)``, the
      schedule of CRFsuite's l2sgd and Bottou's crfsgd;
    * averaged SGD (``average=True``): ``eta_t = eta0 / (1 + alpha eta0
      t)^0.75`` (Bottou's ASGD) and the model is the average of all
      iterates, kept lazily in O(nnz) per step (no feedback).

    Parameters
    ----------{params}
    average : bool, default=False
        Return the average of all iterates (averaged SGD).

    Attributes
    ----------{attrs}

    See Also
    --------
    ASFSequenceTagger : averaged SGD with feedback on the same core.
    """.format(params=_COMMON_PARAMS_DOC.format(max_iter=10), attrs=_COMMON_ATTRS_DOC)

    _parameter_constraints: dict = {
        **_BaseSequenceTagger._parameter_constraints,
        "average": ["boolean"],
    }

    def __init__(self, *, alpha=1e-4, max_iter=10, eta0="auto", average=False,
                 fit_intercept=True, shuffle=True, random_state=None, verbose=0):
        self.alpha = alpha
        self.max_iter = max_iter
        self.eta0 = eta0
        self.average = average
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose

    @property
    def _averaged(self):
        return self.average

    def _run_passes(self, ds, n_epochs):
        st = self._state
        w = self._weights(st["coef"], averaged=st["avg"] is not None)
        info = sgd_epochs(ds, w, eta0=self.eta0_, power=0.75 if self.average else 1.0,
                          alpha=self.alpha, t=st["t"], n_epochs=n_epochs,
                          shuffle=self.shuffle, seed=st["seed"],
                          fit_intercept=self.fit_intercept, feedback=False,
                          passes_done=st["passes"])
        st["n_iterates"] = w.n_iterates
        self._check_info(info)
        return info["epochs"]

    def _final_flat(self):
        st = self._state
        if st["avg"] is None or st["n_iterates"] == 0:
            return st["coef"].copy()
        return st["avg"] / st["n_iterates"]


class PSASequenceTagger(_BaseSequenceTagger):
    __doc__ = """Linear-chain CRF trained by Periodic Step-size Adaptation (PSA).

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

    Weights not in the current sequence catch up lazily (the shared
    ``LazyStepWeights`` core of ``PSAClassifier``): within a window they only
    shrink, ``(1 - eta_i alpha)^k`` in closed form, and a whole idle window
    has the shrink's ratio ``(1 - eta_i alpha)^b`` (clipped to kappa, after
    which ``K`` idle windows are one closed-form step). A pass therefore
    costs O(nnz) like plain SGD, not the paper implementation's O(n_weights)
    every ``2b`` updates, and gives the dense algorithm's result to
    rounding. The paper's defaults for CRFs are the defaults here;
    the method aims at a good model in a single pass (``max_iter=1``).

    Parameters
    ----------
    alpha : float, default=1e-4
        L2 strength (not PSA's alpha, which is ``psa_alpha``): the objective
        is ``alpha/2 ||w||^2 + mean over sequences of -log p(y | x)``
        (CRFsuite's ``c2 = alpha n / 2``).
    period : int, default=10
        ``b``: the step sizes adapt every ``2 b`` updates. The paper suggests
        ``b ~ 0.5 n / 1000`` for large ``n``.
    eta0 : float or 'auto', default=0.1
        Initial step size of every weight (the paper's CRF setting);
        ``'auto'`` calibrates it as the other taggers do.
    psa_alpha, psa_beta : float, default=0.9999, 0.99
        Largest and smallest discount ``v_i`` (Eq. 10), ``0 < psa_beta <
        psa_alpha < 1``.
    psa_kappa : float, default=0.9
        Bound on ``|g_i|`` (Eq. 7), ``0 < psa_kappa < 1``.
    max_iter : int, default=1
        Passes over the data in ``fit``.
    fit_intercept : bool, default=True
    shuffle : bool, default=True
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0

    Attributes
    ----------{attrs}
    step_sizes_ : ndarray of shape (n_weights,)
        The current per-weight step sizes (flat layout).

    References
    ----------
    C.-N. Hsu, Y.-M. Chang, H.-S. Huang, Y.-J. Lee. Periodic step-size
    adaptation for single-pass on-line learning. NIPS 2009.
    """.format(attrs=_COMMON_ATTRS_DOC)

    _parameter_constraints: dict = {
        **_BaseSequenceTagger._parameter_constraints,
        "period": [Interval(Integral, 1, None, closed="left")],
        "psa_alpha": [Interval(Real, 0, 1, closed="neither")],
        "psa_beta": [Interval(Real, 0, 1, closed="neither")],
        "psa_kappa": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, *, alpha=1e-4, period=10, eta0=0.1, psa_alpha=0.9999, psa_beta=0.99,
                 psa_kappa=0.9, max_iter=1, fit_intercept=True, shuffle=True,
                 random_state=None, verbose=0):
        self.alpha = alpha
        self.period = period
        self.eta0 = eta0
        self.psa_alpha = psa_alpha
        self.psa_beta = psa_beta
        self.psa_kappa = psa_kappa
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.verbose = verbose

    def _validate_params(self):
        super()._validate_params()
        check_psa_factors(self)

    def _new_state(self, n_attributes, rng):
        if not self.psa_beta < self.psa_alpha:
            raise ValueError(f"psa_beta={self.psa_beta} must be smaller than "
                             f"psa_alpha={self.psa_alpha}.")
        super()._new_state(n_attributes, rng)
        # LazyStepWeights state, created at the first pass (eta0_ is known then):
        # ve (weights, step sizes), snaps, last, next_event; the weights are
        # copied to coef after each call
        self._state["psa"] = None

    def _grow(self, n_attributes):
        st = self._state
        old = st["n_attributes"]
        super()._grow(n_attributes)
        psa = st["psa"]
        if n_attributes <= old or psa is None:
            return
        H = self.classes_.size
        cut, n_new = old * H, (n_attributes - old) * H
        # weights that did not exist were 0 all along: step size unchanged (0/0),
        # current at t, next event the first multiple of b after t (as every block)
        new_ve = np.zeros((n_new, 2))
        new_ve[:, 1] = self.eta0_
        psa["ve"] = np.concatenate([psa["ve"][:cut], new_ve, psa["ve"][cut:]])
        psa["snaps"] = np.concatenate([psa["snaps"][:cut], np.zeros((n_new, 2)),
                                       psa["snaps"][cut:]])
        t, b = st["t"], self.period
        for key, value in (("last", t), ("next_event", (t // b + 1) * b)):
            psa[key] = np.concatenate([psa[key][:old],
                                       np.full(n_attributes - old, value, dtype=np.int64),
                                       psa[key][old:]])

    def _run_passes(self, ds, n_epochs):
        st = self._state
        if not self.eta0_ * self.alpha < 1.0:
            raise ValueError(f"eta0 * alpha must be < 1 (got {self.eta0_ * self.alpha}).")
        if st["psa"] is None:
            st["psa"] = new_psa_state(st["n_attributes"], self.classes_.size, self.eta0_)
        psa = st["psa"]
        for key in ("ve", "snaps", "last", "next_event"):
            psa[key] = np.require(psa[key], requirements=["C", "W"])
        psa["ve"][:, 0] = st["coef"]
        psa["t"], psa["seed"] = st["t"], st["seed"]
        info = psa_epochs(ds, psa, n_states=self.classes_.size, lam=self.alpha,
                          period=self.period, psa_alpha=self.psa_alpha,
                          psa_beta=self.psa_beta, kappa=self.psa_kappa, n_epochs=n_epochs,
                          shuffle=self.shuffle, fit_intercept=self.fit_intercept)
        st["coef"] = np.ascontiguousarray(psa["ve"][:, 0])
        info["passes_done"] = st["passes"] + info["epochs"]
        self._check_info(info)
        return info["epochs"]

    def _final_flat(self):
        return self._state["coef"].copy()

    @property
    def step_sizes_(self):
        """Per-weight step sizes (flat layout)."""
        check_is_fitted(self)
        return self._state["psa"]["ve"][:, 1].copy()
