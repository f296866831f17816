"""qtsearch: train Quick-Thoughts sentence encoders, index sentences with FAISS, search them."""

from qtsearch.embed import Encoder, load_encoder

__all__ = ["Encoder", "load_encoder"]
__version__ = "0.1.0"
