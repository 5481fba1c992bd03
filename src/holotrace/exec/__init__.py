"""How per-file work is scheduled: in this process, or a local process pool."""
