"""Encoders, the Quick-Thoughts objective and model-folder I/O."""
