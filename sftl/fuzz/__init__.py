"""Input-validity fuzzing of a framework API: specs, seeds from the report, generation, execution in workers, a validity classifier.

`validity` drives it (`fuzz`, `replay_variants`); `specs` reads an API's arguments, `seed` the report's own
call, `generate` makes inputs, `execute` runs them in restartable `_worker` processes, `features` learns
which inputs are valid.
"""
