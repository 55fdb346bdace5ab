"""Data-parallel training on a Dask cluster: iterative parameter mixing.

``ParameterMixing(estimator)`` trains any estimator of the package on a
``dask.array`` / ``dask.dataframe`` (linear classifiers) or a ``dask.bag`` of
``(sentence, labels)`` pairs (sequence taggers) held by the workers of a
``distributed.Client``. Every pass, each worker runs the estimator's own pass
(``partial_fit``, the compiled kernel) over the rows it holds, starting from
the current mixed model; then the workers' models are combined into the next
mixed model (iterative parameter mixing: McDonald, Hall and Mann, NAACL 2010;
Zinkevich, Weimer, Smola and Li, NIPS 2010). The partitions never leave their
workers: only models travel, one per worker and pass each way. The result
``estimator_`` is an ordinary fitted estimator (it pickles, and predicts
without Dask).

How each method's state combines is one rule per estimator class
(``MIXING_RULES``), reading and writing the estimators' typed states. The
rules follow one principle: the iterates are averaged, statistics that are
sums over the rows seen are summed, and adapted multiplicative quantities are
averaged in log space. With ``p_w = n_w / sum n`` the share of the rows worker
``w`` saw in the pass, ``s`` the state the pass started from, and ``W`` the
workers (see ``doc/dask.md`` for the arguments):

================================  =================================================
state                             mixed value
================================  =================================================
weights, intercepts (all)         ``sum_w p_w theta_w`` (Zinkevich et al., Alg. 2)
update counter ``t`` (all)        ``t_s + sum_w (t_w - t_s)``: the rows the model
                                  has been trained on, as on one machine
averaged SGD / ASF sums           ``S_s + sum_w (S_w - S_s)`` and the iterate
                                  counts likewise: the average of every iterate
                                  of every worker (the model a single machine
                                  would average over the same iterates)
PSA step sizes ``eta_i``          ``exp(sum_w p_w log eta_w,i)``, weighted
                                  geometric mean: ``eta`` is a product of
                                  per-window factors, the workers' windows are
                                  parallel estimates of the same contraction
PSA adaptation window             restarted at the mixed weights (both snapshots
                                  set to them); the next event is the first
                                  multiple of ``b`` after ``t``, as for new
                                  attributes
SGD-QN ``1/B``                    ``1/B_s + sum_w (1/B_w - 1/B_s)``: ``1/B`` sums
                                  the secant curvatures of the rows seen (the
                                  erratum's harmonic update), ``alpha (t0 + t)``
                                  without curvature, consistent with ``t``
SGD-QN skip cycle                 restarted (``count = skip``, no pending
                                  re-estimate, ``v`` = the mixed weights)
AP / PA: weights that exist       the union of the workers' (CRFsuite's feature
                                  set of all the sentences seen)
AROW variances ``Sigma_k``        precisions ``1/Sigma_k`` summed as increments
SBM ``Sigma = M^-1``, ``mu``      the bounds' curvature ``C = Sigma - lam I``:
                                  ``C_s + sum_w (C_w - C_s)``, ``mu`` likewise
                                  (sums over the rows seen, Algorithm 2); then
                                  ``Sigma = C + alpha n_t I`` with the workers'
                                  largest ``n_t``; ``phi = M mu``
================================  =================================================

SBM is mixed at full rank only (``rank=None``): the low-rank factors of
different workers do not add up to a rank-``k`` bound.
"""
try:
    import dask  # noqa: F401
    import distributed  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "sklearn_secondorder.dask needs dask and distributed: "
        "pip install 'sklearn-secondorder[dask]'") from exc

from ._meta import ParameterMixing
from ._rules import MIXING_RULES, MixingRule

__all__ = ["ParameterMixing", "MixingRule", "MIXING_RULES"]
