"""Sequence taggers: linear-chain CRFs on the shared Cython core.

Besides the estimators, the package offers inference on a trained chain's
flat weights (``sequence_batch``, ``viterbi_labels``, ``token_marginals``,
``path_log_likelihood``, ``mean_neg_log_likelihood``; ``_inference.py``) to
the layers above it.
"""
from ._arow import AROWSequenceTagger
from ._asf import ASFSequenceTagger
from ._inference import (
    mean_neg_log_likelihood,
    path_log_likelihood,
    sequence_batch,
    token_marginals,
    viterbi_labels,
)
from ._lbfgs import LBFGSSequenceTagger
from ._passive_aggressive import PassiveAggressiveSequenceTagger
from ._perceptron import AveragedPerceptronSequenceTagger
from ._psa import PSASequenceTagger
from ._sgd import SGDSequenceTagger

__all__ = ["ASFSequenceTagger", "PSASequenceTagger", "SGDSequenceTagger",
           "LBFGSSequenceTagger", "AveragedPerceptronSequenceTagger",
           "PassiveAggressiveSequenceTagger", "AROWSequenceTagger",
           # inference on a trained chain, for the layers above (``_inference``)
           "sequence_batch", "viterbi_labels", "token_marginals", "path_log_likelihood",
           "mean_neg_log_likelihood"]
