"""``gradhealth``: the tab's analysis from the command line, to read or to gate CI.

    gradhealth report LOGDIR [--run NAME] [--format text|json] [--all-steps] [--by-hparams]
    gradhealth check LOGDIR [--fail-on warn|critical] [--sampled]
    gradhealth watch LOGDIR [--on warn|critical] [--kinds K,..] [--consecutive N] [--format text|json]
                     [--exit-on-first] [--exec CMD] [--interval SECONDS] [--time-limit SECONDS]

It loads the logdir with TensorBoard's own loader and data provider (the same
code path as the tab). ``report`` keeps the same samples TensorBoard keeps by
default, unless ``--all-steps`` asks for every logged step; ``check`` reads every
logged step, since a gate must not pass over steps it never read, unless
``--sampled`` asks for TensorBoard's samples. Wherever sampling dropped steps,
both say so in one line per run. All three commands say each tag that cannot be
read (whole, or at some steps), one line per tag. The text report prints each finding with its
advice, but folds the notes (info) of one kind and role after the first into one
line of their steps and layers (in model order), and so the repeated warnings of a
kind that gives one finding per event (a spike), naming each of their layers;
``--format json`` lists every finding.

Exit codes: 0 clean (or a report printed; watch: its time limit reached),
1 a finding reached --fail-on (watch: --exit-on-first and a finding reached --on),
2 any error: a usage error, an unreadable or empty logdir, a config file that
is not a JSON object, or a failure of the analysis (one line on stderr, never
a traceback). What cannot be read under the logdir (a directory without
permission, a dangling symlink, a FIFO named like an event file) is skipped,
one stderr line each, and the rest is analysed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
from typing import TYPE_CHECKING, Dict, Iterator, List, NoReturn, Optional, Sequence, TextIO, Tuple

if TYPE_CHECKING:
    from .analysis.finding import Finding
    from .config import Config

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2
EXIT_USAGE = EXIT_ERROR

EXIT_CODES = """exit codes:
  0  no finding at --fail-on or above (check), or the report was printed (report)
  1  check: a finding reached --fail-on (in the runs that could be analysed)
  2  an error: bad arguments, an unreadable or empty logdir, a config file that is not
     a JSON object, a failure of the analysis (one line on stderr); a run that alone
     cannot be analysed is skipped with one line, the others reported, and exit 2
     unless check found findings"""


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Reports a bad command line in one line like every other usage error, not usage text plus a message."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def _warn(message: str) -> None:
    print(f"gradhealth: {message}", file=sys.stderr)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _readable_event_files(logdir: str) -> Tuple[Dict[str, List[str]], List[str]]:
    """Event files TensorBoard would read under the logdir, by run directory relative to it, keeping only
    regular files this process can open; and one line per directory or file skipped.

    TensorBoard's own walk stops at the first directory it may not list (with a
    traceback), blocks forever opening a FIFO, and gives up a directory whose
    first event file is a dangling symlink: each is left out here instead.
    """
    from tensorboard.backend.event_processing import io_wrapper

    found: Dict[str, List[str]] = {}
    skipped: List[str] = []
    seen = set()  # (device, inode) of directories walked: a symlink loop is walked once
    stack = [logdir]
    while stack:
        directory = stack.pop()
        try:
            st = os.stat(directory)
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            if directory == logdir:
                raise UsageError(f"cannot read logdir {logdir!r}: {e.strerror}") from None
            skipped.append(f"skipped directory {directory!r}: {e.strerror}")
            continue
        subdirectories = []
        for entry in entries:
            if entry.is_dir():  # follows symlinks, as TensorBoard does
                subdirectories.append(entry.path)
            elif io_wrapper.IsSummaryEventsFile(entry.path):
                problem = _unreadable(entry.path)
                if problem:
                    skipped.append(f"skipped {entry.path!r}: {problem}")
                else:
                    found.setdefault(os.path.relpath(directory, logdir), []).append(entry.path)
        stack.extend(reversed(subdirectories))  # walked in name order
    return found, skipped


def _unreadable(path: str) -> Optional[str]:
    """Why an event file cannot be read, or None; never opens anything but a regular file."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "not a regular file"
        with open(path, "rb"):
            return None
    except OSError as e:
        return "dangling symlink" if os.path.islink(path) and not os.path.exists(path) else e.strerror


