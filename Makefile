# Every target sets itself up: the first call creates .venv and installs the project,
# later calls find the stamp file and install nothing.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Our machines keep an offline copy of the corpus beside the checkout.
MIRROR := $(abspath ../shared/corpora)
ifneq ($(wildcard $(MIRROR)/cmn-eng.zip),)
export SEQ2SEQ_DATA_MIRROR ?= $(MIRROR)
endif

.PHONY: install train test test-all faults lint tensorboard clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	# CPU build of torch first, so that nothing pulls a CUDA build.
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e '.[dev]'
	touch $(STAMP)

train: $(STAMP)
	$(VENV)/bin/seq2seq-train +experiment=default_cpu $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not faults"

test-all: $(STAMP)
	$(PY) -m pytest -q

# The whole fault-injection suite (tests/faults/: hostile checkpoints and inputs, signals,
# kill -9 and resume trials, fuzzing); the figures go to faults-report.md (RELIABILITY.md).
FAULTS_REPORT := faults-report.jsonl
faults: $(STAMP)
	rm -f $(FAULTS_REPORT)
	SEQ2SEQ_FAULTS_REPORT=$(abspath $(FAULTS_REPORT)) $(PY) -m pytest -q tests/faults; \
	  status=$$?; $(PY) scripts/faults_report.py $(FAULTS_REPORT) | tee faults-report.md; exit $$status

# ruff, then the package's import layers (the contract in pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check seq2seq tests scripts configs
	$(VENV)/bin/lint-imports

tensorboard: $(STAMP)
	$(VENV)/bin/tensorboard --logdir outputs --host 127.0.0.1 --port 6006

clean:
	rm -rf $(VENV) outputs multirun

# ---------------------------------------------------------------- benchmarks and comparisons
.PHONY: bench

# Speed of training (every preset), decoding and the matmul ceiling, appended to
# BENCHMARKS.md (profile: benchmarks/profile_default_cpu.txt). About 10-15 min on 2 cores.
# More sections: make bench ARGS="--checkpoint RUN/checkpoints/best.pt --run-dir RUN"
bench: $(STAMP)
	$(PY) scripts/bench.py $(ARGS)

# This project against JoeyNMT 2.3.0, measured back to back on this machine: both train the
# reference shapes (transformer_small, gru_additive) for 4 min each on the same data, then
# decode the same test sentences greedy and beam 5; figures and ratios appended to
# BENCHMARKS.md. JoeyNMT lives in its own virtual environment, .peer/joeynmt (made on first
# use: torch==2.13.0 first, then joeynmt==2.3.0). About 35 min on 2 cores. A smoke run:
#   make bench-peer ARGS="--minutes 0.3 --sentences 20 --log-every 2 --warmup-updates 2 \
#     --decode-reps 1 --out /tmp/peer.md"
.PHONY: bench-peer
bench-peer: $(STAMP)
	$(PY) scripts/bench_peer.py $(ARGS)

# Preparation time and peak memory, and training start-up time, at Tatoeba's 26k pairs and
# at synthetic corpora of 250k, 1M and 5M pairs (seq2seq-data synth), appended to
# BENCHMARKS.md; work files (about 2 GB at 5M) in bench/data_scale/. About 25 min on 2 cores.
# A smoke run: make bench-data ARGS="--sizes 0 100000 --out /tmp/data.md"
.PHONY: bench-data
bench-data: $(STAMP)
	$(PY) scripts/bench_data.py $(ARGS)

# Two Hydra sweeps with the same data, split, step budget and parameter budget (±10%), each
# configuration trained SEEDS times (trainer.seed = 1234, 1235, ...: the initialisation and
# the data order change, the split's data.seed never does):
#   attention/: the GRU model (compare_gru) with every attention preset (sparsemax and
#               1.5-entmax included);
#   encoders/:  the attention with the best mean valid BLEU in attention/ (or ATTENTION=<preset>)
#               with every encoder/decoder family; the GRU runs of every seed are linked
#               from attention/ instead of being trained again;
# then scripts/compare.py writes COMPARISON.md, comparison.csv and the alignment images: one
# table row per configuration (mean ± std over its seeds; the CSV keeps one row per seed),
# paired bootstrap tests of test BLEU (1,000 resamples) against each sweep's baseline
# (attention=none; the GRU) seed by seed, 95% intervals, and the test AER of every model on
# the hand-aligned gold pairs. BASELINE_AER="a.json b.json" adds word aligners' test AER
# (the file format: scripts/compare.py). Conclusions are drawn only where a difference is
# significant for every seed.
# Full: 600 updates of 2,048-token batches (~4 epochs) of the width-96 compare presets
# per run, 2-4 min each on 2 cores; 15 configurations × SEEDS=3 = 45 runs, about 2 h with
# JOBS=1 (COMPARISON.md: the measured time, and what this budget costs against convergence).
# `make compare BUDGET=small` (60 steps, SEEDS=1 unless given, about 20 min) writes into its
# sweep folder. JOBS=N trains N runs at once (Hydra's joblib launcher, one process each),
# each with cores/N torch threads (at least 1): for a machine with more cores than one run
# uses well. JOBS=1 (the default) trains one run after another, with torch's threads.
# The stages can be run alone with the same COMPARE_DIR, e.g. to finish a compare:
#   make compare-encoders compare-summary COMPARE_DIR=multirun/compare_full/DATE
BUDGET    ?= full
ATTENTION ?= best
SEEDS_full  := 3
SEEDS_small := 1
SEEDS     ?= $(SEEDS_$(BUDGET))
SEED_BASE := 1234# the presets' trainer.seed: seed 1 of a sweep is the run a plain training makes
JOBS      ?= 1
CORES     := $(shell nproc 2>/dev/null || echo 1)
COMPARE_SEEDS   := $(shell seq -s, $(SEED_BASE) $$(( $(SEED_BASE) + $(SEEDS) - 1 )) 2>/dev/null)
ifeq ($(JOBS),1)
COMPARE_LAUNCHER :=
COMPARE_THREADS  := 0# torch's default, as a single training uses
else
COMPARE_LAUNCHER := hydra/launcher=joblib hydra.launcher.n_jobs=$(JOBS)
COMPARE_THREADS  := $(shell n=$$(( $(CORES) / $(JOBS) )) 2>/dev/null; [ "$${n:-0}" -ge 1 ] && echo $$n || echo 1)
endif
COMPARE_TIME := $(shell date +%Y-%m-%d_%H-%M-%S)
COMPARE_DIR  ?= multirun/compare_$(BUDGET)/$(COMPARE_TIME)
COMPARE_full  := trainer.max_steps=600 trainer.valid_every=150
COMPARE_small := trainer.max_steps=60 trainer.valid_every=60 trainer.valid_max_sentences=200 \
                 trainer.test_search.beam_size=1 schedule.warmup_steps=30
