package dev.fjord.diff;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.function.Supplier;
import org.apache.fluss.rpc.messages.ApiMessage;
import org.apache.fluss.rpc.messages.ErrorResponse;
import org.apache.fluss.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.fluss.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Sends one request to both servers and compares the answers field by field (see {@link Tree}),
 * after each side's values that legitimately differ are replaced by what they stand for:
 *
 * <ul>
 *   <li>table and partition ids by the name the test registered for them on that side ({@code
 *       table:db.t}, {@code partition:db.t/p}), so a response naming the wrong table still
 *       differs;
 *   <li>writer ids, creation and modification times, host names and ports by a marker that keeps
 *       only their presence;
 *   <li>error message texts by a marker (their presence is compared, their wording is not);
 *   <li>JSON documents (table, schema, database) by their parsed tree (key order ignored);
 *   <li>{@code records} by the description the exchange asks for ({@link Records}).
 * </ul>
 *
 * A difference left after that is checked against {@link Exceptions}: a listed one is reported
 * with its reason, any other fails the test.
 */
final class Differ {
    /** Which of Fluss's servers a request goes to; Fjord serves both roles on one port. */
    enum Route {
        COORDINATOR,
        TABLET_SERVER
    }

    /** One server's side of the comparison. */
    static final class Side {
        final String name;
        final Wire coordinator;
        final Wire tabletServer;
        final Map<Long, String> tableIds = new HashMap<>();
        final Map<Long, String> partitionIds = new HashMap<>();
        final Map<String, Long> idOf = new HashMap<>();
        long writerId = -1;

        Side(String name, Wire coordinator, Wire tabletServer) {
            this.name = name;
            this.coordinator = coordinator;
            this.tabletServer = tabletServer;
        }

        long id(String label) {
            Long id = idOf.get(label);
            if (id == null) {
                throw new IllegalStateException(name + ": no id registered for " + label);
            }
            return id;
        }

        void registerTable(String label, long id) {
            tableIds.put(id, label);
            idOf.put(label, id);
        }

        void registerPartition(String label, long id) {
            partitionIds.put(id, label);
            idOf.put(label, id);
        }

        Wire wire(Route route) {
            return route == Route.COORDINATOR ? coordinator : tabletServer;
        }
    }

    /** Both parsed answers (null where that side answered with an error frame). */
    record Pair<R>(R fluss, R fjord, Object flussTree, Object fjordTree) {}

    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * Repeated fields whose entries a client finds by their key (bucket, partition, name), never by
     * position: Fluss builds them from hash maps, so their order is arbitrary and not compared.
     */
    private static final java.util.Set<String> KEYED_LISTS = java.util.Set.of(
            "bucketsResps", "tablesResps", "partitionsInfos", "databaseNames", "tableNames",
            "databaseSummaries", "tableMetadatas", "partitionMetadatas", "bucketMetadatas",
            "latestSnapshots", "tabletServers");

    final Side fluss;
    final Side fjord;
    /** Differences not covered by an exception: they fail the test. */
    final List<String> failures = new ArrayList<>();
    /** Differences covered by an exception, with the reason. */
    final List<String> tolerated = new ArrayList<>();
    final StringBuilder transcript = new StringBuilder();
    private int exchanges;

    Differ(Side fluss, Side fjord) {
        this.fluss = fluss;
        this.fjord = fjord;
    }

    int exchanges() {
        return exchanges;
    }

    /**
     * Sends {@code request.apply(side)} to each side, parses each answer into {@code response}
     * (or an ErrorResponse for an error frame) and compares them.
     *
     * @param records how to describe {@code records} fields (null: compare the bytes)
     */
    <R extends ApiMessage> Pair<R> exchange(
            String label,
            int apiKey,
            int version,
            Route route,
            Function<Side, ApiMessage> request,
            Supplier<R> response,
            Function<byte[], Object> records) {
        exchanges++;
        Function<Side, byte[]> body = side -> request.apply(side).toByteArray();
        return compareAnswers(
                label, apiKey, version,
                send(fluss, apiKey, version, route, body, response),
                send(fjord, apiKey, version, route, body, response),
                records);
    }

