"""findings.py: every rule at its threshold, grouping, evidence, combined causes and the heatmap's statuses.

Runs are built directly as `RunData` (one `MetricTable` per layer and role,
the cell rules scored as the analysis scores them), so each test sets exactly
the metric values a rule looks at.
"""

import json

import numpy as np
import pytest

from gradhealth_plugin.analysis import combine, findings, health, metrics
from gradhealth_plugin.analysis.detectors import no_progress, vanishing_gradients
from gradhealth_plugin.analysis import limits as rules
from gradhealth_plugin.reading import runs
from gradhealth_plugin.reading import tags as T

LIMITS = rules.thresholds()
N = 40
STEPS = np.arange(N, dtype=np.int64) * 10  # logged every 10 steps


# --- builders --------------------------------------------------------------------------------------

def table(steps=STEPS, **values):
    """A metric table with the given values (scalars broadcast), all of exact quality."""
    steps = np.asarray(steps, dtype=np.int64)
    n = len(steps)
    vals = {k: np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)).copy() for k, v in values.items()}
    quality = {k: np.full(n, metrics.EXACT, dtype=np.uint8) for k in vals}
    return metrics.MetricTable(steps=steps, values=vals, quality=quality)


def _noise(seed, n=N, sigma=0.1):
    return np.exp(np.random.default_rng(seed).normal(0.0, sigma, n))


def grad(seed=0, steps=STEPS, **over):
    """A healthy gradient: mean |g| 1e-2, max |g| 0.1, norm 1, a little noise, no vanished values."""
    n = len(steps)
    noise = _noise(seed, n)
    base = dict(mean_abs=1e-2 * noise, max_abs=0.1 * noise, l2=1.0 * noise, std=1.2e-2 * noise, mean=0.0,
                small_fraction=1e-3, zero_fraction=0.0, skewness=0.0, nonfinite=0.0, count=1000.0)
    base.update(over)
    return table(steps, **base)


def weight(seed=0, steps=STEPS, **over):
    """A healthy kernel: mean 0, std 0.1, symmetric, update ratio 1e-3."""
    n = len(steps)
    base = dict(mean=0.0, std=0.1 * _noise(seed, n, 0.01), skewness=0.0, max_abs=0.4, l2=3.0,
                mean_abs=0.08, nonfinite=0.0, update_ratio=1e-3 * _noise(seed + 1, n), count=1000.0)
    base.update(over)
    return table(steps, **base)


def act(seed=0, steps=STEPS, **over):
    """A healthy ReLU output with 10% zeros."""
    base = dict(mean=0.5, std=0.6, zero_fraction=0.1, max_abs=3.0, nonfinite=0.0, count=1000.0)
    base.update(over)
    return table(steps, **base)


def layer(name, kind=T.KIND_KERNEL, shape=None, **roles):
    group = name.rsplit("/", 1)[0]
    rds = {role: runs.RoleData(tags=[f"{role}/{name}"], source="histogram", table=t,
                               health=health.CellHealth(np.zeros(0), np.zeros(0, np.uint8), np.zeros(0, object)))
           for role, t in roles.items()}
    return runs.Layer(name=name, group=group, kind=kind, order=0, roles=rds, shape=shape)


def run(*layers, scalar_series=None, histogram_interval=None, name="r", limits=LIMITS):
    for i, lay in enumerate(layers):
        lay.order = i
        for role, rd in lay.roles.items():
            rd.health = findings.cell_health(rd.table, role, lay.kind, limits)
    steps = [rd.table.steps for lay in layers for rd in lay.roles.values()]
    allsteps = np.unique(np.concatenate(steps)) if steps else np.zeros(0)
    return runs.RunData(run=name, layers=list(layers), scalars={}, unclassified=[], steps_kept=len(allsteps),
                        last_step=int(allsteps[-1]) if len(allsteps) else None,
                        scalar_series=dict(scalar_series or {}), histogram_interval=histogram_interval)


def find(rd, limits=LIMITS):
    return findings.find(rd, limits)


def of_kind(found, kind, severity=None):
    return [f for f in found if f.kind == kind and (severity is None or f.severity == severity)]


def serious(found):
    return [f for f in found if f.severity in (findings.WARN, findings.CRITICAL)]


def one(found, kind, severity=None):
    hits = of_kind(found, kind, severity)
    assert len(hits) == 1, [(f.kind, f.severity, f.message) for f in found]
    return hits[0]


def three_kernels(g=None, w=None):
    """Three dense kernels with healthy gradients and weights; g/w: index -> replacement table."""
    g, w = g or {}, w or {}
    return [layer(f"dense_{i}/kernel", gradient=g.get(i, grad(i)), weight=w.get(i, weight(i))) for i in range(3)]


def assert_evidence(f):
    ev = f.evidence
    for key in ("value", "threshold", "step"):
        assert key in ev, (f.kind, ev)
    assert f.first_step <= ev["step"] <= f.last_step
    assert f.advice and f.advice == f.advice.strip()
    assert f.layers[0] in f.message
    json.dumps(f.to_json())  # must serialise as is


def at(values, idx, v):
    out = np.array(values, dtype=np.float64)
    out[idx] = v
    return out


# --- a healthy run ---------------------------------------------------------------------------------

