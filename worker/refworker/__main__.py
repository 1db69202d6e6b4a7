"""``python -m refworker``: run the reference worker until shutdown or EOF."""

import sys

from refworker.worker import main

sys.exit(main())
