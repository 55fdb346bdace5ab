"""The only module that imports private scikit-learn API.

Keeping these imports in one place makes an upgrade of scikit-learn a
one-file change.
"""
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

__all__ = [
    "_fit_context",
    "Hidden",
    "Interval",
    "StrOptions",
    "_check_sample_weight",
    "check_is_fitted",
    "validate_data",
]
