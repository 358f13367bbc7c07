package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.NullNode;

import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.channels.UnresolvedAddressException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLParameters;

/**
 * Sends requests to the nodes, moving to the next node on a connection failure or a 503, and
 * resending a request whose answer was lost only when that is safe (as the Python transport).
 */
final class Transport {
    static final ObjectMapper MAPPER = new ObjectMapper();
    private static final Set<String> IDEMPOTENT = Set.of("GET", "HEAD", "PUT", "DELETE", "PATCH");
    static final String USER_AGENT = "chronoq-java/0.1.0";

    /** One API call. */
    static final class Call {
        final String method;
        final String path;
        final JsonNode body;
        final boolean resend;
        final Duration extraTimeout;

        Call(String method, String path, JsonNode body, boolean resend, Duration extraTimeout) {
            this.method = method;
            this.path = path;
            this.body = body;
            this.resend = resend;
            this.extraTimeout = extraTimeout == null ? Duration.ZERO : extraTimeout;
        }

        boolean safeToResend() { return resend || IDEMPOTENT.contains(method); }
    }

    /** An answer: status, decoded body (NullNode when empty) and the node URL. */
    static final class Answer {
        final int status;
        final JsonNode body;
        final String node;

        Answer(int status, JsonNode body, String node) {
            this.status = status;
            this.body = body;
            this.node = node;
        }
    }

    private final List<String> nodes;
    private final String token;
    private final Duration timeout;
    private final HttpClient http;
    private volatile int current;

