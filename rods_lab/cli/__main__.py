"""`python -m rods_lab.cli ...`: the same `rods` command (the app launches runs this way)."""

from rods_lab.cli import main

main()
