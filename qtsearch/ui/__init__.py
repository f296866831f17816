"""Interactive front ends: the query shell.
"""
