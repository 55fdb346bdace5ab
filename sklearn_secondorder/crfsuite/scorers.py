"""``sklearn_crfsuite.scorers``: scorers for ``cross_val_score`` / ``GridSearchCV``."""
from sklearn.metrics import make_scorer

from . import metrics

#: ``make_scorer(flat_accuracy_score)``, as sklearn-crfsuite's.
flat_accuracy = make_scorer(metrics.flat_accuracy_score)
#: ``make_scorer(sequence_accuracy_score)``, as sklearn-crfsuite's.
sequence_accuracy = make_scorer(metrics.sequence_accuracy_score)
#: ``make_scorer(chunk_f1_score)``: conlleval chunk F1.
chunk_f1 = make_scorer(metrics.chunk_f1_score)

__all__ = ["flat_accuracy", "sequence_accuracy", "chunk_f1"]
