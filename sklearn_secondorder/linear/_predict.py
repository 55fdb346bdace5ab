"""Prediction and deployment of the linear models.

``LinearDeploymentMixin``: the deployment helpers ``sparsify``, ``densify``
and ``strip_training_state`` of every linear estimator; ``LinearPredictionMixin``
adds the classifiers' ``decision_function``, ``predict``, ``predict_proba`` /
``predict_log_proba`` (for the probabilistic losses) from ``coef_`` and
``intercept_``.
"""
import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.utils.extmath import safe_sparse_dot, softmax
from sklearn.utils.metaestimators import available_if

from .._compat import check_is_fitted, validate_data


class LinearDeploymentMixin:
    """``sparsify``, ``densify`` and ``strip_training_state`` of the linear
    models (see the module docstring)."""

    #: ``coef_``'s dimensions: 2 (classifiers: a row per class or problem),
    #: 1 (regressors: ``(n_features,)``)
    _coef_ndim = 2

    def densify(self):
        """Convert a sparse ``coef_`` (see ``sparsify``) back to a dense array.

        The default format of ``coef_``; ``fit`` and ``partial_fit`` set it.

        Returns
        -------
        self : object
            The estimator, with a dense ``coef_``.
        """
        check_is_fitted(self)
        if sp.issparse(self.coef_):
            dense = self.coef_.toarray()
            self.coef_ = np.ascontiguousarray(dense.ravel() if self._coef_ndim == 1 else dense)
        return self

    def sparsify(self):
        """Convert ``coef_`` to a scipy.sparse CSR matrix.

        As scikit-learn's ``SGDClassifier.sparsify``: with many zero weights
        (an L1 penalty, or hashed features never seen) the sparse matrix is
        smaller and ``decision_function`` faster. Unlike scikit-learn, later
        ``fit`` / ``partial_fit`` calls still work (they continue the
        training state and set a dense ``coef_`` again); ``densify`` undoes
        it. ``strip_training_state`` drops what only training needs.

        Returns
        -------
        self : object
            The estimator, with a CSR ``coef_``.
        """
        check_is_fitted(self)
        self.coef_ = sp.csr_matrix(self.coef_)
        return self

    def strip_training_state(self):
        """Drop everything but what prediction needs (a deployment-size model).

        Removes the training state (step sizes, snapshots, running averages,
        ``M``, rescalings: several times the size of ``coef_`` for some
        estimators) and the fitted attributes that expose it (``eta_``,
        ``B_``), so that a pickle holds ``coef_``, ``intercept_``,
        ``classes_`` and the small fitted attributes. ``predict``,
        ``decision_function`` and ``predict_proba`` work as before;
        ``partial_fit`` then raises a ``ValueError`` (there is no state to
        continue) and ``fit`` trains a new model (``warm_start`` has nothing
        to continue). Combine with ``sparsify`` for sparse weights.

        Returns
        -------
        self : object
            The estimator, without its training state.
        """
        check_is_fitted(self)
        for name in (*self._private_state, *self._training_attributes):
            vars(self).pop(name, None)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class LinearPredictionMixin(LinearDeploymentMixin):
    """The classifiers' prediction from ``coef_`` / ``intercept_`` (see the
    module docstring).

    Subclasses set ``_probabilistic_losses``, the losses with
    ``predict_proba``.
    """

    _probabilistic_losses = frozenset({"log_loss", "modified_huber"})

    def decision_function(self, X):
        """Compute the signed scores ``X @ coef_.T + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to score.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            One score per row for two classes (positive: ``classes_[1]``),
            else one per row and class.
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32],
                          reset=False)
        scores = safe_sparse_dot(X, self.coef_.T, dense_output=True) + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predict the class label of each row.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to classify.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            The class of highest score (for two classes, ``classes_[1]`` when
            the score is positive).
        """
        scores = self.decision_function(X)
        idx = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes_[idx]

    def _check_proba(self):
        loss = getattr(self, "loss", "log_loss")
        if loss not in self._probabilistic_losses:
            raise AttributeError(
                f"probability estimates are not available for loss={loss!r}")
        return True

    def _predict_proba(self, X):
        return self.proba_from_scores(self.decision_function(X))

    def proba_from_scores(self, scores):
        """The class probabilities of rows whose decision scores are ``scores``.

        ``predict_proba`` without the product ``X coef_``: for scores already
        computed (a stream's scores before each row's update,
        ``begin_stream``). Any loss: the logistic of the scores (softmax for a
        multinomial model) unless ``loss='modified_huber'`` (Zhang's).

        Parameters
        ----------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            ``decision_function``'s output for the rows.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            The probability of each class, as ``predict_proba``'s.
        """
        if scores.ndim == 1:
            scores = scores[:, None]
        if getattr(self, "loss", "log_loss") == "modified_huber":
            # Zhang (2001), as scikit-learn's SGDClassifier.
            prob = (np.clip(scores, -1, 1) + 1) / 2
            if prob.shape[1] == 1:
                return np.hstack([1 - prob, prob])
            norm = prob.sum(axis=1, keepdims=True)
            uniform = norm[:, 0] == 0
            prob[uniform] = 1.0
            norm[uniform] = prob.shape[1]
            return prob / norm
        if scores.shape[1] > 1 and self._is_multinomial():
            return softmax(scores.copy())
        prob = expit(scores)
        if prob.shape[1] == 1:
            return np.hstack([1 - prob, prob])
        return prob / prob.sum(axis=1, keepdims=True)  # one-vs-rest, normalised

    @available_if(_check_proba)
    def predict_proba(self, X):
        """Estimate the class probabilities (probabilistic losses only).

        Binary: the logistic of the score (``log_loss``) or Zhang's
        ``(clip(score, -1, 1) + 1) / 2`` (``modified_huber``). Multiclass:
        softmax for a multinomial model, normalised one-vs-rest otherwise.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to classify.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            The probability of each class (columns in the order of
            ``classes_``); each row sums to 1.
        """
        return self._predict_proba(X)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Estimate the log of the class probabilities (probabilistic losses only).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to classify.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            ``log(predict_proba(X))`` (``-inf`` where a probability is 0).
        """
        return np.log(self.predict_proba(X))