@contextlib.contextmanager
def _vetted_logdir(found: Dict[str, List[str]]) -> Iterator[str]:
    """A temporary directory mirroring the logdir's runs with symlinks to their readable event files only,
    so TensorBoard's loader reads the same runs under the same names and nothing it would trip on."""
    root = tempfile.mkdtemp(prefix="gradhealth-")
    try:
        for run_dir, paths in found.items():
            target = os.path.join(root, run_dir)
            os.makedirs(target, exist_ok=True)
            for path in paths:
                os.symlink(os.path.abspath(path), os.path.join(target, os.path.basename(path)))
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _read_s3_without_tensorflow(logdir: str) -> None:
    """Makes TensorBoard read an ``s3://`` logdir with its own file layer (boto3, honouring S3_ENDPOINT).

    TensorBoard reads through TensorFlow's file systems wherever TensorFlow is
    installed, and those know no ``s3://`` since TensorFlow 2.6 (tensorflow-io
    adds it back). Reading event files needs nothing else from TensorFlow, so the
    CLI takes TensorBoard's TensorFlow-free layer, as TensorBoard itself does on
    a machine without TensorFlow. Other schemes (``gs://``) stay with TensorFlow's.
    """
    if not logdir.startswith("s3://") or "tensorboard.compat.notf" in sys.modules:
        return
    import types

    # TensorBoard's own switch (tensorboard.compat.tf() imports it first): its presence selects the stub.
    sys.modules["tensorboard.compat.notf"] = types.ModuleType("tensorboard.compat.notf")


def _analyze(logdir: str, run: Optional[str], all_steps: bool, config_path: Optional[str],
             by_hparams: bool = False) -> Tuple[List[tuple], List[str], Optional[dict], Dict[str, object]]:
    """(run data, its findings) per run of the logdir, through TensorBoard's data provider; the config's
    problems; with ``by_hparams`` the sweep's answer (else None); by run, the training it is a rank of
    (`Analyzer.training_of`) and the run beside it that holds its layers (`Analyzer.layers_in`). Every skipped
    file and config problem is said on stderr. With ``run``, only what that run needs is read (`_runs_to_read`)."""
    url = "://" in logdir
    if url:
        _read_s3_without_tensorflow(logdir)
    else:
        # Before the imports: TensorBoard pulls in TensorFlow, seconds to wait for a typo.
        logdir = os.path.expanduser(logdir)
        if not os.path.isdir(logdir):
            raise UsageError(f"logdir {logdir!r} does not exist or is not a directory")

    from . import config as config_lib

    try:
        cfg = config_lib.load(path=config_path, logdir=logdir)
    except ValueError as e:
        raise UsageError(str(e)) from None
    for problem in cfg.problems:
        _warn(problem)
    if url:
        # Object storage has no FIFOs, permissions per directory or dangling symlinks to vet for:
        # TensorBoard's loader lists and reads it as the server does.
        found = _listed_event_files(logdir)
        read = _runs_to_read(found, logdir, run, by_hparams)
        directories = {name: os.path.dirname(found[name][0]) for name in read}
        analyses, sweep, trainings = _analyze_runs(directories, found, logdir, run, all_steps, cfg, by_hparams)
        return analyses, cfg.problems, sweep, trainings
    found, skipped = _readable_event_files(logdir)
    for line in skipped:
        _warn(line)
    if not found:
        raise UsageError(f"no TensorBoard event files under {logdir!r}" + (
            f" that can be read ({len(skipped)} skipped)" if skipped else ""))
    read = _runs_to_read(found, logdir, run, by_hparams)
    with _vetted_logdir({name: found[name] for name in read}) as vetted, _naming_user_paths(vetted, logdir):
        directories = {name: os.path.normpath(os.path.join(vetted, name)) for name in read}
        analyses, sweep, trainings = _analyze_runs(directories, found, logdir, run, all_steps, cfg, by_hparams)
    for line in _loss_not_yet_read(analyses, _unflushed({name: found[name] for name in read})):
        _warn(line)
    return analyses, cfg.problems, sweep, trainings


