"""Entry point for `python -m gpuslice`."""

from gpuslice.cli.main import main

if __name__ == "__main__":
    main()
