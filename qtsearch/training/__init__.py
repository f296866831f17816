"""Training: the trainers and their objectives (Quick-Thoughts, FastSent, SDAE, NLI, multi-task).
"""