def healthy_run(n=300, seed=0):
    """Lognormal noise, slowly decaying norms, steady weights, ReLU outputs at 45% zeros, loss falling."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n, dtype=np.int64) * 5
    decay = np.linspace(1.0, 0.3, n)
    layers = []
    for i in range(4):
        noise = np.exp(rng.normal(0.0, 0.3, n))
        scale = 10.0 ** -(i * 0.3)  # earlier layers a little smaller, far from depth vanishing
        g = table(steps, mean_abs=1e-2 * scale * decay * noise, max_abs=0.2 * scale * decay * noise,
                  l2=2.0 * scale * decay * noise, std=1.3e-2 * scale * decay * noise, mean=1e-4 * rng.normal(size=n),
                  small_fraction=2e-3, zero_fraction=0.0, skewness=0.2 * rng.normal(size=n), nonfinite=0.0)
        std = 0.05 * (1 + 0.3 * np.linspace(0, 1, n)) * np.exp(rng.normal(0, 0.01, n))
        w = table(steps, mean=1e-3 * rng.normal(size=n), std=std, skewness=0.1 * rng.normal(size=n),
                  max_abs=4 * std, l2=std * 30, mean_abs=0.8 * std, nonfinite=0.0,
                  update_ratio=1e-3 * np.exp(rng.normal(0, 0.3, n)))
        layers.append(layer(f"dense_{i}/kernel", gradient=g, weight=w))
        b = table(steps, mean=0.01, std=0.02 * np.linspace(0.01, 1, n), skewness=3.0, nonfinite=0.0,
                  max_abs=0.05, l2=0.1)
        layers.append(layer(f"dense_{i}/bias", kind=T.KIND_BIAS,
                            gradient=table(steps, mean_abs=1e-3 * decay * noise, max_abs=1e-2 * decay * noise,
                                           l2=1e-2 * decay * noise, small_fraction=0.0, nonfinite=0.0),
                            weight=b))
        layers.append(layer(f"relu_{i}", kind=T.KIND_OUTPUT,
                            activation=table(steps, zero_fraction=0.45 + 0.03 * rng.normal(size=n), mean=0.3,
                                             std=0.5, max_abs=4.0, nonfinite=0.0)))
    loss = 2.0 * np.exp(-np.arange(n) / 150) * np.exp(rng.normal(0, 0.05, n))
    gnorm = 3.0 * decay * np.exp(rng.normal(0, 0.3, n))
    return run(*layers, scalar_series={"loss": (steps, loss), "grad_norm_total": (steps, gnorm)},
               histogram_interval=5.0)


@pytest.mark.parametrize("seed", range(5))
def test_healthy_run_has_no_warning(seed):
    found = find(healthy_run(seed=seed))
    assert serious(found) == [], [(f.kind, f.message) for f in serious(found)]


def test_healthy_run_cells_are_all_ok_after_findings():
    rd = healthy_run()
    found = find(rd)
    findings.decide_cells(rd, found, LIMITS)
    for lay in rd.layers:
        for role, r in lay.roles.items():
            assert set(r.health.status.tolist()) == {health.OK}, (lay.name, role)


def test_finding_kinds_are_the_contract_vocabulary():
    assert set(findings.KINDS) == set(findings.ADVICE)
    assert set(findings.KINDS) == {
        "nonfinite", "exploding_gradients", "vanishing_gradients", "dead_units", "weight_growth",
        "skewed_distribution", "bimodal_weights", "update_ratio", "spike", "periodic_spikes",
        "depth_vanishing", "init_scale", "no_progress", "rank_divergence"}


# --- exploding_gradients ---------------------------------------------------------------------------

@pytest.mark.parametrize("value,fires", [(0.99e3, False), (1.01e3, True)])
def test_exploding_max_abs_threshold(value, fires):
    g = grad(0)
    g.values["max_abs"] = at(g.values["max_abs"], [20, 21], value)  # two logged steps: it lasts
    found = find(run(*three_kernels(g={0: g})))
    if not fires:
        assert of_kind(found, "exploding_gradients") == []
        return
    f = one(found, "exploding_gradients")
    assert f.severity == findings.CRITICAL
    assert f.layers == ["dense_0/kernel"]
    assert (f.first_step, f.last_step) == (STEPS[20], STEPS[21])
    assert f.evidence["value"] == pytest.approx(value)
    assert f.evidence["threshold"] == 1e3
    assert f.evidence["step"] == STEPS[20]
    assert "dense_0/kernel" in f.message and f"step {STEPS[20]}" in f.message
    assert_evidence(f)


@pytest.mark.parametrize("ratio,fires", [(9.0, False), (11.0, True)])
def test_exploding_norm_jump_against_running_median(ratio, fires):
    g = grad(0, l2=1.0)  # a flat norm: its running median is exactly 1
    g.values["l2"] = at(g.values["l2"], [20, 21], ratio)
    found = find(run(*three_kernels(g={0: g})))
    if not fires:
        assert of_kind(found, "exploding_gradients") == []
        return
    f = one(found, "exploding_gradients")
    assert f.severity == findings.CRITICAL and f.first_step == STEPS[20]
    # The evidence must show why it fired: the jump, not a max |g| far below 1e3.
    assert f.evidence["value"] > f.evidence["threshold"]
    assert f.evidence["threshold"] == LIMITS["exploding_jump"]
    assert f.evidence["step"] == STEPS[20]
    assert_evidence(f)


@pytest.mark.parametrize("back_at", [None, 50])
def test_a_sustained_jump_is_one_explosion_until_it_comes_back_down(back_at):
    # Every gradient of one layer x1e5 from step 25 on (max |g| stays under the absolute limit, but above the
    # other layers'): the running median catches up half a window later, but the level is still 1e5x what it
    # was before the jump.
    steps = np.arange(61, dtype=np.int64)
    end = 61 if back_at is None else back_at
    scale = np.ones(61)
    scale[25:end] = 1e5
    g = grad(0, steps=steps, mean_abs=1e-8 * scale, max_abs=1e-7 * scale, l2=1e-6 * _noise(0, 61) * scale,
             std=1.2e-8 * scale)
    others = [layer(f"dense_{i}/kernel", gradient=grad(i, steps=steps, max_abs=1e-3)) for i in (1, 2)]
    f = one(find(run(layer("dense_0/kernel", gradient=g), *others)), "exploding_gradients")
    assert f.layers == ["dense_0/kernel"]
    assert (f.first_step, f.last_step) == (25, end - 1)
    assert f.points["dense_0/kernel"].tolist() == list(range(25, end))
    assert f.evidence["threshold"] == LIMITS["exploding_jump"]


def test_exploding_jump_needs_a_baseline():
    # The first points have no running median yet; a big first value is not a jump.
    g = grad(0, l2=1.0)
    g.values["l2"] = at(g.values["l2"], 0, 50.0)
    assert of_kind(find(run(*three_kernels(g={0: g}))), "exploding_gradients") == []


def test_exploding_in_three_layers_is_one_finding():
    gs = {}
    onsets = {0: 25, 1: 12, 2: 30}
    for i, onset in onsets.items():
        g = grad(i)
        g.values["max_abs"] = at(g.values["max_abs"], slice(onset, onset + 3), 5e3)
        gs[i] = g
    f = one(find(run(*three_kernels(g=gs))), "exploding_gradients")
    # Listed in model order; the evidence is the earliest onset's (dense_1 at step 12).
    assert f.layers == ["dense_0/kernel", "dense_1/kernel", "dense_2/kernel"]
    assert f.first_step == STEPS[12]
    assert f.last_step == STEPS[32]
    assert f.evidence["step"] == STEPS[12]
    assert set(f.evidence["layers"]) == set(f.layers)
    assert all(name in f.message for name in f.layers)
    assert f"step {STEPS[12]}" in f.message
    assert_evidence(f)


def test_exploding_text_names_the_norm_a_norm_scalar_is_held_to():
    steps = np.arange(0, 400, 10)
    norm = np.full(len(steps), 1.0)
    norm[30:] = 5e3
    found = find(run(*three_kernels(), scalar_series={"grad_norm_total": (steps, norm)}))
    f = one(found, "exploding_gradients")
    assert "max |g| or the gradient norm above 1000" in f.message
    g = grad(0)
    g.values["max_abs"] = at(g.values["max_abs"], slice(20, 30), 5e4)
    f = one(find(run(*three_kernels(g={0: g}))), "exploding_gradients")
    assert "(max |g| above 1000 or" in f.message


def test_a_scalar_judged_with_the_rows_is_named_a_scalar_not_a_layer():
    g = grad(0)
    g.values["max_abs"] = at(g.values["max_abs"], slice(30, None), 5e4)
    steps = np.arange(0, 400, 10)
    norm = np.full(len(steps), 1.0)
    norm[30:] = 5e3
    found = find(run(*three_kernels(g={0: g}), scalar_series={"grad_norm_total": (steps, norm)}))
    f = one(found, "exploding_gradients")
    assert f.layers == ["grad_norm_total", "dense_0/kernel"]
    assert f.message.startswith("scalar `grad_norm_total` and layer `dense_0/kernel`: gradients explode"), f.message


def test_exploding_from_grad_norm_scalar():
    steps = np.arange(200, dtype=np.int64)
    values = _noise(3, 200)
    values[150:152] = 20.0
    found = find(run(*three_kernels(), scalar_series={"grad_norm_total": (steps, values)}))
    f = one(found, "exploding_gradients")
    assert f.layers == ["grad_norm_total"] and f.first_step == 150


def test_exploding_grad_norm_scalar_rising_steadily_past_the_limit():
    # 3% more every step: never near a 10x jump over the running median, but past
    # the absolute limit (1e3) from step 102 on, and never past ten times it.
    steps = np.arange(150, dtype=np.int64)
    values = 50.0 * 1.03 ** steps
    limit = LIMITS["exploding_max_abs"]
    crossing = int(np.argmax(values > limit))
    assert 0 < crossing and values.max() < 10 * limit
    found = find(run(*three_kernels(), scalar_series={"grad_norm": (steps, values)}))
    f = one(found, "exploding_gradients")
    assert f.layers == ["grad_norm"]
    assert f.first_step == crossing and f.last_step == steps[-1]
    assert f.evidence["threshold"] == limit and f.evidence["value"] == pytest.approx(values.max())
    ev = f.evidence["layers"]["grad_norm"]
    assert ev["source"] == "scalar" and ev["threshold"] == limit
    assert ev["norm"] / ev["running_median"] < LIMITS["exploding_jump"]


def test_exploding_grad_norm_scalar_rising_steadily_through_the_routes(tmp_path, plugin_client):
    """The same steady rise logged as PyTorch users log a clipped norm, read back by the findings route."""
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    model = torch.nn.Linear(4, 1)
    steps = range(150)
    writer = SummaryWriter(str(tmp_path / "rising"))
    for step in steps:
        for p in model.parameters():
            p.grad = torch.full_like(p, 50.0 * 1.03 ** step / 5 ** 0.5)  # total norm 50 * 1.03^step
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=float("inf"))
        writer.add_scalar("train/grad_norm", norm.item(), step)
    writer.close()
    limit = LIMITS["exploding_max_abs"]
    crossing = next(s for s in steps if 50.0 * 1.03 ** s > limit)
    client = plugin_client(tmp_path)
    found = [f for f in client.ok("/findings", run="rising")["findings"] if f["kind"] == "exploding_gradients"]
    assert len(found) == 1, found
    assert found[0]["layers"] == ["train/grad_norm"] and found[0]["first_step"] == crossing
    assert found[0]["severity"] == "critical" and found[0]["evidence"]["threshold"] == limit


# --- vanishing_gradients ---------------------------------------------------------------------------

@pytest.mark.parametrize("metric,bad", [("small_fraction", 0.91), ("mean_abs", 0.9e-6)])
@pytest.mark.parametrize("length,fires", [(5, True), (4, False)])
def test_vanishing_threshold_and_duration(metric, bad, length, fires):
    g = grad(0)
    g.values[metric] = at(g.values[metric], slice(10, 10 + length), bad)
    found = find(run(*three_kernels(g={0: g})))
    if not fires:
        assert of_kind(found, "vanishing_gradients") == []
        return
    f = one(found, "vanishing_gradients")
    assert f.severity == findings.WARN
    assert f.layers == ["dense_0/kernel"]
    assert (f.first_step, f.last_step) == (STEPS[10], STEPS[10 + length - 1])
    assert f"step {STEPS[10]}" in f.message
    assert_evidence(f)
    # The evidence's value is the one that crossed its threshold.
    if metric == "small_fraction":
        assert f.evidence["value"] >= f.evidence["threshold"] == LIMITS["vanishing_fraction"]
    else:
        assert f.evidence["value"] < f.evidence["threshold"] == LIMITS["vanishing_abs"]


@pytest.mark.parametrize("metric,good", [("small_fraction", 0.89), ("mean_abs", 1.1e-6)])
def test_vanishing_just_inside_the_healthy_side_never_fires(metric, good):
    g = grad(0)
    g.values[metric] = at(g.values[metric], slice(5, N), good)
    assert of_kind(find(run(*three_kernels(g={0: g}))), "vanishing_gradients") == []


def test_vanishing_short_run_at_the_end_is_reported_as_what_held():
    # Training may have stopped because of it: 3 steps at the very end are reported, but the
    # text says what held rather than the rule's 5 steps, at a severity lower.
    g = grad(0)
    g.values["mean_abs"] = at(g.values["mean_abs"], slice(N - 3, N), 1e-8)
    f = one(find(run(*three_kernels(g={0: g}))), "vanishing_gradients")
    assert f.first_step == STEPS[N - 3] and f.last_step == STEPS[N - 1]
    assert f.severity == findings.INFO
    assert "5+" not in f.message and f"for only the last 3 of {N} logged steps, too few to be sure" in f.message
    assert f.evidence["too_few_steps"] == {"steps_needed": 5, "layers": {"dense_0/kernel": {"last": 3, "of": N}}}


def test_vanishing_that_held_as_stated_says_so():
    g = grad(0)
    g.values["mean_abs"] = at(g.values["mean_abs"], slice(10, 16), 1e-8)
    f = one(find(run(*three_kernels(g={0: g}))), "vanishing_gradients")
    assert f.severity == findings.WARN and "for 5+ logged steps" in f.message and "too few" not in f.message


@pytest.mark.parametrize("needed", [5, 10])
def test_vanishing_on_a_run_of_three_logged_steps_never_claims_more(needed):
    # Three logged steps (0, 100, 200); the gradients vanish at the last two.
    steps = np.array([0, 100, 200])
    gs = {i: grad(i, steps=steps) for i in range(3)}
    gs[0].values["mean_abs"] = at(gs[0].values["mean_abs"], [1, 2], 1e-8)
    limits = rules.thresholds({"vanishing_steps": needed})
    found = find(run(*three_kernels(g=gs), limits=limits), limits)
    f = one(found, "vanishing_gradients")
    assert f"{needed}+" not in f.message
    assert "for only the last 2 of 3 logged steps, too few to be sure" in f.message
    assert f"the rule asks for {needed} in a row" in f.message
    assert f.severity == findings.INFO


def test_a_layer_that_held_and_one_that_only_ended_so_are_two_findings():
    g0, g1 = grad(0), grad(1)
    g0.values["mean_abs"] = at(g0.values["mean_abs"], slice(10, 20), 1e-8)
    g1.values["mean_abs"] = at(g1.values["mean_abs"], slice(N - 2, N), 1e-8)
    found = of_kind(find(run(*three_kernels(g={0: g0, 1: g1}))), "vanishing_gradients")
    by_severity = {f.severity: f for f in found}
    assert set(by_severity) == {findings.WARN, findings.INFO}
    assert by_severity[findings.WARN].layers == ["dense_0/kernel"] and "5+" in by_severity[findings.WARN].message
    assert by_severity[findings.INFO].layers == ["dense_1/kernel"]
    assert "last 2 of 40" in by_severity[findings.INFO].message


def _two_last_steps(table_, metric, value):
    table_.values[metric] = at(table_.values[metric], slice(N - 2, N), value)
    return table_


@pytest.mark.parametrize("kind,build", [
    ("skewed_distribution", lambda: three_kernels(w={0: _two_last_steps(weight(0), "skewness", 5.0)})),
    ("update_ratio", lambda: three_kernels(w={0: _two_last_steps(weight(0), "update_ratio", 0.5)})),
    ("weight_growth", lambda: three_kernels(w={0: _two_last_steps(weight(0), "mean", 3.0)})),
    ("dead_units", lambda: three_kernels() + [layer("relu_0", kind=T.KIND_OUTPUT,
                                                    activation=_two_last_steps(act(0), "zero_fraction", 0.9))]),
])
def test_every_three_step_rule_met_only_at_the_end_is_a_severity_lower(kind, build):
    # Each of these rules needs 3 consecutive logged steps; 2 at the very end are reported as such.
    f = one(find(run(*build())), kind)
    assert f.severity == findings.INFO
    assert f"for only the last 2 of {N} logged steps, too few to be sure (the rule asks for 3 in a row)" in f.message


def test_vanishing_everywhere_is_critical():
    gs = {i: grad(i, mean_abs=1e-8, small_fraction=0.99) for i in range(3)}
    f = one(find(run(*three_kernels(g=gs))), "vanishing_gradients")
    assert f.severity == findings.CRITICAL and len(f.layers) == 3


def _key_bias_run(before=("attn_q/bias", T.KIND_BIAS), from_step=0, quality=metrics.EXACT):
    """A healthy tensor, then one of another module whose gradient is tiny (from `from_step`), then a healthy kernel."""
    tiny = grad(1, mean_abs=at(grad(1).get("mean_abs"), slice(from_step // 10, None), 1e-9),
                small_fraction=at(np.full(N, 1e-3), slice(from_step // 10, None), 1.0))
    first = grad(0)
    first.quality["mean_abs"] = np.full(N, quality, dtype=np.uint8)
    return run(layer(before[0], kind=before[1], gradient=first), layer("attn_k/bias", kind=T.KIND_BIAS, gradient=tiny),
               layer("out/kernel", gradient=grad(2)))


def test_a_gradient_tiny_from_the_start_behind_a_layer_that_gets_gradients_is_a_note():
    rd = _key_bias_run()
    found = find(rd)
    f = one(found, "vanishing_gradients")
    assert f.severity == findings.INFO and f.layers == ["attn_k/bias"]
    assert f.evidence["signal_reaches"] == {"attn_k/bias": "attn_q/bias"}
    assert "layers before it get gradients (`attn_q/bias`)" in f.message and "reaches past it" in f.message
    assert f.advice.startswith("Layers before it get gradients")
    findings.decide_cells(rd, found, LIMITS)
    assert (rd.layer("attn_k/bias").roles[T.GRADIENT].health.status == health.OK).all()


@pytest.mark.parametrize("why, build", [
    ("only its own module, and no kernel of it, before it", lambda: _key_bias_run(before=("attn_k/scale", T.KIND_OTHER))),
    ("it was healthy before", lambda: _key_bias_run(from_step=100)),
    ("the layer before it is only bounded from above", lambda: _key_bias_run(quality=metrics.UPPER_BOUND)),
])
def test_a_gradient_tiny_where_no_earlier_layer_proves_the_signal_passed_stays_vanishing(why, build):
    f = one(find(build()), "vanishing_gradients")
    assert f.severity == findings.WARN and "signal_reaches" not in f.evidence, why


@pytest.mark.parametrize("kernel_mean_abs, cancelled", [(1e-2, True), (1e-4, False)])
def test_a_bias_tiny_beside_its_own_kernels_gradients_is_cancelled_not_vanishing(kernel_mean_abs, cancelled):
    # A bias 5e-7 against its kernel's 1e-2: the signal reaches the module and sums to zero over the bias.
    # Against 1e-4 (200x) inputs of some scale could make the difference: vanishing, as the rule says.
    rd = run(layer("conv/kernel", gradient=grad(0, mean_abs=kernel_mean_abs)),
             layer("conv/bias", kind=T.KIND_BIAS, gradient=grad(1, mean_abs=5e-7, small_fraction=1.0)),
             layer("out/kernel", gradient=grad(2)))
    f = one(find(rd), "vanishing_gradients")
    assert f.layers == ["conv/bias"]
    if cancelled:
        assert f.severity == findings.INFO and f.evidence["signal_reaches"] == {"conv/bias": "conv/kernel"}
        assert "its own kernel gets gradients over 1,000x larger (`conv/kernel`)" in f.message
        assert "bias=False" in f.advice
    else:
        assert f.severity == findings.WARN and "signal_reaches" not in f.evidence


@pytest.mark.parametrize("kernel_steps, cancelled", [(STEPS[::2], True), (STEPS[1:4], False)])
def test_a_kernel_logged_at_fewer_steps_speaks_for_its_bias_only_at_enough_of_them(kernel_steps, cancelled):
    # Every other step (20) are steps enough to prove the signal reached the module; 3 are not (5 needed).
    rd = run(layer("conv/kernel", gradient=grad(0, steps=kernel_steps)),
             layer("conv/bias", kind=T.KIND_BIAS, gradient=grad(1, mean_abs=5e-7, small_fraction=1.0)))
    f = one(find(rd), "vanishing_gradients")
    assert (f.severity, f.evidence.get("signal_reaches")) == (
        (findings.INFO, {"conv/bias": "conv/kernel"}) if cancelled else (findings.WARN, None))


def test_the_first_layers_gradients_tiny_from_the_start_stay_vanishing():
    tiny = grad(0, mean_abs=1e-9, small_fraction=1.0)
    f = one(find(run(layer("dense_0/kernel", gradient=tiny), layer("dense_1/kernel", gradient=grad(1)),
                     layer("dense_2/kernel", gradient=grad(2)))), "vanishing_gradients")
    assert f.severity == findings.WARN and f.layers == ["dense_0/kernel"]


# --- dead_units ------------------------------------------------------------------------------------

@pytest.mark.parametrize("zf,severity", [(0.71, findings.WARN), (0.69, findings.INFO), (0.5, findings.INFO),
                                         (0.31, findings.INFO), (0.29, None)])
def test_dead_units_zero_fraction_bands(zf, severity):
    a = act(0)
    a.values["zero_fraction"] = at(a.values["zero_fraction"], slice(10, 20), zf)
    found = find(run(*three_kernels(), layer("relu_1", kind=T.KIND_OUTPUT, activation=a)))
    dead = of_kind(found, "dead_units")
    if severity is None:
        assert dead == []
        return
    assert [f.severity for f in dead] == [severity]
    f = dead[0]
    assert f.layers == ["relu_1"] and f.first_step == STEPS[10] and f.last_step == STEPS[19]
    assert_evidence(f)


def test_dead_units_ignores_preactivations_and_weights():
    a = act(0, zero_fraction=0.95)
    found = find(run(layer("dense/preactivation", kind=T.KIND_PREACTIVATION, activation=a),
                     layer("dense/kernel", weight=weight(0, zero_fraction=0.95))))
    assert of_kind(found, "dead_units") == []


def test_dead_units_warn_and_info_name_different_layers():
    found = find(run(layer("relu_1", kind=T.KIND_OUTPUT, activation=act(0, zero_fraction=0.8)),
                     layer("relu_2", kind=T.KIND_OUTPUT, activation=act(1, zero_fraction=0.5))))
    assert one(found, "dead_units", findings.WARN).layers == ["relu_1"]
    assert one(found, "dead_units", findings.INFO).layers == ["relu_2"]


# --- weight_growth ---------------------------------------------------------------------------------

def _growing_std(factor):
    std = np.full(N, 0.1)
    std[20:] = 0.1 * factor
    return std


@pytest.mark.parametrize("factor,fires", [(2.9, False), (3.1, True)])
def test_weight_growth_std_threshold(factor, fires):
    w = weight(0, std=_growing_std(factor))
    found = find(run(*three_kernels(w={1: w})))
    if not fires:
        assert of_kind(found, "weight_growth") == []
        return
    f = one(found, "weight_growth")
    assert f.severity == findings.WARN and f.layers == ["dense_1/kernel"] and f.first_step == STEPS[20]
    assert f.evidence["value"] == pytest.approx(factor)
    assert f.evidence["threshold"] == LIMITS["weight_std_growth"]
    assert_evidence(f)


@pytest.mark.parametrize("mean,fires", [(0.99, False), (1.01, True), (-1.01, True)])
def test_weight_growth_abs_mean_threshold(mean, fires):
    w = weight(0)
    w.values["mean"] = at(w.values["mean"], slice(20, N), mean)
    found = find(run(*three_kernels(w={1: w})))
    if not fires:
        assert of_kind(found, "weight_growth") == []
        return
    f = one(found, "weight_growth")
    assert f.first_step == STEPS[20]
    # Fired by |mean|: the evidence shows |mean| against its own threshold, not the std ratio.
    assert f.evidence["value"] == pytest.approx(abs(mean))
    assert f.evidence["threshold"] == LIMITS["weight_abs_mean"]
    assert_evidence(f)


def _ramp(top, until):
    """A weight std rising from 0.1 to `top` x 0.1 over the first `until` logged steps, level after."""
    std = np.full(N, 0.1 * top)
    std[:until] = np.linspace(0.1, 0.1 * top, until)
    return std


def test_weight_growth_says_since_when_it_is_level():
    grew = weight(0, std=_ramp(6.0, 12))
    grows = weight(1, std=np.geomspace(0.1, 1.0, N))  # still rising at the last step, 6% a step
    f = one(find(run(*three_kernels(w={1: grew, 2: grows}))), "weight_growth")
    assert f.layers == ["dense_1/kernel", "dense_2/kernel"]
    # Within 10% of its last value (0.6) from the first step the ramp reaches 0.54.
    since = int(STEPS[np.argmax(_ramp(6.0, 12) >= 0.54)])
    assert f.evidence["layers"]["dense_1/kernel"]["level_since"] == since
    assert "level_since" not in f.evidence["layers"]["dense_2/kernel"]
    assert f.message.endswith(f"; 1 of them stayed within 10% of their last value since step {since}")
    alone = one(find(run(*three_kernels(w={2: grows}))), "weight_growth")
    assert "stayed within" not in alone.message and "level_since" not in str(alone.evidence)


def test_weight_growth_during_too_fast_updates_names_them_as_its_cause():
    fast = 0.5 * (np.arange(N) < 10) + 1e-3  # update ratio above 0.1 for the first 10 logged steps
    grew = weight(0, std=_ramp(6.0, 8), update_ratio=fast)
    f = one(find(run(*three_kernels(w={1: grew}))), "weight_growth")
    assert f.evidence["grown_by_fast_updates"] == ["dense_1/kernel"]
    assert f"; it crossed the limit while updates were too fast (steps 0-{STEPS[9]}, see update ratio)" in f.message
    assert f.cause == "learning_rate_too_high" and f.advice.startswith("Lower the learning rate")
    # Growth that crosses its limit after the fast updates ended is not theirs.
    late = weight(0, std=_growing_std(4.0), update_ratio=fast)
    f = one(find(run(*three_kernels(w={1: late}))), "weight_growth")
    assert "grown_by_fast_updates" not in f.evidence and f.cause is None
    assert f.advice == findings.ADVICE["weight_growth"]


@pytest.mark.parametrize("kind", [T.KIND_BIAS, T.KIND_NORM])
def test_weight_shape_rules_exempt_biases_and_norm_parameters(kind):
    # They start constant (zeros, ones): growth relative to the first std and skew mean nothing.
    w = weight(0, std=_growing_std(50.0), mean=1.5, skewness=4.0)
    rd = run(layer("bn/gamma" if kind == T.KIND_NORM else "dense/bias", kind=kind, weight=w))
    found = find(rd)
    for k in ("weight_growth", "skewed_distribution", "init_scale"):
        assert of_kind(found, k) == [], k
    findings.decide_cells(rd, found, LIMITS)
    assert set(rd.layers[0].roles[T.WEIGHT].health.status.tolist()) == {health.OK}


# --- skewed_distribution ---------------------------------------------------------------------------

@pytest.mark.parametrize("skew,fires", [(1.9, False), (2.1, True), (-1.9, False), (-2.1, True)])
def test_skewness_threshold(skew, fires):
    w = weight(0)
    w.values["skewness"] = at(w.values["skewness"], slice(15, 25), skew)
    found = find(run(*three_kernels(w={2: w})))
    if not fires:
        assert of_kind(found, "skewed_distribution") == []
        return
    f = one(found, "skewed_distribution")
    assert f.severity == findings.WARN and f.layers == ["dense_2/kernel"]
    assert (f.first_step, f.last_step) == (STEPS[15], STEPS[24])
    assert f.evidence["value"] == pytest.approx(abs(skew))
    assert_evidence(f)


def test_skewness_needs_three_steps():
    w = weight(0)
    w.values["skewness"] = at(w.values["skewness"], slice(15, 17), 5.0)
    assert of_kind(find(run(*three_kernels(w={2: w}))), "skewed_distribution") == []


# --- update_ratio ----------------------------------------------------------------------------------

@pytest.mark.parametrize("ratio,fires", [(0.09, False), (0.11, True), (1.1e-6, False), (0.9e-6, True)])
def test_update_ratio_thresholds(ratio, fires):
    w = weight(0)
    w.values["update_ratio"] = at(w.values["update_ratio"], slice(10, 20), ratio)
    found = find(run(*three_kernels(w={0: w})))
    if not fires:
        assert of_kind(found, "update_ratio") == []
        return
    f = one(found, "update_ratio")
    assert f.severity == findings.WARN and f.layers == ["dense_0/kernel"]
    assert (f.first_step, f.last_step) == (STEPS[10], STEPS[19])
    assert f.evidence["value"] == pytest.approx(ratio)
    assert f.evidence["threshold"] == (LIMITS["update_ratio_high"] if ratio > 1e-3 else LIMITS["update_ratio_low"])
    assert_evidence(f)


def test_update_ratio_of_a_zero_initialised_bias_is_not_a_warning():
    # A bias starting at 0 has update/weight ratios of inf, 1, 0.5, ... in its first steps: healthy.
    ur = np.full(N, 1e-3)
    ur[:8] = [np.inf, 1.0, 0.5, 0.33, 0.25, 0.2, 0.15, 0.12]
    b = weight(0, mean=0.0, std=np.linspace(0.0, 0.01, N), update_ratio=ur)
    assert of_kind(find(run(*three_kernels(), layer("dense_0/bias", kind=T.KIND_BIAS, weight=b))),
                   "update_ratio") == []


# --- depth_vanishing -------------------------------------------------------------------------------

@pytest.mark.parametrize("ratio,fires", [(1.1e-3, False), (0.9e-3, True)])
def test_depth_vanishing_first_vs_last_layer(ratio, fires):
    gs = {0: grad(0, mean_abs=1e-2 * ratio), 1: grad(1, mean_abs=1e-3), 2: grad(2, mean_abs=1e-2)}
    found = find(run(*three_kernels(g=gs)))
    assert of_kind(found, "vanishing_gradients") == []  # 1e-5 is far above 1e-6
    if not fires:
        assert of_kind(found, "depth_vanishing") == []
        return
    f = one(found, "depth_vanishing")
    assert f.severity == findings.WARN
    assert f.layers == ["dense_0/kernel", "dense_2/kernel"]
    assert f.evidence["value"] == pytest.approx(ratio)
    assert f.evidence["threshold"] == LIMITS["depth_ratio"]
    assert_evidence(f)


def test_depth_vanishing_says_zero_gradients_in_words():
    gs = {0: grad(0, mean_abs=0.0), 1: grad(1, mean_abs=1e-3), 2: grad(2, mean_abs=1e-2)}
    f = one(find(run(*three_kernels(g=gs))), "depth_vanishing")
    assert "are zero, against a mean |g| of 1.0e-02 at layer `dense_2/kernel` from step" in f.message, f.message
    assert "e+00x" not in f.message


def test_depth_vanishing_needs_three_layers():
    gs = {0: grad(0, mean_abs=1e-8), 1: grad(1, mean_abs=1e-2)}
    layers = three_kernels(g=gs)[:2]
    assert of_kind(find(run(*layers)), "depth_vanishing") == []


# --- nonfinite -------------------------------------------------------------------------------------

def test_nonfinite_in_a_layer():
    g = grad(0)
    g.values["nonfinite"] = at(g.values["nonfinite"], [25, 30], 3.0)
    f = one(find(run(*three_kernels(g={1: g}))), "nonfinite")
    assert f.severity == findings.CRITICAL and f.layers == ["dense_1/kernel"] and f.role == T.GRADIENT
    assert (f.first_step, f.last_step) == (STEPS[25], STEPS[30])
    assert f.evidence["step"] == STEPS[25]
    assert_evidence(f)


def test_nonfinite_loss_scalar():
    steps = np.arange(0, 400, 10)
    loss = np.linspace(2.0, 1.0, len(steps))
    loss[33:] = np.nan
    f = one(find(run(*three_kernels(), scalar_series={"loss": (steps, loss)})), "nonfinite")
    assert f.severity == findings.CRITICAL and f.layers == ["loss"] and f.role is None
    assert f.first_step == 330 and "loss" in f.message and "330" in f.message
    payload = json.loads(json.dumps(f.to_json()))
    assert payload["evidence"]["step"] == 330


def test_infinite_scalar_is_nonfinite_too():
    steps = np.arange(50)
    loss = np.ones(50)
    loss[40] = np.inf
    f = one(find(run(*three_kernels(), scalar_series={"train/loss": (steps, loss)})), "nonfinite")
    assert f.first_step == f.last_step == 40


# --- init_scale ------------------------------------------------------------------------------------

# PyTorch nn.Linear(100, 50).weight has shape (out, in) = (50, 100): He 0.141, Glorot 0.115.
@pytest.mark.parametrize("std,fires", [(0.41, False), (0.44, True), (0.04, False), (0.037, True)])
def test_init_scale_torch_layout(std, fires):
    w = weight(0, std=std)
    found = find(run(layer("fc1.weight", shape=[50, 100], weight=w)))
    if not fires:
        assert of_kind(found, "init_scale") == []
        return
    f = one(found, "init_scale")
    assert f.severity == findings.WARN and f.layers == ["fc1.weight"] and f.first_step == STEPS[0]
    assert f.evidence["layers"]["fc1.weight"]["he_std"] == pytest.approx(np.sqrt(2 / 100))
    assert f.evidence["layers"]["fc1.weight"]["glorot_std"] == pytest.approx(np.sqrt(2 / 150))
    assert_evidence(f)


@pytest.mark.parametrize("shape,fan_in,fan_out", [
    ([100, 50], 100, 50),  # Keras Dense(50) on 100 inputs: (in, out)
    ([3, 3, 64, 128], 576, 1152),  # Keras Conv2D: (kh, kw, in, out)
])
def test_init_scale_keras_layout(shape, fan_in, fan_out):
    glorot = np.sqrt(2 / (fan_in + fan_out))
    he = np.sqrt(2 / fan_in)
    # Keras' default glorot_uniform init is healthy.
    assert of_kind(find(run(layer("dense/kernel", shape=shape, weight=weight(0, std=glorot)))), "init_scale") == []
    found = find(run(layer("dense/kernel", shape=shape, weight=weight(0, std=4 * max(he, glorot)))))
    f = one(found, "init_scale")
    assert f.evidence["layers"]["dense/kernel"]["he_std"] == pytest.approx(he)
    assert f.evidence["layers"]["dense/kernel"]["glorot_std"] == pytest.approx(glorot)


def test_init_scale_torch_conv_layout():
    # nn.Conv2d(64, 128, 3).weight: (out, in, kh, kw); fan_in 576, fan_out 1152.
    he, glorot = np.sqrt(2 / 576), np.sqrt(2 / 1728)
    assert of_kind(find(run(layer("conv1.weight", shape=[128, 64, 3, 3], weight=weight(0, std=he)))),
                   "init_scale") == []
    assert of_kind(find(run(layer("conv1.weight", shape=[128, 64, 3, 3], weight=weight(0, std=glorot / 4)))),
                   "init_scale")


def test_init_scale_needs_a_known_shape():
    assert of_kind(find(run(layer("fc1.weight", weight=weight(0, std=5.0)))), "init_scale") == []


# --- spikes and periodic spikes --------------------------------------------------------------------

def _periodic_norm(period, n=1000, seed=0):
    """A grad-norm scalar logged every step, 10% noise, 5x spikes every `period` steps."""
    steps = np.arange(n, dtype=np.int64)
    values = _noise(seed, n, 0.1)
    values[(steps % period == 0) & (steps > 0)] *= 5.0
    return steps, values


def test_periodic_spikes_at_the_histogram_interval_are_an_artefact():
    rd = run(*three_kernels(), scalar_series={"grad_norm_total": _periodic_norm(50)}, histogram_interval=50.0)
    found = find(rd)
    f = one(found, "periodic_spikes")
    assert f.period == 50 and f.artefact is True and f.severity == findings.INFO
    assert f.layers == ["grad_norm_total"] and f.first_step == 50
    assert "50" in f.message and "artefact" in f.message
    payload = f.to_json()
    assert payload["period"] == 50 and payload["artefact"] is True
    assert of_kind(found, "spike") == []  # the periodic ones are not also reported one by one
    assert serious(found) == []


def test_periodic_spikes_off_the_histogram_interval_are_a_warning():
    rd = run(*three_kernels(), scalar_series={"grad_norm_total": _periodic_norm(37)}, histogram_interval=50.0)
    f = one(find(rd), "periodic_spikes")
    assert f.period == 37 and f.artefact is False and f.severity == findings.WARN
    assert f.to_json()["artefact"] is False
    assert "37" in f.message
    assert_evidence(f)


def test_periodic_spikes_at_a_multiple_of_the_interval_are_an_artefact():
    rd = run(*three_kernels(), scalar_series={"grad_norm_total": _periodic_norm(100)}, histogram_interval=50.0)
    f = one(find(rd), "periodic_spikes")
    assert f.period == 100 and f.artefact is True


def test_one_off_spike_is_info():
    steps = np.arange(500, dtype=np.int64)
    values = _noise(1, 500, 0.1)
    values[250] = 5.0  # below the 10x jump that would make it an explosion
    found = find(run(*three_kernels(), scalar_series={"grad_norm_total": (steps, values)}))
    f = one(found, "spike")
    assert f.severity == findings.INFO and f.first_step == 250 and f.layers == ["grad_norm_total"]
    assert of_kind(found, "periodic_spikes") == [] and of_kind(found, "exploding_gradients") == []


def test_spike_that_is_an_explosion_is_reported_once():
    steps = np.arange(500, dtype=np.int64)
    values = _noise(1, 500, 0.3)
    values[250:252] = 30.0
    found = find(run(*three_kernels(), scalar_series={"grad_norm_total": (steps, values)}))
    assert one(found, "exploding_gradients").first_step == 250
    assert of_kind(found, "spike") == []


def test_spikes_in_pure_noise_scalar_are_not_reported():
    steps = np.arange(800, dtype=np.int64)
    for seed in range(5):
        found = find(run(*three_kernels(), scalar_series={"grad_norm_total": (steps, _noise(seed, 800, 0.3))}))
        assert of_kind(found, "spike") == [] and of_kind(found, "periodic_spikes") == []


def test_spikes_of_one_episode_are_one_finding():
    # A loss diverging over steps 9 to 12: one finding, its four spike steps in the evidence.
    steps = np.arange(200, dtype=np.int64)
    loss = _noise(2, 200, 0.05)
    loss[9:13] = [6.0, 12.0, 30.0, 8.0]
    loss[150] = 6.0  # a later, separate spike
    found = of_kind(find(run(*three_kernels(), scalar_series={"loss": (steps, loss)})), "spike")
    assert [(f.first_step, f.last_step) for f in found] == [(9, 12), (150, 150)]
    assert found[0].evidence["layers"]["loss"]["spike_steps"] == [9, 10, 11, 12]
    assert found[0].to_json()["evidence"]["layers"]["loss"]["spike_steps"] == [9, 10, 11, 12]
    assert "from step 9 to step 12" in found[0].message


def test_spikes_on_a_periodic_grid_fold_into_the_periodic_finding():
    # A bad batch every 35 steps: the global norm, logged every step, shows the period; the layers'
    # gradients, logged every 20 steps, spike where their steps meet it (140, 280) and at 20, off it.
    steps = np.arange(400, dtype=np.int64)
    norm = _noise(3, 400, 0.05)
    norm[(steps % 35 == 0) & (steps > 0)] *= 6.0
    hist_steps = np.arange(0, 400, 20, dtype=np.int64)
    gs = {}
    for i in range(3):
        gs[i] = grad(i, steps=hist_steps)
        gs[i].values["l2"] = at(gs[i].values["l2"], [7, 14], 8.0)  # steps 140 and 280
    gs[1].values["l2"] = at(gs[1].values["l2"], 1, 8.0)  # step 20: not on the grid
    rd = run(*three_kernels(g=gs), scalar_series={"grad_norm_total": (steps, norm)}, histogram_interval=20.0)
    found = find(rd)
    periodic = one(found, "periodic_spikes")
    assert periodic.period == 35 and periodic.severity == findings.WARN
    assert set(periodic.layers) == {"grad_norm_total", "dense_0/kernel", "dense_1/kernel", "dense_2/kernel"}
    assert periodic.evidence["layers"]["dense_0/kernel"]["spike_steps"] == [140, 280]
    # Only the pattern's own series is said to spike every 35 steps; the others where its grid met their steps.
    assert periodic.message.startswith("scalar `grad_norm_total` spikes every 35 steps from step 35 to step")
    assert "`dense_0/kernel`, `dense_1/kernel`, `dense_2/kernel` spike on the same grid, at steps 140 and 280" in \
        periodic.message
    spikes = of_kind(found, "spike")
    assert [(f.first_step, f.layers) for f in spikes] == [(20, ["dense_1/kernel"])]
    # The layers' gradient cells at 140 and 280 are the periodic finding's, and nothing else is.
    findings.decide_cells(rd, found, LIMITS)
    g0 = rd.layer("dense_0/kernel").roles[T.GRADIENT].health
    assert g0.rule[7] == g0.rule[14] == "periodic_spikes" and g0.status[7] == health.WARN
    assert np.count_nonzero(g0.status == health.WARN) == 2
    assert set(rd.layer("dense_0/kernel").roles[T.WEIGHT].health.status.tolist()) == {health.OK}
    _check_consistent(rd, found)


def test_one_nonfinite_finding_per_run_covers_each_row_at_its_own_steps():
    g, w = grad(0), weight(0)
    g.values["nonfinite"] = at(g.values["nonfinite"], slice(30, N), 5.0)
    w.values["nonfinite"] = at(w.values["nonfinite"], slice(32, N), 5.0)
    a = act(0)
    a.values["nonfinite"] = at(a.values["nonfinite"], slice(33, N), 1.0)
    loss = np.linspace(2.0, 1.0, N)
    loss[31:] = np.nan
    rd = run(*three_kernels(g={1: g}, w={1: w}), layer("relu_1", kind=T.KIND_OUTPUT, activation=a),
             scalar_series={"loss": (STEPS, loss)})
    found = find(rd)
    f = one(found, "nonfinite")
    assert f.role is None and f.first_step == STEPS[30]
    assert f.layers == ["loss", "dense_1/kernel", "relu_1"]  # run-level scalars first, then model order
    layers = f.to_json()["evidence"]["layers"]
    assert layers["dense_1/kernel"]["roles"]["gradient"]["first_step"] == STEPS[30]
    assert layers["dense_1/kernel"]["roles"]["weight"]["first_step"] == STEPS[32]
    assert layers["loss"]["first_step"] == STEPS[31]
    assert "(gradients, weights and activations)" in f.message and "scalar `loss`" in f.message
    findings.decide_cells(rd, found, LIMITS)
    lay = rd.layer("dense_1/kernel")
    # The weight row turns critical where its own values do (32), not where its gradient did (30).
    assert lay.roles[T.GRADIENT].health.status[30] == health.CRITICAL
    assert lay.roles[T.WEIGHT].health.status[30] == health.OK
    assert lay.roles[T.WEIGHT].health.status[32] == health.CRITICAL
    _check_consistent(rd, found)
    # What the tab outlines in each role's view is what that role's rows show.
    from gradhealth_plugin.serving import responses

    (sent,) = [x for x in responses.findings_json(rd, found) if x["kind"] == "nonfinite"]
    assert sent["covers_by_role"]["gradient"]["dense_1/kernel"] == [[STEPS[30], STEPS[N - 1]]]
    assert sent["covers_by_role"]["weight"]["dense_1/kernel"] == [[STEPS[32], STEPS[N - 1]]]
    assert sent["covers_by_role"]["activation"] == {"relu_1": [[STEPS[33], STEPS[N - 1]]]}
    assert sent["covers_by_role_text"]["weight"]["dense_1/kernel"] == [[str(STEPS[32]), str(STEPS[N - 1])]]


def test_overshoot_symptoms_before_the_overflow_carry_the_learning_rate_cause():
    g = grad(0)
    g.values["max_abs"] = at(g.values["max_abs"], slice(20, 30), 5e4)
    fast, slow = weight(0), weight(1)
    fast.values["update_ratio"] = at(fast.values["update_ratio"], slice(15, 25), 0.5)
    slow.values["update_ratio"] = at(slow.values["update_ratio"], slice(15, 25), 1e-8)
    loss = np.linspace(2.0, 1.0, N)
    loss[30:] = np.nan
    found = find(run(*three_kernels(g={0: g}, w={0: fast, 1: slow}), scalar_series={"loss": (STEPS, loss)}))
    too_fast, too_slow = sorted(of_kind(found, "update_ratio"), key=lambda f: f.evidence["direction"])
    assert too_fast.evidence["direction"] == "too_high" and too_fast.cause == "learning_rate_too_high"
    assert too_fast.to_json()["cause"] == "learning_rate_too_high" and "learning rate" in too_fast.message
    # Updates too small are no sign of a learning rate too high.
    assert too_slow.cause is None and "cause" not in too_slow.to_json()


# --- combined symptoms -----------------------------------------------------------------------------

def test_exploding_with_nan_loss_points_to_the_learning_rate():
    g = grad(0)
    g.values["max_abs"] = at(g.values["max_abs"], slice(20, 30), 5e4)
    loss = np.linspace(2.0, 1.0, N)
    loss[30:] = np.nan
    found = find(run(*three_kernels(g={0: g}), scalar_series={"loss": (STEPS, loss)}))
    exploding = one(found, "exploding_gradients")
    nan = one(found, "nonfinite")
    assert exploding.cause == nan.cause == "learning_rate_too_high"
    assert "learning rate" in exploding.message and "learning rate" in nan.message
    assert exploding.to_json()["cause"] == "learning_rate_too_high"
    # Most severe first.
    assert [f.severity for f in found][:2] == [findings.CRITICAL, findings.CRITICAL]


def test_no_cause_without_both_symptoms():
    g = grad(0)
    g.values["max_abs"] = at(g.values["max_abs"], slice(20, 30), 5e4)
    found = find(run(*three_kernels(g={0: g})))
    assert one(found, "exploding_gradients").cause is None
    assert "cause" not in one(found, "exploding_gradients").to_json()


def test_vanishing_with_dead_units_points_to_dying_relus():
    g = grad(0, mean_abs=1e-8)
    found = find(run(*three_kernels(g={0: g}),
                     layer("relu_0", kind=T.KIND_OUTPUT, activation=act(0, zero_fraction=0.9))))
    assert one(found, "vanishing_gradients").cause == "dead_relu"
    assert one(found, "dead_units", findings.WARN).cause == "dead_relu"


def test_gradients_that_vanished_before_the_units_died_are_not_blamed_on_them():
    g = grad(0, mean_abs=1e-8)  # vanished from the first logged step
    dying = act(0, zero_fraction=at(np.full(N, 0.1), slice(20, None), 0.9))  # dead from step 200
    found = find(run(*three_kernels(g={0: g}), layer("relu_0", kind=T.KIND_OUTPUT, activation=dying)))
    vanishing, dead = one(found, "vanishing_gradients"), one(found, "dead_units", findings.WARN)
    assert vanishing.first_step == 0 and dead.first_step == STEPS[20]
    assert vanishing.cause is None and "dying ReLUs" not in vanishing.message
    # The units died with nothing left for them to stop: no cause on them either.
    assert dead.cause is None and "dying ReLUs" not in dead.message


def _overshooting(fast_from: int):
    """Gradients of dense_0 exploding at logged steps 20-29, its updates too fast from `fast_from` to 24,
    relu_0's units dead from 22 and dense_1's gradients vanished from 25: Adam at a learning rate far too
    high, without a NaN."""
    g, vanished = grad(0), grad(1)
    g.values["max_abs"] = at(g.values["max_abs"], slice(20, 30), 5e4)
    vanished.values["mean_abs"] = at(vanished.values["mean_abs"], slice(25, None), 1e-8)
    fast = weight(0)
    fast.values["update_ratio"] = at(fast.values["update_ratio"], slice(fast_from, 25), 0.5)
    dying = act(0, zero_fraction=at(np.full(N, 0.1), slice(22, None), 0.9))
    return find(run(*three_kernels(g={0: g, 1: vanished}, w={0: fast}),
                    layer("relu_0", kind=T.KIND_OUTPUT, activation=dying)))


def test_exploding_with_updates_already_too_fast_points_to_the_learning_rate():
    found = _overshooting(fast_from=15)
    exploding, too_fast = one(found, "exploding_gradients"), one(found, "update_ratio")
    assert exploding.cause == too_fast.cause == "learning_rate_too_high", exploding.message
    assert exploding.message.endswith(f"; together with updates too fast from step {STEPS[15]} this points to a "
                                      "learning rate that is too high")
    assert exploding.advice.startswith("Lower the learning rate")
    # Dead units that began during the explosion are one more symptom of the overshoot, and the
    # gradients they stopped share its cause rather than being blamed on dying ReLUs alone.
    dead, vanishing = one(found, "dead_units", findings.WARN), one(found, "vanishing_gradients")
    assert dead.cause == "learning_rate_too_high" and "exploding gradients and updates too fast" in dead.message
    assert vanishing.cause == "learning_rate_too_high", vanishing.message
    assert f"ReLU units dead from step {STEPS[22]} stop the gradient" in vanishing.message
    assert "not to dying ReLUs alone" in vanishing.message


def test_updates_too_fast_only_after_the_explosion_began_name_no_learning_rate():
    found = _overshooting(fast_from=21)
    assert one(found, "exploding_gradients").cause is None and one(found, "update_ratio").cause is None
    # The dead units and the gradients they stopped are then dying ReLUs, as without an explosion.
    assert one(found, "dead_units", findings.WARN).cause == one(found, "vanishing_gradients").cause == "dead_relu"


# --- thresholds are overridable --------------------------------------------------------------------

def test_threshold_override_moves_the_boundary():
    g = grad(0)
    g.values["max_abs"] = at(g.values["max_abs"], [20, 21], 500.0)
    limits = rules.thresholds({"exploding_max_abs": 100})
    assert of_kind(find(run(*three_kernels(g={0: g}), limits=limits), limits), "exploding_gradients")
    assert of_kind(find(run(*three_kernels(g={0: g}))), "exploding_gradients") == []


# --- decide_cells: the tab and the findings never disagree --------------------------------------

BANDS = {health.OK: (0.6, 1.0), health.WARN: (0.25, 0.6), health.CRITICAL: (0.0, 0.25)}


def _covered(f, lay, role, steps):
    if f.severity == findings.INFO or lay.name not in f.spans or (f.role is not None and f.role != role):
        return np.zeros(len(steps), dtype=bool)
    first, last = f.spans[lay.name]
    mask = (steps >= first) & (steps <= last)
    points = f.points_of(lay.name, role)
    if points is not None:
        mask &= np.isin(steps, points)
    return mask


def _check_consistent(rd, found):
    findings.decide_cells(rd, found, LIMITS)
    severity_code = {findings.WARN: health.WARN, findings.CRITICAL: health.CRITICAL}
    for lay in rd.layers:
        for role, r in lay.roles.items():
            steps = r.table.steps
            status, rule, score = r.health.status, r.health.rule, r.health.score
            worst = np.full(len(steps), health.OK)
            for f in found:
                cov = _covered(f, lay, role, steps)
                code = severity_code.get(f.severity, health.OK)
                worst = np.where(cov & (code > worst), code, worst)
                # Every cell a finding covers has at least that status, and a rule of a finding covering it.
                assert np.all(status[cov] >= code), (f.kind, lay.name, role)
            present = status != health.NO_DATA
            assert np.array_equal(status[present], worst[present]), (lay.name, role)
            for code, (lo, hi) in BANDS.items():
                sel = status == code
                assert np.all((score[sel] >= lo) & (score[sel] <= hi)), (lay.name, role, code)
            bad = status >= health.WARN
            kinds_here = {f.kind for f in found if np.any(_covered(f, lay, role, steps))}
            assert set(rule[bad].tolist()) <= kinds_here
            # An ok cell names a rule only where that kind's cell rule fired there, no warning covering it.
            ok = status == health.OK
            fired = np.array([""] + [c.name for c in findings.detectors.CELL_RULES], dtype=object)[r.health.fired]
            assert np.array_equal(rule[ok], fired[ok]), (lay.name, role)


def _troubled_run(*extra_layers):
    g0 = grad(0)
    g0.values["max_abs"] = at(g0.values["max_abs"], [12, 13, 18, 19], 5e3)  # two explosions, healthy in between
    g1 = grad(1)
    g1.values["mean_abs"] = at(g1.values["mean_abs"], slice(5, 11), 1e-8)
    g1.values["mean_abs"] = at(g1.values["mean_abs"], slice(25, 31), 1e-8)
    g1.values["small_fraction"] = at(g1.values["small_fraction"], 20, 0.95)  # a lone step: cell rule only
    g2 = grad(2)
    g2.values["nonfinite"] = at(g2.values["nonfinite"], 35, 1.0)
    w1 = weight(1, std=_growing_std(4.0))
    w2 = weight(2)
    w2.values["skewness"] = at(w2.values["skewness"], [3, 4], 3.0)  # two steps: cell rule only
    a = act(0)
    a.values["zero_fraction"] = at(a.values["zero_fraction"], slice(30, N), 0.9)
    loss = np.linspace(2, 1, N)
    loss[36:] = np.nan
    return run(*three_kernels(g={0: g0, 1: g1, 2: g2}, w={1: w1, 2: w2}),
               layer("relu_0", kind=T.KIND_OUTPUT, activation=a), *extra_layers,
               scalar_series={"loss": (STEPS, loss)})


def test_decide_cells_statuses_match_findings():
    rd = _troubled_run()
    found = find(rd)
    kinds = {f.kind for f in serious(found)}
    assert {"exploding_gradients", "vanishing_gradients", "nonfinite", "weight_growth", "dead_units"} <= kinds
    _check_consistent(rd, found)


def test_decide_cells_lone_cell_rule_without_finding_is_ok():
    rd = _troubled_run()
    # Before: the cell rules alone flag the lone vanishing step and the two skewed steps.
    g1 = rd.layer("dense_1/kernel").roles[T.GRADIENT].health
    w2 = rd.layer("dense_2/kernel").roles[T.WEIGHT].health
    assert g1.status[20] == health.WARN and w2.status[3] == health.WARN
    findings.decide_cells(rd, find(rd), LIMITS)
    g1 = rd.layer("dense_1/kernel").roles[T.GRADIENT].health
    w2 = rd.layer("dense_2/kernel").roles[T.WEIGHT].health
    # Ok, held at the top of ok, and naming the rule that held there, for fewer steps than a finding needs.
    assert g1.status[20] == health.OK and g1.rule[20] == "vanishing_gradients" and g1.score[20] == pytest.approx(0.6001)
    held = findings.held(rd.layer("dense_1/kernel").roles[T.GRADIENT], 20, [], "dense_1/kernel", T.GRADIENT, LIMITS)
    assert (held["steps_in_a_row"], held["steps_needed"]) == (1, LIMITS["vanishing_steps"]), held
    assert w2.status[3] == health.OK and 0.6 < w2.score[3] <= 1.0 and w2.rule[3] == "skewed_distribution"


def test_decide_cells_marks_only_the_problem_steps():
    rd = _troubled_run()
    findings.decide_cells(rd, find(rd), LIMITS)
    g0 = rd.layer("dense_0/kernel").roles[T.GRADIENT].health
    assert g0.status[12] == g0.status[18] == health.CRITICAL and g0.rule[12] == "exploding_gradients"
    assert g0.status[15] == health.OK
    # Vanishing in two separate spans: the healthy steps between them stay ok.
    g1 = rd.layer("dense_1/kernel").roles[T.GRADIENT].health
    assert np.all(g1.status[5:11] == health.WARN) and np.all(g1.status[25:31] == health.WARN)
    assert g1.status[15] == health.OK and g1.status[20] == health.OK
    assert g1.rule[5] == "vanishing_gradients"


@pytest.mark.parametrize("seed", range(3))
def test_decide_cells_random_runs(seed):
    # Random problems in random places: whatever is found, the statuses agree with it.
    rng = np.random.default_rng(seed)
    gs, ws = {}, {}
    for i in range(3):
        g = grad(i)
        for metric, bad in (("max_abs", 5e3), ("mean_abs", 1e-8), ("small_fraction", 0.95), ("nonfinite", 2.0)):
            start = int(rng.integers(0, N - 1))
            g.values[metric] = at(g.values[metric], slice(start, start + int(rng.integers(1, 8))), bad)
        gs[i] = g
        w = weight(i)
        for metric, bad in (("skewness", 3.0), ("update_ratio", 0.5), ("mean", 2.0)):
            start = int(rng.integers(0, N - 1))
            w.values[metric] = at(w.values[metric], slice(start, start + int(rng.integers(1, 8))), bad)
        ws[i] = w
    rd = run(*three_kernels(g=gs, w=ws))
    _check_consistent(rd, find(rd))


def test_findings_are_sorted_most_severe_first():
    # A ReLU at 50% zeros from the first step: an info finding that starts before every other,
    # so the three severities come out of the rules in an order the sort has to change.
    found = find(_troubled_run(layer("relu_1", kind=T.KIND_OUTPUT, activation=act(1, zero_fraction=0.5))))
    assert {f.severity for f in found} == {findings.INFO, findings.WARN, findings.CRITICAL}
    by_start = sorted(found, key=lambda f: f.first_step)
    assert by_start[0].severity == findings.INFO and by_start[1].severity == findings.WARN
    ranks = [findings.SEVERITY_RANK[f.severity] for f in found]
    assert ranks == sorted(ranks, reverse=True)
    # Within a severity, earliest first.
    for severity in (findings.INFO, findings.WARN, findings.CRITICAL):
        starts = [f.first_step for f in found if f.severity == severity]
        assert starts == sorted(starts)


# --- many layers judged at once: the same answers as one layer at a time -----------------------------

def _mixed_run(seed, n_layers=24):
    """Layers of three kinds, two lengths and several roles, with random problems: every stacked group."""
    rng = np.random.default_rng(seed)
    layers = []
    for i in range(n_layers):
        steps = STEPS if i % 3 else STEPS[:25]
        kind = (T.KIND_KERNEL, T.KIND_BIAS, T.KIND_OUTPUT)[i % 4 % 3]
        g, w = grad(i, steps=steps), weight(i, steps=steps, count=5000.0)
        for t, problems in ((g, (("max_abs", 5e3), ("mean_abs", 1e-8), ("small_fraction", 0.95), ("nonfinite", 2.0),
                                 ("l2", 40.0))),
                            (w, (("skewness", 3.0), ("update_ratio", 0.5), ("mean", 2.0), ("bimodal_dip", 0.1)))):
            for metric, bad in problems:
                if rng.random() < 0.4:
                    start = int(rng.integers(0, len(steps) - 1))
                    t.values[metric] = at(t.get(metric), slice(start, start + int(rng.integers(1, 8))), bad)
        roles = {"gradient": g, "weight": w} if kind != T.KIND_OUTPUT else {"activation": act(i, steps=steps)}
        if kind == T.KIND_OUTPUT and rng.random() < 0.5:
            roles["activation"].values["zero_fraction"] = at(roles["activation"].values["zero_fraction"],
                                                             slice(10, 20), 0.9)
        layers.append(layer(f"block_{i}/t", kind=kind, **roles))
    return run(*layers)


@pytest.mark.parametrize("seed", range(4))
def test_detectors_judge_each_layer_of_many_as_if_alone(monkeypatch, seed):
    # Folding the findings after a run's non-finite collapse into it is run-wide by design (another
    # layer's collapse folds this one's later findings): left out here, it is tested on its own.
    monkeypatch.setattr(combine, "fold_after_nonfinite", lambda found: found)
    # So is an explosion's comparison with the other layers' max |g| (exploding_peer_factor): off here.
    alike = rules.thresholds({"exploding_peer_factor": 0})
    # And vanishing gradients' look at the layers before (the signal reaching past a layer): off here.
    monkeypatch.setattr(vanishing_gradients, "_bypassed", lambda *args: {})
    rd = _mixed_run(seed)
    found = find(rd, alike)
    assert len({f.kind for f in found}) >= 5, [f.kind for f in found]
    for lay in rd.layers:
        alone = find(run(layer(lay.name, kind=lay.kind, **{r: d.table for r, d in lay.roles.items()})), alike)

        def evidence(found, severity=lambda f: f.severity):
            return {f"{f.kind} {severity(f)} {f.role}": {k: v for k, v in f.to_json()["evidence"]["layers"][lay.name]
                                                         .items() if k != "others_median_max_abs"}
                    for f in found if f.kind != "depth_vanishing" and lay.name in f.evidence.get("layers", {})}

        # A layer vanishing alone is all the gradients there are: critical, where among others it is a warning
        # (a severity lower either way where it held too briefly to be sure).
        assert evidence(found) == evidence(alone, lambda f: findings.WARN if f.kind == "vanishing_gradients"
                                           and "too_few_steps" not in f.evidence else f.severity), lay.name


@pytest.mark.parametrize("seed", range(3))
def test_cell_rules_score_stacked_tables_as_each_table_alone(seed):
    rd = _mixed_run(seed)
    for role in (T.GRADIENT, T.WEIGHT):
        tables = [lay.roles[role].table for lay in rd.layers
                  if role in lay.roles and len(lay.roles[role].table.steps) == N]
        stacked = health.rule_health(metrics.stack_tables(tables), role, T.KIND_KERNEL, LIMITS,
                                     findings.detectors.CELL_RULES)
        for i, t in enumerate(tables):
            alone = findings.cell_health(t, role, T.KIND_KERNEL, LIMITS)
            assert np.array_equal(stacked.score[i], alone.score, equal_nan=True)
            assert stacked.status[i].tolist() == alone.status.tolist()
            assert stacked.rule[i].tolist() == alone.rule.tolist()


def test_decided_cells_say_where_their_score_rests_on_an_estimate_uniform_rows_without_a_byte_a_cell():
    exact, from_buckets, partly = grad(), grad(seed=1), grad(seed=2)
    from_buckets.quality["l2"][:] = metrics.ESTIMATED
    partly.quality["max_abs"][5:9] = metrics.LOWER_BOUND
    rd = run(layer("d/a", **{T.GRADIENT: exact}), layer("d/b", **{T.GRADIENT: from_buckets}),
             layer("d/c", **{T.GRADIENT: partly}))
    findings.decide_cells(rd, find(rd), LIMITS)
    held = {lay.name: lay.roles[T.GRADIENT].health.estimated for lay in rd.layers}
    assert held["d/a"].tolist() == [False] * N and held["d/b"].tolist() == [True] * N
    # Alike at every step: one value broadcast, not a byte a cell.
    assert held["d/a"].strides == (0,) and held["d/b"].strides == (0,)
    assert held["d/c"].tolist() == [5 <= i < 9 for i in range(N)]


def test_cell_rules_read_stacked_quality_as_each_table_alone():
    # An update ratio known only as a lower bound (a weight logged without its update): under the floor it
    # proves nothing, in a stacked table as in the table alone.
    bounded = weight(0, update_ratio=1e-9)
    bounded.quality["update_ratio"] = np.full(len(STEPS), metrics.LOWER_BOUND, dtype=np.uint8)
    tables = [weight(1), bounded, weight(2, update_ratio=1e-9)]
    stacked = health.rule_health(metrics.stack_tables(tables), T.WEIGHT, T.KIND_KERNEL, LIMITS,
                                 findings.detectors.CELL_RULES)
    for i, t in enumerate(tables):
        alone = findings.cell_health(t, T.WEIGHT, T.KIND_KERNEL, LIMITS)
        assert np.array_equal(stacked.score[i], alone.score, equal_nan=True), i
        assert stacked.rule[i].tolist() == alone.rule.tolist(), i
    # The bounded row is not judged "barely moves": its cells stay ok, naming the rule as not judged there;
    # the same values known exactly are judged.
    assert set(stacked.rule[1]) == {"update_ratio"} and stacked.unproven[1].all()
    assert (stacked.status[1] == health.OK).all()
    assert set(stacked.rule[2]) == {"update_ratio"} and not stacked.unproven[2].any()
    assert (stacked.status[2] > health.OK).all()


@pytest.mark.parametrize("cells_at_once", [1, 100, 1 << 17])
def test_decide_cells_of_many_layers_equal_each_row_decided_alone(monkeypatch, cells_at_once):
    monkeypatch.setattr(findings, "_CELLS_AT_ONCE", cells_at_once)  # chunks of one row, of a few, of all
    rd = _mixed_run(7)
    found = find(rd)
    findings.decide_cells(rd, found, LIMITS)
    severity_code = {findings.WARN: health.WARN, findings.CRITICAL: health.CRITICAL}
    for lay in rd.layers:
        for role, r in lay.roles.items():
            alone = findings.cell_health(r.table, role, lay.kind, LIMITS)
            status = alone.status.copy()
            status[status != health.NO_DATA] = health.OK
            rule = np.where(status == health.OK, "", None).astype(object)
            for f in found:
                covered = _covered(f, lay, role, r.table.steps) & (status != health.NO_DATA)
                code = severity_code.get(f.severity, health.OK)
                rule = np.where(covered & (status < code), f.kind, rule)
                status = np.where(covered & (status < code), code, status)
            # An ok cell where a cell rule fired names it.
            rule = np.where((status == health.OK) & (alone.status > health.OK), alone.rule, rule)
            assert r.health.status.tolist() == status.tolist(), (lay.name, role)
            assert r.health.rule.tolist() == rule.tolist(), (lay.name, role)
            assert np.array_equal(r.health.score, health.in_band(alone.score, status), equal_nan=True)


def test_a_cells_rule_is_held_in_one_byte_and_decodes_to_the_kind_that_decided_it():
    """A long run holds millions of cells: each one's rule is a one-byte code, not a pointer a cell,
    decoded through `health.rule_names` to the worst finding covering it (None without data); an ok cell
    names the cell rule that fired there, too briefly for a finding, or "" where none did."""
    health.rule_code("a_rule_no_cell_names")  # the kinds' codes need not follow their order
    rd = _mixed_run(3)
    found = find(rd)
    findings.decide_cells(rd, found, LIMITS)
    kinds = set()
    for lay in rd.layers:
        for role, r in lay.roles.items():
            codes = r.health.rule_codes
            assert codes.dtype == np.uint8 and codes.nbytes == len(r.table.steps), (lay.name, role)
            names = health.rule_names()[codes]
            alone = findings.cell_health(r.table, role, lay.kind, LIMITS).rule
            for j in range(len(codes)):
                status = int(r.health.status[j])
                worst = [f for f in serious(found) if _covered(f, lay, role, r.table.steps)[j]]
                worst.sort(key=lambda f: f.severity != findings.CRITICAL)
                want = None if status == health.NO_DATA else worst[0].kind if worst else alone[j]
                assert names[j] == r.health.rule_at(j) == want, (lay.name, role, j)
                kinds.add(want)
    assert len(kinds - {None, ""}) >= 2, kinds


def test_a_spike_inside_a_span_only_finding_far_apart_is_explained():
    # A NaN loss at steps 0 and 2**62: its finding has a span but no points. Whether a spike lies
    # in it is a comparison; the steps in between were once built as a set.
    far = 2 ** 62
    nan_loss = findings.Finding(run="r", kind="nonfinite", severity=findings.CRITICAL, layers=["loss"], first_step=0,
                                last_step=far, evidence={}, message="", advice="", spans={"loss": (0, far)})

    def spike(step):
        return findings.Finding(run="r", kind="spike", severity=findings.INFO, layers=["loss", "grad_norm"],
                                first_step=step, last_step=step, evidence={"layers": {"loss": {}, "grad_norm": {}}},
                                message="", advice="", spans={"loss": (step, step), "grad_norm": (step, step)})

    kept = combine.drop_explained_spikes([nan_loss, spike(far // 2), spike(far + 1)])
    assert [(f.kind, f.first_step, f.layers) for f in kept] == [
        ("nonfinite", 0, ["loss"]), ("spike", far // 2, ["grad_norm"]), ("spike", far + 1, ["loss", "grad_norm"])]


# --- a one-off is a spike, not an explosion ---------------------------------------------------------

def _norm_spike(idx, value=50.0, **over):
    """The whole gradient scaled at `idx`: its norm to `value` (about 1 elsewhere), max |g| alike."""
    g = grad(0, l2=_noise(7, N, 0.05), **over)
    g.values["l2"] = at(g.values["l2"], idx, value)
    g.values["max_abs"] = at(g.values["max_abs"], idx, value * 0.1)
    return g


def test_one_off_jump_that_comes_back_is_a_spike_not_an_explosion():
    found = find(run(*three_kernels(g={0: _norm_spike(20)})))
    assert of_kind(found, "exploding_gradients") == []
    f = one(found, "spike")
    # 50x its neighbours: under spike_warn_jump, a note.
    assert f.first_step == STEPS[20] and f.layers == ["dense_0/kernel"] and f.severity == findings.INFO


def test_one_off_max_abs_past_the_limit_is_no_explosion():
    g = grad(0)
    g.values["max_abs"] = at(g.values["max_abs"], 20, 5e3)
    assert of_kind(find(run(*three_kernels(g={0: g}))), "exploding_gradients") == []


def test_a_jump_that_never_comes_back_is_an_explosion():
    # At the last logged step, and followed by nothing but NaN: neither returned below the limits.
    last = one(find(run(*three_kernels(g={0: _norm_spike(N - 1)}))), "exploding_gradients")
    assert last.first_step == STEPS[-1]
    g = _norm_spike(20)
    for metric in ("l2", "max_abs"):
        g.values[metric] = at(g.values[metric], slice(21, N), np.nan)
    g.values["nonfinite"] = at(g.values["nonfinite"], slice(21, N), 5.0)
    assert one(find(run(*three_kernels(g={0: g}))), "exploding_gradients").first_step == STEPS[20]


def test_a_jump_after_which_the_gradients_vanish_is_an_explosion():
    # Saturated by the jump, the layer passes no gradient back: not a return to normal.
    g = _norm_spike(20)
    g.values["max_abs"] = at(g.values["max_abs"], slice(21, 24), 0.0)
    assert one(find(run(*three_kernels(g={0: g}))), "exploding_gradients").first_step == STEPS[20]


def test_exploding_steps_is_a_threshold():
    limits = rules.thresholds({"exploding_steps": 1})
    rd = run(*three_kernels(g={0: _norm_spike(20)}), limits=limits)
    assert one(find(rd, limits), "exploding_gradients").first_step == STEPS[20]


# --- update ratio from the weights alone ------------------------------------------------------------

def _bounded_weight(l2, steps, low=None, high=None):
    """A weight row without update tags: exact norms, or estimated ones with their proven interval."""
    t = table(steps, l2=l2, std=0.1, mean=0.0, count=1000.0)
    if low is not None:
        t.values.update(l2_low=np.asarray(low, float), l2_high=np.asarray(high, float))
        t.quality["l2"] = np.full(len(steps), metrics.ESTIMATED, dtype=np.uint8)
    return t


def test_update_ratio_lower_bound_divides_growth_and_shrink_correctly():
    # Doubling over 5 steps needs a mean ratio of at least 2^(1/5) - 1 per step; halving, (1 - 1/2) / 5.
    steps = np.array([0, 5, 10, 11])
    ratio, quality = metrics.update_ratio_lower_bound(_bounded_weight([1.0, 2.0, 1.0, 1.0], steps))
    assert np.isnan(ratio[0]) and ratio[1:] == pytest.approx([2 ** 0.2 - 1, 0.1, 0.0])
    assert quality.tolist() == [metrics.NO_DATA] + [metrics.LOWER_BOUND] * 3


def test_update_ratio_lower_bound_takes_the_norms_at_their_least_favourable_ends():
    steps = np.array([0, 1, 2])
    t = _bounded_weight([1.0, 1.5, 1.0], steps, low=[0.9, 1.35, 0.9], high=[1.1, 1.65, 1.1])
    ratio, _ = metrics.update_ratio_lower_bound(t)
    assert ratio[1:] == pytest.approx([1.35 / 1.1 - 1, 1 - 1.1 / 1.35])
    # Estimated norms without their interval prove nothing.
    t = _bounded_weight([1.0, 1.5, 1.0], steps, low=[np.nan] * 3, high=[np.nan] * 3)
    assert np.isnan(metrics.update_ratio_lower_bound(t)[0]).all()


@pytest.mark.parametrize("writer", ["tf2", "v1"])
def test_l2_bounds_contain_the_true_norm(writer):
    rng = np.random.default_rng(0)
    arrays, norms = [], []
    for i in range(20):
        x = rng.normal(0.0, 10.0 ** rng.uniform(-3, 1), size=int(rng.integers(2, 5000))) + rng.normal(0, 0.1)
        if writer == "tf2":  # TF2: 30 equal buckets between the data's min and max
            counts, edges = np.histogram(x, bins=30)
            buckets = np.stack([edges[:-1], edges[1:], counts], axis=1)
        else:  # a v1 exponential grid, the outer edges clamped to the data's range
            grid = np.concatenate([-np.logspace(2, -12, 400), [0.0], np.logspace(-12, 2, 400)])
            counts, edges = np.histogram(x, bins=grid)
            keep = counts > 0
            buckets = np.stack([np.maximum(edges[:-1], x.min()), np.minimum(edges[1:], x.max()), counts], axis=1)[keep]
        arrays.append(buckets)
        norms.append(np.linalg.norm(x))
    low, high = metrics.l2_bounds(metrics.stack_histograms(np.arange(20), np.zeros(20), arrays))
    assert (low <= np.array(norms)).all() and (np.array(norms) <= high).all()
    assert (high / low < 1.6).all()


def _run_with_bound(ratio_at_step_5, **limits_over):
    limits = rules.thresholds(limits_over)
    w = weight(0)
    w.values["update_ratio"] = at(np.zeros(N), 0, np.nan)
    w.values["update_ratio"] = at(w.values["update_ratio"], 5, ratio_at_step_5)
    w.quality["update_ratio"] = np.where(np.isnan(w.values["update_ratio"]), metrics.NO_DATA,
                                         metrics.LOWER_BOUND).astype(np.uint8)
    rd = run(*three_kernels(w={0: w}), limits=limits)
    return rd, find(rd, limits)


def test_a_lower_bound_above_the_ceiling_is_a_finding_labelled_as_a_bound():
    _, found = _run_with_bound(0.2)
    f = one(found, "update_ratio")
    assert f.layers == ["dense_0/kernel"] and f.first_step == f.last_step == STEPS[5]
    assert f.evidence["quality"] == "lower_bound" and f.evidence["layers"]["dense_0/kernel"]["quality"] == "lower_bound"
    assert "lower bound" in f.message
    assert of_kind(_run_with_bound(0.09)[1], "update_ratio") == []
    assert of_kind(_run_with_bound(0.2, update_ratio_bound_steps=2)[1], "update_ratio") == []


def test_a_lower_bound_under_the_floor_proves_nothing():
    # Zero (no proven change) at every step: no "barely move" finding, and no cell rule fires.
    rd, found = _run_with_bound(0.0)
    assert of_kind(found, "update_ratio") == []
    cell = rd.layer("dense_0/kernel").roles[T.WEIGHT].health
    assert (cell.status[1:] == health.OK).all()


# --- weights that never change ----------------------------------------------------------------------

def _frozen_weight(n_steps=N):
    steps = STEPS[:n_steps]
    return table(steps, mean=0.01, std=0.1, min=-0.4, max=0.41, l2=3.0, mean_abs=0.08, skewness=0.1,
                 kurtosis=0.2, zero_fraction=0.0, count=1000.0, max_abs=0.41, nonfinite=0.0)


def test_weights_identical_at_every_step_never_change():
    f = one(find(run(*three_kernels(w={1: _frozen_weight()}))), "update_ratio")
    assert f.layers == ["dense_1/kernel"] and (f.first_step, f.last_step) == (STEPS[0], STEPS[-1])
    assert "show no change although their gradients flow" in f.message
    assert f.evidence["layers"]["dense_1/kernel"]["gradient_max_abs"] > 0
    # No gradient logged: only what the weights show.
    f = one(find(run(layer("dense_1/kernel", weight=_frozen_weight()))), "update_ratio")
    assert f.message.endswith(f"show no change: their histogram is identical at every logged step (any change "
                              f"is smaller than the histogram shows) from step {STEPS[0]} to step {STEPS[-1]}")


def test_weights_that_change_once_or_are_logged_twice_are_not_frozen():
    w = _frozen_weight()
    w.values["max"] = at(w.values["max"], 30, 0.42)
    assert of_kind(find(run(*three_kernels(w={1: w}))), "update_ratio") == []
    assert of_kind(find(run(layer("dense_1/kernel", weight=_frozen_weight(2)))), "update_ratio") == []
    limits = rules.thresholds({"frozen_steps": 2})
    assert of_kind(find(run(layer("dense_1/kernel", weight=_frozen_weight(2)), limits=limits), limits),
                   "update_ratio")


def test_weights_standing_still_behind_vanished_gradients_are_the_vanishing_finding():
    lay = layer("dense_1/kernel", weight=_frozen_weight(), gradient=grad(1, mean_abs=1e-9, max_abs=1e-8))
    found = find(run(lay))
    assert of_kind(found, "update_ratio") == [] and of_kind(found, "vanishing_gradients")


# --- init_scale from element counts -----------------------------------------------------------------

def _dense_with_bias(std, steps=STEPS, fan_in=256, fan_out=64):
    std = std * _noise(0, len(steps), 0.01)
    return (layer("dense/kernel", weight=weight(0, steps=steps, std=std, count=float(fan_in * fan_out))),
            layer("dense/bias", kind=T.KIND_BIAS, weight=weight(1, steps=steps, std=0.0, count=float(fan_out))))


def test_init_scale_fans_from_the_bias_count():
    f = one(find(run(*_dense_with_bias(1.0))), "init_scale")
    ev = f.evidence["layers"]["dense/kernel"]
    assert (ev["fan_in"], ev["fan_out"], ev["matches"]) == (256, 64, "standard_normal")
    assert ev["he_std"] == pytest.approx(np.sqrt(2 / 256)) and ev["glorot_std"] == pytest.approx(np.sqrt(2 / 320))
    assert "standard normal" in f.message
    assert of_kind(find(run(*_dense_with_bias(np.sqrt(2 / 256)))), "init_scale") == []


def test_init_scale_judges_only_a_first_step_at_the_start():
    later = STEPS + 100
    assert of_kind(find(run(*_dense_with_bias(1.0, steps=later))), "init_scale") == []
    limits = rules.thresholds({"init_scale_max_step": 100})
    assert of_kind(find(run(*_dense_with_bias(1.0, steps=later), limits=limits), limits), "init_scale")


def test_init_scale_needs_counts_that_divide():
    w, b = _dense_with_bias(1.0)
    b.roles[T.WEIGHT].table.values["count"][:] = 63.0
    assert of_kind(find(run(w, b)), "init_scale") == []


# --- no_progress ------------------------------------------------------------------------------------

def _loss(improvement, n=100, seed=0):
    steps = np.arange(n, dtype=np.int64)
    return steps, np.linspace(1.0, 1.0 - improvement, n) * _noise(seed, n, 0.01)


@pytest.mark.parametrize("improvement,fires", [(0.0, True), (0.02, True), (0.05, False), (-0.5, True)])
def test_no_progress_threshold(improvement, fires):
    found = find(run(*three_kernels(), scalar_series={"train/loss": _loss(improvement)}))
    if not fires:
        assert of_kind(found, "no_progress") == []
        return
    f = one(found, "no_progress")
    assert f.severity == findings.WARN and f.layers == ["train/loss"] and (f.first_step, f.last_step) == (0, 99)
    assert f.evidence["layers"]["train/loss"]["points"] == 100
    assert_evidence(f)


def test_a_loss_that_fell_and_rose_again_gets_worse_from_its_lowest_step():
    steps = np.arange(300, dtype=np.int64)
    loss = np.where(steps < 150, 2.0 * np.exp(-steps / 10) + 0.01, 0.9) * _noise(0, 300, 0.01)
    f = one(find(run(*three_kernels(), scalar_series={"loss": (steps, loss)})), "no_progress")
    assert f.message.startswith("the loss gets worse (`loss`): ")
    lowest = int(np.argmin(loss))
    assert 100 <= lowest < 150 and f.message.endswith(f"; it was lowest, {loss[lowest]:.4g}, at step {lowest}")
    stalled = one(find(run(*three_kernels(), scalar_series={"loss": _loss(0.0)})), "no_progress")
    assert stalled.message.startswith("the loss does not improve (`loss`): ") and "lowest" not in stalled.message


def test_a_loss_blown_up_right_away_gets_worse_against_its_first_value():
    """Adam at a learning rate far too high: 0.7 at step 0, millions right after, settling near 50. Its
    first tenth's median is the blow-up's, which the end is far below; its first value is not."""
    steps = np.arange(300, dtype=np.int64)
    loss = np.where(steps == 0, 0.7, 5e6 * np.exp(-steps / 3.0) + 50.0) * _noise(0, 300, 0.05)
    f = one(find(run(*three_kernels(), scalar_series={"loss": (steps, loss)})), "no_progress")
    assert f.message.startswith("the loss gets worse (`loss`): "), f.message
    assert f"against {loss[0]:.4g}, its first value (step 0), below the median of its first tenth" in f.message
    assert f.message.endswith(f"; it was lowest, {loss[0]:.4g}, at step 0"), f.message
    judged = f.evidence["layers"]["loss"]
    assert judged["from_first"] and judged["first_median"] == loss[0] and judged["worse"], judged
    # A loss whose first value is its usual level is judged against its first tenth, as before; so is a
    # flat one whose first value came out low by about twice its noise: one noisy value is no start.
    stalled = one(find(run(*three_kernels(), scalar_series={"loss": _loss(0.0)})), "no_progress")
    assert "in its first tenth" in stalled.message and "first value" not in stalled.message
    steps, flat = _loss(0.0, n=300)
    flat[0] = np.median(flat) * 0.98
    stalled = one(find(run(*three_kernels(), scalar_series={"loss": (steps, flat)})), "no_progress")
    assert stalled.message.startswith("the loss does not improve") and "first value" not in stalled.message


def test_a_blown_up_loss_bouncing_far_above_its_first_value_gets_worse_by_a_sign_test():
    """Adam far too high, chaotic after its blow-up: its last tenth bounces between a third of its first value
    and hundreds of times it (median 17 times it), a noise that hides the rise of its median, but 29 of its
    30 values lie above where it began. Back near its first value (15 of 30 above), it does not get worse."""
    steps = np.arange(300, dtype=np.int64)
    bounce = 12.0 * _noise(0, 300, 1.3)
    loss = np.where(steps == 0, 0.7, 5e6 * np.exp(-steps / 3.0) + bounce)
    f = one(find(run(*three_kernels(), scalar_series={"loss": (steps, loss)})), "no_progress")
    judged = f.evidence["layers"]["loss"]
    assert judged["improvement"] + judged["noise_margin"] > 0 and judged["above"] == 29, judged
    assert f.message.startswith("the loss gets worse (`loss`): "), f.message
    back = np.where(steps == 0, 0.7, 5e6 * np.exp(-steps / 3.0) + 0.7 * _noise(1, 300, 1.3))
    judged = no_progress._judge(steps, back, 8)
    assert judged["from_first"] and judged["above"] == 15 and not judged["worse"], judged


def test_no_progress_needs_enough_points_and_every_loss_stuck():
    assert of_kind(find(run(*three_kernels(), scalar_series={"loss": _loss(0.0, n=7)})), "no_progress") == []
    # Tenths of fewer than 3 values (one stray value moves their medians) prove nothing: not judged.
    assert of_kind(find(run(*three_kernels(), scalar_series={"loss": _loss(0.0, n=11)})), "no_progress") == []
    assert of_kind(find(run(*three_kernels(), scalar_series={"loss": _loss(0.0, n=29)})), "no_progress") == []
    assert one(find(run(*three_kernels(), scalar_series={"loss": _loss(0.0, n=30)})), "no_progress")
    # A training loss that improves while the validation loss does not: no stalled run.
    series = {"train/loss": _loss(0.3), "val/loss": _loss(0.0, seed=1)}
    assert of_kind(find(run(*three_kernels(), scalar_series=series)), "no_progress") == []


def test_a_loss_stuck_until_it_turns_nan_is_no_progress_up_to_there():
    """A loss is judged for progress up to its first NaN or Inf; what follows is the nonfinite finding's."""
    steps, loss = _loss(0.0)
    loss[60:] = np.nan
    found = find(run(*three_kernels(), scalar_series={"loss": (steps, loss)}))
    stalled = one(found, "no_progress")
    assert (stalled.first_step, stalled.last_step) == (0, 59) and one(found, "nonfinite")
    assert "its 10 logged values before it turned NaN or Inf at step 60" in stalled.message
    assert "over its first 10, a tenth of its 100 each" in stalled.message, stalled.message


