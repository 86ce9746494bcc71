"""Two training processes pointed at one run folder: the second is refused while the first
holds the folder's lock; a killed process's lock does not block the folder."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from helpers import run_training_process, single_thread_env, toy_train_command

from seq2seq.runs.folder import LOCK_NAME, RunFolderBusy, run_folder_lock


@pytest.mark.attack("concurrency")
def test_a_second_run_in_the_same_folder_is_refused_and_a_killed_runs_lock_is_freed(tmp_path):
    run_dir = tmp_path / "run"
    command = toy_train_command(tmp_path, run_dir, "trainer.max_steps=100000",
                                "trainer.valid_every=4", "trainer.valid_max_sentences=4")  # fmt: skip
    first = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=single_thread_env(),
    )
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "metrics.jsonl").is_file() and time.monotonic() < deadline:
            assert first.poll() is None, "the first run ended early"
            time.sleep(0.05)
        second = run_training_process(command)
        assert second.returncode == 2, second.stdout[-3000:]
        assert "Traceback" not in second.stdout
        assert "in use by another training process" in second.stdout
        assert f"pid {first.pid}" in second.stdout and str(run_dir) in second.stdout
        assert first.poll() is None  # the first run was not disturbed
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # The lock dies with its process (a resume after kill -9 is run in test_resume.py).
    with run_folder_lock(run_dir):
        assert (run_dir / LOCK_NAME).read_text().strip() == str(os.getpid())


@pytest.mark.attack("concurrency")
def test_the_run_folder_lock_is_exclusive_and_released(tmp_path):
    with run_folder_lock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text().strip() == str(os.getpid())
        with pytest.raises(RunFolderBusy, match=str(tmp_path)):
            with run_folder_lock(tmp_path):
                pass
    with run_folder_lock(tmp_path):  # released on exit
        pass
