"""Gradients that explode: max |g| past an absolute limit, or a norm jumping
far above its running median (seeds 002, 004; the median before the jump is held
while the norm stays that far above it) to above every norm the series had at its
calm steps before, for consecutive logged steps or not back to normal at the next
logged step (still up, vanished, NaN, or the log ends). A one-off outlier that
comes back at the next logged step (a corrupted batch) is a `spike`, and so is a
jump of a gradient that was once larger: noise at a tiny scale, not an explosion, and so
is a jump within the series' own batch-to-batch swings (under `spike_z` times their
robust spread in decades, as a spike is judged). An explosion found by jumps alone counts only
where, at one of its jumps, the layer's max |g| is also above the median of the other layers' max |g|
at that step (`exploding_peer_factor` times it): a parameter whose gradient is tiny by construction
(an attention key bias, a branch faded in) moves by factors at a scale that moves nothing.
An explosion after a calm span of a median window (`spike_window` logged steps)
is a new one, with its own onset and finding.
"""

from __future__ import annotations

import warnings
from typing import Dict, List, Mapping

import numpy as np

from ...reading import tags as tags_lib
from ...reading.runs import RunData
from .. import health
from .. import series as series_lib
from ..finding import CRITICAL, Finding
from ..limits import Line
from ..spans import Hit, group, gt, kept_before, role_tables, stack

KIND = "exploding_gradients"
ORDER = 20
SEVERITY = CRITICAL
LABEL = "Exploding gradients"
METRIC = "max_abs"
NEEDS = (tags_lib.GRADIENT, tags_lib.SCALAR_GRAD_NORM)
ADVICE = ("Clip gradients by global norm, lower the learning rate, use He init for ReLU or Glorot for "
          "tanh/sigmoid, and add BatchNorm (LayerNorm for batches under 4) or residual connections.")
STEPS_NEEDED = "exploding_steps"
CELL_RULES = (
    health.CellRule(KIND, (tags_lib.GRADIENT,), "max_abs", True, "exploding_max_abs", health.CRITICAL, True),
)
THRESHOLDS = (Line(tags_lib.GRADIENT, "max_abs", "exploding_max_abs", "above"),)


def detect(rd: RunData, limits: Mapping[str, float]) -> List[Finding]:
    limit, jump, peers = limits["exploding_max_abs"], limits["exploding_jump"], limits["exploding_peer_factor"]
    window, lasting = int(limits["spike_window"]), int(limits["exploding_steps"])
    scalars = _scalar_hits(rd, limit, jump, window, lasting)
    # A gradient-norm scalar is held to the limit itself: say so where one is in the finding.
    over = f"max |g| or the gradient norm above {limit:g}," if scalars else f"max |g| above {limit:g}"
    large = "" if not peers else (", a layer's max |g| above the other layers' median" if peers == 1 else
                                  f", a layer's max |g| above {peers:g}x the other layers' median")
    what = (f"explode ({over} or the norm jumps {jump:g}x its running median to above its earlier "
            f"calm levels{large})")
    hits = _layer_hits(rd, limit, jump, window, lasting, limits["spike_z"], peers) + scalars
    return [group(rd, KIND, SEVERITY, tags_lib.GRADIENT, part, limit, what, ADVICE)
            for part in _separate(rd, hits, window)]


def _separate(rd: RunData, hits: List[Hit], window: int) -> List[List[Hit]]:
    """Hits cut into explosions, each its own finding: a hit starts a new one when at least `window`
    logged steps (of its own series) passed since every hit so far ended, or when its series already
    has a hit in the current one (its own later explosion, whatever other series did in between)."""
    out: List[Dict[str, Hit]] = []
    end = None
    for h in sorted(hits, key=lambda h: (h.first, h.last)):
        steps = _series_steps(rd, h.layer)
        calm = int(np.count_nonzero((steps > end) & (steps < h.first))) if end is not None else 0
        if end is None or h.layer in out[-1] or (h.first > end and calm >= window):
            out.append({})
            end = h.last
        out[-1][h.layer] = h
        end = max(end, h.last)
    return [list(part.values()) for part in out]


def _series_steps(rd: RunData, name: str) -> np.ndarray:
    layer = rd.layer(name)
    if layer is not None and tags_lib.GRADIENT in layer.roles:
        return layer.roles[tags_lib.GRADIENT].table.steps
    return np.asarray(rd.scalar_steps(name))


