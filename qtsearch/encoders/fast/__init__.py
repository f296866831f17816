"""Fast CPU inference for the GRU encoders without nn.GRU: stacked weights, the fused query loop,
the stepped batch path, and their shared compiled pieces."""