@contextlib.contextmanager
def _naming_user_paths(mirror: str, logdir: str) -> Iterator[None]:
    """TensorBoard's loader messages name the files it reads: they say the user's logdir, not the mirror."""
    tb_logger = logging.getLogger("tensorboard")  # every TensorBoard module logs to this one logger

    def rename(record: logging.LogRecord) -> bool:
        record.msg, record.args = record.getMessage().replace(mirror, logdir), None
        return True

    tb_logger.addFilter(rename)
    try:
        yield
    finally:
        tb_logger.removeFilter(rename)


def _unflushed(found: Dict[str, List[str]]) -> Dict[str, List[str]]:
    """By run, its event files holding no event after the file's header: a writer that has opened its file
    but not flushed yet (a SummaryWriter writes every 120 s, or at ``flush()``)."""
    from tensorboard.backend.event_processing import event_file_loader

    held: Dict[str, List[str]] = {}
    for run_dir, paths in found.items():
        for path in paths:
            # The header is one event; a second one of any kind means the writer has flushed.
            events = event_file_loader.EventFileLoader(path).Load()
            if not any(event.WhichOneof("what") != "file_version" for _, event in zip(range(2), events)):
                held.setdefault(run_dir, []).append(path)
    return held


def _loss_not_yet_read(analyses: List[tuple], unflushed: Dict[str, List[str]]) -> List[str]:
    """A line per run read without a loss while one of its event files holds nothing yet: the loss may
    be waiting in that writer's buffer, so its absence is said, not left to read as never logged."""
    from .reading import tags as tags_lib

    lines = []
    for rd, result in analyses:
        if isinstance(result, str) or rd.run not in unflushed or rd.scalars.get(tags_lib.SCALAR_LOSS):
            continue  # a run that failed is said elsewhere; one with a loss lost nothing worth a line
        files = ", ".join(os.path.basename(p) for p in unflushed[rd.run])
        lines.append(f"run {rd.run!r}: no loss read yet: {files} holds no event yet, its writer has not flushed"
                     " (a SummaryWriter writes every 120 s, or at flush()); report again once it has")
    return lines


def _listed_event_files(logdir: str) -> Dict[str, List[str]]:
    """Event files under a logdir in object storage by run, as TensorBoard lists and names them; nothing is read."""
    from tensorboard.backend.event_processing import io_wrapper

    found: Dict[str, List[str]] = {}
    for directory in io_wrapper.GetLogdirSubdirectories(logdir):
        files = sorted(p for p in io_wrapper.ListDirectoryAbsolute(directory) if io_wrapper.IsSummaryEventsFile(p))
        if files:
            found[os.path.relpath(directory, logdir)] = files
    return found


def _runs_to_read(found: Dict[str, List[str]], logdir: str, run: Optional[str], by_hparams: bool) -> List[str]:
    """The runs to load of those listed (``found``): every one, or for one ``run``, what its report needs:
    the run; the other ranks of the training its name makes it a rank of (judged together, `Analyzer.run`);
    with ``by_hparams``, the runs its hyperparameters may be written in (`hparams.assign`): its ancestors
    and the runs right under it. The run beside a validation half is found without loading (`_beside`).
    Raises `UsageError` for a run not listed, naming those that are."""
    from .analysis import sweep as sweep_lib
    from .reading import hparams as hparams_lib
    from .reading import trainings as trainings_lib

    names = sorted(found, key=sweep_lib.run_key)
    if run is None:
        return names
    if run not in found:
        raise UsageError(f"no run named {run!r} in {logdir!r}; runs: {', '.join(names)}")
    rank = trainings_lib.rank_name(run)

    def needed(name: str) -> bool:
        if name == run:
            return True
        other = trainings_lib.rank_name(name)
        if rank is not None and other is not None and other.training == rank.training:
            return True
        if not by_hparams:
            return False
        ancestor = hparams_lib.parent_of(run)
        while ancestor is not None and ancestor != name:
            ancestor = hparams_lib.parent_of(ancestor)
        return ancestor is not None or hparams_lib.parent_of(name) == run

    return [name for name in names if needed(name)]


