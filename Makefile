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

.PHONY: install train test test-all lint tensorboard clean

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
	$(PY) -m pytest -q -m "not slow"

test-all: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check seq2seq tests scripts

tensorboard: $(STAMP)
	$(VENV)/bin/tensorboard --logdir outputs --host 127.0.0.1 --port 6006

clean:
	rm -rf $(VENV) outputs multirun

# ---------------------------------------------------------------- benchmarks and comparisons
.PHONY: bench compare

# Speed of training (every preset), decoding and the matmul ceiling, appended to
# BENCHMARKS.md (profile: benchmarks/profile_default_cpu.txt). About 10-15 min on 2 cores.
# More sections: make bench ARGS="--checkpoint RUN/checkpoints/best.pt --run-dir RUN"
bench: $(STAMP)
	$(PY) scripts/bench.py $(ARGS)

# Two Hydra sweeps with the same data, seed, step budget and parameter budget (±10%):
#   attention/: the GRU model (compare_gru) with every attention;
#   encoders/:  attention ATTENTION (default additive) with every encoder/decoder family;
# then scripts/compare.py writes COMPARISON.md, comparison.csv and the alignment images.
# Full: 700 steps of 4096 tokens (~11 epochs) per run, 13 runs, about 1 h 45 min on 2 cores
# (sweep B reuses sweep A's GRU run with attention ATTENTION instead of training it again).
# `make compare BUDGET=small` (60 steps, about 15 min) writes them into its sweep folder.
BUDGET    ?= full
ATTENTION ?= additive
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

compare: $(STAMP)
	@test -n "$(COMPARE_$(BUDGET))" || { echo "BUDGET must be full or small, not $(BUDGET)"; exit 1; }
	$(VENV)/bin/seq2seq-train -m +experiment=compare_gru \
	  attention=none,dot,scaled_dot,general,additive,cosine,local,hard,multihead \
	  $(COMPARE_ARGS) hydra.sweep.dir=$(COMPARE_DIR)/attention
	$(VENV)/bin/seq2seq-train -m \
	  +experiment=compare_rnn,compare_lstm,compare_cnn,compare_transformer \
	  attention=$(ATTENTION) $(COMPARE_ARGS) hydra.sweep.dir=$(COMPARE_DIR)/encoders
	ln -s "$$(realpath $(COMPARE_DIR)/attention/*_+experiment=compare_gru,attention=$(ATTENTION))" \
	  "$(COMPARE_DIR)/encoders/4_+experiment=compare_gru,attention=$(ATTENTION)"
	$(PY) scripts/compare.py $(COMPARE_DIR)/attention $(COMPARE_DIR)/encoders \
	  --out-dir $(COMPARE_OUT_$(BUDGET)) \
	  --made-by "make compare BUDGET=$(BUDGET) ATTENTION=$(ATTENTION) ($(COMPARE_$(BUDGET)))"
