"""sklearn-crfsuite's API on this package's trainers: change one import.

``import sklearn_crfsuite`` becomes
``from sklearn_secondorder import crfsuite as sklearn_crfsuite`` (and
``from sklearn_crfsuite import metrics, scorers`` becomes
``from sklearn_secondorder.crfsuite import metrics, scorers``):

* `CRF`: sklearn-crfsuite's ``CRF`` (every argument, pycrfsuite's input
  forms and attribute names, ``training_log_``, ``tagger_``...), trained by
  the algorithm chosen in the ``ALGORITHMS`` registry;
* ``metrics``: ``flat_accuracy_score``, ``flat_f1_score``, ... and
  ``sequence_accuracy_score``, as ``sklearn_crfsuite.metrics``;
* ``scorers``: ``flat_accuracy``, ``sequence_accuracy``.
"""
from . import metrics, scorers
from ._estimator import CRF, DEFAULT_ALGORITHM, TrainingLog
from ._model import CRFModel, Tagger
from ._registry import ALGORITHMS, Algorithm, available_algorithms, register_algorithm

__all__ = [
    "CRF",
    "CRFModel",
    "Tagger",
    "TrainingLog",
    "ALGORITHMS",
    "Algorithm",
    "DEFAULT_ALGORITHM",
    "available_algorithms",
    "register_algorithm",
    "metrics",
    "scorers",
]
