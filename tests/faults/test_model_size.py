"""Oversized models: a config or a checkpoint whose values describe billions of numbers is
refused before anything is allocated, naming the key (a config) or the first differing
parameter (a checkpoint). Before these checks, `model.embed_dim=1000000`,
`encoder.num_layers=100000`, `decoder.num_layers=100000`, `encoder.ff_size=10000000` and
`encoder.max_positions=5000000` each grew the process past 1.5 GB within seconds, from the
command line and from a checkpoint's config alike.

The estimate these checks rest on (`seq2seq.config.sizing`, the model built on the meta device and
extrapolated for deep stacks) is compared with the parameters of the really built model.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config

from seq2seq.checkpoint import CheckpointError
from seq2seq.config.build import ConfigError, build_model, count_parameters
from seq2seq.config.sizing import Vocabulary, estimate_size
from seq2seq.runs.assemble import check_startup, train_and_test
from seq2seq.search.translator import Translator

REPO_ROOT = Path(__file__).resolve().parents[2]
QUICK = ["trainer.max_steps=2", "trainer.valid_every=2", "logging.tensorboard=false",
         "trainer.test_search.beam_size=1"]  # fmt: skip
TOY_SIZES = ["data.source.train_size=64", "data.source.valid_size=8", "data.source.test_size=8"]
TINY_TRANSFORMER = TINY_TOY + QUICK + TOY_SIZES + [
    "encoder=transformer", "decoder=transformer", "attention=multihead",
    "encoder.hidden_size=32", "decoder.hidden_size=32", "encoder.ff_size=32",
    "decoder.ff_size=32", "encoder.num_layers=1", "decoder.num_layers=1",
    "encoder.heads=2", "decoder.heads=2", "attention.heads=2",
]  # fmt: skip
# The values the fault run found; each would need gigabytes if it were built.
OVERSIZED = [
    ["model.embed_dim=1000000", "model.tie_embeddings=false"],
    ["model.embed_dim=1000000"],
    ["encoder.num_layers=1000"],
    ["decoder.num_layers=1000"],
    ["encoder.ff_size=10000000"],
    ["encoder.max_positions=5000000"],
    ["model.max_parameters=1000"],
]
FAMILIES = [
    ["encoder=transformer", "decoder=transformer", "attention=multihead"],
    ["encoder=gru", "decoder=gru", "attention=additive"],
    ["encoder=lstm", "decoder=lstm", "attention=general"],
    ["encoder=rnn", "decoder=rnn", "attention=dot"],
    ["encoder=cnn", "decoder=cnn", "attention=scaled_dot"],
]

pytestmark = pytest.mark.attack("checkpoint")


def resident_bytes() -> int:
    """This process's resident memory (Linux), for checks that nothing large was allocated."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def first_key(overrides: list[str]) -> str:
    return overrides[0].split("=", 1)[0]


@pytest.mark.attack("settings")
@pytest.mark.parametrize("overrides", OVERSIZED, ids=lambda o: " ".join(o))
def test_oversized_config_is_refused_before_allocating(overrides, tmp_path):
    """The default model (Tatoeba's vocabularies of 4,000 pieces) with one value changed."""
    cfg = compose_config([f"data.root={tmp_path / 'data'}", *QUICK, *overrides])
    before = resident_bytes()
    with pytest.raises(ConfigError) as refused:
        train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
    assert resident_bytes() - before < 200 * 2**20
    message = str(refused.value)
    assert "\n" not in message
    if "model.max_parameters=1000" in overrides:  # no single value: the largest are named
        assert message.startswith("model.max_parameters") and "the cause: " in message
    elif "tie_embeddings" not in message:
        assert message.startswith("model.max_parameters") and first_key(overrides) in message
    assert not (tmp_path / "run").exists()


@pytest.mark.attack("settings")
def test_raising_the_limit_lets_a_large_model_through():
    cfg = compose_config(TINY_TRANSFORMER + ["encoder.num_layers=6", "model.max_parameters=1000"])
    with pytest.raises(ConfigError, match="encoder.num_layers=6"):
        check_startup(cfg)
    check_startup(compose_config(TINY_TRANSFORMER + ["encoder.num_layers=6"]))


