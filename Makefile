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
	$(VENV)/bin/seq2seq-train $(ARGS)

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
