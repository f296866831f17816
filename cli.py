"""Run the qtsearch command line from a checkout: `python cli.py --help`."""

from qtsearch.app.cli import main

if __name__ == "__main__":
    main()
