"""
Stochastic bound majorization against SGD, pass by pass
=======================================================

``SBMLogisticRegression`` (Choromanska and Jebara) keeps the inverse ``M`` of
the sum of the examples' quadratic bounds on the log-partition function and
steps ``theta -= eta M mu``: a stochastic Newton-like method. This example
compares its test log-loss after each pass with scikit-learn's
``SGDClassifier`` (log loss, default schedule, and averaged) and with the
converged ``LogisticRegression`` of the same objective
(``C = 1 / (alpha n)``), on scikit-learn's bundled, standardised digits
(10 classes, 64 features: a full-rank ``M`` of 650 x 650).

SBM's per-pass cost is far above an SGD epoch (``O(K P^2)`` per example at
full rank): the right panel shows the same curves against the seconds.
"""
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sklearn_secondorder import SBMLogisticRegression

X, y = load_digits(return_X_y=True)
X, Xt, y, yt = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
scaler = StandardScaler().fit(X)
X, Xt = scaler.transform(X), scaler.transform(Xt)
n = X.shape[0]
alpha = 1.0 / n

lr = LogisticRegression(C=1.0 / (alpha * n), max_iter=5000).fit(X, y)
ref = log_loss(yt, lr.predict_proba(Xt))
print(f"digits: {n} training rows; converged LogisticRegression test log-loss {ref:.4f}")

makers = {
    "SBMLogisticRegression": lambda k: SBMLogisticRegression(alpha=alpha, max_iter=k,
                                                             random_state=0),
    "SGDClassifier (sklearn)": lambda k: SGDClassifier(loss="log_loss", alpha=alpha,
                                                       max_iter=k, tol=None, random_state=0),
    "SGDClassifier averaged": lambda k: SGDClassifier(loss="log_loss", alpha=alpha,
                                                      max_iter=k, tol=None, average=True,
                                                      random_state=0),
}
passes = [1, 2, 3]
curves = {}
for label, make in makers.items():
    rows = []
    for k in passes:
        clf = make(k)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(X, y)
        rows.append((log_loss(yt, clf.predict_proba(Xt)) / ref, time.perf_counter() - t))
    curves[label] = np.array(rows)
    print(f"{label:25s} " + "  ".join(f"{k}: {r:.2f}x LR ({s:.2f} s)"
                                      for k, (r, s) in zip(passes, rows)))

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
for label, r in curves.items():
    ax1.plot(passes, r[:, 0], "o-", label=label)
    ax2.plot(r[:, 1], r[:, 0], "o-", label=label)
for ax in (ax1, ax2):
    ax.axhline(1.0, color="k", ls="--", lw=1, label="LogisticRegression (converged)")
    ax.set_ylabel("test log-loss / LogisticRegression's")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
ax1.set_xlabel("passes")
ax1.set_xticks(passes)
ax2.set_xlabel("fit seconds (this run)")
ax2.set_xscale("log")
ax1.set_title("digits: test log-loss per pass")
ax2.set_title("digits: test log-loss against time")
ax1.legend(fontsize=8)
fig.tight_layout()
plt.show()
