"""The relevance benchmark (`qtsearch bench relevance`): does search find what a user means?

Each task holds a pool of sentences and queries drawn from that pool with their relevant
sentences (a paraphrase, a question of the same type). A real index is built over the pool with
`build-index`'s code path and every query goes through `Index.search`, as a user's would; the
query's own row is left out of its hits. Systems (a model and a search mode, or a baseline
encoder) are scored side by side: R@1, R@10 and MRR@10, and P@10 for topical retrieval.
"""
