package dev.chronoq.examples.purge;

import java.time.Instant;
import java.util.Collection;
import java.util.List;
import java.util.Set;

/** What the purge needs from the application's storage (a Spring Data repository in the recipe). */
public interface SoftDeletedRepository {
    /**
     * @param cutoff rows soft-deleted before this instant
     * @return their ids
     */
    List<Long> findSoftDeletedBefore(Instant cutoff);

    /**
     * Deletes rows (one statement per chunk).
     *
     * @param ids at most 1,000 ids
     * @return the ids actually deleted (or already gone); the others failed
     */
    Set<Long> deleteByIds(Collection<Long> ids);
}
