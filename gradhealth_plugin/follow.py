"""``gradhealth watch``: follows a live logdir and acts on findings as training runs.

Each poll reloads TensorBoard's own loader (an ``EventMultiplexer``: new runs,
new steps, any store TensorBoard reads; every active event file of a run, as
``--reload_multifile`` reads them, since a training writes its own events and
gradhealth's side by side) and analyses each run with the `Analyzer` the tab
and ``gradhealth report`` use, so all three name the same findings.
`alerts.Announcer` says each finding once; a line (or a JSON line) goes to
stdout, and an ``--exec`` command runs with the finding in its environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Iterator, List, Optional, TextIO, Tuple

from .alerts import Alert, Announcer, Match

# As TensorBoard's --reload_multifile_inactive_secs: files silent for a day are no longer read.
_INACTIVE_SECS = 86400


class WatchError(Exception):
    """A problem with what was asked (a bad option, a logdir that is a file): one line, exit 2."""


@dataclasses.dataclass
class Options:
    logdir: str
    alert: Alert
    interval: float = 5.0
    time_limit: Optional[float] = None
    exit_on_first: bool = False
    exec_cmd: Optional[str] = None
    json_lines: bool = False
    run: Optional[str] = None
    all_steps: bool = False
    config: Optional[str] = None


class Follower:
    """A logdir read through TensorBoard's loader, reloaded and analysed at each `poll`."""

    def __init__(self, logdir: str, all_steps: bool = False, config_path: Optional[str] = None) -> None:
        from tensorboard import context as tb_context
        from tensorboard.backend.event_processing import data_ingester, data_provider, plugin_event_multiplexer

        from . import config as config_lib
        from . import plugin
        from .serving import analyzer as analyzer_lib
        from .writing import format as metadata

        self.logdir = logdir
        try:
            cfg = config_lib.load(path=config_path, logdir=logdir)
        except ValueError as e:
            raise WatchError(str(e)) from None
        # The samples the tab's loader keeps (or every step), as `gradhealth report` reads them.
        guidance = dict(data_ingester.DEFAULT_TENSOR_SIZE_GUIDANCE)
        guidance[metadata.PLUGIN_NAME] = plugin.DEFAULT_SAMPLES_PER_PLUGIN[metadata.PLUGIN_NAME]
        if all_steps:
            guidance = {name: 0 for name in guidance}
        self._multiplexer = plugin_event_multiplexer.EventMultiplexer(
            size_guidance=dict(data_ingester.DEFAULT_SIZE_GUIDANCE) if not all_steps else {"tensors": 0},
            tensor_size_guidance=guidance,
            event_file_active_filter=lambda wall_time: wall_time + _INACTIVE_SECS >= time.time())
        provider = data_provider.MultiplexerDataProvider(self._multiplexer, logdir)
        self._analyzer = analyzer_lib.Analyzer(provider, cfg.limits, cfg.tag_rules, dict(guidance),
                                               multiplexer=self._multiplexer)
        self._ctx = tb_context.RequestContext()
        self._errors = analyzer_lib.RunFailed

    def poll(self, only: Optional[str] = None) -> Iterator[Tuple[str, object, Optional[list], Optional[str]]]:
        """(run, run data, findings, None) per run, or (run, None, None, why) for a run that failed."""
        from tensorboard import errors
        from tensorboard.backend.event_processing import io_wrapper

        if only is None:
            self._multiplexer.AddRunsFromDirectory(self.logdir)
        else:
            # Only what the run's findings read is loaded: the run, and the other ranks of the training its
            # name makes it a rank of (judged together); a logdir of many runs is not read whole at each poll.
            # Runs are found and named as `AddRunsFromDirectory` finds and names them.
            for subdir in io_wrapper.GetLogdirSubdirectories(self.logdir):
                name = os.path.relpath(subdir, self.logdir)
                if _read_with(name, only):
                    self._multiplexer.AddRun(subdir, name=name)
        self._multiplexer.Reload()
        for name in self._analyzer.list_runs(self._ctx, ""):
            if only is not None and name != only:
                continue
            try:
                rd, found = self._analyzer.run(self._ctx, "", name)
            except errors.NotFoundError:
                continue  # gone since it was listed
            except self._errors as e:
                yield name, None, None, str(e)
                continue
            yield name, rd, found, None


