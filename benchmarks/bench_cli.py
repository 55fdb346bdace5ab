"""``skso`` end to end (parsing included) against Vowpal Wabbit, same run.

What it checks (``skso`` with its defaults: no ``--alpha``, so
``alpha = 1/n`` from the scan, or from the first chunk's estimate with
``--classes``):

- a9a and w8a: ``skso train --model psa`` one pass within 0.2 points of
  converged ``LogisticRegression``'s test accuracy (same L2: ``alpha = 1/n``,
  ``C = 1``);
- the large file: test accuracy at least that of Vowpal Wabbit's defaults;
- rows/s of the whole command (parse + train, one pass, logistic loss) and
  test accuracy, against ``vw --loss_function logistic -b 20`` on the same
  rows (VW reads its own text format: the same features written as
  ``label |f index:value ...``); on the large file also ``--repeats``
  alternated runs of each (the best and the median: one run of either tool
  varies by up to 2x on a shared machine);
- peak RSS of the command at 10x the file <= 1.2x the peak at 1x;
- model files: the CoNLL-2000 chunking tagger's (``skso train --model
  psa-tagger``, default: what prediction needs) against CRFsuite's model
  file for the same sentences and the same features (the chunking
  template's feature strings, which ``skso`` hashes; python-crfsuite's
  ``l2sgd``, one pass: a CRFsuite model file stores every feature of the
  training data, whatever the number of passes), target <= 1.5x; and the
  model files of the runs above.

Vowpal Wabbit is the PyPI wheel ``vowpalwabbit`` (``pip install
vowpalwabbit``; in the ``benchmark`` extra where a wheel exists): its
``python -m vowpalwabbit ARGS`` runs VW's own driver (a parser thread and
the learner, as the ``vw`` binary). Without it, the VW rows are skipped.

Every command runs as a child process under GNU ``time`` (``/usr/bin/time``),
which reports its peak RSS. "rows/s" divides the rows by the command's wall
time, start-up included (Python and the imports: scikit-learn's take seconds
on a loaded machine, VW's 0.3 s); "stream s" is the streaming alone: for
``skso`` the time from the scan's start to the end of the last
``partial_fit`` (the model header's ``scan_seconds + seconds``: reading,
parsing, progressive validation and training), for VW the wall time less
its start-up (``python -c 'import vowpalwabbit'``, measured here). Data
(decompressed, converted, replicated) go to a temporary folder that is
deleted afterwards.

Data sets: a9a (``../shared/data/a9a``), a9a replicated 10x (the RSS
check), w8a (80/20 split with seed 0, as ``_datasets.w8a``), and the
CoNLL-2000 training tokens with the chunking template hashed to 2**20
columns, replicated and shuffled to ``--big-rows`` rows (the binary task: is
the token inside a noun phrase, B-NP / I-NP), tested on the CoNLL-2000 test
tokens. Converged ``LogisticRegression`` with the same L2 gives each
set's reference accuracy (on the CoNLL file: ``C`` = the replication count
on the distinct rows, the same objective; ``--no-converged`` skips it).

Regression (``--regression``: this part alone): flights'
(``../shared/data/regression``) 80/20 split (``random_state=0``, as
``_datasets.flights``), written as VW files with namespaces for the carrier
(and carrier x hour), the route (origin, destination, the pair, the
distance / 1000), the time (month, day, hour) and the aircraft (tail number,
flight number), the label the arrival delay in minutes. ``skso train --model
psa-regressor --hash-bits 20`` (otherwise its defaults) against ``vw -b 20``
(one pass, its defaults), squared loss: test RMSE; both with the quantile
loss (``--loss quantile``, ``--loss_function quantile``, the median): test
MAE, beside the training median's. Rows/s of the whole command and of the
streaming, and the CPU time (user + system) of each command.

Usage::

    python benchmarks/bench_cli.py                  # a9a, a9a x 10, w8a, CoNLL tokens x 15,
                                                    # flights (regression)
    python benchmarks/bench_cli.py --regression     # only the regression part
    python benchmarks/bench_cli.py --big-rows 0     # skip the large file
    python benchmarks/bench_cli.py --no-tagger      # skip the tagger model files
    python benchmarks/bench_cli.py --reader-thread --folder /tmp/skso-big
        # only skso psa on the large file without and with the reader thread
        # (and with it and --jobs 2)
        # (--repeats runs of each, alternated), the file kept for the next run
    python benchmarks/bench_cli.py --memory --big-rows 3550000 --folder /tmp/skso-big
        # only the peak RSS of skso psa and VW on the large file and its tenth
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _datasets import DATA
from sklearn.datasets import load_svmlight_file
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TIME = shutil.which("time") or "/usr/bin/time"


def measured(cmd, cwd):
    """Run ``cmd``: (wall seconds, peak RSS in MB, stdout, stderr); raises on failure."""
    out, err = Path(cwd) / ".out", Path(cwd) / ".err"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rss = Path(cwd) / ".rss"
    with open(out, "w") as fo, open(err, "w") as fe:
        t = time.perf_counter()
        # GNU time forks the command from its own small process: a child
        # forked from this (large) one would count our pages in its peak
        p = subprocess.run([TIME, "-f", "%M", "-o", str(rss), *map(str, cmd)], stdout=fo,
                           stderr=fe, cwd=cwd, env=env)
        wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{err.read_text()[-2000:]}")
    return wall, int(rss.read_text().split()[-1]) / 1024, out.read_text(), err.read_text()


def have_vw():
    try:
        import vowpalwabbit  # noqa: F401
    except ImportError:
        return False
    return True


def to_vw(svm_path, vw_path):
    """The same rows in VW's format: ``label |f index:value ...``."""
    with open(svm_path, "rb") as f, open(vw_path, "wb") as g:
        for line in f:
            label, _, rest = line.partition(b" ")
            g.write(label + b" |f " + rest)


