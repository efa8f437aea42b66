"""``python -m convkit``: the ``convkit`` command (:mod:`convkit.cli`) without its console script."""

import sys

from convkit.cli import main

sys.exit(main())