def _read_with(name: str, run: str) -> bool:
    """Whether `run`'s findings read run `name`: it is `run`, or a rank of the same training."""
    from .reading import trainings as trainings_lib

    if name == run:
        return True
    mine, other = trainings_lib.rank_name(run), trainings_lib.rank_name(name)
    return mine is not None and other is not None and mine.training == other.training


def _exists(logdir: str) -> bool:
    if "://" in logdir:
        return True  # a remote store: the loader says what it holds
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        raise WatchError(f"logdir {logdir!r} is not a directory")
    return os.path.isdir(logdir)


def watch(opts: Options, out: Optional[TextIO] = None, err: Optional[TextIO] = None) -> int:
    """Follows the logdir until the time limit (0), the first alert with exit_on_first (1); writes to
    `out` and `err` (the process's stdout and stderr as they are when called, by default)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    logdir = opts.logdir if "://" in opts.logdir else os.path.expanduser(opts.logdir)
    waiting = not _exists(logdir)
    follower = Follower(logdir, opts.all_steps, opts.config)
    announcer = Announcer(opts.alert)
    failed: dict = {}
    said: set = set()  # (run, tag, whole or steps) of what could not be read, said once
    err.write(f"gradhealth: watching {logdir} for findings at {opts.alert.describe()} or above, "
              f"every {opts.interval:g}s\n")
    if waiting:
        err.write(f"gradhealth: {logdir} does not exist yet; waiting for it\n")
    err.flush()
    deadline = None if opts.time_limit is None else time.monotonic() + opts.time_limit
    while True:
        if not waiting or _exists(logdir):
            waiting = False
            for run, rd, found, error in follower.poll(opts.run):
                if error is not None:
                    if failed.get(run) != error:  # said once per run and error
                        failed[run] = error
                        err.write(f"gradhealth: {error}\n")
                        err.flush()
                    continue
                failed.pop(run, None)
                for line in _unreadable(rd, said, opts.json_lines):
                    out.write(line + "\n")
                    out.flush()
                for event in announcer.update(rd, found):
                    out.write((json.dumps(event.to_json()) if opts.json_lines else event.line()) + "\n")
                    out.flush()
                    if opts.exec_cmd:
                        _run(opts.exec_cmd, dict(event.env(), GRADHEALTH_LOGDIR=logdir), err)
                    if opts.exit_on_first and isinstance(event, Match):
                        return 1
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return 0
        time.sleep(opts.interval if deadline is None else max(0.0, min(opts.interval, deadline - now)))


def _unreadable(rd, said: set, json_lines: bool) -> List[str]:
    """A line (or a JSON line) per tag of the run that could not be read, whole or at some steps, as
    ``gradhealth report`` says it; each tag once (`said`), however often the run is read."""
    from .serving import responses

    lines = []
    for tag, why in rd.unreadable.items():
        if (rd.run, tag, "tag") not in said:
            said.add((rd.run, tag, "tag"))
            lines.append(json.dumps({"event": "unreadable", "run": rd.run, "tag": tag, "why": why}) if json_lines
                         else f"{rd.run}: {responses.unreadable_line(tag, why)}")
    for tag, some in rd.unreadable_steps.items():
        if (rd.run, tag, "steps") not in said:
            said.add((rd.run, tag, "steps"))
            lines.append(json.dumps({"event": "unreadable_steps", "run": rd.run, **some.to_json(tag)}) if json_lines
                         else f"{rd.run}: {responses.unreadable_steps_line(tag, some)}")
    return lines


def _run(command: str, env: dict, err: TextIO) -> None:
    """Runs the --exec command through the shell with the event in its environment; a failure is reported."""
    try:
        status = subprocess.run(command, shell=True, env=dict(os.environ, **env), check=False).returncode
    except OSError as e:
        err.write(f"gradhealth: --exec command could not be run: {e}\n")
        err.flush()
        return
    if status != 0:
        err.write(f"gradhealth: --exec command exited with status {status}\n")
        err.flush()


def kinds_option(text: Optional[str]) -> Optional[List[str]]:
    """``--kinds a,b`` as a list (None for every kind)."""
    if text is None:
        return None
    return [k.strip() for k in text.split(",") if k.strip()]
