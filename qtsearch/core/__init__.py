"""What every room uses and nothing else: errors and exit codes, package and data paths, the
cache folder, device choice, the version, JSON configs, and the progress-reporting seam.

Nothing here imports torch, faiss or another room of qtsearch."""
