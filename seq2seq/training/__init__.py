"""The training loop and what it needs: loss, schedules, checkpoints, validation, logging."""
