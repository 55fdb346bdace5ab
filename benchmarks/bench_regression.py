"""PSARegressor and PlainSGDRegressor against scikit-learn's regressors, in one run.

On ``../shared/data/regression`` (80/20 ``train_test_split(random_state=0)``,
test RMSE, MAE for the robust losses; CPU seconds of the fit):

- diamonds, ``log(price)`` and ``price``, the 26 columns unscaled: ``Ridge``;
  ``SGDRegressor`` at its defaults, after ``StandardScaler`` (1 / 5 / 20
  epochs) and the epochs it needs to reach our one-pass RMSE; ours at their
  defaults (three seeds).
- flights (8,487 sparse columns): the constant, ``Ridge``, ``SGDRegressor``
  1 and 20 epochs; ours at their defaults, squared, Huber and quantile loss;
  ``SGDRegressor(loss='huber')`` and ``loss='epsilon_insensitive',
  epsilon=0`` (absolute error) 20 epochs for the MAE.
- The cost of a regressor's kernel pass against a binary ``PSAClassifier``
  kernel pass on the same rows (flights, labels ``arr_delay > 0``).
- With ``--robust-peers``: scikit-learn's ``HuberRegressor`` and
  ``QuantileRegressor`` (median, ``solver='highs'``) where they finish,
  diamonds ``log(price)`` and flights (``HuberRegressor`` only: the linear
  program of ``QuantileRegressor`` on 262k rows x 8,375 columns does not
  finish here), test MAE beside ours (minutes of CPU: off by default).

Run ``python benchmarks/bench_regression.py``; ``--out FILE`` also writes
the tables as Markdown.
"""
import argparse
import sys
import time
import warnings

import numpy as np
from _datasets import DATA, diamonds, flights
from sklearn.linear_model import Ridge, SGDRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_secondorder import PlainSGDRegressor, PSARegressor
from sklearn_secondorder._core._dataset import RowDataset
from sklearn_secondorder._core._lazy_steps import LazyStepState, PSAOptions
from sklearn_secondorder._core._losses import LogLoss, SquaredError
from sklearn_secondorder._core._psa_fast import psa_epochs

SEEDS = (0, 1, 2)


def rmse(model, X, y):
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


def mae(model, X, y):
    return float(np.mean(np.abs(model.predict(X) - y)))


def cpu_fit(make, X, y):
    """The fitted model and the fit's CPU seconds (process time: every thread)."""
    model = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.process_time()
        w = time.perf_counter()
        model.fit(X, y)
        return model, time.process_time() - t, time.perf_counter() - w


def sgd(epochs, n, **kw):
    return SGDRegressor(max_iter=epochs, tol=None, alpha=kw.pop("alpha", 1.0 / n),
                        random_state=0, **kw)


def line(rows, name, score, cpu=None, wall=None, note=""):
    rows.append((name, score, cpu, wall, note))
    cpu_s = "" if cpu is None else f"{cpu:.3f}"
    wall_s = "" if wall is None else f"{wall:.3f}"
    print(f"  {name:<58} {score:>12.5g}  {cpu_s:>7}  {wall_s:>7}  {note}", flush=True)


