"""The attention lab: each classic claim about RNNs and attention as an experiment to run.

`seq2seq-lab NAME` (or `python -m seq2seq.lab NAME`) runs one experiment: it trains or
measures what it needs on the toy tasks or Tatoeba, writes its figures (PNG) and a small
table into its folder, prints what it found in two or three sentences and writes a page
(`docs/lab/NAME.md` with `make lab`). `--quick` runs it in seconds at a toy size: the test
suite runs every experiment that way, so none can rot. `seq2seq-lab --list` lists them.

Each experiment is one module of this package holding `EXPERIMENT`, an `Experiment`
(`seq2seq.lab.experiment`) found by `seq2seq.lab.catalogue`: no list to edit. The
experiments use the library as a user would (compose a config, train, translate, align),
so each doubles as a worked example of the API.
"""
