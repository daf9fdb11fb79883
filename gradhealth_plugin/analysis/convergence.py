"""Whether the logged loss explains small gradients and small updates: a loss near zero makes them the
expected result of a model that fits its data, not a fault.

Vanishing gradients (`fitting`): a layer's gradients that, from the start to the onset, shrank no more
than `fitting_gradient_slack` times further than a loss scalar that fell `fitting_loss_drop` times or more
over the same stretch. The start is the median of the layer's first `fitting_start_steps` logged values
(one outlying first step, as a deep net's at its initialisation, sets no baseline). The loss must have
fallen `fitting_loss_drop` times from the lower of its first logged value and its median up to the last of
those steps: a loss that rose right away (a learning rate that blew it up) did not fall, whatever its
inflated median then makes of a later value. At the onset, the loss is its latest finite value at
or before it (a sampled loss has no value at every step). Cross-entropy's gradient near zero loss is about
the loss itself, squared error's its square root: either shrinks no more than the loss does. Gradients
that shrank much further than the loss did are vanishing, and stay so.

Updates too small (`converged`): the loss's latest finite value at the onset is at most
`converged_loss` and at least `converged_loss_drop` times below its first finite (positive) value.

Without a loss logged nothing is ever explained, and the findings stand as they are.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..reading import tags as tags_lib
from ..reading.runs import RunData
from .finding import INFO, Finding
from .metrics import MetricTable
from .spans import Hit


def converged(rd: RunData, onset: int, limits: Mapping[str, float]) -> Optional[dict]:
    """The first loss scalar converged at `onset`, with its values and steps; None if no loss shows that."""
    drop, tiny = limits["converged_loss_drop"], limits["converged_loss"]
    for tag in rd.scalar_series:
        if rd.scalar_kinds.get(tag) != tags_lib.SCALAR_LOSS:
            continue
        steps, values = rd.scalar_steps(tag), np.asarray(rd.scalar_series[tag][1], dtype=np.float64)
        finite = np.flatnonzero(np.isfinite(values) & (steps <= onset))
        if len(finite) < 2:
            continue
        first, at = values[finite[0]], values[finite[-1]]
        if first > 0 and abs(at) <= tiny and abs(at) * drop <= first:
            return {"tag": tag, "value": float(at), "step": int(steps[finite[-1]]), "first_value": float(first),
                    "first_step": int(steps[finite[0]]), "drop": drop, "threshold": tiny}
    return None


def as_note_if_converged(rd: RunData, f: Finding, limits: Mapping[str, float], what: str) -> None:
    """Makes `f` a note, saying so, where the loss had converged at its onset; `what` names what the
    finding saw ('updates this small')."""
    c = converged(rd, f.first_step, limits)
    if c is None:
        return
    f.severity = INFO
    f.no_fault = ("while the loss stays this close to zero", f"if it rises again with {what}")
    f.evidence["converged_loss"] = c
    f.message += (f"; the loss has converged ({c['tag']}: to {c['value']:.3g} at step {c['step']}, from "
                  f"{c['first_value']:.3g} at step {c['first_step']}): {what} are what a loss this close to "
                  "zero gives, not a fault")


def fitting(rd: RunData, role: str, hits: Sequence[Hit], limits: Mapping[str, float]) -> Dict[str, dict]:
    """Layer -> how its gradients and a loss scalar shrank from the start to the layer's onset, for each
    hit that can be measured against a logged loss; "explained" says whether the loss's fall accounts
    for them. Per layer the first loss tag that explains it is used, else the first that measures it."""
    losses = _losses(rd)
    if not losses:
        return {}
    drop, slack = limits["fitting_loss_drop"], limits["fitting_gradient_slack"]
    n = int(limits["fitting_start_steps"])
    tables = {layer.name: table for layer, table in rd.role_rows(role)}
    out: Dict[str, dict] = {}
    for h in hits:
        start = _gradient_start(tables[h.layer], h.first, n) if h.layer in tables else None
        if start is None:
            continue
        metric, g0, g, until = start
        for tag, steps, values in losses:
            fall = _loss_fall(steps, values, until, h.first)
            if fall is None:
                continue
            l0, loss, at, from_first = fall
            # Both ratios are at most about 1 (they shrank); the gradient's may be `slack` times smaller.
            explained = bool(loss * drop <= l0 and g * l0 * slack >= loss * g0)
            figures = {"tag": tag, "metric": metric, "start": g0, "value": g, "start_until": until,
                       "loss_start": l0, "loss_start_first": from_first, "loss": loss, "loss_step": at,
                       "explained": explained}
            if explained or h.layer not in out:
                out[h.layer] = figures
            if explained:
                break
    return out


def _losses(rd: RunData) -> List[Tuple[str, np.ndarray, np.ndarray]]:
    """(tag, steps, values) of each loss scalar's finite values, in step order: every hit then looks its
    onset up by bisection, never scanning the whole series again."""
    out = []
    for tag in rd.scalar_series:
        if rd.scalar_kinds.get(tag) != tags_lib.SCALAR_LOSS:
            continue
        steps, values = rd.scalar_steps(tag), np.asarray(rd.scalar_series[tag][1], dtype=np.float64)
        finite = np.isfinite(values)
        order = np.argsort(steps[finite], kind="stable")
        out.append((tag, np.asarray(steps[finite])[order], values[finite][order]))
    return out


def _gradient_start(table: MetricTable, onset: int, n: int) -> Optional[Tuple[str, float, float, int]]:
    """(metric, its median over the row's first `n` finite positive values up to the onset, its value at
    the onset, the last step of that start), in mean |g| or where a row has none the l2 norm; None if
    neither has both."""
    i = int(np.searchsorted(table.steps, onset))
    if i >= len(table.steps):
        return None
    for metric in ("mean_abs", "l2"):
        values = table.get(metric)[:i + 1]
        good = np.flatnonzero(np.isfinite(values) & (values > 0))[:n]
        if len(good) and np.isfinite(values[i]):
            return metric, float(np.median(values[good])), float(values[i]), int(table.steps[good[-1]])
    return None


def _loss_fall(steps: np.ndarray, values: np.ndarray, until: int,
               onset: int) -> Optional[Tuple[float, float, int, bool]]:
    """(the loss's start: the lower of its first positive value and the median of its positive values up
    to `until`; its latest value at or before `onset`; that value's step; whether the start is the first
    value), or None where the loss has no positive value there. `steps` and `values`: the finite points,
    in step order."""
    k = int(np.searchsorted(steps, onset, side="right"))
    if k == 0 or values[k - 1] <= 0:
        return None
    seen = values[:k]
    first = float(seen[np.argmax(seen > 0)])
    early = seen[:int(np.searchsorted(steps, until, side="right"))]
    early = early[early > 0]
    # The median is robust to a first value's noise; the first value guards against a loss that blew up
    # right away, whose median of early values is the blow-up's, not a start it fell from.
    median = float(np.median(early)) if len(early) else first
    return min(first, median), float(values[k - 1]), int(steps[k - 1]), first < median


def describe_fitting(f: Finding, fits: Mapping[str, dict], limits: Mapping[str, float]) -> None:
    """Says in `f` (its layers all measured by `fitting`) how far the loss and their gradients fell, with
    the figures in its evidence: a note where the loss explains them, else why it does not."""
    drop, slack = limits["fitting_loss_drop"], limits["fitting_gradient_slack"]
    # Where the loss did not fall far, it says nothing about the gradients' size.
    layers = [name for name in f.layers if name in fits and
              (fits[name]["explained"] or fits[name]["loss"] * drop <= fits[name]["loss_start"])]
    if not layers:
        return
    figures = {name: fits[name] for name in layers}
    for name, fig in figures.items():
        f.evidence["layers"][name]["fitting"] = {k: v for k, v in fig.items() if k != "tag"}
    loss_fell = [fig["loss_start"] / fig["loss"] for fig in figures.values()]
    grad_fell = [fig["start"] / fig["value"] if fig["value"] > 0 else np.inf for fig in figures.values()]
    first = min(figures.values(), key=lambda fig: fig["loss_step"])
    tag = first["tag"]
    f.evidence["fitting"] = {"tag": tag, "loss_start": first["loss_start"], "start_until": first["start_until"],
                             "loss_start_first": first["loss_start_first"], "loss": first["loss"], "loss_step": first["loss_step"], "threshold": drop,
                             "slack": slack, "explained": first["explained"]}
    metric = "mean |g|" if all(fig["metric"] == "mean_abs" for fig in figures.values()) else "size"
    loss = (f"the loss fell {_span(loss_fell)} from its start to {'their onsets' if len(layers) > 1 else 'the onset'} "
            f"({tag}: from {first['loss_start']:.3g}, "
            f"{'its first value' if first['loss_start_first'] else 'its median to step ' + str(first['start_until'])}, to "
            f"{first['loss']:.3g} at step {first['loss_step']}"
            f"{', the earliest' if len(set(loss_fell)) > 1 else ''})")
    grads = f"their {metric} fell {_span(grad_fell)}"
    if first["explained"]:
        f.no_fault = ("while the loss keeps falling", "if it stops falling with gradients this small")
        f.message += (f"; {loss}, and their gradients no more than {slack:g}x further ({grads}): gradients "
                      "this small are what a loss this close to zero gives, the model fitting its data, not a fault")
    else:
        f.message += f"; {loss}, but {grads}: more than {slack:g}x further, which the loss's fall does not explain"


def _span(ratios: Sequence[float]) -> str:
    """'3,400x', or '1,200x to 9.1e+06x' over several layers; 'to zero' where a value fell to 0."""
    lo, hi = min(ratios), max(ratios)
    if not np.isfinite(hi):
        return "to zero" if not np.isfinite(lo) else f"{_times(lo)} or to zero"
    return _times(lo) if _times(lo) == _times(hi) else f"{_times(lo)} to {_times(hi)}"


def _times(x: float) -> str:
    """3.2x, 3,400x, 1.2e+07x: a factor as a person reads it, to two figures."""
    if x < 10 or x >= 1e6:
        return f"{x:.2g}x"
    return f"{float(f'{x:.2g}'):,.0f}x"
