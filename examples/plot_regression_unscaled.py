"""
Regression on features as they come: diamonds' prices, one pass
================================================================

``SGDRegressor`` needs its features scaled: on diamonds' columns as they
come (carat near 1, depth and table near 60) it returns weights of 1e12.
``PSARegressor`` needs no scaler: its steps start from each column's scale,
dense columns are centred inside, and no step moves a row's prediction past
its target (see the user guide's regression page). This example fits it in
one pass on the raw columns and shows

- the test predictions against the true prices, beside ``SGDRegressor``
  after ``StandardScaler`` (one epoch) and the exact ``Ridge``;
- the test RMSE as the rows are seen (``partial_fit`` on chunks of 2,000
  rows), ours on the raw columns beside ``SGDRegressor`` on the raw and on
  the scaled columns.

Data: diamonds (ggplot2's 53,940 diamonds; target ``log(price)``; the 6
numeric columns as they are and one-hot cut, color and clarity) from
``../shared/data`` when it is next to the repository, else a synthetic
stand-in with columns on scales a thousand times apart.
"""
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import Ridge, SGDRegressor
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from sklearn_secondorder import PSARegressor

# (the gallery runs the examples from this folder, without __file__)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
DIAMONDS = HERE.parents[1] / "shared" / "data" / "regression" / "diamonds.csv.gz"


def load():
    if DIAMONDS.exists():
        import pandas as pd

        df = pd.read_csv(DIAMONDS)
        numeric = df[["carat", "depth", "table", "x", "y", "z"]].to_numpy(float)
        onehot = pd.get_dummies(df[["cut", "color", "clarity"]]).to_numpy(float)
        X, y = np.hstack([numeric, onehot]), np.log(df["price"].to_numpy(float))
        name = "diamonds, log(price)"
    else:
        rng = np.random.RandomState(0)
        scale = np.array([1.0, 1000.0, 0.001, 10.0, 1.0])
        X = rng.randn(50_000, 5) * scale + [0, 5000, 0, 60, 0]
        y = X @ ([1.0, 2.0, 0.8, -0.3, 2.0] / scale) + 40 + 0.5 * rng.randn(50_000)
        name = "synthetic, columns on scales 1e6 apart"
    return (name, *train_test_split(X, y, test_size=0.2, random_state=0))


name, X, Xt, y, yt = load()
n = X.shape[0]
print(f"{name}: {n} training rows, {X.shape[1]} columns as they are")


def rmse(pred):
    return float(np.sqrt(np.mean((pred - yt) ** 2)))


# %%
# One pass, on the raw columns, against the exact solution and the peer.
ridge = Ridge(alpha=1e-3).fit(X, y)
psa = PSARegressor(random_state=0).fit(X, y)
scaler = StandardScaler().fit(X)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    sgd_raw = SGDRegressor(max_iter=1, tol=None, alpha=1 / n, random_state=0).fit(X, y)
    sgd_scaled = SGDRegressor(max_iter=1, tol=None, alpha=1 / n,
                              random_state=0).fit(scaler.transform(X), y)
results = {
    "Ridge (exact)": ridge.predict(Xt),
    "PSARegressor, one pass, raw columns": psa.predict(Xt),
    "SGDRegressor, one epoch, StandardScaler": sgd_scaled.predict(scaler.transform(Xt)),
}
for label, pred in results.items():
    print(f"{label:42s} test RMSE {rmse(pred):.4f}")
print(f"{'SGDRegressor, one epoch, raw columns':42s} test RMSE {rmse(sgd_raw.predict(Xt)):.3g}")

fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharex=True, sharey=True)
sample = np.random.RandomState(0).choice(yt.size, min(3000, yt.size), replace=False)
lo, hi = np.percentile(yt, [0.5, 99.5])
for ax, (label, pred) in zip(axes, results.items()):
    ax.scatter(yt[sample], pred[sample], s=3, alpha=0.3)
    ax.plot([lo, hi], [lo, hi], color="k", lw=1)
    ax.set_title(f"{label}\nRMSE {rmse(pred):.4f}", fontsize=9)
    ax.set_xlabel("true")
axes[0].set_ylabel("predicted")
axes[0].set_xlim(lo, hi)
axes[0].set_ylim(lo, hi)
fig.tight_layout()

# %%
# The test RMSE as the rows are seen: each model's ``partial_fit`` on
# chunks of 2,000 rows, the test set scored after each.
chunks = np.array_split(np.random.RandomState(1).permutation(n), max(1, n // 2000))
models = {
    "PSARegressor, raw columns": (PSARegressor(random_state=0), lambda A: A),
    "SGDRegressor, raw columns": (SGDRegressor(alpha=1 / n, random_state=0), lambda A: A),
    "SGDRegressor, StandardScaler": (SGDRegressor(alpha=1 / n, random_state=0),
                                     scaler.transform),
}
curves = {label: [] for label in models}
seen = np.cumsum([c.size for c in chunks])
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for rows in chunks:
        for label, (model, prep) in models.items():
            model.partial_fit(prep(X[rows]), y[rows])
            with np.errstate(over="ignore", invalid="ignore"):
                curves[label].append(rmse(model.predict(prep(Xt))))

fig, axes = plt.subplots(1, 2, figsize=(12, 4))
ridge_rmse = rmse(ridge.predict(Xt))
for ax, log in zip(axes, (True, False)):
    for color, (label, values) in zip(("C0", "C1", "C2"), curves.items()):
        if log or "raw columns" not in label or label.startswith("PSA"):
            ax.plot(seen, np.nan_to_num(values, nan=1e300, posinf=1e300), label=label,
                    color=color)
    ax.axhline(ridge_rmse, color="k", lw=1, ls="--", label="Ridge (exact)")
    ax.set_xlabel("training rows seen")
    if log:
        ax.set_yscale("log")
        ax.set_ylabel("test RMSE (log scale)")
        ax.set_title("all three", fontsize=10)
    else:
        ax.set_ylim(0.95 * ridge_rmse, 1.5 * ridge_rmse)
        ax.set_ylabel("test RMSE")
        ax.set_title("close up: the two that learn", fontsize=10)
    ax.legend(fontsize=8)
fig.suptitle(f"{name}: the test RMSE as the rows are seen")
fig.tight_layout()
plt.show()
for label, values in curves.items():
    print(f"{label:32s} after one pass: test RMSE {values[-1]:.4g}")
