"""precfuzz benchmarks (`make bench`)."""
