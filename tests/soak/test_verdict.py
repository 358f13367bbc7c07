"""The soak test's verdict (bench/soak/verdict.py) on fixed runs: a flat one
passes; a leak, an fd leak, a growing p99, a lost task, an unexpected error
and a sanitizer report each fail it, by the check that names them. The runs
are built here from formulas with fixed noise (no randomness), an hour long
with a SIGKILL every 10 minutes, as `make soak DURATION=1h` makes them."""

import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "soak"))

import verdict  # noqa: E402

COLUMNS = verdict.COLUMNS


def noise(i, amplitude):
    """A fixed, zero-mean wobble: what a loaded machine adds."""
    return amplitude * (((i * 7919) % 13) - 6) / 6.0


def run(duration=3600, kill_every=600, rss_leak_kib_per_s=0.0, fd_leak_per_s=0.0,
        p99_growth_per_s=0.0, late_growth_per_s=0.0, wal_growth_per_s=0.0, errors_at=None,
        rss_level_growth_kib=0.0):
    """The CSV rows of a soak run: RSS climbs for 90 s after each start (the
    caches filling) and then stays level apart from the noise and the leak given."""
    rows = []
    pid, seg_start, seg = 1000, 0.0, 0
    for i in range(1, int(duration / 10) + 1):
        t = i * 10.0
        if kill_every and t - 10.0 >= (seg + 1) * kill_every:
            seg += 1
            pid += 1
            seg_start = t - 10.0
        age = t - seg_start
        rss = (40000 + seg * rss_level_growth_kib + min(age, 90.0) * 200
               + rss_leak_kib_per_s * age + noise(i, 300))
        fds = 30 + (2 if age < 60 else 0) + int(fd_leak_per_s * age) + int(noise(i + 3, 2))
        wal = 4_000_000 + 30_000 * ((i * 31) % 17) + wal_growth_per_s * t
        p99 = 6.0 + p99_growth_per_s * t + abs(noise(i + 5, 3))
        late = 12.0 + late_growth_per_s * t + abs(noise(i + 7, 5))
        rows.append({
            "elapsed_s": t, "pid": pid, "rss_kib": int(rss), "fds": fds, "wal_bytes": int(wal),
            "req_p50_ms": 1.5, "req_p99_ms": round(p99, 2), "requests": 3000,
            "late_p50_ms": 4.0, "late_p99_ms": round(late, 2), "late_n": 1500,
            "enqueued": 2100, "acked": 2100, "backlog": 300, "restarts": seg,
            "errors": 1 if errors_at is not None and abs(t - errors_at) < 5 else 0,
            "chronoqd_cpu_pct": 35.0, "driver_cpu_pct": 20.0, "loadavg1": 4.0,
        })
    return rows


def counts(duration=3600, lost=0, dead=False, exit_code=0, sanitizer_reports=0, sanitized=False):
    by_kind = {"single": {"acknowledged": 200000, "done": 200000 - lost, "duplicates": 12}}
    if lost:
        by_kind["single"]["lost"] = lost
    return {
        "started_utc": "2026-11-27T04:00:00+00:00", "duration_s": duration, "run_s": duration,
        "kill_every_s": 600, "load": 1.0, "sanitized": sanitized, "chronoqd": "chronoqd",
        "kills": [], "restarts": 5, "drained": True, "drain_s": 12.0, "counters": {},
        "unexpected_errors": [],
        "verification": {"by_kind": by_kind, "lost": ["s-17 (not_found)"] * lost,
                         "lost_count": lost + (1 if dead else 0)},
        "schedule_runs": [duration - 40] * 3, "sigterm_exit_code": exit_code,
        "log_sanitizer_reports": sanitizer_reports, "machine": {"cores": 2},
    }


def verdicts(rows, c):
    checks, _ = verdict.evaluate(rows, c)
    return {ch.name: ch.passed for ch in checks}