def diamonds_part(target, rows):
    Xtr, ytr, Xte, yte = diamonds(target)
    n = Xtr.shape[0]
    print(f"\ndiamonds, target {target} ({n} training rows, {Xtr.shape[1]} unscaled "
          "columns): test RMSE, CPU s, wall s")
    ridge, c, w = cpu_fit(lambda: Ridge(alpha=1e-3), Xtr, ytr)
    ridge_rmse = rmse(ridge, Xte, yte)
    line(rows, "Ridge(alpha=1e-3)", ridge_rmse, c, w)
    for epochs in (1, 5, 20):
        m, c, w = cpu_fit(lambda: sgd(epochs, n), Xtr, ytr)
        line(rows, f"SGDRegressor {epochs} epochs, unscaled", rmse(m, Xte, yte), c, w)
    m, c, w = cpu_fit(lambda: SGDRegressor(random_state=0), Xtr, ytr)
    line(rows, "SGDRegressor() at its defaults, unscaled", rmse(m, Xte, yte), c, w,
         f"{m.n_iter_} epochs")
    scaled = {}
    for epochs in (1, 2, 3, 5, 10, 20):
        m, c, w = cpu_fit(lambda: make_pipeline(StandardScaler(), sgd(epochs, n)), Xtr, ytr)
        scaled[epochs] = rmse(m, Xte, yte)
        if epochs in (1, 5, 20):
            line(rows, f"StandardScaler + SGDRegressor {epochs} epochs", scaled[epochs], c, w)
    ours = []
    for seed in SEEDS:
        m, c, w = cpu_fit(lambda: PSARegressor(random_state=seed), Xtr, ytr)
        ours.append(rmse(m, Xte, yte))
        line(rows, f"PSARegressor() one pass, seed {seed}", ours[-1], c, w,
             f"{ours[-1] / ridge_rmse:.3f}x Ridge")
    reach = [e for e, r in scaled.items() if r <= max(ours)]
    print(f"  scaled SGDRegressor reaches PSARegressor's worst one-pass RMSE after "
          f"{reach[0] if reach else '> 20'} epochs")
    for seed in SEEDS:
        m, c, w = cpu_fit(lambda: PlainSGDRegressor(random_state=seed), Xtr, ytr)
        r = rmse(m, Xte, yte)
        line(rows, f"PlainSGDRegressor() (5 passes), seed {seed}", r, c, w,
             f"{r / ridge_rmse:.3f}x Ridge")


def flights_part(rows):
    Xtr, ytr, Xte, yte = flights()
    n = Xtr.shape[0]
    print(f"\nflights ({n} training rows, {Xtr.shape[1]} CSR columns): test RMSE / MAE, "
          "CPU s, wall s")
    line(rows, "constant (the training mean), RMSE",
         float(np.sqrt(np.mean((yte - ytr.mean()) ** 2))))
    line(rows, "constant (the training median), MAE", float(np.mean(np.abs(yte - np.median(
        ytr)))))
    m, c, w = cpu_fit(lambda: Ridge(alpha=100, solver="sparse_cg"), Xtr, ytr)
    line(rows, "Ridge(alpha=100, solver='sparse_cg'), RMSE", rmse(m, Xte, yte), c, w)
    sgd_cpu = {}
    for epochs in (1, 20):
        m, c, w = cpu_fit(lambda: sgd(epochs, n), Xtr, ytr)
        sgd_cpu[epochs] = c
        line(rows, f"SGDRegressor {epochs} epochs, RMSE", rmse(m, Xte, yte), c, w)
    for seed in SEEDS:
        m, c, w = cpu_fit(lambda: PSARegressor(random_state=seed), Xtr, ytr)
        line(rows, f"PSARegressor() one pass, seed {seed}, RMSE", rmse(m, Xte, yte), c, w,
             f"{c / sgd_cpu[1]:.2f}x SGDRegressor 1 epoch's CPU")
    m, c, w = cpu_fit(lambda: PlainSGDRegressor(random_state=0), Xtr, ytr)
    line(rows, "PlainSGDRegressor() (5 passes), RMSE", rmse(m, Xte, yte), c, w)
    m, c, w = cpu_fit(lambda: sgd(20, n, loss="huber"), Xtr, ytr)
    line(rows, "SGDRegressor(loss='huber') 20 epochs, MAE", mae(m, Xte, yte), c, w)
    m, c, w = cpu_fit(lambda: sgd(20, n, loss="epsilon_insensitive", epsilon=0.0), Xtr, ytr)
    line(rows, "SGDRegressor(epsilon_insensitive, epsilon=0) 20 epochs, MAE",
         mae(m, Xte, yte), c, w)
    for loss, kw in (("huber", dict(epsilon=1.0)), ("huber", {}), ("quantile", {})):
        m, c, w = cpu_fit(lambda: PSARegressor(loss=loss, random_state=0, **kw), Xtr, ytr)
        label = f"PSARegressor(loss={loss!r}{', epsilon=1' if kw else ''}) one pass, MAE"
        line(rows, label, mae(m, Xte, yte), c, w, f"RMSE {rmse(m, Xte, yte):.2f}")

    print("\nthe cost of one kernel pass over flights' centred rows (CPU s, best of 7, "
          "alternated): the regressor's (squared loss, bounded steps) against a binary "
          "PSAClassifier's (log loss, labels arr_delay > 0)")
    rows_c = PSARegressor(eta0=0.01, random_state=0).fit(Xtr, ytr)._centring.transform(Xtr)
    weights = np.ones(n)

    def kernel(loss, targets, bound):
        state = LazyStepState.zeros(rows_c.shape[1] + 1, 1, 0.01, seed=1)
        ds = RowDataset(rows_c, targets, weights)
        t = time.process_time()
        psa_epochs(ds, state, PSAOptions(lam=1.0 / n, period=130), loss=loss,
                   bound_steps=bound)
        return time.process_time() - t

    # (alternated, the best of seven each: the machine is shared)
    labels = np.where(ytr > 0, 1.0, -1.0)
    times = [(kernel(SquaredError(), ytr, True), kernel(LogLoss(), labels, False))
             for _ in range(7)]
    reg, clf = (min(t[k] for t in times) for k in (0, 1))
    line(rows, "regressor's pass / binary classifier's pass (kernel)", reg / clf, reg, None,
         f"classifier {clf:.3f} s")


