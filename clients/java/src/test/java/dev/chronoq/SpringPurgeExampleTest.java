package dev.chronoq;

import dev.chronoq.examples.purge.PurgeJob;
import dev.chronoq.examples.purge.SoftDeletedRepository;
import org.junit.jupiter.api.Test;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

import static org.junit.jupiter.api.Assertions.*;

/** The examples/spring-purge recipe against chronoqd with a fake repository (C11, C14). */
class SpringPurgeExampleTest {
    static final class FakeRepository implements SoftDeletedRepository {
        final Map<Long, Instant> rows = new ConcurrentHashMap<>();
        final Set<Long> undeletable = ConcurrentHashMap.newKeySet();
        final List<Integer> chunkSizes = new CopyOnWriteArrayList<>();

        @Override
        public List<Long> findSoftDeletedBefore(Instant cutoff) {
            List<Long> out = new ArrayList<>();
            rows.forEach((id, at) -> { if (at.isBefore(cutoff)) out.add(id); });
            return out;
        }

        @Override
        public Set<Long> deleteByIds(Collection<Long> ids) {
            chunkSizes.add(ids.size());
            Set<Long> done = new HashSet<>();
            for (Long id : ids) {
                if (undeletable.contains(id)) continue;
                rows.remove(id);
                done.add(id);
            }
            return done;
        }
    }

    @Test
    void nightlyPurgeDeletesInChunksAndReportsPerItem() throws Exception {
        try (Chronoqd server = Chronoqd.start()) {
            ChronoqClient client = server.client();
            Instant now = Instant.now();
            FakeRepository repo = new FakeRepository();
            for (long i = 1; i <= 2500; i++) repo.rows.put(i, now.minus(Duration.ofDays(40)));
            for (long i = 2501; i <= 2600; i++) repo.rows.put(i, now.minus(Duration.ofDays(1))); // too recent
            repo.undeletable.addAll(List.of(7L, 1500L));
            PurgeJob job = new PurgeJob(client, repo, Clock.fixed(now, ZoneOffset.UTC));

            Schedule s = job.installSchedule(30);
            assertEquals("0 0 3 * * *", s.cron());
            assertEquals("Asia/Seoul", s.tz());
            for (Instant i : client.nextOccurrences(PurgeJob.SCHEDULE, 2)) assertEquals(18, i.atZone(ZoneOffset.UTC).getHour());
            job.installSchedule(30); // idempotent

            // stand in for tonight's occurrence
            client.enqueue(TaskSpec.builder(PurgeJob.PLAN_QUEUE).id("purge@test").payload(Map.of("retention_days", 30)).build());
            client.configureQueue(PurgeJob.ROWS_QUEUE, new QueueSettings().backoff(new Backoff(Duration.ofHours(1), null)));
            try (ChronoqWorker worker = ChronoqWorker.builder(client).wait(Duration.ofMillis(500)).build()) {
                job.register(worker);
                worker.start();
                Chronoqd.await("2,498 rows to be purged", () -> repo.rows.size() == 102);
                Chronoqd.await("the row tasks to be settled", () -> client.getQueue(PurgeJob.ROWS_QUEUE).count("succeeded") == 2498
                        && client.getQueue(PurgeJob.ROWS_QUEUE).count("scheduled") == 2);
            }
            assertEquals("succeeded", client.get("purge@test").state());
            for (int n : repo.chunkSizes) assertTrue(n <= PurgeJob.CHUNK, "chunk of " + n);
            assertEquals(2500, repo.chunkSizes.stream().mapToInt(Integer::intValue).sum());
            assertEquals("row 7 was not deleted", client.get("purge-row:7").lastError());
            assertEquals("succeeded", client.get("purge-row:8").state());
        }
    }
}
