"""How each estimator is started and mixed by ``ParameterMixing``.

One ``MixingRule`` per estimator class (``MIXING_RULES``): the parameters
resolved before the first pass, read from public fitted attributes
(``eta0_``, ``t0_``, ``skip_``), and the estimator's public ``mix``, whose
arithmetic lives beside each kind of training state (``mix_sgd_states``,
``mix_psa_problems``, ``mix_sgdqn_states``, ``mix_full_rank_states``,
``mix_tagger_states``, ``mix_online_tagger_states``, on the rules of
``sklearn_secondorder._mixing``). This module reads no private state.

The regressors mix as the classifiers of the same method (their states are
the same kinds): the weights and the intercept averaged by the workers'
row shares, PSA's step sizes averaged geometrically, the update counters
summed. Every worker continues the one start (``start_model``: its
centred columns, their means and its step sizes, from the first rows), so
that their weights are in the same coordinates and the average of their
models is the model of the averaged weights.
"""
from dataclasses import dataclass

from ..linear import (
    PlainSGDClassifier,
    PlainSGDRegressor,
    PSAClassifier,
    PSARegressor,
    SBMLogisticRegression,
    SGDQNLinearSVC,
)
from ..sequence import (
    AROWSequenceTagger,
    ASFSequenceTagger,
    AveragedPerceptronSequenceTagger,
    PassiveAggressiveSequenceTagger,
    PSASequenceTagger,
    SGDSequenceTagger,
)


@dataclass(frozen=True)
class MixingRule:
    """How one estimator class is started and mixed.

    Attributes
    ----------
    auto_params : tuple of str
        Parameters whose ``'auto'`` value is resolved once, before the first
        pass, on the first rows of the first partition (every worker must start
        with the same settings).
    resolve : callable
        ``resolve(fitted, n_rows) -> dict``: the concrete values of
        ``auto_params`` read from the public fitted attributes of an
        estimator fitted on those rows.
    mix : callable
        The estimator class's ``mix(models, p, start) -> estimator``: the
        mixed model from the workers' models, their row shares ``p`` and the
        model the pass started from (None on the first pass).
    """

    auto_params: tuple
    resolve: object
    mix: object


def _resolve_eta0(fitted, n_rows):
    return {"eta0": float(fitted.eta0_)}


def _resolve_psa(fitted, n_rows):
    return {"eta0": float(fitted.eta0_),
            # the paper's b ~ 0.5 |D| / 1000 for the whole data (Section 5.1.4)
            "period": max(10, int(round(0.5 * n_rows / 1000)))}


MIXING_RULES = {
    PlainSGDClassifier: MixingRule(("eta0",), _resolve_eta0, PlainSGDClassifier.mix),
    PSAClassifier: MixingRule(("eta0", "period"), _resolve_psa, PSAClassifier.mix),
    PlainSGDRegressor: MixingRule(("eta0",), _resolve_eta0, PlainSGDRegressor.mix),
    PSARegressor: MixingRule(("eta0", "period"), _resolve_psa, PSARegressor.mix),
    SGDQNLinearSVC: MixingRule(
        ("t0", "skip"), lambda f, n: {"t0": float(f.t0_[0]), "skip": int(f.skip_)},
        SGDQNLinearSVC.mix),
    SBMLogisticRegression: MixingRule((), None, SBMLogisticRegression.mix),
    SGDSequenceTagger: MixingRule(("eta0",), _resolve_eta0, SGDSequenceTagger.mix),
    ASFSequenceTagger: MixingRule(("eta0",), _resolve_eta0, ASFSequenceTagger.mix),
    PSASequenceTagger: MixingRule(("eta0",), _resolve_eta0, PSASequenceTagger.mix),
    AveragedPerceptronSequenceTagger: MixingRule(
        (), None, AveragedPerceptronSequenceTagger.mix),
    PassiveAggressiveSequenceTagger: MixingRule((), None, PassiveAggressiveSequenceTagger.mix),
    AROWSequenceTagger: MixingRule((), None, AROWSequenceTagger.mix),
}
"""The mixing rule of each estimator class (subclasses use their base's)."""


def _rule_for(estimator):
    for cls in type(estimator).__mro__:
        if cls in MIXING_RULES:
            return MIXING_RULES[cls]
    raise TypeError(
        f"ParameterMixing has no mixing rule for {type(estimator).__name__}; supported: "
        + ", ".join(c.__name__ for c in MIXING_RULES) + ".")