COMPARE_OUT_full  := .
COMPARE_OUT_small := $(COMPARE_DIR)
# Name run folders by what differs, the seed included
# (`0_+experiment=compare_gru,attention=none,trainer.seed=1234`), not the budget or threads.
COMPARE_NAMES := 'hydra.job.config.override_dirname.exclude_keys=[trainer.max_steps,\
trainer.valid_every,trainer.valid_max_sentences,trainer.test_search.beam_size,\
schedule.warmup_steps,logging.progress_bar,trainer.threads]'
COMPARE_ARGS = $(COMPARE_$(BUDGET)) trainer.seed=$(COMPARE_SEEDS) \
  trainer.threads=$(COMPARE_THREADS) logging.progress_bar=false $(COMPARE_LAUNCHER) $(COMPARE_NAMES)
COMPARE_CHECK = test -n "$(COMPARE_$(BUDGET))" || { echo "BUDGET must be full or small, not $(BUDGET)"; exit 1; }; \
  test -n "$(COMPARE_SEEDS)" || { echo "SEEDS must be a number >= 1, not $(SEEDS)"; exit 1; }; \
  case "$(JOBS)" in ''|0*|*[!0-9]*) echo "JOBS must be a number >= 1, not $(JOBS)"; exit 1;; esac
CHOSEN_ATTENTION = $(COMPARE_DIR)/encoders_attention.txt

.PHONY: compare compare-attention compare-encoders compare-aligner compare-summary
compare: compare-attention compare-encoders compare-aligner compare-summary

compare-attention: $(STAMP)
	@$(COMPARE_CHECK)
	$(VENV)/bin/seq2seq-train -m +experiment=compare_gru \
	  attention=$$($(PY) -m seq2seq.configs attention) \
	  $(COMPARE_ARGS) hydra.sweep.dir=$(COMPARE_DIR)/attention

compare-encoders: $(STAMP)
	@$(COMPARE_CHECK)
	@if [ "$(ATTENTION)" = best ]; then \
	  $(PY) scripts/compare.py $(COMPARE_DIR)/attention --best attention; \
	else echo "$(ATTENTION)"; fi > $(CHOSEN_ATTENTION)
	@echo "encoder sweep with attention=$$(cat $(CHOSEN_ATTENTION))"
	families=$$($(PY) -m seq2seq.configs experiment compare_ | sed 's/compare_gru,\?//;s/,$$//') && \
	$(VENV)/bin/seq2seq-train -m +experiment=$$families \
	  attention=$$(cat $(CHOSEN_ATTENTION)) $(COMPARE_ARGS) hydra.sweep.dir=$(COMPARE_DIR)/encoders
	$(PY) scripts/compare.py $(COMPARE_DIR)/attention --link-into $(COMPARE_DIR)/encoders \
	  --choice attention=$$(cat $(CHOSEN_ATTENTION))

# The statistical word aligner (eflomal) on the compare's training split, scored on the test
# part of the gold set: the non-neural row beside every attention's AER.
COMPARE_DATA ?= data/prepared/tatoeba_zh_en
compare-aligner: $(STAMP)
	@mkdir -p $(COMPARE_DIR)
	$(VENV)/bin/seq2seq-align-baseline --data-dir $(COMPARE_DATA) --src zh --tgt en --part test \
	  --json $(COMPARE_DIR)/aligner_eflomal.json

compare-summary: $(STAMP)
	$(PY) scripts/compare.py $(COMPARE_DIR)/attention $(COMPARE_DIR)/encoders \
	  --out-dir $(COMPARE_OUT_$(BUDGET)) \
	  $(foreach file,$(wildcard $(COMPARE_DIR)/aligner_*.json) $(BASELINE_AER),--baseline-aer $(file)) \
	  --made-by "make compare BUDGET=$(BUDGET) ATTENTION=$(ATTENTION) SEEDS=$(SEEDS) JOBS=$(JOBS) ($(COMPARE_$(BUDGET)))"
