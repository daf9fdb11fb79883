"""Which steps the integrations log: every step at the start, then every N-th.

Trouble that starts early (a learning rate that diverges in ten steps, ReLUs
that die in the first updates) is over before the 100th step: logged only
every 100 steps it shows as NaN at step 100, with no onset and no cause. So
the first `FIRST_STEPS` steps are all logged, then every ``every_n_steps``-th.
Over a run of 10,000 steps logged every 100 that is 129 logged steps instead
of 100 (bench/bench_integrations_torch.py and bench_integrations_tf.py
measure what they cost).
"""

from __future__ import annotations

# Every step below this one is logged, as well as every `every_n_steps`-th.
FIRST_STEPS = 30


def check(every_n_steps: int, first_steps: int) -> tuple:
    """(every_n_steps, first_steps) as integers; ValueError for an interval below 1 or a negative count."""
    if int(every_n_steps) < 1:
        raise ValueError(f"every_n_steps must be at least 1; got {every_n_steps}")
    if int(first_steps) < 0:
        raise ValueError(f"first_steps must be 0 or more; got {first_steps}")
    return int(every_n_steps), int(first_steps)


def is_logged(step: int, every_n_steps: int, first_steps: int) -> bool:
    """Whether step `step` (counted from 0 at the start of training) is logged."""
    return 0 <= step < first_steps or step % every_n_steps == 0


def next_logged(step: int, every_n_steps: int, first_steps: int) -> int:
    """The first logged step at or after `step`."""
    if 0 <= step < first_steps:
        return step
    return -(-max(step, first_steps) // every_n_steps) * every_n_steps
