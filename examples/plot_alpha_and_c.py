"""
``alpha``, ``C``, ``c1`` and ``c2``: one objective, four spellings
==================================================================

Every estimator here minimises scikit-learn's ``SGDClassifier`` objective,

.. math::

   \\frac1n \\sum_i \\ell(y_i, w^\\top x_i + b)
   + \\alpha \\Big(\\rho \\|w\\|_1 + \\frac{1-\\rho}{2}\\|w\\|_2^2\\Big),

with ``rho = l1_ratio`` (0 for ``penalty='l2'``). ``LogisticRegression`` and
``LinearSVC`` write the same problem as ``C sum_i loss_i + ||w||^2 / 2``, so
``alpha = 1 / (C n)``. CRFsuite writes ``-sum_i log p(y_i|x_i) + c1 ||w||_1 +
c2 ||w||^2``, so ``alpha = (c1 + 2 c2) / n`` and
``l1_ratio = c1 / (c1 + 2 c2)``.

This example checks the first identity numerically: one pass of
``PSAClassifier`` at ``alpha = 1 / (C n)`` against ``LogisticRegression(C)``
for a few ``C``, on scikit-learn's bundled breast-cancer data (standardised).
Then a ``GridSearchCV`` over ``alpha`` with the same code one writes for
``SGDClassifier``.
"""
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_secondorder import PSAClassifier

X, y = load_breast_cancer(return_X_y=True)
X, Xt, y, yt = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
scaler = StandardScaler().fit(X)
X, Xt = scaler.transform(X), scaler.transform(Xt)
n = X.shape[0]


def objective(coef, intercept, alpha):
    z = X @ coef + intercept
    return np.mean(np.logaddexp(0, -np.where(y == 1, 1, -1) * z)) + alpha / 2 * coef @ coef


print(f"{'C':>6} {'alpha=1/(Cn)':>13} {'objective LR':>13} {'PSA 5 passes':>13} "
      f"{'test acc LR':>12} {'PSA':>7}")
Cs, lr_objective, psa_objective = (0.01, 0.1, 1.0), [], []
for C in Cs:
    alpha = 1.0 / (C * n)
    lr = LogisticRegression(C=C, max_iter=5000).fit(X, y)
    psa = PSAClassifier(alpha=alpha, max_iter=5, random_state=0).fit(X, y)
    lr_objective.append(objective(lr.coef_[0], lr.intercept_[0], alpha))
    psa_objective.append(objective(psa.coef_[0], psa.intercept_[0], alpha))
    print(f"{C:6g} {alpha:13.3g} {lr_objective[-1]:13.5f} {psa_objective[-1]:13.5f} "
          f"{lr.score(Xt, yt):12.4f} {psa.score(Xt, yt):7.4f}")

fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot(Cs, lr_objective, "o-", label="LogisticRegression(C) (optimum)")
ax.plot(Cs, psa_objective, "s--", label="PSAClassifier(alpha=1/(C n)), 5 passes")
ax.set(xscale="log", xlabel="C", ylabel="objective at alpha = 1/(C n)",
       title="One objective: alpha = 1 / (C n)")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# Same problem, same ``alpha``: five passes of PSA reach an objective within
# a few per cent of the optimum ``LogisticRegression`` finds for each ``C``
# (the two middle columns), and the same test accuracy.
#
# CRFsuite's ``c1``, ``c2`` for ``n`` training sequences, as
# ``sklearn_secondorder.crfsuite.CRF`` maps them
# (``sklearn_secondorder/crfsuite/_params.py``):
n_sequences = 8936          # CoNLL-2000's training sentences
for c1, c2 in [(0.0, 1.0), (0.1, 0.1)]:
    alpha = (c1 + 2 * c2) / n_sequences
    l1_ratio = c1 / (c1 + 2 * c2)
    penalty = "l2" if c1 == 0 else "elasticnet"
    print(f"c1={c1}, c2={c2}: penalty={penalty!r}, alpha={alpha:.3g}, l1_ratio={l1_ratio:.3g}")

# %%
# Model selection is the ``SGDClassifier`` code with the class name changed.
search = GridSearchCV(make_pipeline(StandardScaler(), PSAClassifier(random_state=0)),
                      {"psaclassifier__alpha": [1e-4, 1e-3, 1e-2]}, cv=3)
search.fit(*load_breast_cancer(return_X_y=True))
print("best alpha:", search.best_params_, f"cv accuracy {search.best_score_:.4f}")
