"""Replay helpers: input-validity fuzzing (`validity`, `fuzz_*`) and NaN/INF search (`nansearch`, `nan_*`)."""