def write_svmlight(path, X, y, order=None):
    """``label index:value ...`` lines (one-based, as LIBSVM's), in ``order``."""
    lines = []
    for i in range(X.shape[0]):
        idx = X.indices[X.indptr[i]:X.indptr[i + 1]]
        val = X.data[X.indptr[i]:X.indptr[i + 1]]
        lines.append(f"{int(y[i])} " + " ".join(f"{j + 1}:{v:g}" for j, v in zip(idx, val)) + "\n")
    with open(path, "w") as f:
        if order is None:
            f.writelines(lines)
        else:
            for start in range(0, order.size, 100_000):
                f.writelines(lines[i] for i in order[start:start + 100_000])


def conll_tokens(folder, big_rows, seed=0, skip_train=False):
    """CoNLL-2000 tokens, chunking template hashed to 2**20 (the featurizer of
    ``skso``), labels +1 inside a noun phrase; train replicated and shuffled."""
    from sklearn_secondorder.cli._featurizers import ConllFeaturizer
    from sklearn_secondorder.cli._stream import iter_chunks
    from sklearn_secondorder.cli._templates import CHUNKING_TEMPLATE
    fz = ConllFeaturizer(20, 3, CHUNKING_TEMPLATE)
    out = {}
    for name in ("train", "test"):
        import scipy.sparse as sp
        Xs, ys = [], []
        for chunk, _ in iter_chunks([str(DATA / "conll2000" / f"{name}.txt.gz")], fz, 50_000):
            Xs.append(chunk.X)
            ys.append(np.where(np.isin(chunk.y, ["B-NP", "I-NP"]), 1, -1))
        X, y = sp.vstack(Xs, format="csr"), np.concatenate(ys)
        if name == "train" and skip_train:
            out["X"], out["y"] = X, y
        elif name == "train":
            reps = max(1, -(-big_rows // X.shape[0]))
            order = np.random.default_rng(seed).permutation(np.tile(np.arange(X.shape[0]),
                                                                    reps))
            path = folder / "conll_big.svm"
            write_svmlight(path, X, y, order)
            out["train"], out["n_train"], out["reps"] = path, order.size, reps
            out["X"], out["y"] = X, y
        else:
            path = folder / "conll_test.svm"
            write_svmlight(path, X, y)
            out["test"], out["X_test"], out["y_test"] = path, X, y
    return out


def skso_run(train, test, n, folder, label, n_features=None, model="psa", reader=True,
             jobs=1):
    """``skso train --model psa`` with its defaults (with ``n_features``:
    ``--classes`` and ``--n-features``, no pre-scan; ``reader`` false:
    ``--no-reader-thread``; ``jobs``: ``--jobs``), then ``skso evaluate``."""
    path = folder / "m.skso"
    extra = [] if n_features is None else ["--classes=-1,1", "--n-features", str(n_features)]
    if not reader:
        extra.append("--no-reader-thread")
    if jobs != 1:
        extra += ["--jobs", str(jobs)]
    wall, rss, _, err = measured([PY, "-m", "sklearn_secondorder", "train", str(train),
                                  "--model", model, "--out", str(path), "--progress",
                                  "lines", *extra], folder)
    _, _, res, _ = measured([PY, "-m", "sklearn_secondorder", "evaluate", str(path),
                             str(test), "--json"], folder)
    header = json.loads(measured([PY, "-m", "sklearn_secondorder", "info", str(path),
                                  "--json"], folder)[2])
    tr = header["training"]
    tool = (f"skso {model}" + ("" if n_features is None else ", no scan")
            + ("" if reader else ", 1 thread") + ("" if jobs == 1 else f", --jobs {jobs}"))
    return {"data": label, "tool": tool, "rows": n, "wall_s": wall, "rss_mb": rss,
            "stream_s": tr["seconds"] + tr["scan_seconds"], "train_s": tr["seconds"],
            "alpha": tr["alpha"],
            "model_bytes": path.stat().st_size,
            "test_acc": 100 * json.loads(res)["accuracy"], "log": err.strip().splitlines()}


def load():
    """The load averages (1, 5, 15 min) and the cores, as ``uptime`` gives them."""
    avg = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"load average {avg} on {os.cpu_count()} cores"


def reader_thread_runs(train, test, n, folder, label, repeats):
    """``skso train --model psa`` (defaults, pre-scan) without and with the
    reader thread, and with it and ``--jobs 2`` (two learner threads),
    alternated ``repeats`` times: the rows of each run."""
    runs = []
    for _ in range(repeats):
        for reader, jobs in ((False, 1), (True, 1), (True, 2)):
            r = skso_run(train, test, n, folder, label, reader=reader, jobs=jobs)
            r["load"] = os.getloadavg()[0]
            r.pop("log")
            runs.append(r)
    return runs


def print_reader_thread(runs):
    """Without / with the reader thread (and with ``--jobs 2``): rows/s of the
    whole command, of the streaming (scan + training) and of the training
    alone, best of the runs."""
    print(f"\n{'tool':24s} {'run':>3s} {'wall s':>7s} {'rows/s':>9s} {'stream rows/s':>13s} "
          f"{'train rows/s':>12s} {'test acc':>8s} {'load 1m':>7s}")
    best = {}
    for i, r in enumerate(runs):
        r["rows_s"] = r["rows"] / r["wall_s"]
        r["stream_rows_s"] = r["rows"] / r["stream_s"]
        r["train_rows_s"] = r["rows"] / r["train_s"]
        print(f"{r['tool']:24s} {i // 3 + 1:3d} {r['wall_s']:7.2f} {r['rows_s']:9,.0f} "
              f"{r['stream_rows_s']:13,.0f} {r['train_rows_s']:12,.0f} {r['test_acc']:8.2f} "
              f"{r['load']:7.2f}")
        b = best.setdefault(r["tool"], {})
        for k in ("rows_s", "stream_rows_s", "train_rows_s"):
            b[k] = max(b.get(k, 0), r[k])
    a = next(b for tool, b in best.items() if "1 thread" in tool)
    for tool, b in best.items():
        if "1 thread" in tool:
            continue
        gain = {k: b[k] / a[k] for k in a}
        name = "reader thread" + (", --jobs 2" if "--jobs" in tool else "")
        print(f"{name} / none (best of {len(runs) // 3}): rows/s {gain['rows_s']:.2f}x, "
              f"streaming {gain['stream_rows_s']:.2f}x, training {gain['train_rows_s']:.2f}x "
              f"(target >= 1.3, more with --jobs 2); {load()}")


def memory_runs(big, folder, repeats, vw):
    """Peak RSS of ``skso train --model psa`` (defaults; with the reader
    thread and with ``--no-reader-thread``) and of VW's training, on the
    large file and on its first tenth, alternated ``repeats`` times."""
    tenth = folder / "conll_big_tenth.svm"
    if not tenth.exists():
        with open(big["train"], "rb") as f, open(tenth, "wb") as g:
            for _, line in zip(range(big["n_train"] // 10), f):
                g.write(line)
    files = [("file", big["train"]), ("tenth", tenth)]
    if vw:
        for _, path in files:
            if not path.with_suffix(".vw").exists():
                to_vw(path, path.with_suffix(".vw"))
    runs = []
    for _ in range(repeats):
        for which, path in files:
            for extra in ([], ["--no-reader-thread"]):
                wall, rss, _, _ = measured(
                    [PY, "-m", "sklearn_secondorder", "train", str(path), "--model", "psa",
                     "--out", str(folder / "m.skso"), "--progress", "none", *extra], folder)
                runs.append({"tool": "skso psa" + (", 1 thread" if extra else ""),
                             "data": which, "rss_mb": rss, "wall_s": wall})
            if vw:
                wall, rss, _, _ = measured(
                    [PY, "-m", "vowpalwabbit", "-d", str(path.with_suffix(".vw")),
                     "--loss_function", "logistic", "-b", "20", "--quiet", "-f",
                     str(folder / "vw.model")], folder)
                runs.append({"tool": "vw", "data": which, "rss_mb": rss, "wall_s": wall})
    return runs


def print_memory(runs, n_rows):
    """The peak RSS of each tool on the file and its tenth (the largest of
    the runs), and the ratios: the targets are <= 300 MB for skso with the
    reader thread, and the file within 10% of its tenth."""
    peak = {}
    for r in runs:
        key = (r["tool"], r["data"])
        peak[key] = max(peak.get(key, 0), r["rss_mb"])
    print(f"\npeak RSS (MB, the largest of {len(runs) // len(peak)} runs), "
          f"{n_rows:,} rows and the first tenth:")
    for tool in dict.fromkeys(t for t, _ in peak):
        f, t = peak[(tool, "file")], peak[(tool, "tenth")]
        print(f"  {tool:20s} file {f:6.0f}  tenth {t:6.0f}  file / tenth {f / t:.3f}")
    if ("vw", "file") in peak:
        s, v = peak[("skso psa", "file")], peak[("vw", "file")]
        print(f"  skso psa / vw on the file: {s / v:.2f}x")
    print(f"  targets: skso psa <= 300 MB, file / tenth <= 1.10; {load()}")


def vw_run(train_vw, test_vw, n, folder, label, l2=None):
    model, preds = folder / "vw.model", folder / "vw.pred"
    extra = [] if l2 is None else ["--l2", repr(l2)]
    wall, rss, _, _ = measured([PY, "-m", "vowpalwabbit", "-d", str(train_vw),
                                "--loss_function", "logistic", "-b", "20", "--quiet",
                                "-f", str(model), *extra], folder)
    measured([PY, "-m", "vowpalwabbit", "-t", "-i", str(model), "-d", str(test_vw),
              "-p", str(preds), "--quiet"], folder)
    score = np.loadtxt(preds, usecols=0)
    y = np.array([float(ln.split(b" ", 1)[0]) for ln in open(test_vw, "rb")])
    acc = 100 * np.mean(np.where(score > 0, 1.0, -1.0) == y)
    return {"data": label, "tool": "vw" + ("" if l2 is None else " --l2 1/n"), "rows": n,
            "wall_s": wall, "rss_mb": rss, "test_acc": acc}


def vw_duel(big, folder, repeats):
    """``skso train --model psa`` (defaults) and VW (defaults) on the large
    file, alternated ``repeats`` times (one run of each is at the mercy of a
    shared machine: VW's own time varies by 40% between runs)."""
    tv, sv = folder / (big["train"].name + ".vw"), folder / (big["test"].name + ".vw")
    runs = {"skso": [], "vw": []}
    for _ in range(repeats):
        r = skso_run(big["train"], big["test"], big["n_train"], folder, "CoNLL tokens 2^20")
        r.pop("log")
        runs["skso"].append(r)
        runs["vw"].append(vw_run(tv, sv, big["n_train"], folder, "CoNLL tokens 2^20"))
    return runs


def print_duel(runs):
    """The best and the median of each tool's alternated runs, and their ratios."""
    def stats(values):
        values = sorted(values)
        return values[0], values[len(values) // 2]

    (s_best, s_med), (v_best, v_med) = (stats([r["wall_s"] for r in runs[k]])
                                        for k in ("skso", "vw"))
    stream_best, _ = stats([r["stream_s"] for r in runs["skso"]])
    n = runs["skso"][0]["rows"]
    print(f"  CoNLL tokens 2^20, {len(runs['vw'])} alternated runs each: skso psa wall best "
          f"{s_best:.2f} s (median {s_med:.2f}), stream best {stream_best:.2f} s; vw wall "
          f"best {v_best:.2f} s (median {v_med:.2f})")
    print(f"    skso psa / vw rows/s: best {v_best / s_best:.2f}x, median {v_med / s_med:.2f}x; "
          f"skso's stream against vw's wall: best {v_best / stream_best:.2f}x "
          f"({n / stream_best:,.0f} against {n / v_best:,.0f} rows/s; target >= 1)")


def tagger_model_files(folder):
    """The CoNLL-2000 chunking tagger's model file (``skso train --model
    psa-tagger`` with its defaults) against CRFsuite's for the same sentences
    and features: ``{'skso_bytes', 'crfsuite_bytes', 'skso_f1', ...}``."""
    import pycrfsuite

    from sklearn_secondorder.cli._templates import (
        CHUNKING_TEMPLATE,
        feature_strings,
        parse_template,
    )
    train, test = DATA / "conll2000" / "train.txt.gz", DATA / "conll2000" / "test.txt.gz"
    model = folder / "tagger.skso"
    wall, _, _, err = measured([PY, "-m", "sklearn_secondorder", "train", str(train),
                                "--model", "psa-tagger", "--out", str(model), "--progress",
                                "none"], folder)
    res = json.loads(measured([PY, "-m", "sklearn_secondorder", "evaluate", str(model),
                               str(test), "--json"], folder)[2])
    info = json.loads(measured([PY, "-m", "sklearn_secondorder", "info", str(model),
                                "--json"], folder)[2])
    # CRFsuite on the same feature strings (the ones skso hashes)
    templates = parse_template(CHUNKING_TEMPLATE, 2)
    trainer = pycrfsuite.Trainer(algorithm="l2sgd", verbose=False)
    trainer.set_params({"max_iterations": 1, "c2": 1.0})
    with gzip.open(train, "rt") as f:
        sentences = f.read().strip().split("\n\n")
    attributes = set()
    for sent in sentences:
        tokens = [line.split() for line in sent.splitlines()]
        feats = feature_strings(templates, [np.array([t[0] for t in tokens]),
                                            np.array([t[1] for t in tokens])],
                                np.zeros(len(tokens), dtype=np.int64))
        attributes.update(a for tok in feats for a in tok)
        trainer.append([{a: 1.0 for a in tok} for tok in feats], [t[2] for t in tokens])
    crf_model = folder / "crfsuite.model"
    trainer.train(str(crf_model))
    return {"skso_bytes": model.stat().st_size, "crfsuite_bytes": crf_model.stat().st_size,
            "skso_f1": 100 * res["chunk_f1"], "skso_wall_s": wall,
            "attributes": len(attributes), "nonzero_weights": info["nonzero_weights"],
            "n_weights": info["n_weights"], "contents": info["contents"]}


def big_file(folder, big_rows):
    """``conll_tokens``, unless ``folder`` has its files from an earlier run
    (``--folder``): then only the test rows are featurized again."""
    t = time.perf_counter()
    done = folder / "conll_big.done"
    if done.exists() and int(done.read_text().split()[0]) == big_rows:
        big = conll_tokens(folder, 0, skip_train=True)
        big["train"] = folder / "conll_big.svm"
        big["n_train"], big["reps"] = map(int, done.read_text().split()[1:])
        return big
    big = conll_tokens(folder, big_rows)
    done.write_text(f"{big_rows} {big['n_train']} {big['reps']}")
    print(f"(CoNLL-token files written in {time.perf_counter() - t:.0f}s)")
    return big


def write_w8a(folder):
    """w8a split 80/20 with seed 0 (as ``_datasets.w8a``), as svmlight files."""
    from sklearn.model_selection import train_test_split
    X, y = load_svmlight_file(str(DATA / "w8a" / "w8a.gz"), n_features=300)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=0)
    paths = folder / "w8a.svm", folder / "w8a.t.svm"
    write_svmlight(paths[0], Xtr.tocsr(), ytr)
    write_svmlight(paths[1], Xte.tocsr(), yte)
    return paths, Xtr, ytr, Xte, yte


def startup(module, folder):
    return min(measured([PY, "-c", f"import {module}"], folder)[0] for _ in range(3))


# ---- regression: flights, skso psa-regressor against Vowpal Wabbit ---------------------
def measured_cpu(cmd, cwd):
    """``measured`` with the command's CPU time: (wall s, CPU s (user +
    system), peak RSS MB, stdout, stderr)."""
    out, err, res = Path(cwd) / ".out", Path(cwd) / ".err", Path(cwd) / ".res"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(out, "w") as fo, open(err, "w") as fe:
        t = time.perf_counter()
        p = subprocess.run([TIME, "-f", "%U %S %M", "-o", str(res), *map(str, cmd)],
                           stdout=fo, stderr=fe, cwd=cwd, env=env)
        wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{err.read_text()[-2000:]}")
    user, system, rss = res.read_text().split()[-3:]
    return wall, float(user) + float(system), int(rss) / 1024, out.read_text(), err.read_text()


def flights_vw(folder):
    """flights' training and test rows as VW files with namespaces (the
    module docstring): the paths, the rows and the test labels."""
    from _datasets import flights_frame
    from sklearn.model_selection import train_test_split

    df = flights_frame()
    train, test = train_test_split(df, test_size=0.2, random_state=0)
    out = {}
    for name, part in (("train", train), ("test", test)):
        def col(c, part=part):
            return part[c].astype(str)
        lines = (part["arr_delay"].map(repr)
                 + " |carrier c_" + col("carrier") + " ch_" + col("carrier_hour")
                 + " |route o_" + col("origin") + " d_" + col("dest") + " r_" + col("route")
                 + " dist:" + (part["distance"] / 1000.0).map(repr)
                 + " |time m" + col("month") + " d" + col("day") + " h" + col("hour")
                 + " |aircraft t_" + col("tailnum") + " f" + col("flight"))
        path = folder / f"flights_{name}.vw"
        path.write_text("\n".join(lines) + "\n")
        out[name], out[f"n_{name}"] = path, len(part)
        out[f"y_{name}"] = part["arr_delay"].to_numpy(float)
    return out


def skso_regression_run(data, folder, loss=None):
    """``skso train --model psa-regressor --hash-bits 20`` (``--loss``), then
    ``skso evaluate`` on the test rows."""
    path = folder / "flights.skso"
    extra = [] if loss is None else ["--loss", loss]
    wall, cpu, rss, _, err = measured_cpu(
        [PY, "-m", "sklearn_secondorder", "train", str(data["train"]), "--model",
         "psa-regressor", "--hash-bits", "20", "--out", str(path), "--progress", "lines",
         *extra], folder)
    res = json.loads(measured_cpu([PY, "-m", "sklearn_secondorder", "evaluate", str(path),
                                   str(data["test"]), "--json"], folder)[3])
    tr = json.loads(measured_cpu([PY, "-m", "sklearn_secondorder", "info", str(path),
                                  "--json"], folder)[3])["training"]
    return {"tool": "skso psa-regressor" + ("" if loss is None else f" --loss {loss}"),
            "rows": data["n_train"], "wall_s": wall, "cpu_s": cpu, "rss_mb": rss,
            "stream_s": tr["seconds"] + tr["scan_seconds"], "rmse": res["rmse"],
            "mae": res["mae"], "progressive": tr["progressive_loss"],
            "log": err.strip().splitlines()}


def vw_regression_run(data, folder, start, loss=None):
    """``vw -b 20`` one pass (``--loss_function``), then its predictions of
    the test rows; its progressive 'average loss' from its report."""
    model, preds = folder / "flights.vw.model", folder / "flights.vw.pred"
    extra = [] if loss is None else ["--loss_function", loss]
    wall, cpu, rss, _, err = measured_cpu([PY, "-m", "vowpalwabbit", "-d", str(data["train"]),
                                           "-b", "20", "-f", str(model), *extra], folder)
    measured_cpu([PY, "-m", "vowpalwabbit", "-t", "-i", str(model), "-d", str(data["test"]),
                  "-p", str(preds), "--quiet"], folder)
    r = np.loadtxt(preds, usecols=0) - data["y_test"]
    progressive = next((float(ln.split("=")[1]) for ln in err.splitlines()
                        if ln.startswith("average loss")), float("nan"))
    return {"tool": "vw -b 20" + ("" if loss is None else f" --loss_function {loss}"),
            "rows": data["n_train"], "wall_s": wall, "cpu_s": cpu, "rss_mb": rss,
            "stream_s": max(wall - start, 1e-3), "rmse": float(np.sqrt(np.mean(r * r))),
            "mae": float(np.mean(np.abs(r))), "progressive": progressive}


def regression_part(folder, vw, repeats=1):
    """flights: skso psa-regressor and Vowpal Wabbit, squared and quantile
    losses, alternated ``repeats`` times (the fastest run of each kept: the
    models are the same each time); prints the table and the ratios (same
    run)."""
    data = flights_vw(folder)
    start = {"skso": startup("sklearn_secondorder.cli._train", folder)}
    if vw:
        start["vw"] = startup("vowpalwabbit", folder)
    best = {}
    for k in range(repeats):
        for loss in (None, "quantile"):
            r = skso_regression_run(data, folder, loss)
            log = r.pop("log")
            if k == 0:
                print("\n".join(log))
            runs = [r] + ([vw_regression_run(data, folder, start["vw"], loss)] if vw else [])
            for r in runs:
                if r["tool"] not in best or r["wall_s"] < best[r["tool"]]["wall_s"]:
                    best[r["tool"]] = r
    rows = list(best.values())
    median = np.median(data["y_train"])
    median_mae = float(np.mean(np.abs(data["y_test"] - median)))
    print(f"\nflights ({data['n_train']:,} training rows, {data['n_test']:,} test rows; "
          f"fastest of {repeats} alternated run(s) each; {load()}); start-up (python -c "
          "'import ...', best of 3): " + ", ".join(f"{k} {v:.2f}s" for k, v in start.items()))
    print(f"{'tool':38s} {'wall s':>7s} {'CPU s':>6s} {'rows/s':>9s} {'stream s':>8s} "
          f"{'rows/s':>9s} {'RSS MB':>7s} {'progr.':>9s} {'RMSE':>7s} {'MAE':>7s}")
    for r in rows:
        print(f"{r['tool']:38s} {r['wall_s']:7.2f} {r['cpu_s']:6.2f} "
              f"{r['rows'] / r['wall_s']:9,.0f} {r['stream_s']:8.2f} "
              f"{r['rows'] / r['stream_s']:9,.0f} {r['rss_mb']:7.0f} {r['progressive']:9.4g} "
              f"{r['rmse']:7.3f} {r['mae']:7.3f}")
    print(f"the training median's test MAE: {median_mae:.3f}")
    if vw:
        (s2, v2), (sq, vq) = rows[:2], rows[2:]
        for what, a, b, fig in (("squared", s2, v2, "rmse"), ("quantile", sq, vq, "mae")):
            print(f"  {what}: skso / vw test {fig.upper()} {a[fig] / b[fig]:.3f} (target <= 1); "
                  f"rows/s skso / vw: whole command {b['wall_s'] / a['wall_s']:.2f}x, "
                  f"streaming {b['stream_s'] / a['stream_s']:.2f}x (target >= 1); CPU s "
                  f"skso / vw {a['cpu_s'] / b['cpu_s']:.2f}x")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big-rows", type=int, default=3_000_000,
                    help="rows of the replicated CoNLL-token file (0: skip it)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--no-converged", action="store_true",
                    help="skip the converged LogisticRegression on the CoNLL tokens (~90 s)")
    ap.add_argument("--no-tagger", action="store_true",
                    help="skip the tagger model files (skso and CRFsuite on CoNLL-2000)")
    ap.add_argument("--reader-thread", action="store_true",
                    help="only the reader thread's part: skso psa on the large file without "
                         "and with the reader thread (--no-reader-thread), and with it and "
                         "--jobs 2, alternated "
                         "--repeats times, with the machine's load")
    ap.add_argument("--memory", action="store_true",
                    help="only the peak RSS: skso psa (with and without the reader thread) "
                         "and VW on the large file and on its first tenth, alternated "
                         "--repeats times")
    ap.add_argument("--repeats", type=int, default=2,
                    help="runs of each, with --reader-thread, and of skso psa against VW "
                         "alternated on the large file, and with --regression (default 2; "
                         "best of them)")
    ap.add_argument("--regression", action="store_true",
                    help="only the regression part (flights: skso psa-regressor against VW, "
                         "alternated --repeats times)")
    ap.add_argument("--folder", type=Path,
                    help="the data folder (default: a temporary one, deleted afterwards): "
                         "files already there are reused, and it is kept")
    args = ap.parse_args()
    if not (DATA / "a9a" / "a9a.gz").exists():
        sys.exit(f"{DATA} has no a9a: the benchmark needs ../shared/data")
    if args.folder is not None:
        args.folder.mkdir(parents=True, exist_ok=True)
        args.keep = True
    folder = args.folder or Path(tempfile.mkdtemp(prefix="skso-bench-"))
    if args.memory:
        try:
            big = big_file(folder, args.big_rows)
            runs = memory_runs(big, folder, args.repeats, have_vw())
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        print_memory(runs, big["n_train"])
        return
    if args.reader_thread:
        try:
            big = big_file(folder, args.big_rows)
            print(f"CoNLL tokens 2^20: {big['n_train']:,} rows; before: {load()}")
            runs = reader_thread_runs(big["train"], big["test"], big["n_train"], folder,
                                      "CoNLL tokens 2^20", args.repeats)
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        print_reader_thread(runs)
        return
    vw = have_vw()
    if not vw:
        print("vowpalwabbit is not installed (pip install vowpalwabbit): no VW rows")
    if args.regression:
        try:
            regression_part(folder, vw, args.repeats)
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        return
    rows = []
    try:
        a9a, a9a_t = folder / "a9a.svm", folder / "a9a.t.svm"
        for src, dst in (("a9a.gz", a9a), ("a9a.t.gz", a9a_t)):
            with gzip.open(DATA / "a9a" / src, "rb") as f, open(dst, "wb") as g:
                shutil.copyfileobj(f, g)
        a9a10 = folder / "a9a10.svm"
        with open(a9a10, "wb") as g:
            for _ in range(10):
                g.write(a9a.read_bytes())
        sets = [("a9a", a9a, a9a_t, 32561, 123), ("a9a x 10", a9a10, a9a_t, 325610, 123)]
        (w8a, w8a_t), *w8a_data = write_w8a(folder)
        sets.append(("w8a", w8a, w8a_t, w8a_data[0].shape[0], 300))
        if args.big_rows > 0:
            big = big_file(folder, args.big_rows)
            sets.append(("CoNLL tokens 2^20", big["train"], big["test"], big["n_train"],
                         1 << 20))
        # (the command's imports: the parser alone loads no scikit-learn)
        start = {"skso": startup("sklearn_secondorder.cli._train", folder)}
        if vw:
            start["vw"] = startup("vowpalwabbit", folder)
        for label, train, test, n, d in sets:
            for n_features in (None, d):
                r = skso_run(train, test, n, folder, label, n_features)
                rows.append(r)
                print("\n".join(r.pop("log")))
            # the same stream into plain SGD (a cheap learner): what the
            # command line itself (reading, parsing, chunks) costs
            r = skso_run(train, test, n, folder, label, d, model="sgd")
            rows.append(r)
            print("\n".join(r.pop("log")))
            if vw:
                tv, sv = folder / (train.name + ".vw"), folder / (test.name + ".vw")
                if not tv.exists():
                    to_vw(train, tv)
                if not sv.exists():
                    to_vw(test, sv)
                rows.append(vw_run(tv, sv, n, folder, label))
                rows.append(vw_run(tv, sv, n, folder, label, l2=1.0 / n))
        duel = None
        if args.big_rows > 0:
            # the reader thread's gain, on the large file (same run)
            reader_runs = reader_thread_runs(big["train"], big["test"], big["n_train"],
                                             folder, "CoNLL tokens 2^20", 1)
            if vw:
                duel = vw_duel(big, folder, args.repeats)
        X, y = load_svmlight_file(str(a9a), n_features=123)
        Xt, yt = load_svmlight_file(str(a9a_t), n_features=123)
        lr = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(X, y)
        lr_acc = 100 * lr.score(Xt, yt)
        Xw, yw, Xwt, ywt = w8a_data
        lr = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(Xw, yw)
        w8a_lr_acc = 100 * lr.score(Xwt, ywt)
        tagger = None if args.no_tagger else tagger_model_files(folder)
        if (DATA / "regression" / "flights.csv.gz").exists():
            regression_part(folder, vw)
        big_lr_acc = None
        if args.big_rows > 0 and not args.no_converged:
            # the replicated file's objective, mean log-loss + 1/(2N) ||w||^2
            # over N = reps x n rows, is LogisticRegression's on the n distinct
            # rows with C = reps
            lr = LogisticRegression(C=float(big["reps"]), tol=1e-8, max_iter=10_000).fit(
                big["X"], big["y"])
            big_lr_acc = 100 * lr.score(big["X_test"], big["y_test"])
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print("\nstart-up (python -c 'import ...', best of 3): "
          + ", ".join(f"{k} {v:.2f}s" for k, v in start.items()))
    print(f"a9a: converged LogisticRegression (C = 1, i.e. alpha = 1/n) test accuracy "
          f"{lr_acc:.2f}")
    print(f"w8a: converged LogisticRegression (C = 1, i.e. alpha = 1/n) test accuracy "
          f"{w8a_lr_acc:.2f}")
    if big_lr_acc is not None:
        print(f"CoNLL tokens 2^20: converged LogisticRegression (C = {big['reps']} on the "
              f"distinct rows, i.e. alpha = 1/n on the file) test accuracy {big_lr_acc:.2f}")
    print(f"\n{'data':18s} {'tool':18s} {'rows':>10s} {'wall s':>7s} {'rows/s':>9s} "
          f"{'stream s':>8s} {'rows/s':>9s} {'peak RSS MB':>11s} {'test acc':>8s} "
          f"{'alpha':>9s} {'model B':>10s}")
    for r in rows:
        if "stream_s" not in r:     # VW: the wall time less its start-up (~0.3 s)
            r["stream_s"] = max(r["wall_s"] - start["vw"], 1e-3)
        r["rows_s"] = r["rows"] / r["wall_s"]
        r["rows_s_excl_start"] = r["rows"] / r["stream_s"]
        print(f"{r['data']:18s} {r['tool']:18s} {r['rows']:10,d} {r['wall_s']:7.2f} "
              f"{r['rows_s']:9,.0f} {r['stream_s']:8.2f} {r['rows_s_excl_start']:9,.0f} "
              f"{r['rss_mb']:11.0f} {r['test_acc']:8.2f} "
              + (f"{r['alpha']:9.3g} {r['model_bytes']:10,d}" if "alpha" in r else ""))
    by = {(r["data"], r["tool"]): r for r in rows}
    print("\nratios (same run):")
    s1, s10 = by[("a9a", "skso psa")], by[("a9a x 10", "skso psa")]
    print(f"  skso a9a one pass - converged LogisticRegression: "
          f"{s1['test_acc'] - lr_acc:+.2f} points (target >= -0.2)")
    print(f"  skso w8a one pass - converged LogisticRegression: "
          f"{by[('w8a', 'skso psa')]['test_acc'] - w8a_lr_acc:+.2f} points (target >= -0.2)")
    print(f"  skso peak RSS a9a x 10 / a9a: {s10['rss_mb'] / s1['rss_mb']:.3f} (target <= 1.2)")
    if tagger is not None:
        print(f"  CoNLL-2000 tagger model file: skso psa-tagger {tagger['skso_bytes']:,} bytes "
              f"({tagger['contents']}; {tagger['nonzero_weights']:,} non-zero of "
              f"{tagger['n_weights']:,} state weights; chunk F1 {tagger['skso_f1']:.2f}), "
              f"CRFsuite {tagger['crfsuite_bytes']:,} bytes ({tagger['attributes']:,} "
              f"attributes): {tagger['skso_bytes'] / tagger['crfsuite_bytes']:.2f}x "
              "(target <= 1.5)")
    if big_lr_acc is not None:
        sb = by[("CoNLL tokens 2^20", "skso psa")]
        print(f"  skso CoNLL tokens 2^20 one pass - converged LogisticRegression: "
              f"{sb['test_acc'] - big_lr_acc:+.2f} points")
    if vw and args.big_rows > 0:
        sb, vb = by[("CoNLL tokens 2^20", "skso psa")], by[("CoNLL tokens 2^20", "vw")]
        print(f"  CoNLL tokens 2^20, skso psa (defaults) - vw (defaults): "
              f"{sb['test_acc'] - vb['test_acc']:+.2f} points (target >= 0)")
    if args.big_rows > 0:
        print_reader_thread(reader_runs)
    if duel is not None:
        print_duel(duel)
    if vw:
        v1, v10 = by[("a9a", "vw")], by[("a9a x 10", "vw")]
        print(f"  vw   peak RSS a9a x 10 / a9a: {v10['rss_mb'] / v1['rss_mb']:.3f}")
        for label in [s[0] for s in sets]:
            for tool in ("skso psa", "skso psa, no scan", "skso sgd, no scan"):
                a, b = by[(label, tool)], by[(label, "vw")]
                c = by[(label, "vw --l2 1/n")]
                print(f"  {label}, {tool}: / vw rows/s {a['rows_s'] / b['rows_s']:.2f} "
                      f"(streaming {a['rows_s_excl_start'] / b['rows_s_excl_start']:.2f}); "
                      f"test accuracy - vw {a['test_acc'] - b['test_acc']:+.2f} points "
                      f"(- vw --l2 1/n {a['test_acc'] - c['test_acc']:+.2f})")


if __name__ == "__main__":
    main()
