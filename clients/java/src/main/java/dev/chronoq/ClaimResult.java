package dev.chronoq;

import java.util.List;

/**
 * The answer of a claim: the leased tasks and the results of the acks it carried.
 *
 * @param tasks the leased tasks
 * @param acks one result per ack carried (empty when none)
 */
public record ClaimResult(List<Task> tasks, List<AckResult> acks) {}
