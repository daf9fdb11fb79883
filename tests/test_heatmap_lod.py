"""The heatmap's level of detail: a window of steps and a column budget.

A run longer than the budget is sent in bins of steps, each cell the worst of its
bin with the step it came from, so one bad step shows whatever the zoom; within
the budget every step is sent as before. Answers are cached per data version.
"""

from __future__ import annotations

import base64
import gzip
import json

import numpy as np
import pytest

from gradhealth_plugin.serving import analyzer as analyzer_lib
from tests.test_bad_input import append_events, call, event, hist_value, normal_buckets, write_run

STEPS = 400
BAD_STEP = 237  # layer b's gradients are NaN here, and only here
SPIKE_STEP = 151  # layer a's gradients are a thousand times larger here, and only here
COLUMNS = 40
CRITICAL = 3


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    rng = np.random.default_rng(15)
    logdir = tmp_path_factory.mktemp("long_run")
    nan = np.stack([np.full(30, np.nan), np.full(30, np.nan), np.zeros(30)], axis=1)
    events = []
    for s in range(STEPS):
        a = normal_buckets(rng, scale=10.0 if s == SPIKE_STEP else 1e-2)
        b = nan if s == BAD_STEP else normal_buckets(rng)
        events.append(event(s, hist_value("gradients/a/kernel", a), hist_value("gradients/b/kernel", b),
                            hist_value("gradients/c/kernel", normal_buckets(rng))))
    write_run(logdir / "long", events)
    return logdir


def _column_of(hm: dict, step: int) -> int:
    """The binned column whose steps hold `step`."""
    first = [int(s) for s in hm["steps_text"]]
    last = [int(s) for s in hm["steps_last_text"]]
    (j,) = [j for j, (a, b) in enumerate(zip(first, last)) if a <= step <= b]
    return j


def _check_bins_against_full(binned: dict, full: dict) -> None:
    """Every binned cell holds the worst status of its bin, and the full answer's value and rule at its step."""
    col = {s: j for j, s in enumerate(full["steps"])}
    first = [int(s) for s in binned["steps_text"]]
    last = [int(s) for s in binned["steps_last_text"]]
    for i in range(len(binned["layers"])):
        for j, (a, b) in enumerate(zip(first, last)):
            inside = [col[s] for s in full["steps"] if a <= s <= b]
            worst = max(full["status"][i][k] for k in inside)
            at = col[a + binned["step_offsets"][i][j]]
            assert a <= full["steps"][at] <= b
            assert binned["status"][i][j] == worst == full["status"][i][at], (i, j)
            assert binned["values"][i][j] == full["values"][i][at]
            assert binned["rules"][i][j] == full["rules"][i][at]


def test_one_bad_step_keeps_its_bin_bad_and_names_its_step(long_run, loader_client):
    client = loader_client(long_run)
    full = client.ok("/heatmap", run="long", role="gradient", metric="health")
    assert len(full["steps"]) == STEPS and full["binned"] is False
    binned = client.ok("/heatmap", run="long", role="gradient", metric="health", columns=COLUMNS)
    assert binned["binned"] is True and 1 < len(binned["steps"]) <= COLUMNS
    b = binned["layers"].index("b/kernel")
    j = _column_of(binned, BAD_STEP)
    assert binned["status"][b][j] == CRITICAL and binned["rules"][b][j] == "nonfinite"
    assert int(binned["steps_text"][j]) + binned["step_offsets"][b][j] == BAD_STEP
    _check_bins_against_full(binned, full)
    # A metric: the value at the spike, the most extreme of its bin, not an average.
    full = client.ok("/heatmap", run="long", role="gradient", metric="max_abs")
    binned = client.ok("/heatmap", run="long", role="gradient", metric="max_abs", columns=COLUMNS)
    a = binned["layers"].index("a/kernel")
    j = _column_of(binned, SPIKE_STEP)
    assert int(binned["steps_text"][j]) + binned["step_offsets"][a][j] == SPIKE_STEP
    assert binned["values"][a][j] == full["values"][a][full["steps"].index(SPIKE_STEP)] > 1.0
    _check_bins_against_full(binned, full)