def failed(rows, c):
    return sorted(name for name, ok in verdicts(rows, c).items() if ok is False)


def test_a_flat_run_passes_every_check():
    v = verdicts(run(), counts())
    assert all(ok is True for ok in v.values()), v


def test_a_leak_of_2_mib_per_10_minutes_fails_rss():
    # 3.5 KiB/s = 2 MiB per 10 min: twice the limit, under the noise of any one sample.
    assert failed(run(rss_leak_kib_per_s=3.5), counts()) == ["RSS flat within segments"]


def test_half_the_rss_limit_passes():
    assert failed(run(rss_leak_kib_per_s=0.85), counts()) == []


def test_state_that_piles_up_across_restarts_fails_the_level():
    assert failed(run(rss_level_growth_kib=4000), counts()) == ["RSS level across restarts"]


def test_an_fd_leak_fails_fds():
    # One fd every 5 minutes: segments end 2 fds up, and the slope is 2 per 10 min.
    assert "fds flat within segments" in failed(run(fd_leak_per_s=1 / 300), counts())


def test_a_p99_that_grows_fails_and_noise_does_not():
    # 6 ms to about 100 ms over the hour.
    assert failed(run(p99_growth_per_s=0.027), counts()) == ["request p99 flat"]
    # 6 ms to 40 ms: over three times, but within the floor: another build on
    # the machine does that.
    assert failed(run(p99_growth_per_s=0.01), counts()) == []


def test_lateness_that_grows_fails():
    assert failed(run(late_growth_per_s=0.06), counts()) == ["lateness p99 flat"]


def test_a_wal_that_grows_fails():
    assert failed(run(wal_growth_per_s=8000), counts()) == ["WAL bounded"]


def test_a_lost_task_fails_and_duplicates_do_not():
    assert failed(run(), counts(lost=1)) == ["nothing lost"]
    assert failed(run(), counts(dead=True)) == ["nothing lost"]


def test_an_unexpected_error_fails():
    assert failed(run(errors_at=1800), counts()) == ["no unexpected errors, drained"]


def test_a_sanitizer_report_or_an_unclean_exit_fails():
    assert failed(run(), counts(sanitizer_reports=1, sanitized=True)) == [
        "clean shutdown, no sanitizer report (LeakSanitizer included)"]
    assert failed(run(), counts(exit_code=23)) == ["clean shutdown"]


def test_under_asan_rss_is_not_judged_the_leak_report_is():
    # ASan's quarantine grows RSS on its own; the LeakSanitizer report decides.
    v = verdicts(run(rss_leak_kib_per_s=3.5), counts(sanitized=True))
    assert v["RSS flat within segments"] is None
    assert v["clean shutdown, no sanitizer report (LeakSanitizer included)"] is True


def test_a_short_run_decides_only_what_it_can():
    # 90 s, no kills: nothing is left after the warm-up, so the trends are
    # undecided (n/a), while loss and shutdown are still checked.
    v = verdicts(run(duration=90, kill_every=0), counts(duration=90))
    assert v["RSS flat within segments"] is None
    assert v["request p99 flat"] is None
    assert v["nothing lost"] is True


def test_the_command_writes_a_report_and_fails_a_leak(tmp_path):
    for name, rows, code in (("flat", run(), 0), ("leak", run(rss_leak_kib_per_s=3.5), 1)):
        d = tmp_path / name
        d.mkdir()
        with open(d / "samples.csv", "w", newline="") as f:
            w = csv.DictWriter(f, COLUMNS)
            w.writeheader()
            w.writerows(rows)
        (d / "counts.json").write_text(json.dumps(counts()))
        assert verdict.main([str(d), "--no-plot"]) == code
        report = (d / "report.md").read_text()
        assert report.startswith(f"# Soak run {name}: {'PASS' if code == 0 else 'FAIL'}")
        assert ("| RSS flat within segments | **FAIL** |" in report) == (code == 1)
