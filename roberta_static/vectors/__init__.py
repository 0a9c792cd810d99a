"""Static vectors in memory: the store, queries, gensim's view, post-processing, fill."""
