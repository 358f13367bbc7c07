package dev.chronoq;

import java.time.Instant;

/**
 * A schedule's latest finished occurrence.
 *
 * @param taskId the occurrence's task id
 * @param scheduledFor the occurrence's instant
 * @param state succeeded, dead or cancelled
 * @param finishedAt when it finished
 * @param error its last error, or null
 */
public record ScheduleRun(String taskId, Instant scheduledFor, String state, Instant finishedAt, String error) {}