def test_within_the_budget_every_step_is_sent_as_without_one(long_run, loader_client):
    client = loader_client(long_run)
    for metric in ("health", "std"):
        plain = client.ok("/heatmap", run="long", role="gradient", metric=metric)
        assert client.ok("/heatmap", run="long", role="gradient", metric=metric, columns=STEPS) == plain
        assert client.ok("/heatmap", run="long", role="gradient", metric=metric, columns=100_000) == plain
        assert plain["steps"] == list(range(STEPS)) and "step_offsets" not in plain
    # A window of 100 steps within a budget of 100: each of its steps, the same cells as in the whole.
    whole = client.ok("/heatmap", run="long", role="gradient", metric="health")
    part = client.ok("/heatmap", run="long", role="gradient", metric="health", start="100", end="199", columns=100)
    assert part["steps"] == list(range(100, 200)) and part["binned"] is False
    assert part["window"] == {"start_text": "100", "end_text": "199", "steps": 100, "steps_total": STEPS,
                              "first_step": 0, "first_step_text": "0",
                              "last_step": STEPS - 1, "last_step_text": str(STEPS - 1)}
    for key in ("values", "status", "rules", "quality_cells"):
        assert part[key] == [row[100:200] for row in whole[key]], key
    # Zoomed into 100 steps with 40 columns: bins of the window only.
    zoomed = client.ok("/heatmap", run="long", role="gradient", metric="health", start="200", end="299",
                       columns=COLUMNS)
    assert zoomed["binned"] is True and int(zoomed["steps_text"][0]) == 200
    assert int(zoomed["steps_last_text"][-1]) == 299
    assert 2 < _column_of(zoomed, BAD_STEP) < len(zoomed["steps"])


# The compact layout's code of a cell without a value (docs/http_api.md).
NULL_CODE = 0xFFFFFF
# How far apart a value rounded to 4 significant digits and one through the compact layout's 13
# significant bits may be: 5e-4 and 2**-13 of the value.
VALUE_TOLERANCE = 6.5e-4


def decode_values(text: str) -> list:
    """The compact layout's `values` (f64top24): per cell 3 bytes, a double's top 24 bits, big-endian;
    None for `NULL_CODE`. Written from the documented format, not from the server's code."""
    raw = np.frombuffer(base64.b64decode(text), dtype=np.uint8).reshape(-1, 3).astype(np.uint64)
    codes = (raw[:, 0] << np.uint64(16)) | (raw[:, 1] << np.uint64(8)) | raw[:, 2]
    doubles = (codes << np.uint64(40)).view(np.float64)
    return [None if c == NULL_CODE else v for c, v in zip(codes.tolist(), doubles.tolist())]


def decode_offsets(text: str, width: int) -> list:
    """The compact layout's `step_offsets`: unsigned little-endian integers of `width` bytes."""
    return np.frombuffer(base64.b64decode(text), dtype=f"<u{width}").tolist()


def _from_compact(hm: dict) -> dict:
    """The compact layout read back into the matrices of the default one (its values not rounded)."""
    rows, cols = len(hm["layers"]), len(hm["steps"])
    raw = base64.b64decode(hm["cells"])
    codes = np.frombuffer(raw, dtype=np.uint8 if hm["cell_bytes"] == 1 else "<u2").reshape(rows, cols)
    kinds = hm["cell_kinds"]
    assert hm["value_encoding"] == "f64top24" and len(hm["values"]) == 4 * rows * cols
    drop = ("cells", "cell_kinds", "cell_bytes", "value_encoding", "step_offset_bytes")
    out = {key: value for key, value in hm.items() if key not in drop}
    out["status"] = [[kinds[c][0] for c in row] for row in codes.tolist()]
    out["quality_cells"] = [[kinds[c][1] for c in row] for row in codes.tolist()]
    out["rules"] = [[kinds[c][2] for c in row] for row in codes.tolist()]
    values = decode_values(hm["values"])
    out["values"] = [values[i * cols:(i + 1) * cols] for i in range(rows)]
    if "step_offsets" in hm:
        offsets = decode_offsets(hm["step_offsets"], hm["step_offset_bytes"])
        out["step_offsets"] = [offsets[i * cols:(i + 1) * cols] for i in range(rows)]
    return out


def close_values(got, want) -> bool:
    """Whether `got` (compact, decoded) is `want` (rows layout) within 4 significant digits, None where it is."""
    if want is None or got is None:
        return got is None and want is None
    return abs(got - want) <= VALUE_TOLERANCE * abs(want)


def assert_same_cells(compact: dict, plain: dict, note=None) -> None:
    """A decoded compact answer holds the rows layout's cells: every field equal, the values within
    4 significant digits (a null exactly where the rows layout has one)."""
    assert set(compact) == set(plain), note
    for key in plain:
        if key in ("values", "value_range"):
            continue
        assert compact[key] == plain[key], (key, note)
    assert len(compact["values"]) == len(plain["values"]), note
    for i, (got_row, want_row) in enumerate(zip(compact["values"], plain["values"])):
        assert len(got_row) == len(want_row), (i, note)
        bad = [(j, g, w) for j, (g, w) in enumerate(zip(got_row, want_row)) if not close_values(g, w)]
        assert not bad, (i, bad[:5], note)