def test_a_loss_judged_up_to_its_nan_is_no_progress_only_where_it_sat_still():
    steps, falling = _loss(0.5)
    falling[60:] = np.inf
    assert of_kind(find(run(*three_kernels(), scalar_series={"loss": (steps, falling)})), "no_progress") == []
    # Noisy at first and then stuck, as a run with a learning rate too high for it: tenths of the run's
    # length, not of its finite part, whose first tenth would be the first fall alone.
    first_fall = np.where(steps < 4, 3.0 - 0.15 * steps, 2.3) * _noise(3, 100, 0.01)
    first_fall[60:] = np.nan
    assert one(find(run(*three_kernels(), scalar_series={"loss": (steps, first_fall)})), "no_progress")
    # Rising into its NaN, or blowing up early, is the nonfinite finding's alone.
    rising = np.where(steps < 40, 1.0, np.exp((steps - 40) / 5.0)) * _noise(0, 100, 0.01)
    rising[70:] = np.nan
    found = find(run(*three_kernels(), scalar_series={"loss": (steps, rising)}))
    assert of_kind(found, "no_progress") == [] and one(found, "nonfinite")
    # NaN before two tenths of the run are logged: too early to tell.
    _, early = _loss(0.0)
    early[19:] = np.nan
    assert of_kind(find(run(*three_kernels(), scalar_series={"loss": (steps, early)})), "no_progress") == []


