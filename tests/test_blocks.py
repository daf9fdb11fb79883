"""Unit tests of the blocks heatmap rows fold into, on the names real models and real logs carry."""

import collections
import csv
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from gradhealth_plugin.analysis.blocks import blocks
from gradhealth_plugin.reading import tags
from tests.conftest import WILD
from tests.test_wild import OWN_LABELS


def blocks_of(tag_names: Sequence[str], siblings: Sequence[str] = ()) -> Dict[str, Optional[str]]:
    """Layer -> block, the layers and their modules read from tags as the plugin reads them."""
    infos = [tags.classify_histogram(t, siblings or tag_names) for t in tag_names]
    assert all(infos), tag_names
    return dict(zip([i.layer for i in infos], blocks([i.layer for i in infos], [i.group for i in infos])))


def _gpt2_names(n_layer: int = 3) -> List[str]:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=n_layer, n_embd=8, n_head=2, vocab_size=16, n_positions=8)
    return [name for name, _ in transformers.GPT2LMHeadModel(config).named_parameters()]


def test_gpt2_layers_fold_into_their_transformer_block():
    names = _gpt2_names()
    got = blocks_of([f"weights/{n}" for n in names])
    assert got["transformer.h.1.attn.c_attn.weight"] == "transformer.h.1"
    assert got["transformer.h.1.mlp.c_fc.bias"] == "transformer.h.1"
    assert got["transformer.h.2.ln_1.weight"] == "transformer.h.2"
    # Every parameter of block h.i, and nothing else, is in block transformer.h.i.
    for name, block in got.items():
        if name.startswith("transformer.h."):
            assert block == ".".join(name.split(".")[:3])
    assert sum(b == "transformer.h.0" for b in got.values()) == 12
    # Embeddings share no block; the final norm's weight and bias are one module.
    assert got["transformer.wte.weight"] is None and got["transformer.wpe.weight"] is None
    assert got["transformer.ln_f.weight"] == got["transformer.ln_f.bias"] == "transformer.ln_f"


def _resnet_names() -> List[str]:
    """torchvision's resnet18 parameter names (2 BasicBlocks per stage, a downsample from stage 2)."""
    names = ["conv1.weight", "bn1.weight", "bn1.bias"]
    for stage in range(1, 5):
        for block in range(2):
            p = f"layer{stage}.{block}"
            names += [f"{p}.conv1.weight", f"{p}.bn1.weight", f"{p}.bn1.bias",
                      f"{p}.conv2.weight", f"{p}.bn2.weight", f"{p}.bn2.bias"]
            if stage > 1 and block == 0:
                names += [f"{p}.downsample.0.weight", f"{p}.downsample.1.weight", f"{p}.downsample.1.bias"]
    return names + ["fc.weight", "fc.bias"]


def test_resnet_layers_fold_into_their_residual_block():
    got = blocks_of([f"grads/{n}" for n in _resnet_names()])
    assert got["layer4.1.conv1.weight"] == got["layer4.1.bn1.bias"] == "layer4.1"
    assert got["layer2.0.downsample.1.bias"] == "layer2.0"
    assert collections.Counter(got.values())["layer2.0"] == 9
    assert got["conv1.weight"] is None
    assert got["bn1.weight"] == got["bn1.bias"] == "bn1"
    assert got["fc.weight"] == "fc"


def test_resnet_activations_fold_like_their_parameters():
    modules = [n.rsplit(".", 1)[0] for n in _resnet_names() if n.endswith("weight")]
    got = blocks_of([f"activations/{m}" for m in modules])
    assert got["layer3.1.bn2"] == got["layer3.1.conv1"] == "layer3.1"
    assert got["layer3.0.downsample.0"] == "layer3.0"
    assert got["conv1"] is None and got["fc"] is None


def _bert_tf_names(n_layer: int = 3) -> List[str]:
    names = ["bert/embeddings/word_embeddings", "bert/embeddings/LayerNorm/gamma", "bert/embeddings/LayerNorm/beta"]
    for i in range(n_layer):
        p = f"bert/encoder/layer_{i}"
        for part in ("attention/self/query", "attention/self/key", "attention/self/value",
                     "attention/output/dense", "intermediate/dense", "output/dense"):
            names += [f"{p}/{part}/kernel", f"{p}/{part}/bias"]
        names += [f"{p}/attention/output/LayerNorm/gamma", f"{p}/output/LayerNorm/beta"]
    return names + ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"]


def test_bert_layers_fold_into_their_encoder_layer():
    got = blocks_of([f"gradients/{n}:0" for n in _bert_tf_names()])
    assert got["bert/encoder/layer_2/attention/self/query/kernel"] == "bert/encoder/layer_2"
    assert got["bert/encoder/layer_2/output/LayerNorm/beta"] == "bert/encoder/layer_2"
    assert got["bert/pooler/dense/kernel"] == got["bert/pooler/dense/bias"] == "bert/pooler/dense"
    assert got["bert/embeddings/word_embeddings"] is None


