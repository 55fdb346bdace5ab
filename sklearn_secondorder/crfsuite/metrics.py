"""``sklearn_crfsuite.metrics`` under the same names (and conlleval chunk F1).

The functions live in `sklearn_secondorder.metrics`; this module lets
``from sklearn_crfsuite import metrics`` become
``from sklearn_secondorder.crfsuite import metrics``.
"""
from ..metrics import (
    chunk_f1_score,
    chunk_precision_recall_fscore,
    flat_accuracy_score,
    flat_classification_report,
    flat_f1_score,
    flat_fbeta_score,
    flat_precision_score,
    flat_recall_score,
    sequence_accuracy_score,
)

#: sklearn_crfsuite.metrics's functions, then the chunk F1 it lacks.
__all__ = ["flat_accuracy_score", "flat_precision_score", "flat_recall_score", "flat_f1_score",
           "flat_fbeta_score", "flat_classification_report", "sequence_accuracy_score",
           "chunk_f1_score", "chunk_precision_recall_fscore"]
