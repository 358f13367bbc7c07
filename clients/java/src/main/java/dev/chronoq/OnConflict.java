package dev.chronoq;

/** What an enqueue with a client id that names an unfinished task does. */
public enum OnConflict {
    /** 409 conflict (the default). */
    REJECT,
    /** return the existing task unchanged. */
    IGNORE,
    /** replace its run_at, payload and options (409 if running). */
    REPLACE;

    String wire() { return name().toLowerCase(java.util.Locale.ROOT); }
}
