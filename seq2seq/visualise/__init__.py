"""Showing what attention does: terminal matrices, heatmaps, TensorBoard probes."""
