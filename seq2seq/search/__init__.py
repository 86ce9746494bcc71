"""Decoding a trained model: greedy and beam search over its `decode_step` interface."""

from seq2seq.search.beam import FinishedHypotheses, beam_search
from seq2seq.search.common import Hypothesis, gnmt_length_penalty
from seq2seq.search.greedy import greedy_search

__all__ = [
    "FinishedHypotheses",
    "Hypothesis",
    "beam_search",
    "gnmt_length_penalty",
    "greedy_search",
]
