"""Convergence as COMPARISON.md measures it: the gain of the last part of a run.

With v_i the selected validation metric at update s_i (signed so that higher is better)
and S the last validated update, the gain over the last fraction f of the run is

    gain = max_i v_i − max_{i : s_i ≤ (1 − f)·S} v_i

(0 when nothing improved late; None without a validation that early). A run whose gain over
its last quarter is under 0.5 BLEU counts as converged for its length. `trainer.converged_gain`
stops training the first time the gain falls under the given value, so that a run is trained
until it is near convergence by that measure, and no longer. Early in a run the last quarter
holds one or two validations, and a noisy pair of them can look flat while the run still
climbs; the rule is therefore judged only once that part holds at least
`trainer.converged_validations` validations (`validations_in_window`).
"""

from __future__ import annotations

from collections.abc import Sequence


def recent_gain(
    history: Sequence[Sequence[float]], fraction: float, higher_is_better: bool = True
) -> float | None:
    """The gain (module docstring) of `history`, pairs (update, value) in update order."""
    if not history:
        return None
    sign = 1.0 if higher_is_better else -1.0
    last_step = history[-1][0]
    early = [sign * value for step, value in history if step <= (1.0 - fraction) * last_step]
    if not early:
        return None
    return max(sign * value for _, value in history) - max(early)


def validations_in_window(history: Sequence[Sequence[float]], fraction: float) -> int:
    """How many validations of `history` lie in the last `fraction` of its updates."""
    if not history:
        return 0
    cutoff = (1.0 - fraction) * history[-1][0]
    return sum(1 for step, _ in history if step > cutoff)
