"""``python -m convkit.papers.summary.concurrency``: the soak (see the package's doc), or one of its workers."""

import sys

from convkit.papers.summary.concurrency.driver import main

main(sys.argv[1:])
