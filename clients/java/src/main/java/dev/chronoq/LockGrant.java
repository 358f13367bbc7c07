package dev.chronoq;

import java.time.Instant;

/**
 * A held lock.
 *
 * @param key the key
 * @param token the fencing token (larger than any earlier grant's)
 * @param expiresAt when the lease ends unless extended
 */
public record LockGrant(String key, long token, Instant expiresAt) {}
