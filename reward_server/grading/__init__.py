"""Grading: code (through the sandbox pool) and math (a SymPy-based checker)."""
