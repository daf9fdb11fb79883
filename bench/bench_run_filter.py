"""`gradhealth report --run` and `check --run` on a logdir of many runs, this checkout beside another.

    python bench/bench_run_filter.py                          # 50 trials, this checkout alone
    python bench/bench_run_filter.py --rev da12b10            # and that commit's, side by side
    python bench/bench_run_filter.py --code /path/to/old      # and that checkout's
    python bench/bench_run_filter.py --trials 200 --logdir /tmp/ghrf   # keep (and reuse) the logdir

Prints figures; it is not a test and asserts nothing about time. See bench/README.md.

The logdir: ``--trials`` copies of the demo sweep's Keras trial ``lr_1_sgd`` (its hyperparameters in
``trial_<i>``, the fit in ``trial_<i>/train`` and ``trial_<i>/validation``, 0.3 MB) and as many of the
demo run ``vanishing/relu_he_batchnorm`` (``run_<i>``, 3.2 MB of TF2 histograms), each a folder of
symbolic links to the demo's event files, so 200 trials cost no disk. Each command runs in its own process
(``python -m gradhealth_plugin.cli`` with ``PYTHONPATH`` set to the checkout), the median of
``--repeats``; CPU time (the child's user + system) is given beside wall time: on a shared machine
wall times move with the other jobs, CPU times much less. Every command's JSON is compared between
the checkouts: the figures are of the same answer.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIAL = os.path.join(REPO, "demo", "runs", "sweep", "lr_1_sgd")
RUN = os.path.join(REPO, "demo", "runs", "vanishing", "relu_he_batchnorm")


def write_logdir(logdir: str, trials: int) -> None:
    """``trials`` copies of the demo trial and of the demo run, as symbolic links to their event files."""
    for i in range(trials):
        for source, copy in ((TRIAL, f"trial_{i:03d}"), (RUN, f"run_{i:03d}")):
            for here, _, files in os.walk(source):
                target = os.path.join(logdir, copy, os.path.relpath(here, source))
                os.makedirs(target, exist_ok=True)
                for name in files:
                    link = os.path.join(target, name)
                    if not os.path.lexists(link):
                        os.symlink(os.path.join(here, name), link)


def _timed(code: str, argv: list) -> tuple:
    """(wall seconds, CPU seconds, stdout) of one CLI process with ``code`` first on its path."""
    env = dict(os.environ, PYTHONPATH=code, TF_CPP_MIN_LOG_LEVEL="3")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # Run from the checkout itself: `python -m` puts the working directory before PYTHONPATH.
    done = subprocess.run([sys.executable, "-m", "gradhealth_plugin.cli", *argv], env=env, cwd=code,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} with {code} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _measure(code: str, argv: list, repeats: int) -> tuple:
    runs = [_timed(code, argv) for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), runs[0][2]


def _checkout(rev: str, into: str) -> str:
    """The package of commit ``rev`` of this repository, extracted under ``into``."""
    archive = subprocess.run(["git", "-C", REPO, "archive", rev, "gradhealth_plugin"], stdout=subprocess.PIPE,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--logdir", default=None, help="write the logdir here and keep it")
    other = parser.add_mutually_exclusive_group()
    other.add_argument("--rev", default=None, help="a commit of this repository to measure beside this checkout")
    other.add_argument("--code", default=None, help="another checkout to measure beside this one")
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="ghrf-")
    try:
        logdir = args.logdir or os.path.join(scratch, "logdir")
        write_logdir(logdir, args.trials)
        checkouts = [("this checkout", REPO)]
        if args.rev:
            os.makedirs(os.path.join(scratch, "rev"))
            checkouts.append((args.rev, _checkout(args.rev, os.path.join(scratch, "rev"))))
        elif args.code:
            checkouts.append((args.code, args.code))
        run = f"trial_{args.trials // 2:03d}"
        commands = [
            (f"report --run {run}/train", ["report", logdir, "--run", f"{run}/train", "--format", "json"]),
            (f"report --run {run}/validation", ["report", logdir, "--run", f"{run}/validation", "--format", "json"]),
            (f"report --run {run}/train --by-hparams",
             ["report", logdir, "--run", f"{run}/train", "--by-hparams", "--format", "json"]),
            (f"check --run {run}/train", ["check", logdir, "--run", f"{run}/train"]),
        ]
        print(f"logdir: {args.trials} trials (the hyperparameters, train and validation) and {args.trials} runs, "
              f"{4 * args.trials} runs in all; median of {args.repeats} processes; seconds")
        print(f"{'command':<52}" + "".join(f"{name[:20]:>24}" for name, _ in checkouts))
        for label, argv in commands:
            measured = [_measure(code, argv, args.repeats) for _, code in checkouts]
            cells = "".join(f"{f'{wall:.1f} wall, {cpu:.1f} CPU':>24}" for wall, cpu, _ in measured)
            same = "" if len(measured) == 1 else (
                "  same answer" if len({_answer(out) for _, _, out in measured}) == 1 else "  ANSWERS DIFFER")
            print(f"{label:<52}{cells}{same}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _answer(out: str) -> str:
    """What is compared between checkouts: a report's runs and findings (its sweep may gain fields), a
    check's text as it is."""
    try:
        report = json.loads(out)
    except ValueError:
        return out
    return json.dumps([report["runs"], report["findings"]], sort_keys=True)


if __name__ == "__main__":
    main()
