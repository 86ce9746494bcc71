"""The study pipeline: many finished runs read back, compared, tested for significance and reported.

`seq2seq-compare` is its command (`seq2seq.study.comparison` holds its stages). One run's
assembly, folder and metrics log are `seq2seq.runs`; this package only reads what runs wrote.
"""
