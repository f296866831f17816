"""Queries over an index folder: `searcher.Searcher` (semantic, lexical, hybrid), fusion, filters,
re-ranking, analogies, folding of passages into documents."""
