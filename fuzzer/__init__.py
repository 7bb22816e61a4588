"""precfuzz: a differential numerical fuzzer across precision backends."""

__version__ = "0.1.0"
