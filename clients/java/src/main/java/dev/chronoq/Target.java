package dev.chronoq;

import java.time.Duration;
import java.util.Map;

/**
 * A webhook target: chronoqd delivers the task itself by sending its payload to {@code url}.
 *
 * @param url http or https URL
 * @param method POST (default when null), PUT, PATCH, GET or DELETE
 * @param headers extra headers, or null
 * @param timeout the answer timeout, or null for 10 s
 */
public record Target(String url, String method, Map<String, String> headers, Duration timeout) {
    /**
     * @param url the URL
     * @return a POST target with defaults
     */
    public static Target of(String url) { return new Target(url, null, null, null); }
}
