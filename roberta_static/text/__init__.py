"""Corpus text without a model: files, units, shards, sentences, vocabulary (no torch)."""