def _beside(run: str, found: Dict[str, List[str]]) -> Optional[Tuple[str, bool]]:
    """`Analyzer.layers_in` of a run whose neighbours were not loaded: each run in its folder is read up to
    its first layer (`peek.holds`), and only until two hold layers (then no single one holds them)."""
    from .reading import peek
    from .serving import responses

    parent = responses.parent_run(run)
    if parent is None:
        return None
    with_layers, with_data = [], [run]
    for name in found:
        if name == run or responses.parent_run(name) != parent:
            continue
        held = peek.holds(found[name])
        if held is not None:
            with_data.append(name)
        if held == peek.LAYERS:
            with_layers.append(name)
            if len(with_layers) == 2:
                break
    return responses.beside(run, with_layers, with_data)


def _analyze_runs(directories: Dict[str, str], found: Dict[str, List[str]], logdir: str, run: Optional[str],
                  all_steps: bool, cfg: "Config",
                  by_hparams: bool = False) -> Tuple[List[tuple], Optional[dict], Dict[str, object]]:
    """(run data, its findings) per run, or (run name, error) for a run that could not be analysed;
    with ``by_hparams``, the sweep's answer over the same runs; by run, the training it is a rank of and
    the run beside it that holds its layers (`run_summary`'s last two arguments). ``directories``: the
    runs to load, each by the directory TensorBoard reads it from; ``found``: every run's event files."""
    from tensorboard import context as tb_context
    from tensorboard.backend.event_processing import data_ingester, data_provider, plugin_event_multiplexer

    from . import plugin
    from .serving import analyzer as analyzer_lib
    from .serving import responses
    from .serving import sweep as sweep_answer
    from .writing import format as metadata

    guidance = dict(data_ingester.DEFAULT_TENSOR_SIZE_GUIDANCE)
    guidance[metadata.PLUGIN_NAME] = plugin.DEFAULT_SAMPLES_PER_PLUGIN[metadata.PLUGIN_NAME]
    if all_steps:
        guidance = {name: 0 for name in guidance}
    multiplexer = plugin_event_multiplexer.EventMultiplexer(
        size_guidance=dict(data_ingester.DEFAULT_SIZE_GUIDANCE) if not all_steps else {"tensors": 0},
        tensor_size_guidance=guidance,
        # Every event file of a run, read whole, as --reload_multifile: a training's own writer and
        # gradhealth's write side by side, and a single-file loader reads one while the other grows.
        event_file_active_filter=lambda wall_time: True)
    for name, directory in directories.items():
        multiplexer.AddRun(directory, name=name)
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    # What the loader keeps per tag, so a run whose tags hold fewer steps is known to be whole.
    # The multiplexer too, as TensorBoard's Python loader gives it: its tags are decoded in bulk.
    analyzer = analyzer_lib.Analyzer(provider, cfg.limits, cfg.tag_rules, dict(guidance), multiplexer=multiplexer)
    ctx = tb_context.RequestContext()
    names = analyzer.list_runs(ctx, "")
    if run is None:
        if not names:
            raise UsageError(f"no TensorBoard event files with histograms or scalars under {logdir!r}")
        # Every run's listing: the run beside a validation run is named from it.
        listings = analyzer.listings(ctx, "")
    elif run not in names:
        raise UsageError(f"run {run!r} in {logdir!r} holds no histograms or scalars")
    else:
        names = [run]
    analyses = []
    trainings = {}
    for name in names:
        try:
            analyses.append(analyzer.run(ctx, "", name))
            rd = analyses[-1][0]
            # The run holding its layers is said only of a run without layer steps: the others are not read for it.
            beside = (analyzer.layers_in(ctx, "", name, listings) if run is None
                      else None if responses.holds_layer_steps(rd) else _beside(name, found))
            # The training the run is a rank of and the run holding its layers, as the runs route says them.
            trainings[name] = (analyzer.training_of(rd), beside)
        except analyzer_lib.RunFailed as e:  # this run only: the others are still reported
            analyses.append((name, _one_line(str(e).partition(": ")[2] or e)))
    # The analyses above are cached: the sweep's lines cost no second analysis.
    return analyses, (sweep_answer.answer(analyzer, ctx, "", names) if by_hparams else None), trainings


