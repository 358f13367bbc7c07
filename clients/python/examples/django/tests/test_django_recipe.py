"""The expiring-shares recipe against a real chronoqd on a test clock and a
temporary SQLite database (see conftest.py). No test sleeps to let time pass:
a share that must expire now is given a period of zero and chronoqd's clock
is moved to its due time, the worker's last claim wait is run out by moving
the clock too, and conditions are polled with deadlines that say what they
waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.test import Client as HttpClient
from django.utils import timezone

from chronoq import Client, Lease, NotFound, RetryLater
from recipe_support import PROJECT, FakeTime, Server, wait_for
from shares.models import Share
from shares.services import ShareClosed, change_period, create_share, revoke_share
from shares.tasks import expire_share

QUEUE = "expire-share"
WEEK = timedelta(days=7)


def test_creating_a_share_schedules_its_expiry_in_seven_days(client: Client) -> None:
    before = timezone.now()
    share = create_share("report.pdf")
    after = timezone.now()

    assert share.task_id == f"share:{share.pk}"
    task = client.get(share.task_id)
    assert task.queue == QUEUE
    assert task.state == "scheduled"
    assert task.payload == {"share": share.pk}
    assert task.run_at == share.expires_at
    # Times are kept in whole milliseconds, as chronoqd's answers carry them.
    assert before - timedelta(milliseconds=1) + WEEK < task.run_at <= after + WEEK
    share.refresh_from_db()
    assert share.expires_at - share.created_at == WEEK


def test_a_rolled_back_create_schedules_nothing(client: Client) -> None:
    with pytest.raises(RuntimeError, match="the request failed"):
        with transaction.atomic():
            share = create_share("draft.pdf")
            share_id = share.pk
            assert Share.objects.filter(pk=share_id).exists()
            raise RuntimeError("the request failed")

    assert not Share.objects.filter(pk=share_id).exists()
    with pytest.raises(NotFound):
        client.get(f"share:{share_id}")


def test_the_task_is_sent_only_when_the_outer_transaction_commits(client: Client) -> None:
    with transaction.atomic():
        share = create_share("slides.pdf")
        # Still inside the request's transaction: chronoqd knows nothing yet.
        with pytest.raises(NotFound):
            client.get(share.task_id)
    assert client.get(share.task_id).state == "scheduled"


def test_revoking_early_cancels_the_task(client: Client) -> None:
    share = create_share("contract.pdf")
    assert client.get(share.task_id).state == "scheduled"

    revoke_share(share)

    assert client.get(share.task_id).state == "cancelled"
    share.refresh_from_db()
    assert share.status == "revoked"
    revoke_share(share)  # again: nothing happens
    with pytest.raises(ShareClosed):
        change_period(share, timedelta(days=30))


def test_a_rolled_back_revoke_leaves_the_task(client: Client) -> None:
    share = create_share("notes.txt")
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            revoke_share(share)
            raise RuntimeError("the request failed")
    assert client.get(share.task_id).state == "scheduled"
    share.refresh_from_db()
    assert share.status == "active"


def test_changing_the_period_reschedules_the_task(client: Client) -> None:
    share = create_share("photos.zip")
    first = client.get(share.task_id)

    change_period(share, timedelta(days=30))

    share.refresh_from_db()
    assert share.expires_at == share.created_at + timedelta(days=30)
    task = client.get(share.task_id)
    assert task.state == "scheduled"
    assert task.run_at == share.expires_at
    assert task.run_at is not None and first.run_at is not None
    assert task.run_at - first.run_at == timedelta(days=23)

    change_period(share, timedelta(days=1))  # sooner works too
    assert client.get(share.task_id).run_at == share.created_at + timedelta(days=1)


def test_changing_the_period_makes_a_missing_task(client: Client) -> None:
    # A share committed while chronoqd was unreachable has no task; the next
    # change makes one (enqueue with on_conflict="replace").
    share = create_share("lost.pdf")
    client.cancel(share.task_id)
    assert client.get(share.task_id).state == "cancelled"

    change_period(share, timedelta(days=3))

    task = client.get(share.task_id)
    assert task.state == "scheduled"
    assert task.run_at == share.created_at + timedelta(days=3)


def test_the_handler_does_not_expire_a_share_before_its_time(client: Client) -> None:
    # A task that comes early (its reschedule lost a race) is retried at the
    # share's expires_at instead of expiring it.
    share = create_share("early.pdf")
    lease = Lease(id=share.task_id, queue=QUEUE, payload={"share": share.pk}, token=1)

    with pytest.raises(RetryLater) as caught:
        expire_share(lease)

    delay = caught.value.delay
    assert isinstance(delay, timedelta)
    assert timedelta(days=6, hours=23) < delay <= WEEK
    share.refresh_from_db()
    assert share.status == "active"


def test_the_json_api_creates_and_revokes(client: Client) -> None:
    http = HttpClient(HTTP_HOST="localhost")
    answer = http.post("/shares/", {"file_name": "api.pdf", "days": "2"})
    assert answer.status_code == 201, answer.content
    body = answer.json()
    task = client.get(f"share:{body['id']}")
    assert task.state == "scheduled"
    assert task.run_at - Share.objects.get(pk=body["id"]).created_at == timedelta(days=2)

    answer = http.post(f"/shares/{body['id']}/revoke")
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "revoked"
    assert client.get(f"share:{body['id']}").state == "cancelled"


def test_worker_command_expires_due_shares_and_stops_on_sigterm(
    client: Client, chronoqd: Server, tmp_path: Path
) -> None:
    due = create_share("due-now.pdf", period=timedelta(0))
    later = create_share("next-week.pdf")
    revoked = create_share("revoked.pdf", period=timedelta(0))
    revoke_share(revoked)
    assert client.get(due.task_id).state == "scheduled"

    env = dict(os.environ)
    env.update(
        CHRONOQ_URL=chronoqd.url,
        SHARESITE_DB=os.environ["SHARESITE_DB"],
        DJANGO_SETTINGS_MODULE="sharesite.settings",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("CHRONOQ_TOKEN", None)
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-B", str(PROJECT / "manage.py"), "chronoq_worker", "--wait", "1"],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    fake_time = FakeTime(chronoqd)
    try:
        def expired() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"the worker exited with {proc.returncode}:\n{log_path.read_text()}")
            return Share.objects.get(pk=due.pk).expired_at is not None

        # The share is due now by our clock; chronoqd's test clock stands at
        # its start-up until moved to the task's run_at.
        run_at = client.get(due.task_id).run_at
        assert run_at is not None and run_at == due.expires_at
        fake_time.advance_to(run_at)
        wait_for(expired, f"the worker to expire share {due.pk}", timeout=30)
        wait_for(lambda: client.get(due.task_id).state == "succeeded",
                 f"task {due.task_id} to be acknowledged", timeout=30)
        assert client.get(later.task_id).state == "scheduled"

        proc.send_signal(signal.SIGTERM)
        # The stop waits for the claim in flight (--wait 1): move time past it.
        fake_time.run_out_until(lambda: proc.poll() is not None, 1000,
                                "the worker to exit after SIGTERM", timeout=30)
        code = proc.wait(timeout=30)
        assert code == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        fake_time.close()
        print(log_path.read_text())  # shown when the test fails

    assert Share.objects.get(pk=due.pk).status == "expired"
    assert Share.objects.get(pk=later.pk).status == "active"
    assert Share.objects.get(pk=revoked.pk).status == "revoked"
    assert client.get(later.task_id).state == "scheduled"
    assert client.get(revoked.task_id).state == "cancelled"
    output = log_path.read_text()
    assert "worker stopped: 1 claimed, 1 succeeded, 0 failed" in output, output
    with pytest.raises(ShareClosed):
        change_period(Share.objects.get(pk=due.pk), timedelta(days=30))