@pytest.mark.parametrize("level,hint", [(np.log(10) * 1.006, "ln 10"), (np.log(2), "ln 2"), (1.5, None),
                                        (np.log(20), None)])
def test_a_stuck_loss_at_ln_k_says_it_is_a_uniform_guess(level, hint):
    steps = np.arange(100, dtype=np.int64)
    f = one(find(run(*three_kernels(), scalar_series={"loss": (steps, level * _noise(0, 100, 0.01))})),
            "no_progress")
    if hint is None:
        assert "uniform guess" not in f.message
    else:
        assert f"is about {hint} = " in f.message and "a uniform guess among" in f.message


# --- after a collapse -------------------------------------------------------------------------------

def _collapsed(recovers):
    w = weight(2)
    bad = slice(20, 21) if recovers else slice(20, N)
    w.values["nonfinite"] = at(w.values["nonfinite"], bad, 10.0)
    g = grad(1)
    g.values["mean_abs"] = at(g.values["mean_abs"], slice(25, N), 1e-9)
    return run(*three_kernels(g={1: g}, w={2: w}))


def test_findings_after_a_collapse_fold_into_it():
    found = find(_collapsed(recovers=False))
    assert of_kind(found, "vanishing_gradients") == []
    nan = one(found, "nonfinite")
    assert nan.evidence["collapse_step"] == STEPS[20]
    assert [c["kind"] for c in nan.evidence["consequences"]] == ["vanishing_gradients"]
    assert "1 later finding (vanishing_gradients)" in nan.message
    json.dumps(nan.to_json())


