"""The tuning job's process: ``python -m shapeshift.tune.worker ...``.

``shapeshift tune run --state DIR`` submits this command to the controller; run under
the controller it reports finished trials as its progress (``shapeshift queue``) through
the client library, and writes its results to ``--out``. It keeps no checkpoint: a
preempted tuning job starts again from its first trial.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shapeshift.errors import InputError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shapeshift.tune.worker")
    parser.add_argument("--space", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--trials", type=int, required=True)
    parser.add_argument("--scale", type=int, required=True)
    parser.add_argument("--fusion", type=int, required=True)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--out", required=True)
    parser.add_argument("--torch-init", action="store_true")
    args = parser.parse_args(argv)
    from shapeshift.client import flush, report
    from shapeshift.tune.report import write_results
    from shapeshift.tune.search import TuneSpec, run_tuning
    from shapeshift.tune.space import load_space

    try:
        spec = TuneSpec(args.model, load_space(args.space), args.trials, args.scale, args.fusion, args.slots,
                        torch_init=args.torch_init)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = run_tuning(spec, progress=lambda done, total: report(done))
    paths = write_results(result, spec, Path(args.out))
    flush()
    print(f"results: {paths['table']}  plot: {paths['plot']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