    private <R extends ApiMessage> Pair<R> compareAnswers(
            String label, int apiKey, int version, Answer<R> a, Answer<R> b, Function<byte[], Object> records) {
        Object ta = normalize(a.tree, fluss, records);
        Object tb = normalize(b.tree, fjord, records);
        List<String> diffs = new ArrayList<>();
        compare("", ta, tb, diffs);
        transcript.append("== ").append(label).append(" (api ").append(apiKey).append(" v").append(version).append(")\n");
        transcript.append("   fluss: ").append(ta).append('\n');
        if (diffs.isEmpty()) {
            transcript.append("   fjord: same\n");
        } else {
            transcript.append("   fjord: ").append(tb).append('\n');
            transcript.append("   fluss raw: ").append(a.tree).append('\n');
            transcript.append("   fjord raw: ").append(b.tree).append('\n');
        }
        for (String d : diffs) {
            String reason = Exceptions.reason(label, d);
            if (reason != null) {
                tolerated.add(label + ": " + d + "  [exception: " + reason + "]");
            } else {
                failures.add(label + ": " + d);
            }
        }
        return new Pair<>(a.message, b.message, ta, tb);
    }

    <R extends ApiMessage> Pair<R> exchange(
            String label, int apiKey, Route route, Function<Side, ApiMessage> request, Supplier<R> response) {
        return exchange(label, apiKey, 0, route, request, response, null);
    }

    private record Answer<R>(R message, Object tree) {}

    private <R extends ApiMessage> Answer<R> send(
            Side side,
            int apiKey,
            int version,
            Route route,
            Function<Side, byte[]> request,
            Supplier<R> response) {
        Wire.Frame frame;
        try {
            frame = side.wire(route).call(apiKey, version, request.apply(side));
        } catch (IOException e) {
            throw new IllegalStateException(side.name + ": " + e, e);
        }
        if (frame.type() == 0 && response == null) {
            return new Answer<>(null, new Tree.Bytes(frame.body()));
        }
        if (frame.type() == 0) {
            R message = response.get();
            message.parseFrom(frame.body());
            return new Answer<>(message, Tree.of(message));
        }
        ErrorResponse error = new ErrorResponse();
        error.parseFrom(frame.body());
        Map<String, Object> tree = new TreeMap<>();
        tree.put("<frame type>", frame.type());
        tree.put("<error>", Tree.of(error));
        return new Answer<>(null, tree);
    }

    /** A raw frame sent to both sides as is (malformed requests); compares the answers. */
    void raw(String label, int apiKey, int version, Route route, byte[] body) {
        exchanges++;
        compareAnswers(label, apiKey, version, rawSend(fluss, apiKey, version, route, body),
                rawSend(fjord, apiKey, version, route, body), null);
    }

    /** On a connection of its own, as a malformed request may make a server close it. */
    private Answer<ApiMessage> rawSend(Side side, int apiKey, int version, Route route, byte[] body) {
        try (Wire wire = Wire.open(side.wire(route).address)) {
            wire.readTimeoutMs(5_000);
            Wire.Frame frame;
            try {
                frame = wire.call(apiKey, version, body);
            } catch (java.net.SocketTimeoutException e) {
                return new Answer<>(null, "<no answer within 5 s>");
            } catch (java.io.EOFException e) {
                return new Answer<>(null, "<connection closed>");
            }
            if (frame.type() == 0) {
                return new Answer<>(null, new Tree.Bytes(frame.body()));
            }
            ErrorResponse error = new ErrorResponse();
            error.parseFrom(frame.body());
            Map<String, Object> tree = new TreeMap<>();
            tree.put("<frame type>", frame.type());
            tree.put("<error>", Tree.of(error));
            return new Answer<>(null, tree);
        } catch (IOException e) {
            throw new IllegalStateException(side.name + ": " + e, e);
        }
    }

    @SuppressWarnings("unchecked")
    private Object normalize(Object tree, Side side, Function<byte[], Object> records) {
        if (tree instanceof Map<?, ?> map) {
            Map<String, Object> out = new TreeMap<>();
            for (Map.Entry<?, ?> e : map.entrySet()) {
                String key = (String) e.getKey();
                out.put(key, normalizeField(key, e.getValue(), side, records));
            }
            return out;
        }
        if (tree instanceof List<?> list) {
            List<Object> out = new ArrayList<>();
            for (Object o : list) {
                out.add(normalize(o, side, records));
            }
            return out;
        }
        return tree;
    }

