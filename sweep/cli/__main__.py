"""``python -m sweep.cli``: the ``sweep`` command."""

import sys

from sweep.cli.app import main

sys.exit(main())
