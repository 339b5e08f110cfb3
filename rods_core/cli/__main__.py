"""`python -m rods_core.cli ...`: the same `rods` command (the app launches runs this way)."""

from rods_core.cli import main

main()
