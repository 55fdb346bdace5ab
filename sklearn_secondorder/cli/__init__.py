"""The ``skso`` command line: train, predict, evaluate and inspect models from
data files of any size, streamed in chunks through the estimators'
``partial_fit``.

Run ``skso --help`` (or ``python -m sklearn_secondorder --help``). From
Python, ``main(argv)`` runs a command and ``load_model`` reads a model file
(see ``_model`` for the versioned format).
"""
from ._main import main
from ._model import MODEL_FORMAT_VERSION, SavedModel, load_model, save_model
from ._parser import MODELS, build_parser

__all__ = ["main", "build_parser", "load_model", "save_model", "SavedModel",
           "MODEL_FORMAT_VERSION", "MODELS"]
