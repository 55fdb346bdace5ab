"""The ``penalty`` / ``l1_ratio`` parameters, with scikit-learn's
``SGDClassifier`` meaning, shared by the estimators that take them.

The penalty term is ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2)``:
``'l2'`` is ``l1_ratio = 0``, ``'l1'`` is ``l1_ratio = 1``, ``'elasticnet'``
uses ``l1_ratio``. The L1 part is Tsuruoka et al.'s cumulative penalty in the
shared core (``_core/_weights.pyx``).
"""
from numbers import Real

from ._compat import Interval, StrOptions

PENALTY_CONSTRAINTS = {
    "penalty": [StrOptions({"l2", "l1", "elasticnet"})],
    # (None: scikit-learn's "not used", allowed unless penalty='elasticnet')
    "l1_ratio": [Interval(Real, 0, 1, closed="both"), None],
}


def l1_share(estimator):
    """The L1 share of ``alpha`` for the estimator's ``penalty`` and
    ``l1_ratio``: 0 for ``'l2'``, 1 for ``'l1'``, ``l1_ratio`` for
    ``'elasticnet'``."""
    penalty = getattr(estimator, "penalty", "l2")
    if penalty == "l1":
        return 1.0
    if penalty == "elasticnet":
        if estimator.l1_ratio is None:
            raise ValueError("l1_ratio must be set when penalty is 'elasticnet'")
        return float(estimator.l1_ratio)
    return 0.0


def split_alpha(estimator):
    """``(lam, l1)``: the L2 strength (of ``lam/2 ||w||^2``) and the L1
    strength (of ``l1 ||w||_1``) of the estimator's ``alpha``.

    The one place ``alpha`` is divided: the estimators call it once per
    kernel call and pass ``lam`` and ``l1`` down (the options of every kernel
    and the step-size calibration take these two names).
    """
    share = l1_share(estimator)
    if share == 0.0:
        return float(estimator.alpha), 0.0
    return estimator.alpha * (1.0 - share), estimator.alpha * share


def check_l2_only(estimator, why):
    """Refuse a ``penalty`` other than ``'l2'`` (``why``: the method's reason)."""
    if estimator.penalty != "l2":
        raise ValueError(f"{type(estimator).__name__} supports only penalty='l2', got "
                         f"penalty={estimator.penalty!r}: {why}")
