"""``python -m trainer_run.cli`` runs the ``trainer-run`` command."""

from .entry import main

main()