def _cell(value) -> str:
    from .analysis import sweep as sweep_lib

    return "-" if value is None else sweep_lib.format_value(value)


def _write_sweep(sweep: dict, out: TextIO) -> None:
    """The sweep for a person: a line per run with its hyperparameters, worst status and the kinds found
    (onset step, first layer), then what the hyperparameters explain."""
    names = [h["name"] for h in sweep["hparams"]]
    header = ["run"] + names + ["worst", "kinds found (from step, first layer)"]
    lines = []
    for row in sweep["runs"]:
        if "error" in row:
            lines.append([row["run"]] + ["-"] * len(names) + ["failed", row["error"]])
            continue
        # The onset on the finding's own axis ("epoch 3"); a bare step on the layers' axis.
        kinds = "; ".join(f"{k['kind']} ({k['first_step_text'] if k['axis'] is None else k['onset_text']}, "
                          f"{k['layer'] or '-'})" for k in row["kinds"])
        lines.append([row.get("trial", row["run"])] + [_cell(row["hparams"].get(n)) for n in names]
                     + [row["worst_status"], kinds or "-"])
    widths = [max(len(str(line[i])) for line in [header] + lines) for i in range(len(header) - 1)]
    for line in [header] + lines:
        out.write("  ".join(str(c).ljust(w) for c, w in zip(line, widths)) + "  " + str(line[-1]) + "\n")
    out.write("\nwhat the hyperparameters explain:\n")
    if not names:
        out.write("  no run logged hyperparameters (hp.hparams, hp.KerasCallback or add_hparams)\n")
    elif not sweep["splits"]:
        out.write(f"  no clear split in {len(lines)} runs\n")
    for split in sweep["splits"]:
        out.write(f"  {split['sentence']}\n")


def _tensors_text(summary: dict) -> str:
    """'314 gradient, 314 weight, 626 activation tensors': per role, the rows the tab shows for it (a layer
    has one per role it logged, so a count over all roles would match no role's heatmap)."""
    if not summary["roles"]:
        return f"{len(summary['layers']):,} layers (no roles)"
    counts = collections.Counter(role for layer in summary["layers"] for role in layer["roles"])
    tensors = "tensor" if sum(counts.values()) == 1 else "tensors"
    return ", ".join(f"{counts[role]:,} {role}" for role in summary["roles"]) + f" {tensors}"


def _last_steps(rd) -> str:
    """'last layer step 2,990; loss to 2,999': the last step of the layers' rows (the tab's "last") and,
    where run-level scalars were logged later, which ones and how far, so neither reads as the other."""
    ends = [int(r.table.steps[-1]) for layer in rd.layers for r in layer.roles.values() if len(r.table.steps)]
    if not ends:
        return "no layer steps" + (f", scalars to {rd.last_step:,}" if rd.last_step is not None else "")
    text = f"last layer step {max(ends):,}"
    if rd.last_step is not None and rd.last_step > max(ends):
        tags = sorted(tag for tag, (steps, _) in rd.scalar_series.items()
                      if len(steps) and int(max(steps)) == rd.last_step)
        text += f"; {', '.join(tags) if tags else 'scalars'} to {rd.last_step:,}"
    return text


