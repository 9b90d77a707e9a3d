"""Bundled optimization targets (baseline/ + solution/ + bench) and the timing harness."""
