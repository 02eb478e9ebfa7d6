"""The userspace benchmarks on the real CPU: the memmap bench (microbench) and its replays, fork's maple-tree copy."""