def test_bert_torch_names_fold_the_same_way():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=8, num_attention_heads=2,
                                     intermediate_size=8, vocab_size=16, max_position_embeddings=8)
    names = [n for n, _ in transformers.BertModel(config).named_parameters()]
    got = blocks_of([f"weights/{n}" for n in names])
    layered = [n for n in names if n.startswith("encoder.layer.1.")]
    assert layered and all(got[n] == "encoder.layer.1" for n in layered)


def test_keras_layers_fold_into_their_layer_and_a_lone_scope_does_not_swallow_the_model():
    got = blocks_of(["dense/kernel_0", "dense/bias_0", "dense_3/kernel_0", "dense_3/bias_0", "embedding/embeddings_0"])
    assert got == {"dense/kernel": "dense", "dense/bias": "dense", "dense_3/kernel": "dense_3",
                   "dense_3/bias": "dense_3", "embedding/embeddings": None}
    # model_1 has no numbered sibling: it is a scope, not a repeated block.
    got = blocks_of(["gradients/model_1/dense/kernel:0", "gradients/model_1/dense_1/kernel:0"])
    assert set(got.values()) == {None}


def test_rows_sharing_no_block_stay_their_own_row():
    assert blocks(["a", "b.weight"], ["a", "b"]) == [None, None]
    assert blocks([], []) == []


def _labelled_rows() -> Dict[Tuple[str, str], List[str]]:
    """Per labelled run and role, its histogram tags, from the corpus's labels."""
    out: Dict[Tuple[str, str], List[str]] = collections.defaultdict(list)
    for path in (WILD / "labels.tsv", OWN_LABELS):
        if not path.is_file():
            continue
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                if row["role"] in (tags.WEIGHT, tags.GRADIENT, tags.ACTIVATION):
                    out[(row["run_dir"], row["role"])].append(row["tag"])
    return out


@pytest.mark.skipif(not WILD.is_dir(), reason=f"real-world event-file corpus not found at {WILD}")
def test_blocks_of_the_labelled_real_world_runs():
    runs = _labelled_rows()
    assert runs
    folded = 0
    for (run, role), tag_names in runs.items():
        infos = [i for i in (tags.classify_histogram(t, tag_names) for t in tag_names) if i is not None]
        layers = list(dict.fromkeys(i.layer for i in infos))
        module = {i.layer: i.group for i in infos}
        got = dict(zip(layers, blocks(layers, [module[l] for l in layers])))
        members = collections.defaultdict(list)
        for layer, block in got.items():
            if block is not None:
                members[block].append(layer)
        for block, names in members.items():
            # A block has two rows or more, each named inside it.
            assert len(names) > 1, (run, block)
            assert all(n == block or n.startswith((block + "/", block + ".")) for n in names), (run, block, names)
            # Only a numbered part with numbered siblings gathers several modules.
            assert len({module[n] for n in names}) == 1 or block[-1].isdigit(), (run, block, names)
            folded += 1
        # Two rows of one module (a kernel and its bias) always share its block.
        by_module = collections.defaultdict(set)
        for layer in layers:
            by_module[module[layer]].add(got[layer])
        for mod, found in by_module.items():
            if sum(module[l] == mod for l in layers) > 1:
                assert len(found) == 1 and None not in found, (run, mod, found)
    assert folded > 0


@pytest.fixture(scope="session")
def torch_blocks_logdir(tmp_path_factory):
    """Run ``.``: gradhealth's torch watch() of a model with a ModuleList of 3 nested blocks."""
    from tests.conftest import _written_logdir

    return _written_logdir(tmp_path_factory, "torch_watch_blocks")


@pytest.mark.parametrize("role", [tags.GRADIENT, tags.WEIGHT, tags.ACTIVATION])
def test_heatmap_names_each_rows_block_on_a_watched_torch_model(torch_blocks_logdir, loader_client, role):
    client = loader_client(torch_blocks_logdir)
    run = client.ok("/runs")["runs"][0]["run"]
    h = client.ok("/heatmap", run=run, role=role)
    assert len(h["blocks"]) == len(h["layers"]) > 0
    got = dict(zip(h["layers"], h["blocks"]))
    for layer, block in got.items():
        if layer.startswith("blocks."):
            # blocks.<i>.attn.qkv.weight, blocks.<i>.mlp.2.bias, blocks.<i>.norm (an activation) ...
            assert block == ".".join(layer.split(".")[:2]), (layer, block)
    assert {b for b in got.values() if b and b.startswith("blocks.")} == {"blocks.0", "blocks.1", "blocks.2"}
    # The embedding has one tensor and no bias: it shares no block.
    assert got["embed.weight" if role != tags.ACTIVATION else "embed"] is None
    if role != tags.ACTIVATION:
        assert got["head.weight"] == got["head.bias"] == "head"