@pytest.mark.attack("cli")
def test_oversized_config_on_the_command_line_exits_2(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.train", "encoder.num_layers=1000",
         f"data.root={tmp_path / 'data'}", f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "encoder.num_layers=1,000" in errors[0], output


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f[0].split("=")[1])
@pytest.mark.parametrize("layers", [(1, 1), (3, 2), (6, 7)], ids=lambda pair: f"{pair[0]}+{pair[1]}")
def test_estimate_equals_the_built_model(family, layers):
    """Exact builds (up to 4 layers) and extrapolated ones (6, 7) against the real count."""
    overrides = TINY_TOY + family + [f"encoder.num_layers={layers[0]}",
                                     f"decoder.num_layers={layers[1]}"]  # fmt: skip
    if "encoder=transformer" in family or "encoder=cnn" in family:
        overrides += ["encoder.hidden_size=32", "decoder.hidden_size=32"]
    cfg = compose_config(overrides)
    model = build_model(cfg, 17, 19)
    size = estimate_size(cfg, Vocabulary(17, 19))
    assert size.parameters == count_parameters(model)
    assert size.state_elements == sum(t.numel() for t in model.state_dict().values())
    persistent = set(model.state_dict())
    buffers = sum(b.numel() for name, b in model.named_buffers() if name not in persistent)
    assert size.buffer_elements == buffers


# ---------------------------------------------------------------- the same in a checkpoint


@pytest.fixture(scope="module")
def payload(tmp_path_factory) -> dict:
    """A tiny trained Transformer checkpoint (two steps), as plain data."""
    root = tmp_path_factory.mktemp("tiny_transformer")
    train_and_test(compose_config(TINY_TRANSFORMER), root / "run", outputs_root=root)
    return torch.load(root / "run" / "checkpoints" / "best.pt", weights_only=True)


CHECKPOINT_ATTACKS = [
    ({"model": {"embed_dim": 1_000_000, "tie_embeddings": False}}, "parameter src_embed"),
    ({"model": {"embed_dim": 1_000_000}}, "tie_embeddings"),
    ({"encoder": {"num_layers": 100_000}}, "encoder.num_layers must be"),
    ({"encoder": {"num_layers": 1_000}}, "parameter encoder.layers.1."),
    ({"decoder": {"num_layers": 1_000}}, "parameter decoder.layers.1."),
    ({"encoder": {"ff_size": 10_000_000}}, "parameter encoder.layers.0.feed_forward"),
    ({"encoder": {"max_positions": 5_000_000}}, "encoder.max_positions=5,000,000"),
    ({"decoder": {"ff_size": 48}}, "parameter decoder.layers.0.feed_forward"),
]


@pytest.mark.parametrize(
    "edit, expected", CHECKPOINT_ATTACKS, ids=[str(edit) for edit, _ in CHECKPOINT_ATTACKS]
)
def test_oversized_checkpoint_config_is_refused_before_allocating(
    payload, edit, expected, tmp_path, fault_figures
):
    hostile = copy.deepcopy(payload)
    for section, values in edit.items():
        hostile["config"][section].update(values)
    path = tmp_path / "hostile.pt"
    torch.save(hostile, path)
    before = resident_bytes()
    with pytest.raises(CheckpointError) as refused:
        Translator.load(path)
    assert resident_bytes() - before < 200 * 2**20
    message = str(refused.value)
    assert "\n" not in message and expected in message, message
    fault_figures.add("hostile_checkpoints_refused", 1)


def test_weights_of_another_shape_are_refused_naming_the_parameter(payload, tmp_path):
    hostile = copy.deepcopy(payload)
    name = next(key for key in hostile["model"] if key.startswith("decoder.layers.0."))
    hostile["model"][name] = torch.zeros(3, 5)
    torch.save(hostile, tmp_path / "hostile.pt")
    with pytest.raises(CheckpointError, match=rf"parameter {name}: shape \(3, 5\)"):
        Translator.load(tmp_path / "hostile.pt")
    del hostile["model"][name]
    torch.save(hostile, tmp_path / "hostile.pt")
    with pytest.raises(CheckpointError, match=rf"parameter {name}: missing"):
        Translator.load(tmp_path / "hostile.pt")


def test_the_untampered_checkpoint_still_loads(payload, tmp_path):
    torch.save(payload, tmp_path / "good.pt")
    Translator.load(tmp_path / "good.pt")
