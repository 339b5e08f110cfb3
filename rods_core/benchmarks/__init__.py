"""Benchmarks behind one small interface (protocols.py): each a wing of its own, BFCL multi-turn (bfcl/) and
BFCL v4 memory (memory/), named by the registry (config/benchmark_entries.py), and any a lab adds."""
