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

.PHONY: install train test test-all test-docs faults lint tensorboard clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	# CPU build of torch first, so that nothing pulls a CUDA build.
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e '.[dev]'
	touch $(STAMP)

train: $(STAMP)
	$(VENV)/bin/seq2seq-train +experiment=default_cpu $(ARGS)

# One pytest-xdist worker per core, each test file whole on one worker (its module
# fixtures are built once); tests/conftest.py gives each worker one torch thread.
test: $(STAMP)
	$(PY) -m pytest -q -n auto --dist loadfile -m "not slow and not faults"

test-all: $(STAMP)
	$(PY) -m pytest -q

# The tutorial pages whose toy runs `make test` leaves out (tests/test_docs_commands.py,
# SLOW_PAGES); CI runs them after `make test`.
test-docs: $(STAMP)
	$(PY) -m pytest -q -n auto --dist load -m slow tests/test_docs_commands.py

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
# tools/bench/LOG.md (profile: benchmarks/profile_default_cpu.txt). About 10-15 min on 2 cores.
# More sections: make bench ARGS="--checkpoint RUN/checkpoints/best.pt --run-dir RUN"
bench: $(STAMP)
	$(PY) scripts/bench.py $(ARGS)

# This project against JoeyNMT 2.3.0 and OpenNMT-py 3.5.1, measured back to back on this
# machine: each trains the reference shapes (transformer_small, gru_additive) for 4 min on the
# same data, then decodes the same test sentences greedy and beam 5; figures and ratios
# appended to tools/bench/LOG.md. Each peer lives in its own virtual environment under .peer/
# (made on first use: torch==2.13.0 first, then the toolkit; OpenNMT-py with --no-deps, as it
# pins torch<2.3). ARGS="--peers joeynmt" measures one. About 55 min on 2 cores. Time to
# quality as well (each framework trains 30 min per shape, saving every minute; minutes to
# greedy valid BLEU 15 and 20 and their ratios), about 4 h more:
#   make bench-peer ARGS="--quality 15 20 --quality-minutes 30"
# A smoke run (add --quality 0.5 --quality-minutes 1 --quality-every 0.25 --quality-sentences 20):
#   make bench-peer ARGS="--minutes 0.3 --sentences 20 --log-every 2 --warmup-updates 2 \
#     --decode-reps 1 --out /tmp/peer.md"
.PHONY: bench-peer
bench-peer: $(STAMP)
	$(PY) scripts/bench_peer.py $(ARGS)

