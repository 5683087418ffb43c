"""`python -m swarmnode`: the same as the `swarmnode` console script."""

import sys

from swarmnode.node.cli import main

if __name__ == "__main__":
    sys.exit(main())
