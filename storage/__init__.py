"""The run store: a per-run event log (Parquet parts queried with DuckDB), the control database
(runs, curation decisions, seed catalog; SQLModel over one DuckDB file) and JSONL export/import.

Imports from rods_core: `rods_core.tasks` only. Nothing here imports streamlit, torch or TRL.
"""
