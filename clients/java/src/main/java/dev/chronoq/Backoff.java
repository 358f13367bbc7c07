package dev.chronoq;

import java.time.Duration;

/**
 * Retry backoff: exponential from {@code base} with full jitter, capped at {@code cap}.
 *
 * @param base the first delay
 * @param cap the largest delay, or null for the engine's
 */
public record Backoff(Duration base, Duration cap) {}
