"""``gradhealth``: the tab's analysis from the command line, to read or to gate CI.

    gradhealth report LOGDIR [--run NAME] [--format text|json] [--all-steps]
    gradhealth check LOGDIR [--fail-on warn|critical] [--all-steps]
    gradhealth watch LOGDIR [--on warn|critical] [--kinds K,..] [--consecutive N] [--format text|json]
                     [--exit-on-first] [--exec CMD] [--interval SECONDS] [--time-limit SECONDS]

It loads the logdir with TensorBoard's own loader and data provider (the same
code path as the tab) and keeps the same samples TensorBoard keeps by default,
unless ``--all-steps`` asks for every logged step.

Exit codes: 0 clean (or a report printed; watch: its time limit reached),
1 a finding reached --fail-on (watch: --exit-on-first and a finding reached --on),
2 a usage error or an unreadable or empty logdir (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, NoReturn, Optional, Sequence, TextIO

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Reports a bad command line in one line like every other usage error, not usage text plus a message."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def _analyze(logdir: str, run: Optional[str], all_steps: bool, config_path: Optional[str]) -> List[tuple]:
    """(run data, its findings) per run of the logdir, through TensorBoard's data provider."""
    # Before the imports: TensorBoard pulls in TensorFlow, seconds to wait for a typo.
    logdir = os.path.expanduser(logdir)
    if not os.path.isdir(logdir):
        raise UsageError(f"logdir {logdir!r} does not exist or is not a directory")

    from tensorboard import context as tb_context
    from tensorboard.backend.event_processing import data_ingester, data_provider, plugin_event_multiplexer

    from . import config as config_lib
    from . import plugin
    from .serving import analyzer as analyzer_lib
    from .writing import format as metadata

    try:
        cfg = config_lib.load(path=config_path, logdir=logdir)
    except ValueError as e:
        raise UsageError(str(e)) from None
    guidance = dict(data_ingester.DEFAULT_TENSOR_SIZE_GUIDANCE)
    guidance[metadata.PLUGIN_NAME] = plugin.DEFAULT_SAMPLES_PER_PLUGIN[metadata.PLUGIN_NAME]
    if all_steps:
        guidance = {name: 0 for name in guidance}
    multiplexer = plugin_event_multiplexer.EventMultiplexer(
        size_guidance=dict(data_ingester.DEFAULT_SIZE_GUIDANCE) if not all_steps else {"tensors": 0},
        tensor_size_guidance=guidance)
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    # What the loader keeps per tag, so a run whose tags hold fewer steps is known to be whole.
    analyzer = analyzer_lib.Analyzer(provider, cfg.limits, cfg.tag_rules, dict(guidance))
    ctx = tb_context.RequestContext()
    names = analyzer.list_runs(ctx, "")
    if not names:
        raise UsageError(f"no TensorBoard event files with histograms or scalars under {logdir!r}")
    if run is not None:
        if run not in names:
            raise UsageError(f"no run named {run!r} in {logdir!r}; runs: {', '.join(names)}")
        names = [run]
    return [analyzer.run(ctx, "", name) for name in names]


def _write_text(summaries: List[dict], analyses: List[tuple], out: TextIO) -> None:
    """The report for a person: per run its verdict, sampling note, unclassified tags and findings."""
    from .serving import responses

    for summary, (_, mine) in zip(summaries, analyses):
        verdict = responses.verdict(mine, summary["gradients_judged"])
        out.write(f"run {summary['run']}: {verdict} - {len(summary['layers'])} layers "
                  f"({', '.join(summary['roles']) or 'no roles'}), "
                  f"{summary['steps_kept']} steps kept, last step {summary['last_step']}\n")
        sampling = responses.cli_sampling(summary["sampling"])
        if sampling is not None:
            out.write(f"  {sampling['message']}\n")
        if summary["coverage_note"]:
            out.write(f"  {summary['coverage_note']}\n")
        if summary["unclassified"]:
            out.write(f"  unclassified tags: {', '.join(summary['unclassified'])}\n")
        if summary["unreadable"]:
            tags = "; ".join(f"{u['tag']} ({u['why']})" for u in summary["unreadable"])
            out.write(f"  unreadable tags: {tags}\n")
        for f in mine:
            out.write(f"  [{f.severity}] {f.kind}: {f.message}\n")
            out.write(f"      advice: {f.advice}\n")
        out.write("\n")


