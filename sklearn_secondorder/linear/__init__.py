"""Linear classifiers on the shared Cython core (dense or CSR input)."""
from ._psa import PSAClassifier
from ._sbm import SBMLogisticRegression
from ._sgd import PlainSGDClassifier
from ._sgdqn import SGDQNLinearSVC

__all__ = ["PSAClassifier", "PlainSGDClassifier", "SBMLogisticRegression", "SGDQNLinearSVC"]
