"""``python -m metricbridge``."""

import sys

from metricbridge.cli import main

sys.exit(main())
