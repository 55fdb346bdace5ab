"""SGDSequenceTagger: plain or averaged SGD on the CRF core (the tagger baseline)."""
from .._core._crf_sgd import SGDOptions, sgd_epochs
from ._base import _COMMON_ATTRS_DOC, _COMMON_PARAMS_DOC, _BaseSequenceTagger


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
        options = SGDOptions(eta0=self.eta0_, power=0.75 if self.average else 1.0,
                             alpha=self.alpha, shuffle=self.shuffle,
                             fit_intercept=self.fit_intercept, average=self.average)
        result = sgd_epochs(ds, self._state.crf, options, n_epochs=n_epochs)
        self._check_info(result)
        return result.epochs

    def _final_flat(self):
        return self._state.crf.model()
