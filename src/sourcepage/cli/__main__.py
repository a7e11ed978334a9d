"""``python -m sourcepage.cli``."""

from sourcepage.cli import main

main()
