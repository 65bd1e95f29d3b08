"""``python -m trainer_run.cli`` runs the ``trainer-run`` command."""

from .main import main

main()
