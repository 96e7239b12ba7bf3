"""hpcbench: plan, run and explain distributed deep-learning scaling studies on Slurm."""

__version__ = "0.1.0"
