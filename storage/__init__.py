"""The run store: a per-run event log (Parquet parts queried with DuckDB), the control store (runs,
curation decisions and their audit trail, seed catalog; SQLModel over SQLite or PostgreSQL) and JSONL
export/import.

Sees a task through the task contract (rods_core.benchmarks.protocols.TaskRecord) and a benchmark through the
registry; still imports from the BFCL wing its JSONL helpers (record_parser, iter_records, write_tasks), its seeds
(the catalog's built-ins) and its task model (curation's side-by-side view of turns). Nothing here imports
streamlit, torch or TRL.
"""