def _jumps(values: np.ndarray, window: int, jump: float) -> tuple:
    """(baseline, ratio to it) of norm series (one, or rows of): the running median, held at its
    value before a jump for as long as the norm stays more than `jump` times that value.

    A trailing median alone catches up with a norm that jumps and stays up: half a window
    later the jump reads as the new normal and a persistent explosion as healthy.
    """
    values = np.asarray(values, dtype=np.float64)
    baseline = series_lib.trailing_median(values, window)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = values / baseline
    rows_b, rows_r, rows_v = (a.reshape(-1, a.shape[-1]) for a in (baseline, ratio, values))
    jumping = np.nonzero(gt(rows_r, jump).any(axis=-1))[0]  # only the rows that jump at all
    if len(jumping):
        rows_b[jumping], rows_r[jumping] = held_rows(rows_v[jumping], rows_b[jumping], window, jump)
    return baseline, ratio


def held_rows(values: np.ndarray, baseline: np.ndarray, window: int, jump: float) -> tuple:
    """Baseline and ratio of rows of norm series (2-D, `baseline` their trailing median) with each
    jump's pre-onset baseline held until the norm comes back down (a finite value within `jump` of
    it); after that the running median resumes over the values outside explosions, the held
    baseline standing in where too few remain.

    A row's explosions depend on each other (one's values leave the median that judges the next),
    so they are taken in order: each round finds the next explosion of every row at once, as many
    rounds as the most explosions in one row.
    """
    first = baseline
    baseline, normal = baseline.copy(), values.copy()
    n = values.shape[-1]
    idx = np.arange(n)
    start = np.zeros(len(values), dtype=np.int64)
    live = np.arange(len(values))
    # Offsets of the `window` positions after an explosion, and of each one's trailing window.
    ahead, behind = np.arange(window), np.arange(window) - window
    with np.errstate(invalid="ignore", divide="ignore"):
        while len(live):
            onsets = gt(values[live] / baseline[live], jump) & (idx >= start[live, None])
            keep = onsets.any(axis=-1)
            live, onsets = live[keep], onsets[keep]
            if not len(live):
                break
            a = onsets.argmax(axis=-1)
            held = baseline[live, a][:, None]
            down = (values[live] <= held * jump) & (idx > a[:, None])
            end = np.where(down.any(axis=-1), down.argmax(axis=-1), n)
            span = (idx >= a[:, None]) & (idx < end[:, None])
            normal[live] = np.where(span, np.nan, normal[live])  # the explosion is no part of the normal level
            # After the explosion the running median of the normal values differs from the plain one
            # only where its window reaches back into an explosion: the `window` positions after it.
            later = np.where(np.isfinite(first[live]), first[live], held)
            rows = np.where(idx[None, :] < a[:, None], baseline[live], np.where(span, held, later))
            near = end[:, None] + ahead
            back = near[..., None] + behind
            win = np.where(back >= 0, normal[live[:, None, None], np.clip(back, 0, n - 1)], np.nan)
            enough = np.count_nonzero(~np.isnan(win), axis=-1) >= 3  # as `trailing_median`'s min_points
            med = np.where(enough, series_lib.nanmedian_rows(win), np.nan)
            inside = near < n
            which = np.broadcast_to(np.arange(len(live))[:, None], near.shape)[inside]
            rows[which, near[inside]] = np.where(np.isfinite(med), med, held)[inside]
            baseline[live] = rows
            start[live] = end
        return baseline, values / baseline


def _above_calm(values: np.ndarray, jumped: np.ndarray) -> np.ndarray:
    """Where a value (of a series, or rows of) is above every finite value of its series at the earlier
    steps that did not jump: the series' own scale, which a jump must pass to be an explosion."""
    calm = np.where(~jumped & np.isfinite(values), values, -np.inf)
    before = np.maximum.accumulate(calm, axis=-1)
    before = np.concatenate([np.full(before.shape[:-1] + (1,), -np.inf), before[..., :-1]], axis=-1)
    return np.nan_to_num(values, nan=-np.inf) > before


