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

# Two Hydra sweeps with the same data, seed, step budget and parameter budget (±10%):
#   attention/: the GRU model (compare_gru) with every attention;
#   encoders/:  the attention with the best valid BLEU in attention/ (or ATTENTION=<preset>)
#               with every encoder/decoder family; the GRU run is linked from attention/;
# then scripts/compare.py writes COMPARISON.md, comparison.csv and the alignment images.
# Full: 700 updates of 4,096-token batches (~11 epochs) per run, 13 runs, about 1 h 30 min
# on 2 cores. `make compare BUDGET=small` (60 steps, about 15 min) writes into its sweep
# folder. The stages can be run alone with the same COMPARE_DIR, e.g. to finish a compare:
#   make compare-encoders compare-summary COMPARE_DIR=multirun/compare_full/DATE
BUDGET    ?= full
ATTENTION ?= best
COMPARE_TIME := $(shell date +%Y-%m-%d_%H-%M-%S)
COMPARE_DIR  ?= multirun/compare_$(BUDGET)/$(COMPARE_TIME)
COMPARE_full  := trainer.max_steps=700 trainer.valid_every=175
COMPARE_small := trainer.max_steps=60 trainer.valid_every=60 trainer.valid_max_sentences=200 \
                 trainer.test_search.beam_size=1 schedule.warmup_steps=30
COMPARE_OUT_full  := .
COMPARE_OUT_small := $(COMPARE_DIR)
# Name run folders by what differs (`0_+experiment=compare_gru,attention=none`), not the budget.
COMPARE_NAMES := 'hydra.job.config.override_dirname.exclude_keys=[trainer.max_steps,\
trainer.valid_every,trainer.valid_max_sentences,trainer.test_search.beam_size,\
schedule.warmup_steps,logging.progress_bar]'
COMPARE_ARGS = $(COMPARE_$(BUDGET)) logging.progress_bar=false $(COMPARE_NAMES)
CHOSEN_ATTENTION = $(COMPARE_DIR)/encoders_attention.txt

.PHONY: compare compare-attention compare-encoders compare-summary
compare: compare-attention compare-encoders compare-summary

compare-attention: $(STAMP)
	@test -n "$(COMPARE_$(BUDGET))" || { echo "BUDGET must be full or small, not $(BUDGET)"; exit 1; }
	$(VENV)/bin/seq2seq-train -m +experiment=compare_gru \
	  attention=$$($(PY) -m seq2seq.configs attention) \
	  $(COMPARE_ARGS) hydra.sweep.dir=$(COMPARE_DIR)/attention

compare-encoders: $(STAMP)
	@test -n "$(COMPARE_$(BUDGET))" || { echo "BUDGET must be full or small, not $(BUDGET)"; exit 1; }
	@if [ "$(ATTENTION)" = best ]; then \
	  $(PY) scripts/compare.py $(COMPARE_DIR)/attention --best attention; \
	else echo "$(ATTENTION)"; fi > $(CHOSEN_ATTENTION)
	@echo "encoder sweep with attention=$$(cat $(CHOSEN_ATTENTION))"
	families=$$($(PY) -m seq2seq.configs experiment compare_ | sed 's/compare_gru,\?//;s/,$$//') && \
	$(VENV)/bin/seq2seq-train -m +experiment=$$families \
	  attention=$$(cat $(CHOSEN_ATTENTION)) $(COMPARE_ARGS) hydra.sweep.dir=$(COMPARE_DIR)/encoders
	cd $(COMPARE_DIR)/encoders && chosen=$$(cat ../encoders_attention.txt) && \
	  ln -sfn ../attention/*_+experiment=compare_gru,attention=$$chosen \
	    "4_+experiment=compare_gru,attention=$$chosen"

compare-summary: $(STAMP)
	$(PY) scripts/compare.py $(COMPARE_DIR)/attention $(COMPARE_DIR)/encoders \
	  --out-dir $(COMPARE_OUT_$(BUDGET)) \
	  --made-by "make compare BUDGET=$(BUDGET) ATTENTION=$(ATTENTION) ($(COMPARE_$(BUDGET)))"
