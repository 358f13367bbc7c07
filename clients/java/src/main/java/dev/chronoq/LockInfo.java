package dev.chronoq;

import java.time.Instant;

/**
 * The state of a lock key.
 *
 * @param key the key
 * @param held whether someone holds it
 * @param owner the holder's owner string, or null
 * @param expiresAt the lease end, or null
 * @param waiters acquisitions waiting
 */
public record LockInfo(String key, boolean held, String owner, Instant expiresAt, int waiters) {}