    private Object normalizeField(String key, Object value, Side side, Function<byte[], Object> records) {
        switch (key) {
            case "tableId":
                return value instanceof Long id ? side.tableIds.getOrDefault(id, "<unregistered table id>") : value;
            case "partitionId":
            case "partitionsId":
                if (value instanceof Long id) {
                    return side.partitionIds.getOrDefault(id, "<unregistered partition id>");
                }
                return value;
            case "writerId":
                return "<writer id>";
            case "createdTime":
            case "modifiedTime":
            case "expirationTime":
                return value instanceof Long t && t > 0 ? "<time>" : value;
            case "errorMessage":
                return "<message>";
            case "apiVersions":
                // One entry per api key, so a key served by one side only is one difference.
                Map<String, Object> byKey = new TreeMap<>();
                for (Object o : (List<?>) value) {
                    Map<?, ?> v = (Map<?, ?>) o;
                    byKey.put(String.valueOf(v.get("apiKey")), v.get("minVersion") + ".." + v.get("maxVersion"));
                }
                return byKey;
            case "host":
                return "<host>";
            case "port":
                return "<port>";
            case "tableJson":
            case "schemaJson":
            case "databaseJson":
                if (value instanceof Tree.Bytes bytes) {
                    return json(bytes.value());
                }
                return value;
            case "records":
                if (records != null && value instanceof Tree.Bytes bytes) {
                    return records.apply(bytes.value());
                }
                return value;
            default:
                Object normalized = normalize(value, side, records);
                if (KEYED_LISTS.contains(key) && normalized instanceof List<?> list) {
                    List<Object> sorted = new ArrayList<>(list);
                    sorted.sort(java.util.Comparator.comparing(Object::toString));
                    return sorted;
                }
                return normalized;
        }
    }

    private static Object json(byte[] bytes) {
        try {
            JsonNode node = JSON.readTree(bytes);
            return jsonTree(node);
        } catch (IOException e) {
            return "<invalid JSON: " + new String(bytes, StandardCharsets.UTF_8) + ">";
        }
    }

    private static Object jsonTree(JsonNode node) {
        if (node.isObject()) {
            Map<String, Object> out = new TreeMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                String k = e.getKey();
                Object v = jsonTree(e.getValue());
                if ((k.equals("created_time") || k.equals("modified_time")) && e.getValue().isNumber()) {
                    v = "<time>";
                }
                out.put(k, v);
            }
            return out;
        }
        if (node.isArray()) {
            List<Object> out = new ArrayList<>();
            node.forEach(n -> out.add(jsonTree(n)));
            return out;
        }
        if (node.isNull()) {
            return "null";
        }
        return node.isTextual() ? "\"" + node.asText() + "\"" : node.toString();
    }

    /** Appends one line per difference, naming the path: {@code fluss=...}, {@code fjord=...}. */
    static void compare(String path, Object a, Object b, List<String> diffs) {
        if (a instanceof Map<?, ?> ma && b instanceof Map<?, ?> mb) {
            TreeMap<Object, Object> keys = new TreeMap<>();
            ma.keySet().forEach(k -> keys.put(k, k));
            mb.keySet().forEach(k -> keys.put(k, k));
            for (Object k : keys.keySet()) {
                String p = path + "/" + k;
                if (!ma.containsKey(k)) {
                    diffs.add(p + ": fluss=<absent> fjord=" + mb.get(k));
                } else if (!mb.containsKey(k)) {
                    diffs.add(p + ": fluss=" + ma.get(k) + " fjord=<absent>");
                } else {
                    compare(p, ma.get(k), mb.get(k), diffs);
                }
            }
            return;
        }
        if (a instanceof List<?> la && b instanceof List<?> lb) {
            if (la.size() != lb.size()) {
                diffs.add(path + ": fluss has " + la.size() + " items, fjord " + lb.size() + ": fluss=" + la + " fjord=" + lb);
                return;
            }
            for (int i = 0; i < la.size(); i++) {
                compare(path + "[" + i + "]", la.get(i), lb.get(i), diffs);
            }
            return;
        }
        if (!Objects.equals(a, b)) {
            diffs.add((path.isEmpty() ? "/" : path) + ": fluss=" + a + " fjord=" + b);
        }
    }
}
