"""Corpus pipeline: fetch, clean, split, subword, batch. Knows nothing of models."""
