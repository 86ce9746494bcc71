"""`python -m seq2seq.lab NAME`: the same as `seq2seq-lab NAME`."""

from seq2seq.cli.lab import main

main()
