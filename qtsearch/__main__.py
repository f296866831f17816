"""`python -m qtsearch`, what `torchrun … -m qtsearch train …` runs in each process."""

from qtsearch.app.cli import main

main()
