"""``python -m metricbridge``."""

import sys

from metricbridge.cli.main import main

sys.exit(main())
