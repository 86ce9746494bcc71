"""The training app: resume equivalence, refusals, config errors, end-to-end runs."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import TINY_TOY, compose_config
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ConfigKeyError, ValidationError
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seq2seq.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from seq2seq.runs.assemble import train_and_test


def _train(
    tmp_path, name: str, overrides: list[str], base: list[str] = TINY_TOY
) -> tuple[dict, list[float]]:
    """Run the app in `tmp_path/name` (`base` + `overrides`, a tiny toy run by default);
    return results and the per-step training losses."""
    cfg = compose_config(base + [f"data.root={tmp_path / 'data'}"] + overrides)
    losses: list[float] = []
    from seq2seq.training import trainer as trainer_module

    original = trainer_module.Trainer.fit

    def recording_fit(self):
        progress = original(self)
        losses.extend(self.train_losses)
        return progress

    trainer_module.Trainer.fit = recording_fit
    try:
        results = train_and_test(cfg, tmp_path / name, outputs_root=tmp_path)
    finally:
        trainer_module.Trainer.fit = original
    return results, losses


def test_resumed_run_gives_the_same_losses_step_by_step(tmp_path):
    common = ["trainer.valid_every=6", "trainer.test_search.beam_size=1"]
    _, straight = _train(tmp_path, "straight", common + ["trainer.max_steps=12"])
    _, first_half = _train(tmp_path, "halves", common + ["trainer.max_steps=6"])
    _, second_half = _train(
        tmp_path,
        "resume",
        common + ["trainer.max_steps=12", f"trainer.resume={tmp_path / 'halves'}"],
    )
    assert len(straight) == 12
    assert first_half + second_half == pytest.approx(straight, rel=1e-5, abs=1e-6)
    # The resumed run continued in the original run folder.
    assert (
        load_checkpoint(tmp_path / "halves" / "checkpoints" / "last.pt")["progress"]["step"] == 12
    )


def test_mismatched_checkpoint_is_refused_with_what_differs(tmp_path):
    _train(tmp_path, "small", ["trainer.max_steps=2", "trainer.valid_every=2"])
    with pytest.raises(CheckpointError, match=r"encoder\.hidden_size: checkpoint 16, config 24"):
        _train(
            tmp_path,
            "bigger",
            [
                "trainer.max_steps=4",
                "encoder.hidden_size=24",
                f"trainer.resume={tmp_path / 'small' / 'checkpoints' / 'last.pt'}",
            ],
        )


def test_corrupt_checkpoint_gives_one_clear_error(tmp_path):
    path = tmp_path / "broken.pt"
    path.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="broken.pt"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")


@pytest.mark.parametrize(
    ("override", "error", "key"),
    [
        ("trainer.max_stepz=3", ConfigCompositionException, "max_stepz"),
        ("encoder.cell=grux", ConfigCompositionException, "cell"),
        ("trainer.max_steps=many", ConfigCompositionException, "max_steps"),
        ("attention.score.hidden_dim=many", ConfigCompositionException, "hidden_dim"),
    ],
)
def test_wrong_config_key_or_value_fails_with_its_name(override, error, key):
    with pytest.raises((error, ConfigKeyError, ValidationError)) as failure:
        compose_config(TINY_TOY + [override])
    assert key in str(failure.value) + str(failure.value.__cause__)


def test_interrupted_checkpoint_write_leaves_the_previous_one_intact(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    payload = {
        "format": 1,
        "model": {"w": torch.ones(3)},
        "config": {},
        "tokenizers": {},
        "progress": {},
    }
    save_checkpoint(path, payload)

    def crash_midway(obj, handle, *args, **kwargs):
        handle.write(b"partial bytes")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", crash_midway)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {**payload, "model": {"w": torch.zeros(3)}})
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.ones(3))


def test_toy_run_writes_a_complete_run_folder(tmp_path):
    results, _ = _train(tmp_path, "run", ["trainer.max_steps=8", "trainer.valid_every=4"])
    run = tmp_path / "run"
    on_disk = json.loads((run / "results.json").read_text())
    assert on_disk["test"]["bleu"] == pytest.approx(results["test"]["bleu"])
    assert {"bleu", "chrf", "bleu_signature"} <= set(on_disk["test"])
    payload = load_checkpoint(run / "checkpoints" / "best.pt")
    assert payload["tokenizers"]["tgt"]["model"]
    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"tensors": 0})
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    expected = {"train/loss", "train/ppl", "train/lr", "train/grad_norm", "train/tokens_per_sec"}
    expected |= {"valid/loss", "valid/ppl", "valid/bleu", "valid/chrf"}
    assert expected <= scalars
    assert [e.step for e in events.Scalars("valid/bleu")] == [4, 8]
    assert any(tag.startswith("valid/samples") for tag in events.Tags()["tensors"])
    plugins = events.PluginTagToContent("hparams")
    assert "_hparams_/experiment" in plugins and "_hparams_/session_start_info" in plugins


def test_averaged_weights_are_the_mean_of_the_validation_snapshots(tmp_path):
    results, _ = _train(
        tmp_path, "avg", ["trainer.max_steps=6", "trainer.valid_every=2", "trainer.average_last=2"]
    )
    assert results["averaged"] is not None and "valid_bleu" in results["averaged"]
    from seq2seq.training.averaging import mean_weights

    snapshots = [{"w": torch.tensor([1.0, 3.0]), "n": torch.tensor(7)},
                 {"w": torch.tensor([3.0, 5.0]), "n": torch.tensor(9)}]  # fmt: skip
    averaged = mean_weights(snapshots)
    assert torch.equal(averaged["w"], torch.tensor([2.0, 4.0]))
    assert averaged["n"].item() == 9  # integer buffers are taken from the newest snapshot


def test_the_trainer_reads_typed_settings_and_holds_no_config_node(tmp_path):
    import dataclasses

    from omegaconf import DictConfig, OmegaConf

    from seq2seq.runs.assemble import assemble_trainer

    cfg = compose_config(TINY_TOY + [f"data.root={tmp_path}", "trainer.max_steps=7",
                                     "data.max_tokens=300", "trainer.patience=4"])  # fmt: skip
    trainer = assemble_trainer(cfg, tmp_path / "run", observe=False)
    settings = trainer.settings
    assert (settings.max_steps, settings.max_tokens, settings.progress_bar) == (7, 300, False)
    assert trainer.selection.patience == 4 and trainer.sampler.max_tokens == 300
    assert settings.run_config == OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.max_steps = 8
    held = [name for name, value in vars(trainer).items() if isinstance(value, DictConfig)]
    assert held == []


def test_a_valid_subset_spreads_over_the_whole_split():
    from seq2seq.data.batching import ParallelData
    from seq2seq.training.trainer import _evenly_spaced

    split = ParallelData([([i], [i]) for i in range(10)], list("abcdefghij"), list("ABCDEFGHIJ"))
    assert _evenly_spaced(split, 4).src_lines == ["a", "d", "g", "j"]
    assert _evenly_spaced(split, None) is split and _evenly_spaced(split, 20) is split


def test_scheduled_sampling_feeds_back_the_models_own_predictions(tmp_path):
    from seq2seq.runs.assemble import assemble_trainer
    from seq2seq.training.objectives import LossParts, scheduled_inputs

    cfg = compose_config(TINY_TOY + [f"data.root={tmp_path}", "trainer.scheduled_sampling=1.0",
                                     "trainer.max_steps=10"])  # fmt: skip
    trainer = assemble_trainer(cfg, tmp_path / "run", observe=False)
    model, batch = trainer.model, trainer.data.train.batch(list(range(8)))
    fed: list[torch.Tensor] = []  # the decoder inputs the objective is given

    class Recorded:
        def loss(self, model, batch):
            fed.append(batch.tgt_in)
            return LossParts(loss=torch.zeros((), requires_grad=True), nll=torch.zeros(()))

    trainer.objective = Recorded()
    trainer.progress.step = 0  # p = 0 at the start: gold inputs
    trainer.train_step(batch)
    assert torch.equal(fed[-1], batch.tgt_in)
    trainer.progress.step = 10  # p = 1 at the end: every real input after BOS is a prediction
    torch.manual_seed(0)
    trainer.train_step(batch)
    torch.manual_seed(0)  # the same dropout in the prediction pass
    assert torch.equal(fed[-1], scheduled_inputs(model, batch, 1.0, trainer.autocast))

    model.eval()  # no dropout, so the prediction pass is reproducible here
    assert torch.equal(scheduled_inputs(model, batch, 0.0, trainer.autocast), batch.tgt_in)
    mixed = scheduled_inputs(model, batch, 1.0, trainer.autocast)
    with torch.no_grad():
        predicted = model(batch.src, batch.src_mask, batch.tgt_in)[0].argmax(-1)[:, :-1]
    real = batch.tgt_in[:, 1:] != 0
    assert torch.equal(mixed[:, 0], batch.tgt_in[:, 0])
    assert torch.equal(mixed[:, 1:][real], predicted[real])
    assert torch.equal(mixed[:, 1:][~real], batch.tgt_in[:, 1:][~real])


@pytest.mark.slow  # inductor compiles C++ kernels: about a minute
def test_compiled_training_step_gives_the_eager_losses(tmp_path):
    # Without dropout: compiled graphs draw their random masks from another generator.
    common = ["trainer.max_steps=3", "trainer.valid_every=3", "trainer.test_search.beam_size=1"]
    common += ["decoder.dropout=0", "model.embed_dropout=0"]
    _, eager = _train(tmp_path, "eager", common)
    _, compiled = _train(tmp_path, "compiled", common + ["trainer.compile=true"])
    assert len(compiled) == 3
    assert compiled == pytest.approx(eager, rel=1e-4, abs=1e-5)


def test_a_resumed_run_keeps_the_weights_kept_for_averaging(tmp_path):
    common = ["trainer.valid_every=2", "trainer.average_last=2", "trainer.test_search.beam_size=1"]
    straight, _ = _train(tmp_path, "straight", common + ["trainer.max_steps=6"])
    _train(tmp_path, "halves", common + ["trainer.max_steps=4"])
    resumed, _ = _train(
        tmp_path,
        "resume",
        common + ["trainer.max_steps=6", f"trainer.resume={tmp_path / 'halves'}"],
    )
    one = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")["snapshots"]
    two = load_checkpoint(tmp_path / "halves" / "checkpoints" / "last.pt")["snapshots"]
    assert len(one) == len(two) == 2  # the weights at steps 4 and 6
    for kept, restored in zip(one, two):
        for name, weight in kept.items():
            assert torch.equal(restored[name], weight), name
    assert resumed["averaged"] == straight["averaged"]


def test_stop_signals_are_caught_only_inside_the_block_and_restored_after():
    import signal
    import threading

    from seq2seq.training.stopping import StopRequest

    def previous(signum, frame):
        raise AssertionError("the trainer's handler should be in place")

    old = signal.signal(signal.SIGUSR1, previous)
    try:
        with StopRequest() as stop:
            signal.raise_signal(signal.SIGUSR1)
            signal.raise_signal(signal.SIGTERM)  # the first signal is the one reported
            assert stop.received == signal.SIGUSR1
            with pytest.raises(KeyboardInterrupt):  # Ctrl-C while stopping: at once
                signal.raise_signal(signal.SIGINT)
            assert stop.immediate
        assert signal.getsignal(signal.SIGUSR1) is previous
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGUSR1, old)

    installed = []

    def in_a_thread():
        with StopRequest():
            installed.append(signal.getsignal(signal.SIGTERM))

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join()
    assert installed == [signal.SIG_DFL]  # signal handlers belong to the main thread
