"""ASFSequenceTagger: a linear-chain CRF trained by averaged SGD with feedback."""
from numbers import Integral

from .._compat import Interval, check_is_fitted
from .._core._crf_sgd import SGDOptions, sgd_epochs
from ._base import _COMMON_ATTRS_DOC, _COMMON_PARAMS_DOC, _BaseSequenceTagger


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
        options = SGDOptions(eta0=self.eta0_, power=0.0, alpha=self.alpha, shuffle=self.shuffle,
                             fit_intercept=self.fit_intercept, average=True, feedback=True)
        result = sgd_epochs(ds, self._state.crf, options, n_epochs=n_epochs,
                            n_latent=self.n_latent)
        self._state.feedbacks.extend(result.feedbacks)
        self._check_info(result)
        return result.epochs

    def _final_flat(self):
        return self._state.crf.model()

    @property
    def feedback_passes_(self):
        """Pass counts after which the weights were reset to the average."""
        check_is_fitted(self)
        return list(self._state.feedbacks)


