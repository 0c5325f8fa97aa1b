"""Fetching the day's papers from public services into files that `papers build` and `papers add`
read."""
