"""Building index folders: read → embed → index + store, resumable and atomic; append and derived
builds.
"""