# Decoding speed and BLEU of every engine on the same models, in one run (tools.bench.engines):
# the project's search at commit BASELINE and now, int8, and CTranslate2 float32/int8 for a
# Transformer; 1 and 2 threads, greedy and beam 5, the 1,000 test sentences; the entry goes to
# tools/bench/LOG.md. MODELS: NAME=CHECKPOINT ... (default: the newest make train checkpoint).
# About 25 min on 2 cores for three models. A smoke run:
#   make bench-inference MODELS=t=RUN/checkpoints/best.pt ARGS="--sentences 20 --reps 1 --out /tmp/i.md"
MODELS   ?= default=$(lastword $(shell ls -t outputs/default_cpu/*/checkpoints/best.pt 2>/dev/null | head -1))
BASELINE ?=
.PHONY: bench-inference
bench-inference: $(STAMP)
	$(PY) scripts/bench_inference.py $(foreach model,$(MODELS),--model $(model)) \
	  $(if $(BASELINE),--baseline $(BASELINE)) $(ARGS)

# Preparation time and peak memory, and training start-up time, at Tatoeba's 26k pairs and
# at synthetic corpora of 250k, 1M and 5M pairs (seq2seq-data synth), appended to
# tools/bench/LOG.md; work files (about 2 GB at 5M) in bench/data_scale/. About 25 min on 2 cores.
# A smoke run: make bench-data ARGS="--sizes 0 100000 --out /tmp/data.md"
.PHONY: bench-data
bench-data: $(STAMP)
	$(PY) scripts/bench_data.py $(ARGS)

# The comparison of COMPARISON.md, `seq2seq-compare` (seq2seq/study/comparison.py; its settings:
# configs/compare/). Five Hydra sweeps with the same split, training rule and parameter
# budget (±10%), each configuration trained SEEDS times (trainer.seed = 1234, 1235, ...: the
# initialisation and the data order change, the split's data.seed never does):
#   attention/: the GRU model (compare_gru) with every attention preset (ARGS="attention=[a,b]"
#               for some of them);
#   encoders/:  the attention with the best mean valid BLEU in attention/ (or ATTENTION=<preset>)
#               with every other encoder/decoder family; the GRU runs of every seed are linked
#               from attention/ instead of being trained again;
#   guided/:    every family with that attention and guided alignment (alignment=guided, the
#               statistical aligner's links), each tested against its unguided twin, linked
#               from encoders/;
#   layer/:     every family with that attention and a separate alignment layer
#               (alignment=layer), trained guided and unsupervised, each tested against its
#               twin without the layer, linked from encoders/ (ARGS="layer=[]" skips it);
#   layer_reverse/: the same layer runs trained en→zh (REVERSE_DATA=tatoeba_en_zh, the data
#               preset of the other direction; REVERSE_DATA= skips it): each layer run's
#               test AER with its reverse run, symmetrised, is a column of layer/;
# then eflomal's test AER (the aligner row; COMPARE_DATA: its prepared corpus, by default the
# runs' own) and the summary: COMPARISON.md, comparison.csv and the alignment images, one
# table row per configuration (mean ± std over its seeds; the CSV keeps one row per seed),
# paired bootstrap tests of test BLEU (1,000 resamples) against each sweep's baseline
# (attention=none; the GRU; the unguided twin) seed by seed, 95% intervals, and the test AER
# of every model on the hand-aligned gold pairs. BASELINE_AER="a.json b.json" adds other word
# aligners' test AER (the file format: seq2seq/study/aer_rows.py).
# BUDGET=full: every run until near convergence (valid BLEU gained under 0.5 in the last
# quarter of its updates, judged once that quarter holds six validations; at most 8,000),
# SEEDS=3, written to ./COMPARISON.md: 3,150-8,000 updates a run, several hours for the attention and encoder sweeps with JOBS=2 on 2 cores,
# more than one session: a comparison started again with the same COMPARE_DIR goes on where
# it stopped (trainer.resume=auto: each run from its last checkpoint; a finished run keeps
# its results). BUDGET=small: 60 updates, SEEDS=1, written into its compare folder. JOBS=N
# trains N runs at once (Hydra's joblib launcher), each with cores/N torch threads. ARGS: more
# settings of seq2seq-compare (`seq2seq-compare --cfg job` lists them).
# The stages can be run alone with the same COMPARE_DIR, e.g. to finish a compare:
#   make compare-guided compare-layer compare-aligner compare-summary COMPARE_DIR=multirun/compare_full/DATE
BUDGET    ?= full
ATTENTION ?= best
JOBS      ?= 1
REVERSE_DATA ?= tatoeba_en_zh
COMPARE_TIME := $(shell date +%Y-%m-%d_%H-%M-%S)
COMPARE_DIR ?= multirun/compare_$(BUDGET)/$(COMPARE_TIME)# one per make call, for every stage
comma := ,
space := $(empty) $(empty)
COMPARE = $(VENV)/bin/seq2seq-compare budget=$(BUDGET) family_attention=$(ATTENTION) jobs=$(JOBS) \
  dir=$(COMPARE_DIR) $(if $(SEEDS),seeds=$(SEEDS)) \
  $(if $(COMPARE_DATA),aligner_data=$(COMPARE_DATA)) $(if $(REVERSE_DATA),reverse_data=$(REVERSE_DATA)) \
  $(if $(BASELINE_AER),report.baseline_aer=[$(subst $(space),$(comma),$(strip $(BASELINE_AER)))]) $(ARGS)

.PHONY: compare compare-attention compare-encoders compare-guided compare-layer compare-aligner compare-summary
compare: $(STAMP)
	$(COMPARE)

compare-attention compare-encoders compare-guided compare-layer compare-aligner compare-summary: compare-%: $(STAMP)
	$(COMPARE) stages=[$*]

# The attention lab (seq2seq.lab, docs/lab/): every experiment at its default size; pages and
# figures into docs/lab/, trained models into outputs/lab/runs (reused by a second call, so an
# interrupted make lab continues). One experiment: make lab LAB=masks. About 32 min on 2 cores.
LAB ?= all
.PHONY: lab
lab: $(STAMP)
	$(VENV)/bin/seq2seq-lab $(LAB) --out docs/lab --runs outputs/lab/runs $(ARGS)

# ---------------------------------------------------------------- the documentation site
# The reference pages from the code (docs/reference/) and the READMEs' tables of components,
# the pictures of docs/images redrawn by the current code from the runs they show (the
# newest finished `make train` run, outputs/first_alignment, multirun/toy_attention, make
# compare's guided runs; a picture whose run is not here is kept, and a line says so;
# docs/images/pictures.json records what each was drawn from; alone: $(PY) -m
# tools.site.pictures), the outputs the README and the tutorial show (their `<!-- output:
# NAME -->` regions, from running their blocks at toy size in a temporary folder; a few
# minutes on 2 cores), then the site, built strictly into site/ (mkdocs.yml; python -m, so
# that its hooks import tools/). Only the pages and pictures: make docs ARGS=--no-outputs;
# without the pictures: ARGS=--no-pictures. The README's first run at full size too (its
# closing lines and docs/images/first_alignment.png, about a minute): make docs
# ARGS=--first-run. Serve it: .venv/bin/python -m mkdocs serve
.PHONY: docs
docs: $(STAMP)
	$(PY) -m tools.site $(ARGS)
	$(PY) -m mkdocs build --strict

# The tutorial notebook (notebooks/tutorial.ipynb and tutorial.zh.ipynb) written from
# tools/site/notebooks.py, run top to bottom at the full budget (about 15 minutes a
# language on 2 cores; ARGS="--model PATH" loads a trained zh->en checkpoint instead of
# training one) and rendered as docs/tutorial/notebook.md. make test runs it at a small
# budget. Only the pages again: make notebooks ARGS=--render-only
.PHONY: notebooks
notebooks: $(STAMP)
	$(PY) -m tools.site.notebooks $(ARGS)