def _header(summary: dict, rd) -> str:
    """A run's first line, one format for every run: 'run NAME: VERDICT - what it holds'. The verdict is the
    route's (the word the tab's badge says, then why: a validation half's names the run holding its layers);
    what it holds, its tensors and steps, or for a run whose layer rows hold no step, its scalars' last step."""
    holds = _last_steps(rd)
    if any(len(r.table.steps) for layer in rd.layers for r in layer.roles.values()):
        holds = f"{_tensors_text(summary)}, {summary['steps_kept']} steps kept, {holds}"
    return f"run {summary['run']}: {summary['verdict']} - {holds}\n"


def _write_text(summaries: List[dict], analyses: List[tuple], out: TextIO) -> None:
    """The report for a person: per run its header (`_header`), sampling note, unclassified and unreadable
    tags and findings. Runs of scalars only with nothing more to say come last, their headers alone."""
    from .serving import responses

    scalars_only = []
    for summary, (rd, mine) in zip(summaries, analyses):
        if _scalars_only(summary, mine):
            scalars_only.append(_header(summary, rd))
            continue
        out.write(_header(summary, rd))
        for sampling in (responses.cli_sampling(summary["sampling"]),
                         responses.cli_scalars_sampling(summary["scalars_sampling"])):
            if sampling is not None:
                out.write(f"  {sampling['message']}\n")
        if summary["stopped"]:
            out.write(f"  stopped: {_one_line(summary['stopped']['message'])}\n")
        # A scalars-only half's verdict says where its layers are already: its note would say it again.
        if summary["coverage_note"] and not (summary["layers_in"]
                                             and summary["verdict_word"].startswith(responses.SCALARS_ONLY)):
            out.write(f"  {summary['coverage_note']}\n")
        if summary["unclassified"]:
            out.write(f"  unclassified tags: {', '.join(summary['unclassified'])}\n")
        # A line per tag: a run may have dozens, each with its own why.
        for line in responses.unreadable_lines(rd):
            out.write(f"  {line}\n")
        printed = []
        for f, more in _fold_notes(mine):
            printed.append(f"  [{f.severity}] {f.kind}: {f.message}\n")
            printed.append(f"      advice: {f.advice}\n")
            if more:
                printed.append(f"  [{f.severity}] {f.kind}: {_more_text(more, [layer.name for layer in rd.layers])}\n")
        out.write("".join(printed))
        note = _call_note("".join(printed))
        if note:
            out.write(f"  {note}\n")
        out.write("\n")
    # A Keras fit's validation folder, an eval job: the same long "not judged" paragraph for each says nothing
    # new; the header's verdict says what was judged, or where the layers are.
    out.write("".join(scalars_only))


def _scalars_only(summary: dict, mine: list) -> bool:
    """A run of scalars only (its verdict word) that has nothing to say but that: no finding, nothing
    unreadable or unclassified."""
    from .serving import responses

    return summary["verdict_word"] == responses.SCALARS_ONLY and not (
        mine or summary["unclassified"] or summary["unreadable"] or summary["unreadable_steps"] or summary["stopped"])


# A quoted layer name the PyTorch integration gave a module's later call in one forward pass: `relu[1]`.
_CALL = re.compile(r"`([^`\s]+)\[([1-9][0-9]*)\]`")


def _call_note(text: str) -> Optional[str]:
    """What `relu[1]` means, once per run, when the findings quote such a name; None when they do not."""
    m = _CALL.search(text)
    if m is None:
        return None
    name, call = m.group(1), int(m.group(2))
    return (f"`{name}[{call}]` is the {_ordinal(call + 1)} call of module `{name}` in forward: a module called "
            "several times in one forward pass (a shared ReLU) is logged once per call, `[1]` for the second")


