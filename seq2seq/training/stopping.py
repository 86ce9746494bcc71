"""How training ends early: stop signals caught at step boundaries, and divergence.

SIGTERM, SIGUSR1 and SIGUSR2 (a scheduler's preemption; SIGUSR2 is submitit's warning before
a SLURM time limit) and Ctrl-C (SIGINT) only set a flag while `StopRequest` is entered; the
training loop reads it at the next step boundary, saves `last.pt` there, then raises
`TrainingStopped` (SIGTERM, SIGUSR1, SIGUSR2) or KeyboardInterrupt (Ctrl-C). A second Ctrl-C
stops at once without saving. The handlers are installed only in the main thread, and the
ones they replace (a job launcher's, e.g. submitit's requeue) are restored on exit.

`TrainingDiverged` ends a run whose updates were not finite `trainer.max_nonfinite_steps`
times in a row, without saving anything over its checkpoints.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

# Signals that stop training at the next step boundary, after saving `last.pt`.
STOP_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGUSR1", "SIGUSR2", "SIGINT")
    if hasattr(signal, name)
)


class TrainingDiverged(RuntimeError):
    """Too many updates in a row had a non-finite loss or gradient norm."""

    @classmethod
    def at(cls, step: int, streak: int, limit: int, lr: float, checkpoints: Path) -> TrainingDiverged:
        """The error of a run that reached `limit` non-finite updates in a row at `step`."""
        return cls(
            f"training diverged at step {step}: the loss or gradient norm was not "
            f"finite for {streak} updates in a row "
            f"(trainer.max_nonfinite_steps={limit}); the learning rate is probably too "
            f"high (optim.lr={lr}) or the computation overflows its "
            f"floating-point type; nothing was saved after the divergence, the checkpoints "
            f"in {checkpoints} are as they were"
        )


class TrainingStopped(Exception):
    """A stop signal (SIGTERM, SIGUSR1, SIGUSR2) ended training at a step boundary; `last.pt`
    holds that boundary, so the run can be resumed. `signum` is the signal this process
    received (None when another rank received it)."""

    def __init__(self, signal_name: str, step: int, checkpoint: Path, signum: int | None = None):
        super().__init__(f"{signal_name}: stopped at step {step}, saved {checkpoint}")
        self.signal_name, self.step, self.checkpoint = signal_name, step, checkpoint
        self.signum = signum


class StopRequest:
    """While entered (in the main thread), SIGTERM, SIGUSR1, SIGUSR2 and SIGINT only record
    that a stop was asked for; the training loop reads `received` at its step boundaries.
    A SIGINT while a stop is already pending raises KeyboardInterrupt at once (an impatient
    Ctrl-C). The previous handlers are restored on exit."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.immediate = False  # a second Ctrl-C interrupted without saving
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and self.received is not None:
            self.immediate = True
            raise KeyboardInterrupt
        if self.received is None:
            self.received = signum

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        self._previous.clear()

    @property
    def by_ctrl_c(self) -> bool:
        """Whether the stop was asked for with Ctrl-C (SIGINT), which ends in KeyboardInterrupt."""
        return self.received == signal.SIGINT

    @property
    def signal_name(self) -> str:
        """The received signal's name, as the stop's log line and error give it."""
        if self.received:
            return signal.Signals(self.received).name
        return "a signal on another rank"