    Transport(List<String> urls, String token, Duration timeout, Duration connectTimeout, Executor executor,
              SSLContext ssl) {
        if (urls.isEmpty()) throw new IllegalArgumentException("no server URL given");
        List<String> list = new ArrayList<>();
        for (String u : urls) {
            String s = u.trim();
            URI uri = URI.create(s);
            if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme()))
                throw new IllegalArgumentException(s + ": the URL must start with http:// or https://");
            if (uri.getHost() == null) throw new IllegalArgumentException(s + ": no host");
            if (uri.getQuery() != null || uri.getFragment() != null)
                throw new IllegalArgumentException(s + ": a server URL takes no query or fragment");
            while (s.endsWith("/")) s = s.substring(0, s.length() - 1);
            list.add(s);
        }
        this.nodes = List.copyOf(list);
        this.token = token;
        this.timeout = timeout;
        HttpClient.Builder b = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(connectTimeout);
        if (executor != null) b.executor(executor);
        // TLS 1.2 or later; the JDK checks the certificate's host name.
        if (ssl != null) b.sslContext(ssl);
        b.sslParameters(new SSLParameters(null, new String[] {"TLSv1.3", "TLSv1.2"}));
        this.http = b.build();
    }

    List<String> nodes() { return nodes; }

    String currentUrl() { return nodes.get(current); }

    private HttpRequest build(int index, Call call, byte[] body) {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(nodes.get(index) + call.path))
                .timeout(timeout.plus(call.extraTimeout))
                .header("User-Agent", USER_AGENT)
                .header("Accept", "application/json");
        if (token != null && !token.isEmpty()) b.header("Authorization", "Bearer " + token);
        if (body != null) {
            b.header("Content-Type", "application/json");
            b.method(call.method, HttpRequest.BodyPublishers.ofByteArray(body));
        } else if (call.method.equals("POST") || call.method.equals("PUT") || call.method.equals("PATCH")) {
            b.method(call.method, HttpRequest.BodyPublishers.ofByteArray(new byte[0]));
        } else {
            b.method(call.method, HttpRequest.BodyPublishers.noBody());
        }
        return b.build();
    }

    private static boolean notSent(Throwable e) {
        while (e instanceof CompletionException && e.getCause() != null) e = e.getCause();
        // A failed TLS handshake: the request was never written.
        return e instanceof ConnectException || e instanceof HttpConnectTimeoutException
                || e instanceof SSLHandshakeException
                || e instanceof UnresolvedAddressException
                || (e instanceof IOException && e.getCause() instanceof UnresolvedAddressException);
    }

    private static String describe(Throwable e) {
        while (e instanceof CompletionException && e.getCause() != null) e = e.getCause();
        if (e instanceof HttpConnectTimeoutException) return "timed out while connecting";
        if (e instanceof ConnectException) return "connection refused";
        if (e instanceof java.net.http.HttpTimeoutException) return "timed out";
        String m = e.getMessage();
        return m == null || m.isEmpty() ? e.getClass().getSimpleName() : m;
    }

    private byte[] encode(Call call) {
        if (call.body == null) return null;
        try {
            return MAPPER.writeValueAsBytes(call.body);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot encode the request: " + e.getMessage(), e);
        }
    }

    /** Sends the call synchronously (blocking the calling thread). */
    Answer send(Call call) {
        try {
            return sendAsync(call).join();
        } catch (CompletionException e) {
            Throwable c = e.getCause();
            if (c instanceof RuntimeException) {
                // Rethrow a copy-less original; add the caller's stack as suppressed for debugging.
                throw (RuntimeException) c;
            }
            throw e;
        }
    }

    /**
     * Sends the call; the future completes with the answer or a {@link ChronoqException}.
     *
     */
    CompletableFuture<Answer> sendAsync(Call call) {
        byte[] body;
        try {
            body = encode(call);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        State st = new State(call, body, current);
        CompletableFuture<Answer> result = new CompletableFuture<>();
        attempt(st, 0, result);
        return result;
    }

    private static final class State {
        final Call call;
        final byte[] body;
        final int start;
        final List<String> notes = new ArrayList<>();
        ChronoqException lastUnavailable;
        String lostAt;

        State(Call call, byte[] body, int start) {
            this.call = call;
            this.body = body;
            this.start = start;
        }
    }

    private void attempt(State st, int i, CompletableFuture<Answer> result) {
        int n = nodes.size();
        if (i >= n) {
            result.completeExceptionally(exhausted(st));
            return;
        }
        int index = (st.start + i) % n;
        String node = nodes.get(index);
        HttpRequest req = build(index, st.call, st.body);
        http.sendAsync(req, HttpResponse.BodyHandlers.ofByteArray()).whenComplete((resp, err) -> {
            try {
                if (err != null) {
                    if (notSent(err)) {
                        st.notes.add(node + ": " + describe(err));
                        attempt(st, i + 1, result);
                        return;
                    }
                    if (st.call.safeToResend()) {
                        st.notes.add(node + ": " + describe(err) + " (after the request was sent)");
                        st.lostAt = node;
                        attempt(st, i + 1, result);
                        return;
                    }
                    result.completeExceptionally(new OutcomeUnknownException(
                            st.call.method + " " + st.call.path + ": " + node + ": " + describe(err)
                                    + " after the request was sent; it may or may not have been done"
                                    + " (not resent: it is not safe to resend)",
                            "outcome_unknown", null, 0, node));
                    return;
                }
                Answer a = decode(resp.statusCode(), resp.body(), node);
                if (a.status == 503) {
                    ChronoqException e = errorOf(a);
                    st.notes.add(node + ": 503 " + e.code() + ": " + e.getMessage());
                    st.lastUnavailable = e;
                    attempt(st, i + 1, result);
                    return;
                }
                current = index;
                if (a.status >= 400) {
                    result.completeExceptionally(errorOf(a));
                    return;
                }
                result.complete(a);
            } catch (RuntimeException e) {
                result.completeExceptionally(e);
            }
        });
    }

    private ChronoqException exhausted(State st) {
        int n = nodes.size();
        if (st.lastUnavailable != null) {
            ChronoqException u = st.lastUnavailable;
            if (n == 1) return u;
            return ChronoqException.of(u.code(), "no node could do it: " + String.join("; ", st.notes),
                    u.field(), u.status(), u.node());
        }
        String text = (n > 1 ? "no node answered: " : "") + String.join("; ", st.notes);
        if (st.lostAt != null) {
            return new OutcomeUnknownException(st.call.method + " " + st.call.path + ": " + text
                    + "; it may or may not have been done (it is safe to send again)",
                    "outcome_unknown", null, 0, st.lostAt);
        }
        return new ConnectionFailedException(text, "connection_failed", null, 0, nodes.get(st.start));
    }

    private static Answer decode(int status, byte[] data, String node) {
        String text = new String(data, java.nio.charset.StandardCharsets.UTF_8).trim();
        if (text.isEmpty()) return new Answer(status, NullNode.getInstance(), node);
        try {
            return new Answer(status, MAPPER.readTree(text), node);
        } catch (IOException e) {
            if (status >= 400) {
                var o = MAPPER.createObjectNode();
                o.putObject("error").put("message", text.length() > 500 ? text.substring(0, 500) : text);
                return new Answer(status, o, node);
            }
            throw new ChronoqException(node + ": answer is not JSON: "
                    + (text.length() > 200 ? text.substring(0, 200) : text), "bad_response", null, status, node);
        }
    }

    static ChronoqException errorOf(Answer a) {
        JsonNode e = a.body.path("error");
        String code = e.path("code").isTextual() ? e.path("code").asText() : null;
        String message = e.path("message").isTextual() ? e.path("message").asText() : ("HTTP " + a.status);
        String field = e.path("field").isTextual() ? e.path("field").asText() : null;
        return ChronoqException.of(code, message, field, a.status, a.node);
    }
}
