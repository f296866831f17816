"""Corpus → index folder: read → embed → index + store, resumable and atomic; `add`, derived
builds, and the Ray engine (`--engine ray`)."""
