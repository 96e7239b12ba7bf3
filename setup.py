# Metadata lives in setup.cfg; this file only adds the fast path's C scanner. It is optional: where it cannot
# be built (no C compiler or Python headers) hpcbench installs without it and parses in pure Python, slower.
from setuptools import Extension, setup

setup(ext_modules=[Extension("hpcbench.parse._scan", ["hpcbench/parse/_scan.c"], optional=True,
                             extra_compile_args=["-O2", "-std=c99", "-Wall", "-Wextra", "-Wno-missing-field-initializers"])])
