package dev.chronoq;

import java.util.List;

/**
 * One page of a listing.
 *
 * @param items the items
 * @param nextCursor the cursor of the next page, or null on the last
 * @param <T> the item type
 */
public record Page<T>(List<T> items, String nextCursor) {}
