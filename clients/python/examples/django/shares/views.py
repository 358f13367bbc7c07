"""A tiny JSON API. Each request is one transaction (``ATOMIC_REQUESTS``), so
the chronoq calls the services register with on_commit go out only after a
successful response's commit, and not at all when the view raises."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET, require_POST

from .models import DEFAULT_PERIOD, Share
from .services import ShareClosed, change_period, create_share, revoke_share


def _days(request: HttpRequest, default: timedelta) -> timedelta:
    value = request.POST.get("days")
    return default if value in (None, "") else timedelta(days=float(value))


@require_POST
def create(request: HttpRequest) -> JsonResponse:
    """``POST /shares/`` with ``file_name`` and optional ``days`` (default 7)."""
    file_name = request.POST.get("file_name", "").strip()
    if not file_name:
        return JsonResponse({"error": "file_name is required"}, status=400)
    try:
        share = create_share(file_name, period=_days(request, DEFAULT_PERIOD))
    except (ValueError, OverflowError) as e:
        return JsonResponse({"error": str(e)}, status=400)
    return JsonResponse(share.as_json(), status=201)


@require_GET
def detail(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(get_object_or_404(Share, pk=pk).as_json())


@require_POST
def revoke(request: HttpRequest, pk: int) -> JsonResponse:
    try:
        share = revoke_share(get_object_or_404(Share, pk=pk))
    except ShareClosed as e:
        return JsonResponse({"error": str(e)}, status=409)
    return JsonResponse(share.as_json())


@require_POST
def period(request: HttpRequest, pk: int) -> JsonResponse:
    """``POST /shares/<id>/period`` with ``days``: expires that long after creation."""
    share = get_object_or_404(Share, pk=pk)
    try:
        share = change_period(share, _days(request, share.period))
    except ShareClosed as e:
        return JsonResponse({"error": str(e)}, status=409)
    except (ValueError, OverflowError) as e:
        return JsonResponse({"error": str(e)}, status=400)
    return JsonResponse(share.as_json())
