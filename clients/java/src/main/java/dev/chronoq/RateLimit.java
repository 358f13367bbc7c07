package dev.chronoq;

import java.time.Duration;

/**
 * A queue's claim rate limit: at most {@code count} tasks claimed per sliding {@code period}.
 *
 * @param count tasks per period
 * @param period the sliding window
 */
public record RateLimit(int count, Duration period) {}