def test_the_compact_layout_holds_the_same_cells(long_run, loader_client):
    client = loader_client(long_run)
    for metric, params in (("health", {}), ("health", {"columns": COLUMNS}), ("max_abs", {"columns": COLUMNS}),
                           ("std", {"start": "100", "end": "199"})):
        plain = client.ok("/heatmap", run="long", role="gradient", metric=metric, **params)
        assert client.ok("/heatmap", run="long", role="gradient", metric=metric, layout="rows", **params) == plain
        compact = client.ok("/heatmap", run="long", role="gradient", metric=metric, layout="compact", **params)
        cells = len(plain["layers"]) * len(plain["steps"])
        assert isinstance(compact["cells"], str) and len(compact["values"]) == 4 * cells
        assert_same_cells(_from_compact(compact), plain, (metric, params))
    # The bad step's cell: one kind of its own, named by the finding kind, its quality a NaN/Inf step's.
    compact = client.ok("/heatmap", run="long", role="gradient", layout="compact")
    assert [CRITICAL, compact["quality_names"].index("finite_only"), "nonfinite"] in compact["cell_kinds"]


def test_compact_cells_past_256_kinds_take_two_bytes():
    from gradhealth_plugin.serving import responses

    rows, cols = 3, 200
    k = np.arange(rows * cols)  # every (status, quality, rule) of 4 x 5 x 30 once
    status = (k % 4).astype(np.uint8).reshape(rows, cols)
    quality = (k // 4 % 5).astype(np.uint8).reshape(rows, cols)
    rules = np.array([f"kind_{x // 20}" for x in k], dtype=object).reshape(rows, cols)
    rules[0, 0], rules[0, 1] = None, ""
    values = np.linspace(0, 1, rows * cols).reshape(rows, cols)
    values[1, 1] = np.nan
    # The rules as codes into a table of names, None and "" first, as the analysis holds them.
    names = [None, ""] + sorted({r for r in rules.ravel().tolist() if r})
    codes = np.array([names.index(r) for r in rules.ravel().tolist()], dtype=np.uint8).reshape(rows, cols)
    out = responses.compact_cells(values, status, codes, quality, rule_names=names)
    assert out["cell_bytes"] == 2 and len(out["cell_kinds"]) > 256
    back = _from_compact({"layers": ["x"] * rows, "steps": list(range(cols)), **out})
    assert back["status"] == status.tolist() and back["quality_cells"] == quality.tolist()
    assert back["rules"] == rules.tolist()
    assert back["values"][1][1] is None and back["values"][2][-1] == 1.0


@pytest.mark.parametrize("params", [
    {"layout": "binary"}, {"layout": "Compact"},
    {"columns": "0"}, {"columns": "-3"}, {"columns": "abc"}, {"columns": "1.5"}, {"columns": " 5"},
    {"start": "x"}, {"end": "1e3"}, {"start": "+5"}, {"start": "300", "end": "200"},
])
def test_bad_window_or_budget_is_refused(long_run, plugin_client, params):
    status, body = call(plugin_client(long_run), "/heatmap", run="long", role="gradient", **params)
    assert status == 400 and body["error"], (params, body)


def test_a_window_outside_the_data_is_empty(long_run, plugin_client):
    client = plugin_client(long_run)
    for params in ({"start": "1000"}, {"end": "-1"}, {"start": "5000", "end": "6000", "columns": "10"},
                   {"start": "-" + "9" * 30, "end": "-1"}):
        hm = client.ok("/heatmap", run="long", role="gradient", **params)
        assert hm["steps"] == [] and hm["layers"] == ["a/kernel", "b/kernel", "c/kernel"], params
        assert hm["values"] == [[], [], []] and hm["window"]["steps"] == 0
    # Bounds past TensorBoard's step range reach every step.
    hm = client.ok("/heatmap", run="long", role="gradient", start="-" + "9" * 30, end="9" * 30, columns="4000000000")
    assert len(hm["steps"]) == STEPS


def test_the_answer_is_cached_per_data_version(tmp_path, plugin_client):
    rng = np.random.default_rng(0)
    run_dir = tmp_path / "growing"
    path = write_run(run_dir, [event(s, hist_value("gradients/a/kernel", normal_buckets(rng))) for s in range(20)])
    client = plugin_client(tmp_path)
    first = client.raw("/heatmap", run="growing", columns=8)
    again = client.raw("/heatmap", run="growing", columns=8)
    assert first.get_data() == again.get_data()
    assert len(json.loads(first.get_data())["steps"]) <= 8
    append_events(path, [event(s, hist_value("gradients/a/kernel", normal_buckets(rng))) for s in range(20, 30)])
    client.reload()
    grown = json.loads(client.raw("/heatmap", run="growing").get_data())
    assert grown["steps"] == list(range(30))


class _Run:
    """Stands for one data version of a run (the analyzer keys versions by object)."""


def test_the_cache_builds_once_per_key_and_data_version():
    analyzer = analyzer_lib.Analyzer(None, {})
    built = []

    def build():
        built.append(1)
        return {"n": len(built), "x": [0.5, None]}

    v1, v2 = _Run(), _Run()
    a = analyzer.answer(v1, ("run", "gradient", "health", None, None, 100), build)
    b = analyzer.answer(v1, ("run", "gradient", "health", None, None, 100), build)
    assert a == b and len(built) == 1
    assert json.loads(gzip.decompress(a)) == {"n": 1, "x": [0.5, None]}
    analyzer.answer(v1, ("run", "gradient", "health", None, None, 200), build)  # another budget
    assert len(built) == 2
    c = analyzer.answer(v2, ("run", "gradient", "health", None, None, 100), build)  # new data
    assert len(built) == 3 and json.loads(gzip.decompress(c))["n"] == 3
    assert analyzer.data_version(v1) != analyzer.data_version(v2)


def test_values_go_with_four_significant_digits():
    from gradhealth_plugin.serving.responses import rounded

    x = np.array([0.47914517762649, -123456.789, 1.23456e-30, 9.87654e30, 0.0, np.nan, np.inf, 0.99995, 5e-324])
    out = rounded(x)
    assert [json.dumps(v) for v in out[:5]] == ["0.4791", "-123500.0", "1.235e-30", "9.877e+30", "0.0"]
    assert np.isnan(out[5]) and out[6] == np.inf and out[7] == 1.0
    finite = np.isfinite(x) & (x != 0)
    assert np.all(np.abs(out[finite] - x[finite]) <= 5e-4 * np.abs(x[finite]))


def test_gradhealth_summaries_are_read_in_chunks(tmp_path, plugin_client, monkeypatch):
    # One read of every tag of a long run can pass the Rust data server's 256 MB message limit.
    from gradhealth_plugin.reading import provider
    from gradhealth_plugin.writing.events import SummaryFileWriter
    from gradhealth_plugin.writing import format as fmt

    writer = SummaryFileWriter(str(tmp_path / "many"))
    for step in range(3):
        for i in range(40):
            writer.write_stats(step, "gradient", f"layer_{i}", np.full(fmt.VECTOR_WIDTH, 0.5), wall_time=1e9 + step)
    writer.close()
    reads = []
    original = provider.Reader._read_tensors

    def recording(self, ctx, experiment_id, plugin, run, tags):
        if plugin == fmt.PLUGIN_NAME:
            reads.append(len(tags))
        return original(self, ctx, experiment_id, plugin, run, tags)

    monkeypatch.setattr(provider.Reader, "_read_tensors", recording)
    hm = plugin_client(tmp_path).ok("/heatmap", run="many", role="gradient")
    assert len(hm["layers"]) == 40 and hm["steps"] == [0, 1, 2]
    assert reads[0] == 8 and sum(reads) == 40, reads


# ----------------------------------------------------------------- rows: the rows on screen only

BLOCKS, PER_BLOCK = 4, 3
NAN_AT = ("block_1/dense_2/kernel", 50)  # NaN gradients here only
SPIKE_AT = ("block_2/dense_0/kernel", 70)  # a thousand times larger here only


@pytest.fixture(scope="module")
def blocks_run(tmp_path_factory):
    """Four blocks of three layers (block_0 ... block_3) and two layers of their own (rows 12, 13), 120 steps."""
    rng = np.random.default_rng(16)
    logdir = tmp_path_factory.mktemp("blocks_run")
    names = (["embed/kernel"] + [f"block_{b}/dense_{j}/kernel" for b in range(BLOCKS) for j in range(PER_BLOCK)]
             + ["head/kernel"])
    nan = np.stack([np.full(30, np.nan), np.full(30, np.nan), np.zeros(30)], axis=1)
    events = []
    for s in range(120):
        values = []
        for name in names:
            if (name, s) == NAN_AT:
                buckets = nan
            else:
                buckets = normal_buckets(rng, scale=10.0 if (name, s) == SPIKE_AT else 1e-2 * (1 + rng.random()))
            values.append(hist_value(f"gradients/{name}", buckets))
        events.append(event(s, *values))
    write_run(logdir / "blocks", events)
    return logdir


def _worst_member(full: dict, members: list, col: int) -> int:
    """The tab's fold (fold.ts worstRows), written out: the highest status, then a value over none,
    then the lowest health score or the highest metric, then the first member."""
    best = members[0]
    for r in members[1:]:
        s, b = full["status"][r][col], full["status"][best][col]
        v, w = full["values"][r][col], full["values"][best][col]
        if s > b or (s == b and v is not None and (w is None or (v < w if full["metric"] == "health" else v > w))):
            best = r
    return best


def _from_compact_window(hm: dict) -> dict:
    """A compact row window read back into matrices, a row per row and block sent."""
    n = len(hm["rows_sent"]) + len(hm["blocks_sent"])
    out = _from_compact({**hm, "layers": [None] * n})
    cols = len(hm["steps"])
    k = len(hm["rows_sent"])
    out["layers"] = hm["layers"]
    out["block_members"] = [hm["block_members"][i * cols:(i + 1) * cols] for i in range(n - k)]
    return out


def _check_window(win: dict, full: dict, rows: list, blocks: list) -> None:
    """The window's rows are the whole answer's rows, cell for cell; its blocks are their members folded."""
    names = list(dict.fromkeys(b for b in full["blocks"] if b is not None))
    assert win["block_names"] == names and win["layers"] == full["layers"] and win["steps"] == full["steps"]
    assert win["rows_sent"] == rows and win["blocks_sent"] == blocks
    keys = ["values", "status", "rules", "quality_cells"] + (["step_offsets"] if full["binned"] else [])
    for k, r in enumerate(rows):
        for key in keys:
            assert win[key][k] == full[key][r], (key, r)
    for k, b in enumerate(blocks):
        members = [i for i, name in enumerate(full["blocks"]) if name == names[b]]
        for col in range(len(full["steps"])):
            m = _worst_member(full, members, col)
            assert win["block_members"][k][col] == m, (names[b], col)
            for key in keys:
                assert win[key][len(rows) + k][col] == full[key][m][col], (key, names[b], col)
    # Every row's and block's worst status over the window, and in how many columns: sorting and marks.
    worst = [max(row) for row in full["status"]]
    assert win["row_worst"] == worst
    assert win["row_worst_columns"] == [row.count(w) for row, w in zip(full["status"], worst)]
    # Cells painted apart from the scale (NaN/Inf, not judged) are no end of it.
    apart = {full["quality_names"].index(name) for name in ("finite_only", "not_judged")}
    shown = [v for row, st, qs in zip(full["values"], full["status"], full["quality_cells"])
             for v, x, q in zip(row, st, qs) if v is not None and x and q not in apart]
    positive = [v for v in shown if v > 0]
    assert win["value_range"] == {"finite": [min(shown), max(shown)] if shown else None,
                                  "positive": [min(positive), max(positive)] if positive else None}
    for b, name in enumerate(names):
        folded = [max(full["status"][i][c] for i, n in enumerate(full["blocks"]) if n == name)
                  for c in range(len(full["steps"]))]
        assert (win["block_worst"][b], win["block_worst_columns"][b]) == (max(folded), folded.count(max(folded)))


def test_a_row_window_sends_the_same_cells_as_the_whole_answer(blocks_run, loader_client):
    client = loader_client(blocks_run)
    for metric, params in (("health", {}), ("health", {"columns": 25}), ("max_abs", {"columns": 25}),
                           ("std", {"start": "40", "end": "89"})):
        full = client.ok("/heatmap", run="blocks", role="gradient", metric=metric, **params)
        assert "rows_sent" not in full and "block_members" not in full  # without `rows`, as before
        assert len(full["layers"]) == BLOCKS * PER_BLOCK + 2
        win = client.ok("/heatmap", run="blocks", role="gradient", metric=metric, rows="2:5,13", blocks="2:3",
                        **params)
        _check_window(win, full, [2, 3, 4, 5, 13], [2, 3])
        compact = client.ok("/heatmap", run="blocks", role="gradient", metric=metric, rows="13,2:5",
                            blocks="3,2", layout="compact", **params)
        # Folded as the tab folds them: from the values the compact layout sends.
        full_compact = _from_compact(client.ok("/heatmap", run="blocks", role="gradient", metric=metric,
                                               layout="compact", **params))
        assert_same_cells(full_compact, full, (metric, params))
        _check_window(_from_compact_window(compact), full_compact, [2, 3, 4, 5, 13], [2, 3])
    # A block sent folded stands for its rows: rows 3:5 (block_1) and 6:8 (block_2) go as their blocks only.
    win = client.ok("/heatmap", run="blocks", role="gradient", rows="0:9", blocks="1:2")
    assert win["rows_sent"] == [0, 1, 2, 9] and win["blocks_sent"] == [1, 2] and len(win["values"]) == 6
    # The NaN step's critical cell and the spike are their blocks' cells, naming the member they came from.
    full = client.ok("/heatmap", run="blocks", role="gradient", metric="health")
    win = client.ok("/heatmap", run="blocks", role="gradient", metric="health", rows="", blocks="0:3")
    assert win["rows_sent"] == [] and win["blocks_sent"] == [0, 1, 2, 3]
    nan_row = full["layers"].index(NAN_AT[0])
    assert win["status"][1][NAN_AT[1]] == CRITICAL and win["rules"][1][NAN_AT[1]] == "nonfinite"
    assert win["block_members"][1][NAN_AT[1]] == nan_row
    assert win["block_worst"][1] == CRITICAL


def test_rows_laid_out_a_few_at_a_time_answer_as_all_at_once(blocks_run, plugin_client, monkeypatch):
    from gradhealth_plugin.serving import responses

    asked = [("health", {"columns": 25}), ("max_abs", {"columns": 25}), ("std", {"columns": 7, "start": "40"}),
             ("health", {})]
    whole = plugin_client(blocks_run)
    expected = [whole.ok("/heatmap", run="blocks", role="gradient", metric=m, **p) for m, p in asked]
    laid_out = []
    grid = responses._grid
    monkeypatch.setattr(responses, "_grid", lambda rows, *a: laid_out.append(len(rows)) or grid(rows, *a))
    # Room for two or three rows of a binned window a chunk (fewer at full resolution): every row is in
    # one chunk or another, binned or not.
    monkeypatch.setattr(responses, "_GRID_CELLS", 2 * len(expected[0]["steps"]) * 5)
    chunked = plugin_client(blocks_run)
    for (metric, params), answer in zip(asked, expected):
        laid_out.clear()
        got = chunked.ok("/heatmap", run="blocks", role="gradient", metric=metric, **params)
        assert got == answer, (metric, params)
        rows = len(answer["layers"])
        assert sum(laid_out) == rows and len(laid_out) > 1, laid_out


def test_rows_out_of_range_are_dropped(blocks_run, plugin_client):
    client = plugin_client(blocks_run)
    rows = BLOCKS * PER_BLOCK + 2
    win = client.ok("/heatmap", run="blocks", role="gradient", rows="12:5000", blocks="2:99")
    assert win["rows_sent"] == [12, 13] and win["blocks_sent"] == [2, 3] and len(win["values"]) == 4
    win = client.ok("/heatmap", run="blocks", role="gradient", rows="0:" + "9" * 40, blocks="")
    assert win["rows_sent"] == list(range(rows)) and win["blocks_sent"] == []
    win = client.ok("/heatmap", run="blocks", role="gradient", rows="900", columns="10")
    assert win["rows_sent"] == [] and win["values"] == [] and len(win["row_worst"]) == rows
    # A role the run does not have: no rows to send.
    win = client.ok("/heatmap", run="blocks", role="weight", rows="0:3", blocks="0")
    assert win["layers"] == [] and win["rows_sent"] == [] and win["blocks_sent"] == []


@pytest.mark.parametrize("params", [
    {"rows": "a"}, {"rows": "1:"}, {"rows": ":3"}, {"rows": "5:2"}, {"rows": "-1"}, {"rows": "1,,2"},
    {"rows": "1:2:3"}, {"rows": " 1"}, {"rows": "1,"}, {"rows": "1.5"}, {"blocks": "x"}, {"blocks": "3:1"},
    {"rows": "1," * 20_000 + "1"},
])
def test_bad_rows_or_blocks_are_refused(blocks_run, plugin_client, params):
    status, body = call(plugin_client(blocks_run), "/heatmap", run="blocks", role="gradient", **params)
    assert status == 400 and body["error"], (params, body)


def test_row_windows_are_cut_from_cells_built_once_per_data_version(tmp_path, plugin_client, monkeypatch):
    from gradhealth_plugin.serving import responses

    built = []
    original = responses.heatmap_cells

    def counting(*args, **kwargs):
        built.append(args[1:])
        return original(*args, **kwargs)

    monkeypatch.setattr(responses, "heatmap_cells", counting)
    rng = np.random.default_rng(1)
    names = [f"l{i}/kernel" for i in range(6)]
    path = write_run(tmp_path / "run", [event(s, *[hist_value(f"gradients/{n}", normal_buckets(rng)) for n in names])
                                        for s in range(10)])
    client = plugin_client(tmp_path)
    whole = client.ok("/heatmap", run="run", columns=4)
    top = client.ok("/heatmap", run="run", columns=4, rows="0:2")
    below = client.ok("/heatmap", run="run", columns=4, rows="3:5", layout="compact")
    assert top["rows_sent"] == [0, 1, 2] and below["rows_sent"] == [3, 4, 5]
    assert top["values"] == whole["values"][:3]
    # The whole answer is built as before; the two row windows share one build of every row's cells.
    assert len(built) == 2
    append_events(path, [event(10, *[hist_value(f"gradients/{n}", normal_buckets(rng)) for n in names])])
    client.reload()
    assert client.ok("/heatmap", run="run", columns=4, rows="0:2")["window"]["steps"] == 11
    assert len(built) == 3


# ----------------------------------------------------------------- pages: no answer past the cell cap

# The cells of a heatmap answer, by layout; every other field is the same in each page of an answer.
CELL_KEYS = {"rows": {"values", "status", "rules", "quality_cells", "step_offsets"},
             "compact": {"cells", "cell_kinds", "cell_bytes", "values", "value_encoding", "step_offsets",
                         "step_offset_bytes"}}
MATRICES = ("values", "status", "rules", "quality_cells", "step_offsets")


def _matrices(answer: dict, layout: str, window: bool) -> dict:
    """An answer's cells as matrices of the rows layout (a row window's: a row per row and block sent)."""
    if layout == "compact":
        answer = _from_compact_window(answer) if window else _from_compact(answer)
    return {key: answer[key] for key in MATRICES if key in answer}


def test_an_answer_past_the_cell_cap_comes_in_pages_that_add_up_to_the_whole(blocks_run, plugin_client,
                                                                             monkeypatch):
    from gradhealth_plugin.serving import responses

    rows = BLOCKS * PER_BLOCK + 2
    asked = [("health", {"columns": 25}), ("max_abs", {"columns": 25}), ("std", {"start": "40", "end": "89"}),
             ("health", {})]
    whole = plugin_client(blocks_run)
    expected = [(metric, layout, params, whole.ok("/heatmap", run="blocks", role="gradient", metric=metric,
                                                  layout=layout, **params))
                for metric, params in asked for layout in ("rows", "compact")]
    assert all("page" not in full and "rows_sent" not in full for *_, full in expected)
    built = []
    original = responses.heatmap_cells
    monkeypatch.setattr(responses, "heatmap_cells", lambda *a, **k: built.append(a[1:]) or original(*a, **k))
    # Room for 5 rows of 25 columns, 2 of the window's 50 steps, 1 of all 120 steps.
    cap = 130
    for layout in ("rows", "compact"):
        monkeypatch.setitem(responses.MAX_CELLS, layout, cap)
    client = plugin_client(blocks_run)
    for metric, layout, params, full in expected:
        if layout == "rows":
            built.clear()
        pages = client.heatmap_pages(run="blocks", role="gradient", metric=metric, layout=layout, **params)
        per_page = cap // len(full["steps"])
        assert len(pages) == -(-rows // per_page) > 1, (metric, layout, params)
        got = {key: [] for key in _matrices(full, layout, False)}
        for k, page in enumerate(pages):
            sent = list(range(k * per_page, min(rows, (k + 1) * per_page)))
            assert page["rows_sent"] == sent and page["blocks_sent"] == []
            assert len(sent) * len(page["steps"]) <= cap
            # Everything but the cells is the whole answer's.
            assert {key: page[key] for key in full if key not in CELL_KEYS[layout]} == \
                {key: full[key] for key in full if key not in CELL_KEYS[layout]}
            if k < len(pages) - 1:
                rest = f"{sent[-1] + 1}:{rows - 1}" if sent[-1] + 1 < rows - 1 else str(rows - 1)
                assert page["page"] == {"max_cells": cap, "rows_total": rows, "rows_span": [sent[0], sent[-1]],
                                        "next": {"rows": rest, "blocks": ""}}
            for key, matrix in _matrices(page, layout, True).items():
                got[key] += matrix
        # The pages together: the whole answer, cell for cell.
        assert got == _matrices(full, layout, False), (metric, layout, params)
        # Every page, in either layout, is cut from one build of the cells.
        assert len(built) == 1, (metric, layout, params)


def test_a_row_window_past_the_cell_cap_sends_what_fits_first_and_names_the_rest(blocks_run, plugin_client,
                                                                                monkeypatch):
    from gradhealth_plugin.serving import responses

    full = plugin_client(blocks_run).ok("/heatmap", run="blocks", role="gradient", metric="health", columns=25)
    monkeypatch.setitem(responses.MAX_CELLS, "rows", 5 * 25)
    client = plugin_client(blocks_run)
    # Rows 3:5 are block number 1, asked folded: 11 rows and a block, 5 a page, rows first.
    pages = client.heatmap_pages(run="blocks", role="gradient", metric="health", columns=25, rows="0:13",
                                 blocks="1")
    assert [(p["rows_sent"], p["blocks_sent"]) for p in pages] == [
        ([0, 1, 2, 6, 7], []), ([8, 9, 10, 11, 12], []), ([13], [1])]
    assert [p.get("page", {}).get("next") for p in pages] == [
        {"rows": "8:13", "blocks": "1"}, {"rows": "13", "blocks": "1"}, None]
    for p in pages:
        _check_window(p, full, p["rows_sent"], p["blocks_sent"])
    # Blocks alone: the first that fit, no row sent.
    monkeypatch.setitem(responses.MAX_CELLS, "rows", 2 * 25)
    client = plugin_client(blocks_run)
    pages = client.heatmap_pages(run="blocks", role="gradient", metric="health", columns=25, rows="", blocks="0:3")
    assert [p["blocks_sent"] for p in pages] == [[0, 1], [2, 3]] and pages[0]["page"]["rows_span"] is None
    assert pages[0]["page"]["next"] == {"rows": "", "blocks": "2:3"}
    # Rows past the last and malformed rows answer as they did.
    win = client.ok("/heatmap", run="blocks", role="gradient", columns=25, rows="900")
    assert win["rows_sent"] == [] and win["values"] == [] and "page" not in win
    status, body = call(client, "/heatmap", run="blocks", role="gradient", columns=25, rows="1:")
    assert status == 400 and body["error"]


@pytest.fixture(scope="module")
def two_lengths(tmp_path_factory):
    """Two runs of one sweep, logged every 10 steps: one to step 3990, the other to step 2390."""
    rng = np.random.default_rng(16)
    logdir = tmp_path_factory.mktemp("two_lengths")
    for name, last in (("lr_1e-2", 3990), ("lr_1e-3", 2390)):
        write_run(logdir / name, [event(s, hist_value("gradients/a/kernel", normal_buckets(rng)))
                                  for s in range(0, last + 1, 10)])
    return logdir


def test_runs_of_different_lengths_asked_for_one_window_are_binned_alike(two_lengths, loader_client):
    client = loader_client(two_lengths)
    # The window compared runs are asked for: the union of their steps.
    ask = dict(role="gradient", metric="health", start="0", end="3990", columns=COLUMNS)
    long = client.ok("/heatmap", run="lr_1e-2", **ask)
    short = client.ok("/heatmap", run="lr_1e-3", **ask)
    assert long["binned"] is True and short["binned"] is True
    # Bins of the window, 100 steps each: the shorter run's columns are the longer one's first columns.
    assert long["steps"] == list(range(0, 4000, 100))
    n = len(short["steps"])
    assert n == 24 and short["steps"] == long["steps"][:n]
    assert short["steps_last_text"] == long["steps_last_text"][:n]


def test_a_window_reaching_far_past_every_step_is_binned_as_the_window_and_its_steps_fall_where_they_are(
        long_run, plugin_client):
    client = plugin_client(long_run)
    full = client.ok("/heatmap", run="long", role="gradient", metric="health")
    b = full["layers"].index("b/kernel")
    # Bins of the window asked for, 100 steps each: the run's 400 steps fill the first four.
    wide = client.ok("/heatmap", run="long", role="gradient", start="0", end="3999", columns=COLUMNS)
    assert wide["binned"] is True and wide["steps"] == [0, 100, 200, 300]
    assert wide["steps_last_text"] == ["99", "199", "299", "399"]
    # A window reaching a billion times past the last step: every step falls in its first bin (the
    # tab's axis spans the window, so the run's steps are one column wide on it), the worst of each row.
    for start, end in (("0", str(10 ** 12)), ("-" + "9" * 30, "9" * 30), ("200", str(10 ** 15))):
        far = client.ok("/heatmap", run="long", role="gradient", start=start, end=end, columns=COLUMNS)
        first = max(0, int(start)) if len(start) < 19 else 0
        assert far["binned"] is True and far["steps"] == [first] and far["steps_last_text"] == [str(STEPS - 1)]
        assert far["window"]["steps"] == STEPS - first
        assert [row[0] for row in far["status"]] == [max(row[first:]) for row in full["status"]]
        if first <= BAD_STEP:
            assert far["rules"][b] == ["nonfinite"] and far["step_offsets"][b] == [BAD_STEP - first]
    # A window wholly past the last step holds no step, whatever the budget.
    past = client.ok("/heatmap", run="long", role="gradient", start=str(10 ** 6), end=str(10 ** 12), columns=COLUMNS)
    assert past["steps"] == [] and past["binned"] is False and past["values"] == [[], [], []]
