"""The build: the README's two commands from a fresh clone, timed.

1. ``pip install .`` from a fresh clone of this repository (its committed
   ``HEAD``, or ``--repo``), in a new virtual environment (``python -m venv``,
   pip upgraded first, untimed), as a new user would run it;
2. then ``pip install -e ".[test]"`` (``--second``) in the same checkout and
   the same environment, as the README's other command: every module is
   copied from the build cache (``build/skso-cache/``) that the first
   filled.

For each command: its wall seconds, its CPU seconds (user + system, pip and
every process it waited for: the build backend, Cython, the compiler),
the load average before and after (the machine's other jobs; CPU seconds
are the robust figure when it is shared), and, from pip's log, the seconds
of its build alone: the phases from "Installing build dependencies" (pip's
isolated build environment) to "Building wheel"/"Building editable"
(setup.py's ``build_ext``), added up, without the resolution, download and
installation of the run-time and test dependencies. The targets: the first
at most 120 s wall on a quiet 2-core machine, the build of the second at
most 15 s.

    python benchmarks/bench_build.py                  # both commands
    python benchmarks/bench_build.py --second ""      # the first only
    python benchmarks/bench_build.py --repo /path/to/checkout --keep

The build dependencies come from pip's cache (or the index) as for any
user; run it once before to take the downloads out of the figures. Run at
most one at a time: the two commands compile on every core.
"""
import argparse
import datetime
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# the phases of pip's build, by the lines its log opens and closes them with
_PHASE = re.compile(r"^(\S+)\s+(Installing build dependencies|Getting requirements to build "
                    r"(?:wheel|editable)|Installing backend dependencies|Preparing "
                    r"(?:editable )?metadata \(pyproject\.toml\)|Building (?:wheel|editable) "
                    r"for \S+ \(pyproject\.toml\)|Checking if build backend supports "
                    r"build_editable): (started|finished)")


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def build_phases(log_path):
    """Seconds of each phase of pip's build, in order, from ``pip --log``'s
    timestamps (``[(phase, seconds), ...]``)."""
    opened, phases = {}, []
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _PHASE.match(line)
            if not m:
                continue
            stamp = datetime.datetime.fromisoformat(m.group(1).replace(",", "."))
            if m.group(3) == "started":
                opened[m.group(2)] = stamp
            elif m.group(2) in opened:
                phases.append((m.group(2), (stamp - opened.pop(m.group(2))).total_seconds()))
    return phases


def timed(cmd, cwd, log_path, env=None):
    """Run ``cmd``; its wall and CPU seconds (children included), the load
    averages before and after."""
    load0 = os.getloadavg()
    cpu0, t0 = _children_cpu(), time.perf_counter()
    with open(log_path + ".out", "w") as out:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode:
        with open(log_path + ".out") as f:
            sys.stderr.write(f.read()[-5000:])
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode})")
    return dict(wall=wall, cpu=cpu, load0=load0, load1=os.getloadavg())


def copied_modules(out_path):
    """How many modules ``build_ext`` compiled and copied from its cache,
    from pip's verbose output."""
    with open(out_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return text.count("copied from build/skso-cache"), len(re.findall(r"^\s*gcc .* -c ", text,
                                                                        re.M))


def report(name, r, log_path):
    phases = build_phases(log_path)
    span = sum(seconds for _, seconds in phases)
    copied, compiled = copied_modules(log_path + ".out")
    print(f"{name}: {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU (user + sys, children "
          f"included); its build {span:.1f} s wall; modules compiled {compiled}, copied "
          f"{copied}; load average {r['load0'][0]:.2f} before, {r['load1'][0]:.2f} after")
    for phase, seconds in phases:
        print(f"    {phase}: {seconds:.1f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=os.path.dirname(HERE),
                    help="the checkout to clone (its HEAD; default: this one)")
    ap.add_argument("--workdir", help="where to clone and make the environment (default: a "
                    "new temporary directory, removed at the end unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the clone and the environment")
    ap.add_argument("--first", default=".", help="what the first command installs (default: .)")
    ap.add_argument("--second", default=".[test]", help="what the second command installs, "
                    'editable (default: ".[test]"; "" to skip it)')
    args = ap.parse_args()

    work = args.workdir or tempfile.mkdtemp(prefix="skso-build-")
    os.makedirs(work, exist_ok=True)
    clone, venv = os.path.join(work, "clone"), os.path.join(work, "venv")
    try:
        subprocess.run(["git", "clone", "-q", args.repo, clone], check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, check=True,
                              capture_output=True, text=True).stdout.strip()
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
        subprocess.run(pip + ["install", "-q", "--upgrade", "pip"], check=True)
        pip_version = subprocess.run(pip + ["--version"], check=True, capture_output=True,
                                     text=True).stdout.split()[1]
        print(f"{args.repo} at {head}, Python {sys.version.split()[0]}, pip {pip_version}, "
              f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        log1 = os.path.join(work, "first.log")
        r = timed(pip + ["install", "-v", "--log", log1, args.first], clone, log1)
        report(f"pip install {args.first}", r, log1)
        if args.second:
            log2 = os.path.join(work, "second.log")
            r = timed(pip + ["install", "-v", "--log", log2, "-e", args.second], clone, log2)
            report(f'pip install -e "{args.second}"', r, log2)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep:
            print(f"kept in {work}")


if __name__ == "__main__":
    main()
