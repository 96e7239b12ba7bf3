"""The figures of a study, before anyone explains or shows them: one Sample per point x repeat (from result
records or a foreign log), the repeats of a point aggregated into means and 95% intervals (Agg), and speedup
and efficiency against a baseline. explain reads them; the report shows them."""
