"""Yelp sentence analogies A:B::C:? (Quick-Thoughts appendix A), rebuilt from real data.

- `categories`: Google/MSR word pairs and their categories (the documented MSR rule);
- `data`: the Yelp pool and Li et al.'s sentiment rewrites;
- `mining`: sentence pairs differing by one analogy word pair;
- `build`: tuples (A, B, C, D), JSONL in and out;
- `metrics`: retrieval ranks, top-1/top-5/MRR with the query sentences excluded or included;
- `analogy_run`: encoders side by side with a cached pool encoding; `analogy_report`: the
  tables.
"""
