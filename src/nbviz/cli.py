"""The ``nbviz`` command: ``nbviz demo | info RUN | report RUN | import-tb LOGDIR -o RUN``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from nbviz.demo import record_demo

    path = record_demo(args.out, epochs=args.epochs, verbose=True)
    where = str(path.resolve())  # a notebook's folder is its kernel's working directory
    print(f"run written to {where}")
    print(f"open it in a notebook: run = nbviz.open_run({where!r}); nbviz.Dashboard(run)")
    return 0


def _info(args: argparse.Namespace) -> int:
    from nbviz.run import open_run
    from nbviz.store import RunFileError
    from nbviz.summary_text import run_summary

    try:
        with open_run(args.run) as run:
            findings = False
            if not args.no_findings:  # the verdict first: what is broken, then the details
                from nbviz.analysis.triage import triage, verdict_text

                findings = run.diagnose()
                print(verdict_text(triage(run, findings)))
                print()
            print(run_summary(run, findings=findings))
    except RunFileError as exc:
        from nbviz.store.inspect import describe_failure

        print(f"nbviz info: {exc}", file=sys.stderr)
        print(f"what could be read of {args.run}:\n{describe_failure(args.run)}")
        return 1
    return 0


def _report(args: argparse.Namespace) -> int:
    from nbviz.report import write_report

    info = write_report(args.run, args.output, max_steps=args.max_steps)
    print(f"report written to {info.path} ({info.nbytes / 1e6:.2f} MB, {info.seconds:.1f} s)")
    for note in info.notes:
        print(f"  {note}")
    return 0


def _import_tb(args: argparse.Namespace) -> int:
    from nbviz.importers.tensorboard import import_tensorboard
    from nbviz.run import open_run

    dirs = import_tensorboard(args.logdir, args.output, strict=not args.lenient)
    for path in dirs:
        with open_run(path) as run:
            series = sum(
                len(run.recorded_layers(signal, table="histograms"))
                for signal in ("activation", "gradient", "weight", "update")
            )
            counts = f"{len(run.scalar_names())} scalar series, {series} histogram series"
            print(f"run {run.name!r} written to {path} ({counts})")
            for note in run.meta("import_notes") or []:
                print(f"  note: {note}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nbviz", description="Look inside a neural network while it trains."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train a small CNN on the bundled digits, with probes")
    demo.add_argument("--out", default="runs/demo", help="run directory (default: runs/demo)")
    demo.add_argument("--epochs", type=int, default=8, help="training epochs (default: 8)")
    demo.set_defaults(func=_demo)
    info = sub.add_parser("info", help="print a readable summary of a run and its findings")
    info.add_argument("run", help="run directory")
    info.add_argument("--no-findings", action="store_true", help="skip the diagnosis")
    info.set_defaults(func=_info)
    report = sub.add_parser("report", help="write a self-contained offline HTML report")
    report.add_argument("run", help="run directory")
    report.add_argument(
        "-o", "--output", default=None, help="output file (default: RUN/report.html)"
    )
    report.add_argument(
        "--max-steps",
        type=int,
        default=120,
        help="steps stored for the scrubber, evenly spaced (default: 120)",
    )
    report.set_defaults(func=_report)
    tb = sub.add_parser("import-tb", help="read a TensorBoard log directory into nbviz runs")
    tb.add_argument("logdir", help="TensorBoard log directory (or one event file)")
    tb.add_argument(
        "-o",
        "--output",
        required=True,
        help="run directory; with several runs under LOGDIR, one run per OUTPUT/<run>",
    )
    tb.add_argument(
        "--lenient",
        action="store_true",
        help="import what a damaged event file still holds instead of stopping",
    )
    tb.set_defaults(func=_import_tb)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from nbviz.store import RunFileError, WriterError

    try:
        return int(args.func(args) or 0)
    except (
        FileNotFoundError,
        NotADirectoryError,
        ValueError,
        ImportError,
        RunFileError,
        WriterError,
    ) as exc:
        print(f"nbviz {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
