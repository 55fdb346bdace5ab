"""Single-pass second-order SGD estimators for scikit-learn.

Estimators
----------
PlainSGDClassifier
    Plain / averaged SGD on the shared core (the baseline).
"""
from ._psa import PSAClassifier
from ._sbm import SBMLogisticRegression
from ._sgd import PlainSGDClassifier
from ._sgdqn import SGDQNLinearSVC
from ._tagger import ASFSequenceTagger, PSASequenceTagger, SGDSequenceTagger

__version__ = "0.1.0"

__all__ = ["PSAClassifier", "PlainSGDClassifier", "SGDQNLinearSVC", "SBMLogisticRegression",
           "ASFSequenceTagger", "PSASequenceTagger", "SGDSequenceTagger"]
