"""Retrieval: corpus readers, chunking, embedders, FAISS/BM25 indexes, search and reranking."""
