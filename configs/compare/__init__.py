"""The configs of `seq2seq-compare` (`compare.yaml` and its `budget/` group), a package of
their own so that Hydra finds them as `pkg://seq2seq.configs.compare`, apart from the
training groups: on its command line `attention=...` is a list of options to compare,
not a choice of the `attention` group."""
