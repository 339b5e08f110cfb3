"""BFCL v3 multi-turn, the benchmark the paper trains on, as a wing: its task model and seeds (tasks, seeds,
demo), structural signature and seed statistics, the tool environment (environment, checker, scoring; call
parsing, dispatch and message reading are the shared benchmarks/toolcalls/), its prompts, the five-stage
synthesis pipeline (synth/), the app's facts, and `benchmark.BfclMultiTurn`, the entry the registry names
(rods_core.config.benchmark_entries)."""
