"""The only module that imports private scikit-learn API.

Keeping these imports in one place makes an upgrade of scikit-learn a
one-file change.
"""
import numpy as np
from sklearn.base import _fit_context  # noqa: F401
from sklearn.utils._param_validation import (  # noqa: F401
    Hidden,
    Interval,
    StrOptions,
)
from sklearn.utils.validation import (  # noqa: F401
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)


def with_unique_labels(y, classes):
    """``y`` as a view that carries its sorted unique values ``classes``.

    scikit-learn (>= 1.6) reads a target's unique values from this dtype
    metadata (``sklearn.utils._unique``) instead of sorting the target again
    in ``check_classification_targets``; an older version ignores it.
    """
    if not isinstance(y, np.ndarray) or y.dtype.metadata is not None:
        return y
    return y.view(np.dtype(y.dtype, metadata={"unique": classes}))


__all__ = [
    "_fit_context",
    "Hidden",
    "Interval",
    "StrOptions",
    "_check_sample_weight",
    "check_is_fitted",
    "validate_data",
    "with_unique_labels",
]
