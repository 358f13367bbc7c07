#!/usr/bin/env python3
"""Django's command-line utility for the expiring-shares example."""

import os
import sys
from pathlib import Path

# The chronoq package of this checkout (clients/python). In a real project
# `pip install chronoq` instead and drop these lines.
_CLIENT = Path(__file__).resolve().parents[2]
if str(_CLIENT) not in sys.path:
    sys.path.insert(1, str(_CLIENT))


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sharesite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