def test_findings_after_a_transient_overflow_stand_on_their_own():
    found = find(_collapsed(recovers=True))
    assert one(found, "vanishing_gradients").first_step == STEPS[25]
    nan = one(found, "nonfinite")
    assert nan.evidence["collapse_step"] is None and "consequences" not in nan.evidence


def test_no_progress_is_not_read_into_a_few_bouncing_values():
    """Under 20 values each tenth is one value: a per-batch loss bouncing by 10% early in training
    proves no stall, nor do 15 flat values at ln 2 (a last third of 5: too few steps for a sign test);
    22 of them do (a last third of 8, 7 steps: a stall at chance)."""
    steps = np.arange(15, dtype=np.int64)
    bouncing = 1.386 * (1 + 0.1 * np.sin(np.arange(15) * 2.1))
    bouncing[-1] = bouncing[0]  # not lower at the end than at the start
    assert of_kind(find(run(*three_kernels(), scalar_series={"loss": (steps, bouncing)})), "no_progress") == []
    # Smooth, so its noise is small, but moving: up by 6% and back, not flat.
    hump = 1.4 + 0.08 * np.sin(np.pi * np.arange(15) / 14)
    assert of_kind(find(run(*three_kernels(), scalar_series={"loss": (steps, hump)})), "no_progress") == []
    flat = 0.693 + 0.001 * np.sin(np.arange(15))
    assert of_kind(find(run(*three_kernels(), scalar_series={"loss": (steps, flat)})), "no_progress") == []
    steps = np.arange(22, dtype=np.int64)
    flat = 0.693 + 0.001 * np.sin(np.arange(22))
    stall = one(find(run(*three_kernels(), scalar_series={"loss": (steps, flat)})), "no_progress")
    assert stall.message.startswith("the loss stalled at chance level"), stall.message


