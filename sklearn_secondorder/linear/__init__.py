"""Linear classifiers and regressors on the shared Cython core (dense or CSR input)."""
from ._psa import PSAClassifier
from ._psa_regressor import PSARegressor
from ._sbm import SBMLogisticRegression
from ._sgd import PlainSGDClassifier
from ._sgd_regressor import PlainSGDRegressor
from ._sgdqn import SGDQNLinearSVC

__all__ = ["PSAClassifier", "PSARegressor", "PlainSGDClassifier", "PlainSGDRegressor",
           "SBMLogisticRegression", "SGDQNLinearSVC"]
