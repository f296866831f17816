"""Text → sentences → tokens: corpus reading, sentence splitting, tokenisation, vocabulary.

The package itself imports nothing: the CLI reads light modules of it (records' defaults for
its help) without loading the sentence splitter and numpy behind it."""
