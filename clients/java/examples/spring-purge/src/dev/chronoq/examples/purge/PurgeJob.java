package dev.chronoq.examples.purge;

import dev.chronoq.ChronoqClient;
import dev.chronoq.ChronoqWorker;
import dev.chronoq.OnConflict;
import dev.chronoq.Schedule;
import dev.chronoq.ScheduleSpec;
import dev.chronoq.Task;
import dev.chronoq.TaskSpec;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The nightly purge of soft-deleted rows, as a chronoq schedule plus two handlers (plain Java; the
 * Spring wiring is in README.md):
 *
 * <ol>
 *   <li>the schedule {@value #SCHEDULE} ({@code 0 0 3 * * *} in {@code Asia/Seoul}) puts one task
 *       into {@value #PLAN_QUEUE} every night;</li>
 *   <li>its handler finds the rows soft-deleted more than {@code retention_days} ago and enqueues
 *       one task per row into {@value #ROWS_QUEUE} (ids {@code purge-row:<id>}, so a re-run adds
 *       nothing twice);</li>
 *   <li>a batch handler takes those tasks {@value #CHUNK} at a time, deletes each chunk with one
 *       statement and reports per row: rows deleted succeed, the others fail and retry with the
 *       queue's backoff, in the same {@code POST /v1/acks}.</li>
 * </ol>
 */
public final class PurgeJob {
    /** The schedule's name. */
    public static final String SCHEDULE = "nightly-purge";
    /** Queue of the nightly occurrence. */
    public static final String PLAN_QUEUE = "maintenance";
    /** Queue of the per-row tasks. */
    public static final String ROWS_QUEUE = "purge-rows";
    /** Rows per delete statement (and per batch). */
    public static final int CHUNK = 1000;

    private final ChronoqClient client;
    private final SoftDeletedRepository repository;
    private final Clock clock;

    /**
     * @param client the chronoq client
     * @param repository the application's storage
     * @param clock time source (for the cutoff)
     */
    public PurgeJob(ChronoqClient client, SoftDeletedRepository repository, Clock clock) {
        this.client = client;
        this.repository = repository;
        this.clock = clock;
    }

    /**
     * Creates or replaces the schedule (idempotent: call it at every start).
     *
     * @param retentionDays how old a soft-deleted row must be to go
     * @return the schedule
     */
    public Schedule installSchedule(int retentionDays) {
        return client.putSchedule(SCHEDULE, ScheduleSpec.cron(null, PLAN_QUEUE, "0 0 3 * * *").tz("Asia/Seoul")
                .payload(Map.of("retention_days", retentionDays)));
    }

    /**
     * Registers both handlers on a worker (before {@link ChronoqWorker#start()}).
     *
     * @param worker the worker
     */
    public void register(ChronoqWorker worker) {
        worker.handle(PLAN_QUEUE, 1, this::plan);
        worker.handleBatch(ROWS_QUEUE, CHUNK, this::deleteChunk);
    }

    /**
     * The nightly occurrence: one task per row to delete.
     *
     * @param occurrence the schedule's task
     */
    public void plan(Task occurrence) {
        int days = occurrence.payload().path("retention_days").asInt(30);
        Instant cutoff = clock.instant().minus(Duration.ofDays(days));
        List<TaskSpec> specs = new ArrayList<>();
        for (Long id : repository.findSoftDeletedBefore(cutoff)) {
            specs.add(TaskSpec.builder(ROWS_QUEUE).id("purge-row:" + id).payload(Map.of("row", id))
                    .onConflict(OnConflict.IGNORE).build());
        }
        client.enqueueMany(specs); // 10,000 per request
    }

    /**
     * One chunk: a single delete, then a result per row.
     *
     * @param tasks up to {@value #CHUNK} row tasks
     * @return one result per task
     */
    public List<ChronoqWorker.ItemResult> deleteChunk(List<Task> tasks) {
        List<Long> ids = new ArrayList<>();
        for (Task t : tasks) ids.add(t.payload().path("row").asLong());
        Set<Long> deleted = repository.deleteByIds(ids);
        List<ChronoqWorker.ItemResult> out = new ArrayList<>();
        for (Long id : ids) {
            out.add(deleted.contains(id) ? ChronoqWorker.ItemResult.ok()
                    : ChronoqWorker.ItemResult.fail("row " + id + " was not deleted"));
        }
        return out;
    }
}
