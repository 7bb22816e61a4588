"""precfuzz subcommands, one module each."""
