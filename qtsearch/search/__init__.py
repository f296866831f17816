"""Queries over an index folder: `engine.Searcher` (semantic, lexical, hybrid), fusion, filters,
re-ranking, analogies, folding of passages into documents."""
