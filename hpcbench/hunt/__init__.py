"""``hpcbench hunt``: find the slow node or link among many, and keep it out of the next run.

schedule: which pairs each round measures; decide: from pair timings and compute probes to suspects.
"""