def _lasting(hit: np.ndarray, level: np.ndarray, baseline: np.ndarray, finite: np.ndarray, min_steps: int,
             jump: float, window: int) -> List[tuple]:
    """(first, last) indices of each explosion: from a run of at least `min_steps` consecutive logged
    steps past a limit, or a run not followed by a logged step back to normal (finite, and `level`
    within `jump` of its running median before the run; none at the end of the log). Later hits belong
    to it until `window` calm logged steps pass (finite, not vanished below a `jump`th of the level
    before it); after those a new explosion must qualify on its own.
    A run that comes back is a spike, not an explosion. `baseline`: the running median of `level`
    (`window` logged steps), computed by the caller for many rows at once.
    """
    runs = series_lib.true_runs(hit, 1)
    out, i = [], 0
    while i < len(runs):
        a, b = runs[i]
        i += 1
        nxt = b + 1
        back = nxt < len(hit) and bool(finite[nxt]) and not (
            np.isfinite(baseline[a]) and level[nxt] < baseline[a] / jump)
        if b - a + 1 < min_steps and back:
            continue
        # Calm: finite and not fallen below a `jump`th of the level before the explosion (vanished
        # gradients after one are its saturation, not a recovery).
        pre = baseline[a]
        calm = finite & ~(np.isfinite(pre) & (np.nan_to_num(level, nan=np.inf) < pre / jump))
        while i < len(runs) and np.count_nonzero(calm[b + 1:runs[i][0]]) < window:
            b = runs[i][1]
            i += 1
        out.append((a, b))
    return out


def _mask(n: int, span: tuple) -> np.ndarray:
    keep = np.zeros(n, dtype=bool)
    keep[span[0]:span[1] + 1] = True
    return keep


def _layer_hits(rd, limit: float, jump: float, window: int, min_steps: int, z: float,
                peers: float) -> List[Hit]:
    layers = list(role_tables(rd, tags_lib.GRADIENT))
    others = _others_max_abs([table for _, table in layers])
    found = {}
    # Layers of equal length are screened together, a row each; only the rows past a limit are
    # then followed step by step (`_lasting`) and build a hit.
    for rows in series_lib.same_length([len(table.steps) for _, table in layers], window):
        tables = [layers[i][1] for i in rows]
        l2, max_abs = stack(tables, lambda t: t.get("l2")), stack(tables, lambda t: t.get("max_abs"))
        baseline, ratio = _jumps(l2, window, jump)
        jumps = gt(ratio, jump)
        jumps &= _past_noise(ratio, jumps, z)
        over, jumped = gt(max_abs, limit), jumps & _above_calm(l2, jumps)
        other = stack(rows.tolist(), lambda i: others[i])
        # No other layer at a step (alone, or the rest non-finite): nothing shows the gradient is small.
        large = ~(max_abs <= peers * other)
        hit = np.nonzero((over | jumped).any(axis=1))[0]
        peak_median = np.zeros_like(max_abs)
        peak_median[hit] = series_lib.trailing_median(max_abs[hit], window)
        for r in hit.tolist():
            table = tables[r]
            finite = np.isfinite(max_abs[r]) & ~gt(table.get("nonfinite"), 0)
            for span in _lasting(over[r] | jumped[r], max_abs[r], peak_median[r], finite, min_steps, jump, window):
                keep = _mask(len(finite), span)
                # Judged per explosion, not per step: one hovering about the others' median stays one.
                if not (over[r] & keep).any() and not (jumped[r] & keep & large[r]).any():
                    continue
                found.setdefault(int(rows[r]), []).append(
                    _layer_hit(layers[rows[r]], max_abs[r], l2[r], baseline[r], ratio[r], other[r],
                               over[r] & keep, jumped[r] & keep, limit, jump))
    return [h for i in sorted(found) for h in found[i]]


def _past_noise(ratio: np.ndarray, jumps: np.ndarray, z: float) -> np.ndarray:
    """Where a norm's jump over its running median stands out of the series' own batch-to-batch swings
    as a spike must: `z` (`spike_z`) times the robust spread, in decades, of the series' other steps
    over their running median (at least 0.03 decades, as for spikes). A norm that swings 100-fold
    between batches does not explode by jumping 10x; a smooth one does."""
    with np.errstate(invalid="ignore", divide="ignore"):
        decades = np.log10(ratio)
    calm = np.where(jumps | ~np.isfinite(decades), np.nan, decades)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        centre = series_lib.nanmedian_rows(calm)
        spread = 1.4826 * series_lib.nanmedian_rows(np.abs(calm - centre[..., None]))
    noise = np.maximum(np.nan_to_num(spread, nan=0.0), 1.4826 * 0.02)
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(decades / noise[..., None], nan=-np.inf) > z


