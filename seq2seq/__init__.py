"""seq2seq: a sequence-to-sequence translation trainer that shows what attention does."""

__version__ = "0.1.0"
