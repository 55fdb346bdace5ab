"""Each paper's claim against its strongest fair peer, one command per paper.

    python benchmarks/bench_claims.py psa     # PSA at SGD cost at scale (claims_psa.py)
    python benchmarks/bench_claims.py sgdqn   # SGD-QN: t0 cost, primal per pass (claims_sgdqn.py)
    python benchmarks/bench_claims.py sbm     # SBM: speed and where it wins (claims_sbm.py)

Arguments after the paper's name go to its module's ``main`` (``--help``
lists them). Every table is measured side by side with the peers in the same
run; ``benchmarks/RESULTS.md`` quotes the runs.
"""
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PAPERS = {"psa": "claims_psa", "sgdqn": "claims_sgdqn", "sbm": "claims_sbm"}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in PAPERS:
        print(__doc__)
        raise SystemExit(f"choose one of: {', '.join(PAPERS)}")
    importlib.import_module(PAPERS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    main()
