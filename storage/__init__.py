"""The run store: a per-run event log (Parquet parts queried with DuckDB), the control store (runs,
curation decisions and their audit trail, seed catalog; SQLModel over SQLite or PostgreSQL) and JSONL
export/import.

Imports from rods_core: `rods_core.benchmarks.bfcl.tasks` only. Nothing here imports streamlit, torch or TRL.
"""
