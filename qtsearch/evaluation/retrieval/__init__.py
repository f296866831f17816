"""`qtsearch bench retrieval`: document retrieval on BEIR-format collections through the
engine (records input, `build-index`, `search --by doc`), every mode beside the baselines."""
