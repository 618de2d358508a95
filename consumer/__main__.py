"""`python -m consumer ...` and the `lineage-consumer` console script."""

from __future__ import annotations

import sys

from consumer.cli import main

if __name__ == "__main__":
    sys.exit(main())
