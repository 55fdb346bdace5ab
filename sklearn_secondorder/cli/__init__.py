"""The ``skso`` command line: train, predict, evaluate and inspect models from
data files of any size, streamed in chunks through the estimators'
``partial_fit``.

Run ``skso --help`` (or ``python -m sklearn_secondorder --help``). From
Python, ``main(argv)`` runs a command and ``load_model`` reads a model file
(see ``_model`` for the versioned format).
"""
from ._main import main, run
from ._parser import MODEL_KINDS, build_parser

__all__ = ["main", "run", "build_parser", "load_model", "save_model", "SavedModel",
           "MODEL_FORMAT_VERSION", "MODELS", "MODEL_KINDS"]


def __getattr__(name):
    # the model file's functions import joblib and NumPy, MODELS the
    # estimators (scikit-learn): loaded on first use, not by `skso --help`
    if name in ("load_model", "save_model", "SavedModel", "MODEL_FORMAT_VERSION"):
        from . import _model
        return getattr(_model, name)
    if name == "MODELS":
        from ._parser import model_class
        return {name: (model_class(name), kind) for name, (_, kind) in MODEL_KINDS.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
