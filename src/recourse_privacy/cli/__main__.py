"""``python -m recourse_privacy.cli``: the console entry point."""

from recourse_privacy.cli import main

main()