def _ordinal(n: int) -> str:
    words = {2: "second", 3: "third", 4: "fourth", 5: "fifth"}
    if n in words:
        return words[n]
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _fold_notes(found: List["Finding"]) -> List[Tuple["Finding", List["Finding"]]]:
    """Each finding to print in full, with its repeats folded under it: info findings of its kind, role and cause
    after the first (one per spike event, a dozen in a long run) read as one line, not a page that buries the
    warnings. Warnings and critical findings fold only for kinds that give one finding per event (a spike), by
    kind, role, severity and cause: any other warning of one kind can mean another problem (weights updating
    too fast, or barely moving), so it stays whole. Only the text folds them: the JSON report keeps one finding
    per event."""
    from .analysis.detectors import EVENT_KINDS
    from .analysis.finding import INFO

    out: List[Tuple["Finding", List["Finding"]]] = []
    folds: Dict[tuple, List["Finding"]] = {}
    for f in found:
        folding = f.severity == INFO or f.kind in EVENT_KINDS
        # Repeats fold only where their advice is the same: an epoch's mean and one batch's loss differ.
        key = (f.kind, f.role, f.severity, f.cause, f.advice)
        if folding and key in folds:
            folds[key].append(f)
            continue
        more: List["Finding"] = []
        if folding:
            folds[key] = more
        out.append((f, more))
    return out


# Steps listed in a folded line before "and N more".
_FOLDED_STEPS = 8


def _more_text(more: List["Finding"], model_order: Sequence[str]) -> str:
    """'14 more like it at steps 180, 220-240, ... and 6 more, in `a`, `b`, `c` and 309 more': the steps of the
    folded findings, and their layers in model order (as the heatmap draws them). Folded warnings name every
    layer: a warning about one layer must never hide behind another's name."""
    from .analysis.finding import INFO
    from .analysis.spans import layers_text

    # Scalars told in their own step axis (an epoch's loss) are listed at their own steps, in its unit.
    axis = more[0].axis if all(f.axis is not None and f.axis.unit == more[0].axis.unit for f in more) else None
    ends = [(f.axis.first_step, f.axis.last_step) if axis else (f.first_step, f.last_step) for f in more]
    spans = [str(a) if a == b else f"{a}-{b}" for a, b in ends]
    steps = ", ".join(spans[:_FOLDED_STEPS])
    if len(spans) > _FOLDED_STEPS:
        steps += f" and {len(spans) - _FOLDED_STEPS} more"
    unit = axis.unit if axis else "step"
    if axis and axis.other and axis.unit == "step":
        steps += " of their own axis"
    layers = _in_model_order([layer for f in more for layer in f.layers], model_order)
    named = layers_text(layers) if more[0].severity == INFO else ", ".join(f"`{name}`" for name in layers)
    return f"{len(more)} more like it at {unit}{'s' if len(spans) > 1 else ''} {steps}, in {named}"


def _in_model_order(names: List[str], model_order: Sequence[str]) -> List[str]:
    """Each name once, in model order; names the run has no layer of (a scalar) after them, as they came."""
    rank = {name: i for i, name in enumerate(model_order)}
    unique = list(dict.fromkeys(names))
    return sorted(unique, key=lambda name: rank.get(name, len(rank)))


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
    try:
        return _main(argv)
    except Exception as e:  # noqa: BLE001 - whatever fails, one line and exit 2, never a traceback
        _warn(_one_line(f"error: {type(e).__name__}: {e}"))
        return EXIT_ERROR


