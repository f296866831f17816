"""Fast inference paths for the GRU encoders: stacked weights, the fused query loop, the stepped
CPU batch path, and their shared compiled pieces.
"""
