"""The pure core of shepherd: rules as functions over frozen records.

Standard library only. No I/O, no clock reads, no randomness of its own:
time (`now`) and randomness (`rng`) are parameters, and functions return decisions.
"""
