"""Roles told by the data (`reading.data_roles`), and how well they generalise.

The measure: the labelled corpus in ``../shared/wild`` copied with every
histogram tag renamed to an opaque name (``series<i>``), so names say
nothing and only the data can. A role the data tells must be the writer's
role at least `PRECISION_FLOOR` of the time, and never for a weight or a
gradient (role-specific rules would then judge a tensor as what it is not).
"""

from __future__ import annotations

import collections
import csv
import pathlib

import numpy as np
import pytest

from gradhealth_plugin.analysis import metrics
from gradhealth_plugin.reading import data_roles
from tests.conftest import REPO, WILD
from tests.test_bad_input import event, hist_value, write_run

PRECISION_FLOOR = 0.9


def _table(samples):
    """The metric table of one tag whose histogram at each step is the histogram of one sample."""
    rows = []
    for x in samples:
        counts, edges = np.histogram(x, bins=30)
        rows.append(np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], axis=1))
    h = metrics.stack_histograms(np.arange(len(rows)), np.arange(len(rows), dtype=np.float64), rows)
    return metrics.histogram_metrics(h)


def test_a_non_negative_distribution_with_a_mass_at_zero_is_an_activation():
    rng = np.random.default_rng(0)
    relu = [np.maximum(rng.normal(size=4000), 0) for _ in range(5)]
    assert data_roles.role_from_data(_table(relu)) == "activation"


@pytest.mark.parametrize("name, make", [
    ("both signs (weights, gradients, pre-activations)", lambda rng: rng.normal(size=4000) * 0.05),
    ("non-negative without a mass at zero (a sigmoid)", lambda rng: 1 / (1 + np.exp(-rng.normal(size=4000)))),
    ("constant biases at 0.1", lambda rng: np.full(64, 0.1) + rng.normal(size=64) * 1e-4),
    ("a ReLU output with one negative step", None),
])
def test_distributions_that_prove_no_role(name, make):
    rng = np.random.default_rng(1)
    if make is None:
        samples = [np.maximum(rng.normal(size=4000), 0) for _ in range(4)] + [rng.normal(size=4000)]
    else:
        samples = [make(rng) for _ in range(5)]
    assert data_roles.role_from_data(_table(samples)) is None, name


def test_an_empty_table_proves_no_role():
    assert data_roles.role_from_data(metrics.empty_table()) is None


def test_a_nameless_relu_output_is_served_as_an_activation_told_by_data(tmp_path, loader_client):
    rng = np.random.default_rng(2)

    def buckets(x):
        counts, edges = np.histogram(x, bins=30)
        return np.stack([edges[:-1], edges[1:], counts.astype(np.float64)], axis=1)

    write_run(tmp_path / "run", [
        event(s, hist_value("h0", buckets(np.maximum(rng.normal(size=2000), 0))),
              hist_value("h1", buckets(rng.normal(size=2000))))
        for s in range(6)])
    summary = loader_client(tmp_path).ok("/runs")["runs"][0]
    roles = {layer["name"]: layer["roles"] for layer in summary["layers"]}
    assert set(roles["h0"]) == {"activation"}
    assert roles["h0"]["activation"]["decided_by"] == "data"
    assert set(roles["h1"]) == {"other"} and roles["h1"]["other"]["decided_by"] == "fallback"


# --------------------------------------------------------------------------- the corpus, names hidden

def _labels() -> dict:
    out = {}
    for path in (WILD / "labels.tsv", REPO / "tests" / "data" / "wild_labels.tsv"):
        with open(path, newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                out[(row["run_dir"], row["tag"])] = row["role"]
    return out


@pytest.fixture(scope="module")
def nameless_corpus(tmp_path_factory):
    """The wild corpus with each histogram tag renamed ``series<i>``: (logdir, opaque name -> (run, tag))."""
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer import record_writer

    if not WILD.is_dir():
        pytest.skip(f"no corpus at {WILD}")
    root = tmp_path_factory.mktemp("nameless_wild")
    names: dict = {}
    for path in sorted(WILD.rglob("*tfevents*")):
        rel = path.relative_to(WILD)
        run = rel.parent.as_posix()
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(root / rel, "wb") as f:
            writer = record_writer.RecordWriter(f)
            for record in event_file_loader.RawEventFileLoader(str(path)).Load():
                e = event_pb2.Event.FromString(record)
                for v in e.summary.value:
                    if v.HasField("histo") or v.metadata.plugin_data.plugin_name == "histograms":
                        v.tag = names.setdefault((run, v.tag), f"series{len(names)}")
                writer.write(e.SerializeToString())
    return root, {opaque: key for key, opaque in names.items()}


def test_roles_told_by_data_generalise(nameless_corpus, plugin_client):
    root, original = nameless_corpus
    labels = _labels()
    told = collections.Counter()
    for summary in plugin_client(root).ok("/runs")["runs"]:
        for layer in summary["layers"]:
            for role, row in layer["roles"].items():
                for tag in row["tags"]:
                    if tag in original:
                        assert row["decided_by"] in ("data", "fallback"), (tag, row)  # names say nothing
                    if row["decided_by"] == "data" and tag in original:
                        told[(labels.get(original[tag], "unlabelled"), role)] += 1
    total = sum(told.values())
    right = sum(n for (label, role), n in told.items() if label == role)
    print(f"roles told by data, names hidden: {right}/{total} right; {dict(told)}")
    assert total >= 10, told  # the corpus holds dozens of ReLU outputs: the cue must find them
    assert right / total >= PRECISION_FLOOR, told
    assert not [key for key in told if key[0] in ("weight", "gradient")], told
