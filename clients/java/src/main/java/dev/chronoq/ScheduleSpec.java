package dev.chronoq;

import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Duration;
import java.time.Instant;

/**
 * A schedule definition: {@code ScheduleSpec.cron("purge", "maintenance", "0 0 3 * * *").tz("Asia/Seoul")}.
 * Exactly one rule: cron, every or fixed delay.
 */
public final class ScheduleSpec {
    final ObjectNode json = Transport.MAPPER.createObjectNode();
    final String name;

    private ScheduleSpec(String name, String queue) {
        this.name = name;
        if (name != null) json.put("name", name);
        json.put("queue", queue);
    }

    /**
     * @param name schedule name
     * @param queue queue
     * @param cron expression
     * @return a cron schedule
     */
    public static ScheduleSpec cron(String name, String queue, String cron) {
        ScheduleSpec s = new ScheduleSpec(name, queue);
        s.json.put("cron", cron);
        return s;
    }

    /**
     * @param name schedule name
     * @param queue queue
     * @param every rate
     * @return a fixed-rate schedule
     */
    public static ScheduleSpec every(String name, String queue, Duration every) {
        ScheduleSpec s = new ScheduleSpec(name, queue);
        s.json.put("every_ms", every.toMillis());
        return s;
    }

    /**
     * @param name schedule name
     * @param queue queue
     * @param delay after each run
     * @return a fixed-delay schedule
     */
    public static ScheduleSpec fixedDelay(String name, String queue, Duration delay) {
        ScheduleSpec s = new ScheduleSpec(name, queue);
        s.json.put("fixed_delay_ms", delay.toMillis());
        return s;
    }

    /**
     * @param tz IANA zone of a cron rule
     * @return this
     */
    public ScheduleSpec tz(String tz) { json.put("tz", tz); return this; }
    /**
     * @param payload a JSON object (Map, POJO)
     * @return this
     */
    public ScheduleSpec payload(Object payload) { json.set("payload", Transport.MAPPER.valueToTree(payload)); return this; }
    /**
     * @param start no occurrence before it
     * @return this
     */
    public ScheduleSpec start(Instant start) { json.put("start", start.toString()); return this; }
    /**
     * @param misfire skip, run_once or run_all
     * @return this
     */
    public ScheduleSpec misfire(String misfire) { json.put("misfire", misfire); return this; }
    /**
     * @param n max_catchup
     * @return this
     */
    public ScheduleSpec maxCatchup(int n) { json.put("max_catchup", n); return this; }
    /**
     * @param overlap allow, skip or queue_one
     * @return this
     */
    public ScheduleSpec overlap(String overlap) { json.put("overlap", overlap); return this; }
    /**
     * @param dstGap run_after or skip
     * @return this
     */
    public ScheduleSpec dstGap(String dstGap) { json.put("dst_gap", dstGap); return this; }
    /**
     * @param dstRepeat once or twice
     * @return this
     */
    public ScheduleSpec dstRepeat(String dstRepeat) { json.put("dst_repeat", dstRepeat); return this; }
    /**
     * @param p priority of each occurrence
     * @return this
     */
    public ScheduleSpec priority(int p) { json.put("priority", p); return this; }
    /**
     * @param n max_attempts of each occurrence
     * @return this
     */
    public ScheduleSpec maxAttempts(int n) { json.put("max_attempts", n); return this; }
    /**
     * @param t webhook target of each occurrence
     * @return this
     */
    public ScheduleSpec target(Target t) { json.set("target", TaskSpec.targetJson(t)); return this; }
}
