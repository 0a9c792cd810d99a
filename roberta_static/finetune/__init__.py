"""Continued masked-LM training of an encoder on a corpus, before distilling from it."""
