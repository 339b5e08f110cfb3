"""The lab's experiment harness: plans method comparisons (arms, replicates, held-out sets, offline arms), runs them
through the lab's launcher and model builder, reads their run folders and summaries, and writes their reports;
statistics come from rods_core.statistics. `rods bench curriculum|paper|demo|...` are its commands."""