def test_a_loss_still_falling_near_ln_k_has_not_settled_at_chance():
    """A healthy classifier starts at ln 10 and leaves it slowly: 22 values falling at every step, all within
    1% of ln 10, fall at more steps than a sign test at 1% allows by chance: no stall at chance."""
    steps = np.arange(22, dtype=np.int64)
    falling = 2.312 - 0.0013 * steps
    assert of_kind(find(run(*three_kernels(), scalar_series={"loss": (steps, falling)})), "no_progress") == []


def _swinging_norm(seed):
    """A gradient norm that swings about 100-fold between batches (0.5 decades of log-normal noise):
    a small or noisy layer's, healthy."""
    return np.exp(np.random.default_rng(seed).normal(0.0, 1.3, N))


def test_a_norm_that_swings_100_fold_between_batches_does_not_explode():
    # Judged as a spike is: a 10x jump over the running median is within such a norm's own swings.
    for seed in range(40):
        found = find(run(*three_kernels(g={0: grad(0, l2=_swinging_norm(seed))})))
        assert of_kind(found, "exploding_gradients") == [], seed


def test_a_swinging_norm_that_jumps_far_past_its_swings_and_stays_up_explodes():
    l2 = _swinging_norm(8)
    l2[30:] *= 1e5
    f = one(find(run(*three_kernels(g={0: grad(0, l2=l2)}))), "exploding_gradients")
    assert f.layers == ["dense_0/kernel"] and f.first_step == STEPS[30] and f.severity == findings.CRITICAL


