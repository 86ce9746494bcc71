"""A full disk while a checkpoint is written: one CheckpointError naming the file and the
system's reason, no temporary file left behind, the previous checkpoint intact."""

from __future__ import annotations

import errno
import os
import resource

import pytest
import torch
from helpers import TINY_TOY, compose_config, run_training_process, toy_train_command

from seq2seq.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from seq2seq.cli.train import USER_ERRORS
from seq2seq.runs.assemble import train_and_test
from seq2seq.runs.folder import remove_stale_temporaries, run_folder_lock


def _payload(value: float) -> dict:
    return {"format": 1, "model": {"w": torch.full((4,), value)}, "config": {},
            "tokenizers": {}, "progress": {"step": int(value)}}  # fmt: skip


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _torch_save_fills_the_disk(obj, handle, *args, **kwargs):
    handle.write(b"the first bytes fit")
    _disk_full()


@pytest.mark.attack("disk")
@pytest.mark.parametrize("where", ["torch.save", "os.fsync"])
def test_a_full_disk_keeps_the_previous_checkpoint_and_no_temporary_file(
    tmp_path, monkeypatch, where
):
    path = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint(path, _payload(1.0), keep_previous=True)
    if where == "torch.save":
        monkeypatch.setattr(torch, "save", _torch_save_fills_the_disk)
    else:
        monkeypatch.setattr(os, "fsync", _disk_full)
    with pytest.raises(CheckpointError) as failure:
        save_checkpoint(path, _payload(2.0), keep_previous=True)
    monkeypatch.undo()
    message = str(failure.value)
    assert str(path) in message and "No space left on device" in message
    assert "\n" not in message
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.pt"]
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.full((4,), 1.0))
    assert CheckpointError in USER_ERRORS  # the CLI reports it in one line, exit code 2


@pytest.mark.attack("disk")
def test_a_full_disk_during_training_stops_the_run_and_keeps_the_last_checkpoint(
    tmp_path, monkeypatch
):
    from seq2seq import checkpoint

    cfg = compose_config(TINY_TOY + [f"data.root={tmp_path / 'data'}", "trainer.max_steps=6",
                                     "trainer.valid_every=2", "logging.tensorboard=false"])  # fmt: skip
    writes = {"count": 0}
    real_save = torch.save

    def fill_the_disk_on_the_third_write(obj, handle, *args, **kwargs):
        writes["count"] += 1
        if writes["count"] == 3:  # step 2 wrote best.pt and last.pt; step 4 fails
            _torch_save_fills_the_disk(obj, handle)
        real_save(obj, handle, *args, **kwargs)

    monkeypatch.setattr(checkpoint.torch, "save", fill_the_disk_on_the_third_write)
    with pytest.raises(CheckpointError, match="No space left on device"):
        train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
    monkeypatch.undo()
    folder = tmp_path / "run" / "checkpoints"
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert load_checkpoint(folder / "last.pt")["progress"]["step"] == 2


@pytest.mark.attack("disk")
def test_the_cli_reports_a_file_size_limit_in_one_line_with_exit_code_2(tmp_path):
    """A real failing write: the process may not write files over 100 kB (RLIMIT_FSIZE;
    Python ignores SIGXFSZ, so the write fails with EFBIG), and a checkpoint is larger."""

    def limit_file_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    run_dir = tmp_path / "run"
    command = toy_train_command(tmp_path, run_dir, "trainer.max_steps=2", "trainer.valid_every=2",
                                "logging.tensorboard=false")  # fmt: skip
    finished = run_training_process(command, preexec_fn=limit_file_size)
    assert finished.returncode == 2, finished.stdout[-3000:]
    assert "Traceback" not in finished.stdout
    assert "cannot write checkpoint" in finished.stdout and "File too large" in finished.stdout
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.attack("disk")
def test_a_run_removes_the_temporary_files_of_a_writer_killed_mid_write(tmp_path):
    folder = tmp_path / "checkpoints"
    save_checkpoint(folder / "last.pt", _payload(1.0))
    stale = folder / ".last.pt.99999.tmp"  # what kill -9 during a write leaves
    stale.write_bytes(b"half a checkpoint")
    with run_folder_lock(tmp_path):
        remove_stale_temporaries(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["last.pt"]
