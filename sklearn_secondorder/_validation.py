"""Checks and failure handling shared by every estimator of the package.

Each rule lives here once: the step-size and PSA-factor checks, the label
checks, the seed range, the weight-scale warning, the divergence error and
the rollback of a failed ``fit`` / ``partial_fit``.
"""
import contextlib
import warnings

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

#: Exclusive upper bound of the seeds drawn for the kernels' shuffling RNG.
MAX_SEED = np.iinfo(np.int32).max


def draw_seed(rng):
    """A kernel seed in ``[1, MAX_SEED)`` (the xorshift state must not be 0)."""
    return int(rng.randint(1, MAX_SEED))


def check_label_types(labels, name):
    """Refuse labels that mix strings with other types.

    NumPy would turn them all into strings, or fail to sort them.
    """
    if isinstance(labels, np.ndarray) and labels.dtype.kind != "O":
        return
    if hasattr(labels, "dtype") and getattr(labels.dtype, "kind", "O") != "O":
        return                                     # e.g. a numeric pandas Series
    try:
        values = np.ravel(np.asarray(labels, dtype=object))
    except (TypeError, ValueError):
        return                                     # left to the usual checks
    is_str = [isinstance(v, str) for v in values]
    if any(is_str) and not all(is_str):
        other = values[is_str.index(False)]
        raise ValueError(f"{name} mixes string labels with labels of other types (e.g. "
                         f"{values[is_str.index(True)]!r} and {other!r}).")


def check_classes_arg(classes):
    """The ``classes`` argument of ``partial_fit``.

    Returns 1-D class labels (not continuous, no NaN, one type), sorted and
    unique.
    """
    check_label_types(classes, "classes")
    classes = column_or_1d(classes, warn=False)
    check_classification_targets(classes)
    return np.unique(classes)


def check_psa_factors(est):
    """PSA's factor range: ``psa_beta < psa_alpha`` (Eq. 10).

    Each lies in (0, 1) by the parameter constraints.
    """
    if not est.psa_beta < est.psa_alpha:
        raise ValueError(f"psa_beta={est.psa_beta} must be smaller than "
                         f"psa_alpha={est.psa_alpha}")


def check_eta0(est, eta0=None):
    """A constant step must keep the L2 shrink ``1 - eta0 alpha`` positive.

    ``eta0`` is the parameter (default) or the step in use (e.g. calibrated,
    ``eta0_``); at or below 0 every step would wipe the weights.
    """
    eta0 = est.eta0 if eta0 is None else eta0
    if eta0 != "auto" and eta0 is not None and not eta0 * est.alpha < 1.0:
        raise ValueError(
            f"eta0={eta0!r} must satisfy eta0 * alpha < 1 (alpha={est.alpha!r}): the "
            "shrink 1 - eta0 * alpha of every step would wipe the weights.")


def diverged_error(name, epoch, remedy="lower eta0"):
    """The error raised when the weights overflow.

    ``remedy`` names the estimator's own step-size knob.
    """
    return ValueError(
        f"{name}: the weights overflowed (non-finite values) during pass {epoch}; "
        f"{remedy}, increase alpha, or scale the features (e.g. StandardScaler)."
    )


def warn_if_implausible(est, penalty, cost_of_zero, advice):
    """Warn when the weights are implausibly large without overflowing.

    At the optimum ``alpha/2 ||w||^2 <= P(w*) <= P(0)``: a model whose
    penalty alone is ten times ``cost_of_zero`` (the objective at ``w = 0``)
    is far worse than ``w = 0``; its steps were too large for the features'
    scale.
    """
    if not penalty <= 10.0 * cost_of_zero:
        warnings.warn(
            f"{type(est).__name__}: the weights are implausibly large (alpha/2 ||w||^2 "
            f"= {penalty:.3g}, while the cost of w = 0 is at most {cost_of_zero:.3g}): "
            f"the steps were too large for the scale of the features. {advice}",
            UserWarning, stacklevel=5)


def remove_fitted(est, private):
    """Remove the public ``*_`` attributes and the ``private`` state of ``est``."""
    for name in list(vars(est)):
        if (name.endswith("_") and not name.startswith("__")) or name in private:
            delattr(est, name)


@contextlib.contextmanager
def unfit_on_error(est, private, continued=False):
    """Leave ``est`` unfitted if the body raises (no half-updated model).

    With ``continued=True`` (a later ``partial_fit``) a ``ValueError`` says
    that the state could not be continued.
    """
    try:
        yield
    except BaseException as exc:
        remove_fitted(est, private)
        if continued and isinstance(exc, ValueError):
            raise ValueError(f"{exc} The estimator is now unfitted: the state could not "
                             "be continued.") from exc
        raise