def test_a_blow_up_after_the_gradients_vanished_in_an_explosion_is_the_same_explosion():
    # Vanished gradients after an explosion are its saturation, not calm: a later excursion past the
    # limit, however far on, belongs to it (and its cells are critical), not to a spike.
    noise = _noise(3)
    level = np.where(np.arange(N) < 10, 1.0, 1e-12) * noise
    level[[10, 11, 30]] = 1e5
    g = grad(0, l2=level, max_abs=0.1 * level)
    f = one(find(run(*three_kernels(g={0: g}))), "exploding_gradients")
    assert f.first_step == STEPS[10] and STEPS[30] in f.points["dense_0/kernel"], f.points


def test_group_sustained_on_many_layers_looks_each_layer_up_once_and_says_what_a_scan_said(monkeypatch):
    """A rule held on many layers: each hit's layer is found by name (not by scanning the run's
    layers a hit at a time), and the findings are those the scan gave: sure hits in one finding,
    hits that held only at the end (each row its own step count) in another a severity lower."""
    from gradhealth_plugin.analysis import spans

    n = 400
    lays = [layer(f"l{i:03d}/kernel", **{T.WEIGHT: weight(i, steps=STEPS[:N - i % 7])}) for i in range(n)]
    rd = run(*lays)
    hits = []
    for i, lay in enumerate(lays):
        steps = lay.roles[T.WEIGHT].table.steps
        # Every third layer: the last 3 steps only (too few for a rule of 5); the others 10 steps in the middle.
        points = steps[-3:] if i % 3 == 0 else steps[10:20]
        hits.append(spans.Hit(layer=lay.name, first=int(points[0]), last=int(points[-1]), value=float(i),
                              step=int(points[0]), points=points))
    # The scan's answer, worked out from each layer's own steps.
    tails = {h.layer: spans.short_tail(rd.layer(h.layer).roles[T.WEIGHT].table.steps, h.points, 5) for h in hits}
    looked_up = []
    scan = runs.RunData.layer
    monkeypatch.setattr(runs.RunData, "layer", lambda self, name: looked_up.append(name) or scan(self, name))
    out = spans.group_sustained(rd, "update_ratio", findings.WARN, T.WEIGHT, hits, 0.1, "moved", "", 5)
    assert looked_up == []
    sure, unsure = out
    assert sure.severity == findings.WARN and unsure.severity == findings.INFO
    assert sure.layers == [lay.name for i, lay in enumerate(lays) if i % 3]
    assert unsure.layers == [lay.name for i, lay in enumerate(lays) if i % 3 == 0]
    assert unsure.evidence["too_few_steps"]["layers"] == {
        name: {"last": tails[name][0], "of": tails[name][1]} for name in unsure.layers}
    assert {tails[name][1] for name in unsure.layers} == {N - k for k in range(7)}
