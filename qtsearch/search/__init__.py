"""Queries over an index folder: `engine.Index` (semantic, lexical, hybrid), fusion, filters,
re-ranking, analogies, folding of passages into documents."""
