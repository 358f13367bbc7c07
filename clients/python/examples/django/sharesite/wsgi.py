"""WSGI entry point (``gunicorn sharesite.wsgi``)."""

import os
import sys
from pathlib import Path

# The chronoq package of this checkout; `pip install chronoq` in a real project.
_CLIENT = Path(__file__).resolve().parents[3]
if str(_CLIENT) not in sys.path:
    sys.path.insert(1, str(_CLIENT))

from django.core.wsgi import get_wsgi_application  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sharesite.settings")
application = get_wsgi_application()
