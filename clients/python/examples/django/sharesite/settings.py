"""Settings of the expiring-shares example: SQLite, one app, chronoq from the
environment."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-example-key-do-not-deploy")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")

INSTALLED_APPS = ["shares"]
# A JSON API without sessions or cookies, so no CSRF middleware; add the
# usual stack (and django.contrib.*) when you add pages for people.
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "sharesite.urls"
WSGI_APPLICATION = "sharesite.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHARESITE_DB", str(BASE_DIR / "db.sqlite3")),
        # Each request is one transaction: what a view enqueues with
        # transaction.on_commit is sent only if the request commits.
        "ATOMIC_REQUESTS": True,
        # The web process and the worker write the same file.
        "OPTIONS": {"timeout": 20},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

USE_TZ = True
TIME_ZONE = "UTC"

# chronoqd: one URL or a comma-separated list of a cluster's nodes.
CHRONOQ_URL = os.environ.get("CHRONOQ_URL", "http://127.0.0.1:7070")
CHRONOQ_TOKEN = os.environ.get("CHRONOQ_TOKEN") or None
# Seconds to wait for chronoqd's answer (a view waits this long at most).
CHRONOQ_TIMEOUT = float(os.environ.get("CHRONOQ_TIMEOUT", "10"))
CHRONOQ_SHARE_QUEUE = os.environ.get("CHRONOQ_SHARE_QUEUE", "expire-share")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "chronoq": {"handlers": ["console"], "level": "INFO"},
        "shares": {"handlers": ["console"], "level": "INFO"},
    },
}
