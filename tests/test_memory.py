"""trainer.keep_freed_memory (seq2seq.training.memory): with glibc, an update's large arrays
reuse freed memory instead of faulting in fresh pages every time."""

import subprocess
import sys

import pytest

from seq2seq.training.memory import _glibc_mallopt

# Allocates and frees a 64 MiB tensor (above glibc's largest dynamic mmap threshold, 32 MiB)
# 30 times and prints the minor page faults of the last 20 times (the first settle the heap).
FAULTS_OF_A_LOOP = """
import resource, sys, torch
from seq2seq.training.memory import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
faults = []
for _ in range(30):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.ones(16 * 2**20)  # 64 MiB of float32, written
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(sum(faults[10:]))
"""


def loop_faults(mode: str) -> int:
    command = [sys.executable, "-c", FAULTS_OF_A_LOOP, mode]
    return int(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


@pytest.mark.skipif(_glibc_mallopt() is None, reason="the C library is not glibc")
def test_freed_memory_is_reused_without_page_faults():
    pages_per_tensor = 64 * 2**20 // 4096
    assert loop_faults("default") > 10 * pages_per_tensor  # fresh pages nearly every time
    assert loop_faults("keep") < pages_per_tensor  # the same pages again
