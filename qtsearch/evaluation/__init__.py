"""Evaluation of sentence encoders: transfer/similarity tasks and the Yelp analogy benchmark."""