def robust_part(rows):
    """scikit-learn's robust regressors beside ours (``--robust-peers``)."""
    from sklearn.linear_model import HuberRegressor, QuantileRegressor

    Xtr, ytr, Xte, yte = diamonds("log")
    print("\ndiamonds log(price), robust losses: test MAE, CPU s, wall s")
    for label, make in (
            ("HuberRegressor(alpha=1e-4)", lambda: HuberRegressor(alpha=1e-4, max_iter=500)),
            ("QuantileRegressor(quantile=0.5, alpha=0, solver='highs')",
             lambda: QuantileRegressor(quantile=0.5, alpha=0.0, solver="highs")),
            ("PSARegressor(loss='huber') one pass", lambda: PSARegressor(loss="huber",
                                                                         random_state=0)),
            ("PSARegressor(loss='quantile') one pass",
             lambda: PSARegressor(loss="quantile", random_state=0))):
        m, c, w = cpu_fit(make, Xtr, ytr)
        line(rows, label, mae(m, Xte, yte), c, w)
    Xtr, ytr, Xte, yte = flights()
    print("\nflights, robust losses: test MAE, CPU s, wall s")
    m, c, w = cpu_fit(lambda: HuberRegressor(alpha=1e-4, max_iter=100), Xtr, ytr)
    line(rows, "HuberRegressor(alpha=1e-4, max_iter=100)", mae(m, Xte, yte), c, w,
         f"{m.n_iter_} iterations")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="also write the tables (Markdown) to this file")
    parser.add_argument("--robust-peers", action="store_true",
                        help="also HuberRegressor and QuantileRegressor (minutes of CPU)")
    parser.add_argument("--only-robust", action="store_true",
                        help="only the robust peers' part")
    args = parser.parse_args(argv)
    if not (DATA / "regression" / "diamonds.csv.gz").exists():
        print(f"skipped: {DATA / 'regression'} is not present")
        return 0
    rows = []
    if not args.only_robust:
        diamonds_part("log", rows)
        diamonds_part("price", rows)
        flights_part(rows)
    if args.robust_peers or args.only_robust:
        robust_part(rows)
    if args.out:
        with open(args.out, "w") as f:
            f.write("| model | test score | CPU s | wall s | note |\n|---|---|---|---|---|\n")
            for name, score, cpu, wall, note in rows:
                f.write(f"| {name} | {score:.5g} | {'' if cpu is None else f'{cpu:.3f}'} | "
                        f"{'' if wall is None else f'{wall:.3f}'} | {note} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
