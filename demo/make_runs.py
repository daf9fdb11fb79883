"""Regenerates every demo run under demo/runs/<story>/<run> (about two minutes of CPU).

    python demo/make_runs.py                      # all stories into demo/runs
    python demo/make_runs.py exploding periodic   # only these stories
    python demo/make_runs.py --out /tmp/runs      # somewhere else

Each story is one script in this directory that can also be run on its own
(``python demo/exploding.py``); its docstring says what was done to the model
and what the Gradient Health tab should find. docs/tutorial.md walks through
them. Seeds are fixed and TensorFlow and PyTorch run on one thread each, so a
rerun on the same machine writes the same numbers.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import common  # noqa: E402  (sets TensorFlow's environment before anything imports it)

# In the order docs/tutorial.md tells them.
STORIES = ("healthy", "exploding", "vanishing", "dead_relu", "weight_growth", "periodic", "lr_too_high", "sweep")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("stories", nargs="*", metavar="story",
                        help=f"stories to make (default: all of {', '.join(STORIES)})")
    parser.add_argument("--out", default=str(common.RUNS), help="logdir to write into (default demo/runs)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.stories if s not in STORIES]
    if unknown:
        parser.error(f"unknown stories {', '.join(unknown)}; known: {', '.join(STORIES)}")
    out = pathlib.Path(args.out)
    total = time.monotonic()
    for story in args.stories or STORIES:
        start = time.monotonic()
        print(f"{story}:", flush=True)
        common.report(importlib.import_module(story).main(out))
        print(f"  ({time.monotonic() - start:.0f} s)", flush=True)
    print(f"all done in {time.monotonic() - total:.0f} s; logdir {out}")


if __name__ == "__main__":
    main()
