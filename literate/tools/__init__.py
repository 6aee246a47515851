"""Tools around the code: benchmarks, the standalone exports and their self-checks, host-sync counting."""
