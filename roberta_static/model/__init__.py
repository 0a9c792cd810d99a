"""The encoder side: model sources and loading, subwords, batches, forward, pooling."""
