"""The long runs of the suite's own checks, for minutes rather than CI's seconds; each prints what
it found and exits non-zero on a failure (they are checks, not benchmarks, so they live beside
the tests rather than in bench/):

    .venv/bin/python -m tests.long.soak --minutes 5 --rate 4000
    .venv/bin/python -m tests.long.kill_loop --kills 20 --seed 7
    .venv/bin/python -m tests.long.fuzz_long --seconds 600 --seed 1
"""