def _main(argv: Optional[Sequence[str]]) -> int:
    parser = _Parser(prog="gradhealth", description=__doc__.split("\n")[0], epilog=EXIT_CODES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("report", "print the findings of every run"),
                            ("check", "exit 1 when a finding reaches --fail-on")):
        p = sub.add_parser(name, help=help_text, epilog=EXIT_CODES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("logdir")
        p.add_argument("--run", default=None, help="only this run (as TensorBoard names it)")
        if name == "report":
            p.add_argument("--all-steps", action="store_true",
                           help="read every logged step instead of TensorBoard's default samples")
        else:
            # A gate reads every step: a step TensorBoard's sampling dropped could hold the one NaN.
            steps = p.add_mutually_exclusive_group()
            steps.add_argument("--all-steps", action="store_true",
                               help="read every logged step (the default for check)")
            steps.add_argument("--sampled", action="store_true",
                               help="judge only TensorBoard's default samples, as the tab does (faster on long runs)")
        p.add_argument("--config", default=None, help="gradhealth.json with tag rules and thresholds")
        if name == "report":
            p.add_argument("--format", choices=("text", "json"), default="text")
            p.add_argument("--by-hparams", action="store_true",
                           help="a line per run with its hyperparameters, and which values go with which findings")
        else:
            p.add_argument("--fail-on", choices=("warn", "critical"), default="warn")
    _add_watch_parser(sub)
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        _warn(str(e))
        return EXIT_ERROR

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # TensorFlow 2.21 logs its oneDNN notice to stderr whatever TF_CPP_MIN_LOG_LEVEL says, which would
    # bury the one-line error; TensorBoard only reads files with it, so oneDNN makes no difference here.
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    if args.command == "watch":
        return _watch(args)
    try:
        all_steps = args.all_steps or (args.command == "check" and not args.sampled)
        analyses, config_problems, sweep, trainings = _analyze(args.logdir, args.run, all_steps, args.config,
                                                    getattr(args, "by_hparams", False))
    except UsageError as e:
        _warn(_one_line(e))
        return EXIT_ERROR

    from .analysis import finding as finding_lib
    from .serving import responses

    failed = [(name, error) for name, error in analyses if isinstance(error, str)]
    analyses = [a for a in analyses if not isinstance(a[1], str)]
    for name, error in failed:
        _warn(f"run {name!r} skipped: {error}")
    found = [f for _, fs in analyses for f in fs]
    if args.command == "report":
        summaries = [responses.run_summary(rd, fs, *trainings.get(rd.run, (None, None))) for rd, fs in analyses]
        if args.format == "json":
            report = responses.cli_report(summaries, analyses)
            report["runs"] += [responses.failed_run(name, error) for name, error in failed]
            if sweep is not None:
                report["sweep"] = sweep
            json.dump({**report, "config_problems": config_problems}, sys.stdout, indent=1)
            sys.stdout.write("\n")
        elif sweep is not None:
            _write_sweep(sweep, sys.stdout)
        else:
            _write_text(summaries, analyses, sys.stdout)
        return EXIT_ERROR if failed else EXIT_OK
    for rd, _ in analyses:
        # Only with --sampled: what the gate did not read is said, never passed over.
        for sampling in (responses.cli_sampling(rd.sampling, "check reads every step without --sampled"),
                         responses.cli_scalars_sampling(rd.scalars_sampling,
                                                        "check reads every point without --sampled")):
            if sampling is not None:
                print(f"{rd.run}: {sampling['message']}")
        # What the gate could not read, as the report says it: never passed over in silence.
        for line in responses.unreadable_lines(rd):
            print(f"{rd.run}: {line}")
    level = finding_lib.SEVERITY_RANK[args.fail_on]
    failing = [f for f in found if finding_lib.SEVERITY_RANK[f.severity] >= level]
    for f in failing:
        print(f"{f.run}: [{f.severity}] {f.kind}: {f.message}")
    if failed:
        print(f"gradhealth: {len(failed)} run(s) could not be checked", file=sys.stderr)
    if failing:
        print(f"gradhealth: {len(failing)} finding(s) at {args.fail_on} or above", file=sys.stderr)
        return EXIT_FINDINGS  # findings are what a check is for, even where some run failed
    if failed:
        return EXIT_ERROR
    print(f"gradhealth: {len(analyses)} run(s) checked, nothing at {args.fail_on} or above")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
