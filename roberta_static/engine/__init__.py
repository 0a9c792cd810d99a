"""One pass over a corpus: its state, the producer, the step, checkpoints, runners."""
