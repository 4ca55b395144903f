import sys

from .forkserver import forward

# inside a local pipeline run, the run's fork server runs the command (it returns where none)
forward("cli", sys.argv[1:])

from .cli import main  # noqa: E402 - only where no server took the command

sys.exit(main())
