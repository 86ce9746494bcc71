"""Out-of-range trainer and model settings: refused at start-up, before any data is prepared
or any step is taken, by an error that names the key; the command exits 2 with one error
line. Before these checks `trainer.accumulate=0` was a ZeroDivisionError after training
had started, `trainer.max_steps=-5` was accepted and a NaN `grad_clip` turned clipping off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TINY_TOY, compose_config

from seq2seq.config.build import ConfigError
from seq2seq.config.value_checks import check_settings
from seq2seq.runs.assemble import check_startup, train_and_test

REPO_ROOT = Path(__file__).resolve().parents[2]
# Bounded even if a bad value slipped through: two steps on a small toy set.
QUICK = TINY_TOY + ["trainer.max_steps=2", "trainer.valid_every=2", "logging.tensorboard=false",
                    "trainer.test_search.beam_size=1", "data.source.train_size=64",
                    "data.source.valid_size=8", "data.source.test_size=8"]  # fmt: skip
# QUICK without the toy source's options, for another data config (its source has none of them)
QUICK_MODEL = [override for override in QUICK if not override.startswith("data.source.")]

pytestmark = pytest.mark.attack("settings")

BAD_VALUES = [
    "trainer.accumulate=0",
    "trainer.log_every=0",
    "trainer.valid_every=0",
    "trainer.max_steps=-5",
    "trainer.max_steps=0",
    "trainer.max_epochs=0",
    "trainer.patience=-1",
    "trainer.label_smoothing=1.0",
    "trainer.label_smoothing=-0.1",
    "trainer.scheduled_sampling=1.5",
    "trainer.grad_clip=nan",
    "trainer.grad_clip=-1.0",
    "trainer.grad_clip=inf",
    "trainer.seed=-1",
    "trainer.threads=-2",
    "trainer.max_minutes=0",
    "trainer.device=banana",
    "trainer.test_search.beam_size=0",
    "trainer.test_search.batch_size=0",
    "trainer.test_search.max_len_a=-1",
    "trainer.test_search.length_penalty=nan",
    "model.embed_dim=0",
    "model.embed_dropout=1.0",
    "encoder.hidden_size=0",
    "decoder.hidden_size=-1",
    "encoder.num_layers=0",
    "decoder.num_layers=0",
    "encoder.num_layers=100000",
    "decoder.num_layers=100000",
    "model.max_parameters=0",
    "trainer.device=meta",
    "trainer.device=mps",
    "trainer.device=cuda:x",
    "encoder.dropout=1.0",
    "decoder.dropout=-0.1",
    "attention.heads=0",
    "attention.dropout=1.5",
    "optim.lr=0",
    "optim.lr=-0.001",
    "optim.lr=nan",
    "optim.lr=inf",
    "optim.eps=0",
    "optim.weight_decay=-0.1",
    "schedule.warmup_steps=-1",
]
TRANSFORMER = ["encoder=transformer", "decoder=transformer", "encoder.hidden_size=32",
               "decoder.hidden_size=32", "encoder.ff_size=32", "decoder.ff_size=32"]  # fmt: skip


def key_of(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+")


@pytest.mark.parametrize("override", BAD_VALUES)
def test_bad_value_is_refused_before_training(override, tmp_path, fault_figures):
    cfg = compose_config(QUICK + [override])
    with pytest.raises(ConfigError, match=key_of(override).replace(".", r"\.")):
        train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
    assert not (tmp_path / "run").exists()
    fault_figures.add("bad_settings_refused", 1)


# The options of the attention's score and region (each checked against its component's
# dataclass) and the error that refuses each, word for word up to the value.
BAD_OPTIONS = {
    "window_zero": (["attention/region=local", "attention.region.window=0"],
                    "attention.region.window must be an integer of at least 1, got 0"),
    "tau_zero": (["attention/region=hard", "attention.region.gumbel_tau=0"],
                 "attention.region.gumbel_tau must be a finite number > 0, got 0"),
    "scale_negative": (["attention/score=cosine", "attention.score.scale=-1"],
                       "attention.score.scale must be a finite number > 0 (or null), got -1"),
    "scale_nan": (["attention/score=cosine", "attention.score.scale=nan"],
                  "attention.score.scale must be a finite number > 0 (or null), got nan"),
    "hidden_zero": (["attention.score.hidden_dim=0"],
                    "attention.score.hidden_dim must be an integer of at least 1 (or null), got 0"),
    "misspelt": (["attention=local", "+attention.region.windw=3"],
                 "attention.region.windw: not an option of region 'local' (did you mean window?); "
                 "its options: window, mode"),
    "left_behind": (["attention=local", "attention.region.name=soft"],
                    "attention.region.window: not an option of region 'soft', which has none"),
    "unknown_region": (["attention.region=everywhere"],
                       "attention.region must be one of the registered regions (soft, "),
}  # fmt: skip


@pytest.mark.parametrize(("overrides", "message"), BAD_OPTIONS.values(), ids=BAD_OPTIONS)
def test_bad_attention_option_is_refused_before_training(
    overrides, message, tmp_path, fault_figures
):
    cfg = compose_config(QUICK + overrides)
    with pytest.raises(ConfigError) as failure:
        train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
    assert str(failure.value).startswith(message)
    assert not (tmp_path / "run").exists()
    fault_figures.add("bad_settings_refused", 1)


@pytest.mark.parametrize(
    "override", ["encoder.heads=0", "decoder.ff_size=0", "decoder.max_positions=0"]
)
def test_bad_transformer_value_is_refused(override):
    cfg = compose_config(QUICK + TRANSFORMER + [override])
    with pytest.raises(ConfigError, match=key_of(override).replace(".", r"\.")):
        check_settings(cfg)


@pytest.mark.parametrize(
    "overrides",
    [["trainer.grad_clip=0"], ["trainer.grad_clip=0.5", "trainer.label_smoothing=0"],
     ["trainer.max_minutes=null", "attention.head_dim=null"], ["trainer.seed=0"],
     ["attention=local", "attention.region=soft"],
     ["attention/score=cosine", "attention.score.scale=5"]],
    ids=["no_clipping", "small_clip", "nulls", "seed_zero", "region_by_name", "fixed_cosine"],
)  # fmt: skip
def test_good_values_pass(overrides):
    check_settings(compose_config(QUICK + overrides))


@pytest.mark.parametrize(
    "experiment",
    sorted(path.stem for path in (REPO_ROOT / "configs" / "experiment").glob("*.yaml")),
)
def test_every_preset_passes(experiment):
    """No false alarm on the configurations the project ships."""
    check_startup(compose_config([f"+experiment={experiment}"]))


# Keys no schema knows, added with `+`: Hydra accepts them and the run ignored them.
UNKNOWN_KEYS = [
    ("+trainer.typo=1", "trainer.typo", "closest known: trainer."),
    ("+trainer.max_step=50", "trainer.max_step", "did you mean trainer.max_steps?"),
    ("+encoder.hiden_size=8", "encoder.hiden_size", "did you mean encoder.hidden_size?"),
    ("+trainer.test_search.beam=2", "trainer.test_search.beam", "trainer.test_search.beam_size"),
    ("+traner.seed=3", "traner", "did you mean trainer?"),
]


@pytest.mark.parametrize("override, key, hint", UNKNOWN_KEYS, ids=[u[0] for u in UNKNOWN_KEYS])
def test_unknown_key_is_refused_naming_its_closest_name(override, key, hint, tmp_path):
    cfg = compose_config(QUICK + [override])
    with pytest.raises(ConfigError) as refused:
        train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
    assert str(refused.value).startswith(f"{key}: ") and hint in str(refused.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "overrides, key",
    [(QUICK_MODEL + TRANSFORMER
      + ["data=tatoeba_zh_en", "data.max_len=1000000", "data.max_tokens=2000000"],
      "encoder.max_positions"),
     (QUICK + TRANSFORMER + ["decoder.max_positions=12"], "decoder.max_positions"),
     (QUICK + ["encoder=cnn", "decoder=cnn", "attention=dot", "encoder.max_positions=5"],
      "encoder.max_positions")],
    ids=["max_len_1M", "toy_decoder_12", "cnn_encoder_5"],
)  # fmt: skip
def test_position_table_shorter_than_max_len_is_refused(overrides, key, tmp_path):
    """The toy task's sequences take data.source.max_len + 1 = 13 positions; a 1 MB line with
    data.max_len=1000000 used to end in a traceback after 350,000 positions."""
    cfg = compose_config(overrides + [f"data.root={tmp_path / 'data'}"])
    with pytest.raises(ConfigError, match=rf"^{key}=\d+ is smaller than"):
        train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
    assert not (tmp_path / "data").exists()


def test_position_table_that_just_fits_passes():
    check_startup(compose_config(QUICK + TRANSFORMER + ["decoder.max_positions=13"]))


@pytest.mark.parametrize("override", ["trainer.accumulate=0", "+trainer.typo=1"])
def test_command_line_exits_2_with_one_error_line(override, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.train", "data=toy_copy", override,
         f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    output = result.stdout + result.stderr
    errors = [line for line in output.splitlines() if "ERROR" in line or "Error" in line]
    assert result.returncode == 2, output
    assert "Traceback" not in output
    assert len(errors) == 1 and key_of(override) in errors[0], output
    assert "parameters" not in output  # stopped before the model was built
