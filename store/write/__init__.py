"""Storing what decoding made: writer.py, the only code that writes spans and log records (one
transaction a batch, a span stored at most once; its SQL in sql/); background_writer.py, which
commits a bulk load's batches while the next ones are decoded; and serve's group commit
(group_commit.py, the front of commit_queue.py, commit_loop.py, commit_stats.py with
histogram.py, derive_thread.py and derived_turns.py), where one writer thread commits the
batches of every request and a second thread derives runs and steps beside it."""
