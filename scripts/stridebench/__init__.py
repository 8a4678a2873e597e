"""stridebench's result tools: from Google Benchmark JSON to tables, plots and comparisons.

Modules (each command-line tool has a thin entry point in scripts/):
  results  the run-name vocabulary, JSON loading and checks, medians and spreads,
           the ceiling rule, formatting, atomic writes
  tables   TABLES.md of a results folder
  plot     the PNGs of a results folder (matplotlib)
  collect  the last step of `ninja benchmark`: raw JSON -> results/<machine>/
  compare  two results folders side by side
  recheck  close comparisons measured again with both sides alternating
  peers    the matrix's cases through PyTorch and NumPy
  abtest   two builds of our benchmarks, old and new, alternating on the same rows
  comments the check that no comment in lib/, include/ or benchmarks/ carries a measurement
"""
