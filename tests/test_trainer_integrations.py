"""One-line trainer integrations, each with a real 3-step CPU training whose logdir the tab diagnoses:
PyTorch Lightning's `GradientHealthCallback` and Hugging Face transformers' `GradientHealthCallback`."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

STEPS = 3


def _roles(run: dict) -> dict:
    return {layer["name"]: set(layer["roles"]) for layer in run["layers"]}


def _assert_diagnosed(client, run: str, layer: str, steps) -> dict:
    """The run is listed with exact gradient, weight and update statistics on `layer` at `steps`."""
    runs = {r["run"]: r for r in client.ok("/runs")["runs"]}
    assert run in runs, sorted(runs)
    assert {"gradient", "weight"} <= _roles(runs[run])[layer], _roles(runs[run])
    for step in steps:
        cell = client.ok("/cell", run=run, layer=layer, step=step)
        for role in ("gradient", "weight"):
            data = cell["roles"][role]
            assert "gradhealth" in data["source"], (role, data["source"])
            assert data["metrics"]["l2"]["quality"] == "exact" and np.isfinite(data["metrics"]["l2"]["value"])
        assert cell["roles"]["weight"]["metrics"]["update_ratio"]["quality"] == "exact"
    assert client.ok("/heatmap", run=run, metric="health")
    return runs[run]


# ---------------------------------------------------------------------------
# PyTorch Lightning


@pytest.fixture(scope="module")
def lightning_run(tmp_path_factory):
    pl = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.utilities import grad_norm

    from gradhealth_plugin.lightning import GradientHealthCallback

    class Classifier(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 16)
            self.relu = torch.nn.ReLU()
            self.fc2 = torch.nn.Linear(16, 3)

        def forward(self, x):
            return self.fc2(self.relu(self.fc1(x)))

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self(x), y)
            self.log("train/loss", loss)
            return loss

        def on_before_optimizer_step(self, optimizer):
            # Lightning's own per-parameter norms, logged beside the callback's summaries.
            self.log_dict(grad_norm(self, norm_type=2))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(48, 8), torch.randint(0, 3, (48,)))
    root = tmp_path_factory.mktemp("lightning")
    callback = GradientHealthCallback(every_n_steps=1)
    trainer = pl.Trainer(default_root_dir=str(root), max_steps=STEPS, accelerator="cpu", devices=1,
                         callbacks=[callback], log_every_n_steps=1, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Classifier(), torch.utils.data.DataLoader(data, batch_size=16))
    return {"root": root, "log_dir": trainer.logger.log_dir, "callback": callback}


def test_lightning_callback_logs_into_the_tensorboard_loggers_run(lightning_run, plugin_client):
    assert lightning_run["callback"].handle is None  # released at the end of the fit
    client = plugin_client(lightning_run["root"], samples={"gradhealth": 500})
    run = _assert_diagnosed(client, "lightning_logs/version_0", "fc1.weight", range(STEPS))
    assert "activation" in _roles(run)["relu"]
    assert run["last_step"] == STEPS - 1


def test_lightning_grad_norm_scalars_still_read(lightning_run, plugin_client):
    client = plugin_client(lightning_run["root"], samples={"gradhealth": 500})
    run = {r["run"]: r for r in client.ok("/runs")["runs"]}["lightning_logs/version_0"]
    assert run["unclassified"] == []
    # Lightning's grad_2.0_norm/<param> scalar joins the callback's summaries in the parameter's row.
    layers = {layer["name"]: layer for layer in run["layers"]}
    for name in ("fc1.weight", "fc2.bias"):
        gradient = layers[name]["roles"]["gradient"]
        assert f"grad_2.0_norm/{name}" in gradient["tags"] and gradient["source"] == "gradhealth+scalar"


@pytest.mark.parametrize("library", ["lightning", "transformers"])
def test_trainer_callbacks_take_watch_settings_and_release_the_watch(library, tmp_path):
    module = pytest.importorskip(f"gradhealth_plugin.{library}")
    with pytest.raises(ValueError, match="every_n_steps must be at least 1"):
        module.GradientHealthCallback(every_n_steps=0)
    callback = module.GradientHealthCallback(str(tmp_path), every_n_steps=7, activations=False, update_ratio=False,
                                             all_ranks=True)
    assert (callback.log_dir, callback.every_n_steps, callback.activations, callback.update_ratio,
            callback.all_ranks, callback.handle) == (str(tmp_path), 7, False, False, True, None)
    model = torch.nn.Linear(2, 2)
    callback._watch(model, str(tmp_path), torch.optim.SGD(model.parameters(), lr=0.1), 5)
    handle = callback.handle
    assert (handle.every_n_steps, handle.update_ratio, handle.step, handle.layers) == (
        7, False, 5, [(0, "gradient", "weight"), (0, "weight", "weight"), (1, "gradient", "bias"), (1, "weight", "bias")])
    callback._release()
    assert callback.handle is None and handle._closed
    callback._release()  # nothing to end


def test_integrations_are_not_imported_with_the_package():
    code = ("import sys, gradhealth_plugin.plugin, gradhealth_plugin.torch; "
            "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


# ---------------------------------------------------------------------------
# Hugging Face transformers


@pytest.fixture(scope="module")
def transformers_run(tmp_path_factory):
    transformers = pytest.importorskip("transformers")

    from gradhealth_plugin.transformers import GradientHealthCallback

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16, num_labels=2)
    model = transformers.BertForSequenceClassification(config)
    data = [{"input_ids": torch.randint(0, 64, (8,)), "attention_mask": torch.ones(8, dtype=torch.long),
             "labels": torch.tensor(i % 2)} for i in range(24)]
    out = tmp_path_factory.mktemp("transformers")
    args = transformers.TrainingArguments(output_dir=str(out), max_steps=STEPS, per_device_train_batch_size=4,
                                          learning_rate=1e-3, logging_steps=1, report_to=["tensorboard"],
                                          save_strategy="no", use_cpu=True, disable_tqdm=True)
    callback = GradientHealthCallback(every_n_steps=1)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])
    trainer.train()
    return {"out": out, "callback": callback}


def test_transformers_callback_logs_into_the_trainers_tensorboard_run(transformers_run, plugin_client):
    assert transformers_run["callback"].handle is None  # released at the end of training
    runs_dir = transformers_run["out"] / "runs"
    event_dirs = {p.parent for p in runs_dir.rglob("events.out.tfevents.*")}
    # One run: the Trainer's own TensorBoard file (loss, learning rate) and gradhealth's side by side.
    assert len(event_dirs) == 1, event_dirs
    (run_dir,) = event_dirs
    assert {p.name.endswith(".gradhealth") for p in run_dir.glob("events.out.tfevents.*")} == {True, False}
    client = plugin_client(runs_dir, samples={"gradhealth": 500})
    layer = "bert.encoder.layer.0.attention.self.query.weight"
    # The Trainer logs the k-th optimizer step's loss at step k: its gradients share that step.
    run = _assert_diagnosed(client, run_dir.name, layer, range(1, STEPS + 1))
    assert run["last_step"] == STEPS
    assert "activation" in _roles(run)["bert.encoder.layer.0.intermediate.intermediate_act_fn"]