def _layer_hit(layer_table, max_abs, l2, baseline, ratio, other, over, jumped, limit: float, jump: float) -> Hit:
    layer, table = layer_table
    idx = np.nonzero(over | jumped)[0]
    j, value, threshold = _evidence(max_abs, ratio, over, jumped, limit, jump)
    detail = {"metric": "max_abs"} if over.any() else {
        "metric": "l2 / running median", "l2": float(l2[j]), "running_median_l2": float(baseline[j]),
        "max_abs": float(max_abs[j]), "others_median_max_abs": float(other[j])}
    return Hit(layer.name, int(table.steps[idx[0]]), int(table.steps[idx[-1]]), value,
               int(table.steps[j]), detail, table.steps[idx], threshold=threshold,
               after=kept_before(table.steps, int(idx[0])))


def _scalar_hits(rd, limit: float, jump: float, window: int, min_steps: int) -> List[Hit]:
    hits = []
    for tag, (_, values) in rd.scalar_series.items():
        if rd.scalar_kinds.get(tag) != tags_lib.SCALAR_GRAD_NORM:
            continue
        steps = rd.scalar_steps(tag)  # on the layers' axis, also for a norm logged per epoch
        baseline, ratio = _jumps(values, window, jump)
        jumps = gt(ratio, jump)
        over_all, jumped_all = gt(values, limit), jumps & _above_calm(values, jumps)
        level_median = series_lib.trailing_median(values, window)
        for span in _lasting(over_all | jumped_all, values, level_median, np.isfinite(values), min_steps, jump,
                             window):
            keep = _mask(len(values), span)
            over, jumped = over_all & keep, jumped_all & keep
            idx = np.nonzero(over | jumped)[0]
            j, value, threshold = _evidence(values, ratio, over, jumped, limit, jump)
            hits.append(Hit(tag, int(steps[idx[0]]), int(steps[idx[-1]]), value, int(steps[j]),
                            {"source": "scalar", "norm": float(values[j]), "running_median": float(baseline[j])},
                            threshold=threshold))
    return hits


def _evidence(peak, ratio, over, jumped, limit, jump) -> tuple:
    """(index, value, threshold): the largest value past the absolute limit, else the largest jump."""
    if over.any():
        j = int(np.argmax(np.where(over, peak, -np.inf)))
        return j, float(peak[j]), limit
    j = int(np.argmax(np.where(jumped, ratio, -np.inf)))
    return j, float(ratio[j]), jump


# Cells `_others_max_abs` takes the median of at once.
_OTHERS_CELLS = 1 << 18


def _others_max_abs(tables: List) -> List[np.ndarray]:
    """Per gradient table, at each of its steps, the median of the other tables' max |g| at that step
    (NaN where no other has a finite one)."""
    if not tables:
        return []
    distinct = {t.steps.tobytes(): t.steps for t in tables}
    steps = np.unique(np.concatenate(list(distinct.values())))
    at = [np.searchsorted(steps, t.steps) for t in tables]
    grid = np.full((len(tables), len(steps)), np.nan)
    for i, t in enumerate(tables):
        grid[i, at[i]] = t.get("max_abs")
    # A few columns at a time: the median's sort, ranks and picks are each as large as what they sort
    # (1,000 layers x 5,000 steps: 40 MB apiece, ten of them at once).
    width = max(1, _OTHERS_CELLS // max(len(tables), 1))
    for start in range(0, len(steps), width):
        grid[:, start:start + width] = median_of_others(grid[:, start:start + width])
    return [grid[i, at[i]] for i in range(len(tables))]


def median_of_others(values: np.ndarray) -> np.ndarray:
    """For each cell of a 2-D array, the median of the other rows' values in its column, NaN ignored
    (NaN where no other value is). One sort per column: leaving out the cell's own rank shifts the
    indices of the middle values past it by one."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, axis=0)  # NaN last
    ranked = np.take_along_axis(values, order, axis=0)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(len(values))[:, None], order.shape), axis=0)
    n = np.count_nonzero(~np.isnan(values), axis=0) - ~np.isnan(values)  # how many others per cell
    lo, hi = (n - 1) // 2, n // 2
    lo, hi = lo + (lo >= rank), hi + (hi >= rank)
    last = max(len(values) - 1, 0)
    pick = [np.take_along_axis(ranked, np.clip(i, 0, last), axis=0) for i in (lo, hi)]
    with np.errstate(invalid="ignore"):
        return np.where(n > 0, (pick[0] + pick[1]) / 2, np.nan)
