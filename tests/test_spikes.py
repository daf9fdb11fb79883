"""spikes.py: a spike stands above the values on both sides of it, on a real torch run whose block of
weights is scaled down at one step (`logdirs.torch_scaled_down`)."""

from tests import logdirs


def _spikes(client):
    found = client.ok("/findings", run=".")["findings"]
    return [f for f in found if f["kind"] in ("spike", "periodic_spikes")]


def test_a_weight_scale_down_is_no_spike_at_its_edge_and_a_bad_batch_still_is(torch_scaled_down_logdir,
                                                                              plugin_client):
    client = plugin_client(torch_scaled_down_logdir)
    spikes = _spikes(client)
    # The bad batch: every gradient a thousandfold its neighbours, one warning at its step.
    assert [(f["kind"], f["severity"], f["first_step"], f["last_step"]) for f in spikes] == \
        [("spike", "warn", logdirs.SCALED_BAD_BATCH, logdirs.SCALED_BAD_BATCH)], spikes
    assert min(layer["jump"] for layer in spikes[0]["evidence"]["layers"].values()) > 100
    # The drop: its last normal step and its first small one are no spike on any gradient row.
    hm = client.ok("/heatmap", run=".", role="gradient", metric="l2")
    for step in (logdirs.SCALED_AT - 1, logdirs.SCALED_AT):
        col = hm["steps"].index(step)
        assert [row[col] for row in hm["rules"] if row[col] == "spike"] == [], step
