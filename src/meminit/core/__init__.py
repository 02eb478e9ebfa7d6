"""The primitives every layer uses: errors, paths, units, running tools, tables, statistics, plots, result directories, the host's facts, apt packages, the kernels we carry."""
