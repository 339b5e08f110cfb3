"""BFCL v4 memory as a wing: its task model and seeds (tasks), answer matching (answers), the memory backends'
environment (env), the template synthesizer (synth) and `benchmark`, whose factories the registry names
(rods_core.config.benchmark_entries)."""
