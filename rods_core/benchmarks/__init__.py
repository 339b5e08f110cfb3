"""Benchmarks behind one small interface (protocols.py): BFCL multi-turn, BFCL v4 memory, and any a lab adds."""
