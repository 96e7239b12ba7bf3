"""Code that runs inside a job, on the compute nodes."""
