"""Queries over an index folder: nearest neighbours, analogies, context.
"""
