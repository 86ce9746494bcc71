#!/usr/bin/env bash
# The GPU check: what a machine with CUDA can tell that the CPU tests cannot (< 10 minutes).
#
#   scripts/gpu_check.sh                       # from the repository root, in its .venv
#   STEPS=300 PEAK_TFLOPS=989 scripts/gpu_check.sh
#
# 1. the test suite's CUDA tests (tests/test_cuda.py and the CUDA cases of the search,
#    decoder and attention-region tests);
# 2. the default model (+experiment=default_cpu, trainer.device=cuda) for STEPS updates in
#    bf16 autocast and in float32 (trainer.precision=fp32), the same data order, then
#    scripts/gpu_compare_losses.py: the smoothed loss curves must agree within THRESHOLD;
# 3. with two GPUs or more, two-GPU data parallel (torchrun, NCCL) for DDP_STEPS updates;
# 4. scripts/gpu_bench.py appends a GPU section to the benchmark log, tools/bench/LOG.md (GPU name, tokens/s, MFU
#    against the GPU's dense bf16 peak, peak memory).
#
# Settings (environment): PYTHON (default .venv/bin/python, else python3), STEPS (300),
# DDP_STEPS (100), THRESHOLD (0.05), PEAK_TFLOPS (the GPU's dense bf16 peak, when the
# name is not in tools/bench/gpu.py's table), OUT (run folders; default
# outputs/gpu_check/<date_time>), BENCH_OUT (tools/bench/LOG.md), DATA (extra Hydra overrides
# for the data, e.g. "data.root=/data/seq2seq"). The Tatoeba corpus is fetched and
# prepared on the first run unless data.root already holds it (prepare it once with
# `seq2seq-data` on a machine with network access and copy data/ over otherwise).
# Exit code: 0 all passed; 2 no CUDA device; otherwise the failing step's.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
STEPS=${STEPS:-300}
DDP_STEPS=${DDP_STEPS:-100}
THRESHOLD=${THRESHOLD:-0.05}
OUT=${OUT:-outputs/gpu_check/$(date +%Y-%m-%d_%H-%M-%S)}
BENCH_OUT=${BENCH_OUT:-tools/bench/LOG.md}
read -r -a DATA_ARGS <<< "${DATA:-}"
started=$SECONDS

step() { printf '\n=== [%3ds] %s\n' "$((SECONDS - started))" "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }

step "0. CUDA"
if ! gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)'); then
    echo "gpu_check: cannot import torch with $PYTHON" >&2
    exit 2
fi
if [[ "$gpus" -lt 1 ]]; then
    "$PYTHON" -c 'import torch; print(f"torch {torch.__version__}, built for CUDA {torch.version.cuda}")' >&2 || true
    echo "gpu_check: no CUDA device (torch.cuda.is_available() is False): nothing to check here; run it on a machine with an NVIDIA GPU and a CUDA build of torch" >&2
    exit 2
fi
"$PYTHON" -c 'import torch; [print(f"cuda:{i}: {torch.cuda.get_device_name(i)}") for i in range(torch.cuda.device_count())]'
echo "run folders under $OUT"

step "1. CUDA tests"
run "$PYTHON" -m pytest -q -p no:cacheprovider tests/test_cuda.py \
    tests/test_search.py::test_cuda_gives_the_cpu_result \
    tests/test_decoders.py tests/test_attention_regions.py -k "cuda"

TRAIN=(
    +experiment=default_cpu trainer.device=cuda trainer.max_steps="$STEPS"
    trainer.max_minutes=null trainer.valid_every="$STEPS" trainer.log_every=1
    trainer.valid_max_sentences=200 trainer.test_search.beam_size=1
    logging.progress_bar=false ${DATA_ARGS[@]+"${DATA_ARGS[@]}"}
)
step "2. default_cpu on cuda: $STEPS updates in bf16, then in float32"
run "$PYTHON" -m seq2seq.cli.train "${TRAIN[@]}" trainer.precision=bf16 hydra.run.dir="$OUT/bf16"
run "$PYTHON" -m seq2seq.cli.train "${TRAIN[@]}" trainer.precision=fp32 hydra.run.dir="$OUT/fp32"
run "$PYTHON" scripts/gpu_compare_losses.py "$OUT/bf16" "$OUT/fp32" --threshold "$THRESHOLD"

if [[ "$gpus" -ge 2 ]]; then
    step "3. data parallel on 2 GPUs (torchrun, NCCL): $DDP_STEPS updates"
    run "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 -m seq2seq.cli.train \
        "${TRAIN[@]}" trainer.max_steps="$DDP_STEPS" trainer.valid_every="$DDP_STEPS" \
        hydra.run.dir="$OUT/ddp"
    test -f "$OUT/ddp/results.json" || { echo "gpu_check: the DDP run wrote no results.json" >&2; exit 1; }
else
    step "3. data parallel: skipped, one GPU"
fi

step "4. throughput, MFU and memory → $BENCH_OUT"
BENCH=(scripts/gpu_bench.py --out "$BENCH_OUT" ${DATA_ARGS[@]+"${DATA_ARGS[@]}"})
if [[ -n "${PEAK_TFLOPS:-}" ]]; then BENCH+=(--peak-tflops "$PEAK_TFLOPS"); fi
run "$PYTHON" "${BENCH[@]}"

step "gpu_check: all passed in $((SECONDS - started)) s"
