"""``python -m roberta_static`` runs the command line."""

from roberta_static.cli import main

main()
