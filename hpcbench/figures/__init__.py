"""The figures of a study, before anyone explains or shows them: run directories and logs read from the disk
(inputs, foreign), one Sample per point x repeat, the repeats of a point aggregated into means and 95%
intervals (Agg), and speedup and efficiency against a baseline; study() does all of it. explain reads them;
the report shows them."""