def _add_watch_parser(sub) -> None:
    p = sub.add_parser("watch", help="follow a live logdir and alert on findings as the training runs")
    p.add_argument("logdir")
    p.add_argument("--on", choices=("warn", "critical"), default="warn",
                   help="alert on findings at this severity or above (never on info)")
    p.add_argument("--kinds", default=None, help="only these finding kinds, comma-separated")
    p.add_argument("--consecutive", type=int, default=1, metavar="N",
                   help="alert once a finding has held N consecutive logged steps (default 1: as soon as it exists)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="one line, or one JSON object, per event")
    p.add_argument("--exit-on-first", action="store_true", help="exit with code 1 at the first alert")
    p.add_argument("--exec", dest="exec_cmd", default=None, metavar="CMD",
                   help="run CMD through the shell at each alert and recovery, the event in GRADHEALTH_* variables")
    p.add_argument("--interval", type=float, default=5.0, metavar="SECONDS", help="seconds between polls")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="stop after this many seconds, exit code 0 (default: until interrupted)")
    p.add_argument("--run", default=None, help="only this run (as TensorBoard names it)")
    p.add_argument("--all-steps", action="store_true",
                   help="read every logged step instead of TensorBoard's default samples")
    p.add_argument("--config", default=None, help="gradhealth.json with tag rules and thresholds")


def _watch(args: argparse.Namespace) -> int:
    """``gradhealth watch``: see `follow`."""
    from . import follow
    from .alerts import Alert

    try:
        if not args.interval > 0:
            raise follow.WatchError(f"--interval must be a positive number of seconds, got {args.interval:g}")
        if args.time_limit is not None and not args.time_limit >= 0:
            raise follow.WatchError(f"--time-limit must be 0 or more seconds, got {args.time_limit:g}")
        try:
            kinds = follow.kinds_option(args.kinds)
            alert = Alert(on=args.on, kinds=kinds, consecutive=args.consecutive)
        except ValueError as e:
            raise follow.WatchError(str(e).replace("gradhealth: ", "", 1)) from None
        opts = follow.Options(logdir=args.logdir, alert=alert, interval=args.interval, time_limit=args.time_limit,
                              exit_on_first=args.exit_on_first, exec_cmd=args.exec_cmd,
                              json_lines=args.format == "json", run=args.run, all_steps=args.all_steps,
                              config=args.config)
        return follow.watch(opts)
    except follow.WatchError as e:
        print(f"gradhealth: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = _Parser(prog="gradhealth", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("report", "print the findings of every run"),
                            ("check", "exit 1 when a finding reaches --fail-on")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("logdir")
        p.add_argument("--run", default=None, help="only this run (as TensorBoard names it)")
        p.add_argument("--all-steps", action="store_true",
                       help="read every logged step instead of TensorBoard's default samples")
        p.add_argument("--config", default=None, help="gradhealth.json with tag rules and thresholds")
        if name == "report":
            p.add_argument("--format", choices=("text", "json"), default="text")
        else:
            p.add_argument("--fail-on", choices=("warn", "critical"), default="warn")
    _add_watch_parser(sub)
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        print(f"gradhealth: {e}", file=sys.stderr)
        return EXIT_USAGE

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # TensorFlow 2.21 logs its oneDNN notice to stderr whatever TF_CPP_MIN_LOG_LEVEL says, which would
    # bury the one-line error; TensorBoard only reads files with it, so oneDNN makes no difference here.
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    if args.command == "watch":
        return _watch(args)
    try:
        analyses = _analyze(args.logdir, args.run, args.all_steps, args.config)
    except UsageError as e:
        print(f"gradhealth: {e}", file=sys.stderr)
        return EXIT_USAGE

    from .analysis import finding as finding_lib
    from .serving import responses

    found = [f for _, fs in analyses for f in fs]
    if args.command == "report":
        summaries = [responses.run_summary(rd, fs) for rd, fs in analyses]
        if args.format == "json":
            json.dump(responses.cli_report(summaries, found), sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            _write_text(summaries, analyses, sys.stdout)
        return EXIT_OK
    level = finding_lib.SEVERITY_RANK[args.fail_on]
    failing = [f for f in found if finding_lib.SEVERITY_RANK[f.severity] >= level]
    for f in failing:
        print(f"{f.run}: [{f.severity}] {f.kind}: {f.message}")
    if failing:
        print(f"gradhealth: {len(failing)} finding(s) at {args.fail_on} or above", file=sys.stderr)
        return EXIT_FINDINGS
    print(f"gradhealth: {len(analyses)} run(s) checked, nothing at {args.fail_on} or above")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
