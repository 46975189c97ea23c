package dev.fjord.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;
import org.apache.flink.util.CloseableIterator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Flink SQL (1.20, a local MiniCluster per job in this JVM) through the unmodified Fluss connector
 * (0.9.1) against {@code fjord server}: every value written is read back and checked.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class FlinkSqlOnFjordTest {
    private static final Duration WAIT = Duration.ofSeconds(90);

    private FjordProcess fjord;
    private MiniCluster flink;
    private java.net.URI flinkRest;
    private final ExecutorService pool = Executors.newCachedThreadPool();

    @BeforeAll
    void start() throws Exception {
        fjord = FjordProcess.start();
        // One Flink cluster for every job of the class (a job per statement would start its own).
        Configuration conf = new Configuration();
        conf.setString("rest.bind-port", "0");
        conf.setString("taskmanager.memory.managed.size", "64m");
        conf.setString("taskmanager.memory.network.min", "64m");
        conf.setString("taskmanager.memory.network.max", "64m");
        flink = new MiniCluster(new MiniClusterConfiguration.Builder()
                .setConfiguration(conf).setNumTaskManagers(1).setNumSlotsPerTaskManager(16).build());
        flink.start();
        flinkRest = flink.getRestAddress().get();
    }

    @AfterAll
    void stop() throws Exception {
        pool.shutdownNow();
        try {
            if (flink != null) {
                flink.close();
            }
        } finally {
            if (fjord != null) {
                fjord.close();
            }
        }
    }

    // --- helpers ----------------------------------------------------------------------------

    TableEnvironment env(boolean streaming, int parallelism, Map<String, String> extra) {
        Configuration conf = new Configuration();
        conf.setString("parallelism.default", String.valueOf(parallelism));
        conf.setString("execution.target", "remote");
        conf.setString("rest.address", flinkRest.getHost());
        conf.setString("rest.port", String.valueOf(flinkRest.getPort()));
        conf.setString("table.exec.resource.default-parallelism", String.valueOf(parallelism));
        extra.forEach(conf::setString);
        EnvironmentSettings.Builder settings = EnvironmentSettings.newInstance().withConfiguration(conf);
        TableEnvironment t = TableEnvironment.create(streaming ? settings.inStreamingMode().build() : settings.inBatchMode().build());
        t.executeSql("CREATE CATALOG fjord WITH ('type' = 'fluss', 'bootstrap.servers' = '" + fjord.address + "')");
        t.executeSql("USE CATALOG fjord");
        return t;
    }

    TableEnvironment streaming() {
        return env(true, 1, Map.of());
    }

    TableEnvironment batch() {
        return env(false, 1, Map.of());
    }

    static void run(TableEnvironment t, String sql) throws Exception {
        t.executeSql(sql).await(WAIT.toSeconds(), TimeUnit.SECONDS);
    }

    /** The first {@code n} rows of a (streaming) query, then the job is cancelled. */
    List<Row> take(TableEnvironment t, String sql, int n) throws Exception {
        TableResult result = t.executeSql(sql);
        try (CloseableIterator<Row> it = result.collect()) {
            return next(it, n, result);
        }
    }

    List<Row> next(CloseableIterator<Row> it, int n, TableResult result) throws Exception {
        Future<List<Row>> f = pool.submit(() -> {
            List<Row> rows = new ArrayList<>();
            while (rows.size() < n && it.hasNext()) {
                rows.add(it.next());
            }
            return rows;
        });
        try {
            List<Row> rows = f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertEquals(n, rows.size(), "the query ended after " + rows.size() + " of " + n + " rows: " + rows);
            return rows;
        } catch (TimeoutException e) {
            f.cancel(true);
            result.getJobClient().ifPresent(JobClient::cancel);
            throw new AssertionError("no " + n + " rows within " + WAIT + "; fjord log tail:\n" + tail(fjord.log()), e);
        }
    }

    /** All rows of a bounded (batch) query. */
    static List<Row> all(TableEnvironment t, String sql) throws Exception {
        List<Row> rows = new ArrayList<>();
        try (CloseableIterator<Row> it = t.executeSql(sql).collect()) {
            it.forEachRemaining(rows::add);
        }
        return rows;
    }

    static List<String> sorted(List<Row> rows) {
        return rows.stream().map(Row::toString).sorted().collect(Collectors.toList());
    }

    static String tail(String log) {
        String[] lines = log.split("\n");
        return String.join("\n", List.of(lines).subList(Math.max(0, lines.length - 40), lines.length));
    }

    /** Materialises a changelog by the first field (the key). */
    static Map<Object, String> materialise(List<Row> changelog) {
        Map<Object, String> state = new TreeMap<>();
        for (Row r : changelog) {
            Row copy = Row.copy(r);
            copy.setKind(RowKind.INSERT);
            switch (r.getKind()) {
                case INSERT, UPDATE_AFTER -> state.put(r.getField(0), copy.toString());
                case UPDATE_BEFORE, DELETE -> state.remove(r.getField(0));
            }
        }
        return state;
    }

    // --- log tables -------------------------------------------------------------------------

    static final String LOG_COLUMNS =
            "(id INT, name STRING, amount BIGINT, price DECIMAL(10, 2), ts TIMESTAMP(3), flag BOOLEAN)";

    static String logRow(int i) {
        return String.format(
                "(%d, %s, %s, %s, TIMESTAMP '2026-01-%02d 10:00:00.%03d', %s)",
                i,
                i % 5 == 0 ? "CAST(NULL AS STRING)" : "'name-" + i + "'",
                i % 7 == 0 ? "CAST(NULL AS BIGINT)" : String.valueOf((long) i * 1_000_000_007L),
                i % 3 + "." + (i % 100 < 10 ? "0" : "") + (i % 100),
                i % 28 + 1,
                i,
                i % 2 == 0 ? "TRUE" : "FALSE");
    }

    static String expectedLogRow(int i) {
        return String.format(
                "+I[%d, %s, %s, %s, 2026-01-%02dT10:00:00.%03d, %s]",
                i,
                i % 5 == 0 ? "null" : "name-" + i,
                i % 7 == 0 ? "null" : String.valueOf((long) i * 1_000_000_007L),
                i % 3 + "." + (i % 100 < 10 ? "0" : "") + (i % 100),
                i % 28 + 1,
                i,
                i % 2 == 0 ? "true" : "false").replace("T10:00:00.000", "T10:00");
    }

    static String values(IntStream ids) {
        return ids.mapToObj(FlinkSqlOnFjordTest::logRow).collect(Collectors.joining(", "));
    }

    static List<String> expected(IntStream ids) {
        return ids.mapToObj(FlinkSqlOnFjordTest::expectedLogRow).sorted().collect(Collectors.toList());
    }

    @Test
    void logTableWrittenByInsertIsReadBackInStreamingMode() throws Exception {
        TableEnvironment t = streaming();
        run(t, "CREATE DATABASE logdb");
        run(t, "CREATE TABLE logdb.orders " + LOG_COLUMNS + " WITH ('bucket.num' = '3')");
        run(t, "INSERT INTO logdb.orders VALUES " + values(IntStream.rangeClosed(1, 40)));

        // Every value, in streaming mode from the earliest offset (the default for a log table).
        assertEquals(expected(IntStream.rangeClosed(1, 40)), sorted(take(t, "SELECT * FROM logdb.orders", 40)));
        // Projection (pushed down to the server) with reordered columns.
        List<String> projected = sorted(take(t,
                "SELECT name, id FROM logdb.orders /*+ OPTIONS('scan.startup.mode' = 'earliest') */", 40));
        List<String> expectedProjection = IntStream.rangeClosed(1, 40)
                .mapToObj(i -> "+I[" + (i % 5 == 0 ? "null" : "name-" + i) + ", " + i + "]")
                .sorted().collect(Collectors.toList());
        assertEquals(expectedProjection, projected);

        // scan.startup.mode = timestamp: only rows committed at or after the timestamp.
        long t0 = System.currentTimeMillis();
        while (System.currentTimeMillis() <= t0) {
            Thread.onSpinWait();
        }
        run(t, "INSERT INTO logdb.orders VALUES " + values(IntStream.rangeClosed(41, 50)));
        assertEquals(expected(IntStream.rangeClosed(41, 50)), sorted(take(t,
                "SELECT * FROM logdb.orders /*+ OPTIONS('scan.startup.mode' = 'timestamp', 'scan.startup.timestamp' = '"
                        + (t0 + 1) + "') */", 10)));

        // scan.startup.mode = latest: a reader started now sees only what is appended later; and a
        // caught-up reader sees later appends.
        TableResult latest = t.executeSql("SELECT * FROM logdb.orders /*+ OPTIONS('scan.startup.mode' = 'latest') */");
        TableResult earliest = t.executeSql("SELECT * FROM logdb.orders");
        try (CloseableIterator<Row> l = latest.collect(); CloseableIterator<Row> e = earliest.collect()) {
            assertEquals(expected(IntStream.rangeClosed(1, 50)), sorted(next(e, 50, earliest)));
            // The `latest` reader takes its offsets once its job runs: marker rows (negative ids)
            // are appended until it sees one; only then are the rows it must see appended.
            int[] markers = awaitFirstMarker(t, l, latest);
            run(t, "INSERT INTO logdb.orders VALUES " + values(IntStream.rangeClosed(51, 60)));
            // It sees the markers after the first one it saw, then the rows.
            List<Row> fromLatest = withoutMarkers(next(l, 10 + markers[0] - markers[1], latest));
            assertEquals(expected(IntStream.rangeClosed(51, 60)), sorted(fromLatest));
            assertEquals(expected(IntStream.rangeClosed(51, 60)), sorted(withoutMarkers(next(e, 10 + markers[0], earliest))));
        }
    }

    /** Appends marker rows until the reader returns one: {markers appended, the one it saw}. */
    int[] awaitFirstMarker(TableEnvironment t, CloseableIterator<Row> it, TableResult result) throws Exception {
        Future<Row> first = pool.submit(() -> it.hasNext() ? it.next() : null);
        long deadline = System.nanoTime() + WAIT.toNanos();
        for (int marker = 1; ; marker++) {
            run(t, "INSERT INTO logdb.orders VALUES (" + (-marker) + ", 'marker', 0, 0.00, TIMESTAMP '2026-01-01 00:00:00', TRUE)");
            try {
                Row row = first.get(1, TimeUnit.SECONDS);
                assertTrue(row != null && (int) row.getField(0) < 0, "the latest reader's first row is not a marker: " + row);
                return new int[] {marker, -(int) row.getField(0)};
            } catch (TimeoutException e) {
                if (System.nanoTime() > deadline) {
                    result.getJobClient().ifPresent(JobClient::cancel);
                    throw new AssertionError("the latest reader saw no marker within " + WAIT);
                }
            }
        }
    }

    static List<Row> withoutMarkers(List<Row> rows) {
        return rows.stream().filter(r -> (int) r.getField(0) > 0).collect(Collectors.toList());
    }

    @Test
    void logTableWithParallelismTwo() throws Exception {
        TableEnvironment t = env(true, 2, Map.of());
        run(t, "CREATE DATABASE pardb");
        run(t, "CREATE TABLE pardb.events " + LOG_COLUMNS + " WITH ('bucket.num' = '4')");
        run(t, "INSERT INTO pardb.events SELECT * FROM (VALUES " + values(IntStream.rangeClosed(1, 200)) + ")");
        assertEquals(expected(IntStream.rangeClosed(1, 200)), sorted(take(t, "SELECT * FROM pardb.events", 200)));
        // Batch LIMIT on a log table.
        TableEnvironment b = batch();
        List<Row> limited = all(b, "SELECT * FROM pardb.events LIMIT 5");
        assertEquals(5, limited.size());
        List<String> all = expected(IntStream.rangeClosed(1, 200));
        for (Row r : limited) {
            assertTrue(all.contains(r.toString()), r + " is not a written row");
        }
    }

    @Test
    void partitionedTable() throws Exception {
        TableEnvironment t = streaming();
        run(t, "CREATE DATABASE partdb");
        run(t, "CREATE TABLE partdb.clicks (id INT, url STRING, dt STRING) PARTITIONED BY (dt) WITH ('bucket.num' = '2')");
        // Partitions are created by the writer as rows need them.
        run(t, "INSERT INTO partdb.clicks VALUES (1, 'a', '2026-01-01'), (2, 'b', '2026-01-02'), (3, 'c', '2026-01-01'), (4, 'd', '2026-01-03')");
        List<String> partitions = sorted(all(t, "SHOW PARTITIONS partdb.clicks"));
        assertEquals(List.of("+I[dt=2026-01-01]", "+I[dt=2026-01-02]", "+I[dt=2026-01-03]"), partitions);
        assertEquals(List.of("+I[1, a, 2026-01-01]", "+I[2, b, 2026-01-02]", "+I[3, c, 2026-01-01]", "+I[4, d, 2026-01-03]"),
                sorted(take(t, "SELECT * FROM partdb.clicks", 4)));
        // Partition pruning: the filter on the partition key reaches the source.
        String plan = t.explainSql("SELECT * FROM partdb.clicks WHERE dt = '2026-01-01'");
        assertTrue(plan.contains("2026-01-01") && plan.contains("TableSourceScan"), plan);
        String scan = plan.lines().filter(l -> l.contains("TableSourceScan")).findFirst().orElse("");
        assertTrue(scan.contains("partitions=") || scan.contains("filter="), "no partition pushdown in " + scan);
        assertEquals(List.of("+I[1, a, 2026-01-01]", "+I[3, c, 2026-01-01]"),
                sorted(take(t, "SELECT * FROM partdb.clicks WHERE dt = '2026-01-01'", 2)));
        // A partition created while a streaming read runs is discovered and read.
        TableResult r = t.executeSql("SELECT * FROM partdb.clicks /*+ OPTIONS('scan.partition.discovery.interval' = '1s') */");
        try (CloseableIterator<Row> it = r.collect()) {
            assertEquals(4, next(it, 4, r).size());
            run(t, "INSERT INTO partdb.clicks VALUES (5, 'e', '2026-02-01'), (6, 'f', '2026-01-01')");
            assertEquals(List.of("+I[5, e, 2026-02-01]", "+I[6, f, 2026-01-01]"), sorted(next(it, 2, r)));
        }
    }

    // --- primary-key tables -----------------------------------------------------------------

    @Test
    void primaryKeyTables() throws Exception {
        TableEnvironment t = streaming();
        TableEnvironment b = batch();
        run(t, "CREATE DATABASE pkdb");
        run(t, "CREATE TABLE pkdb.users (id INT, name STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '2')");
        run(t, "CREATE TABLE pkdb.users_copy (id INT, name STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '3')");
        // 1..10 inserted, 1..4 updated, 5 and 6 deleted.
        run(t, "INSERT INTO pkdb.users VALUES " + IntStream.rangeClosed(1, 10)
                .mapToObj(i -> "(" + i + ", 'u" + i + "', " + (i * 10) + ")").collect(Collectors.joining(", ")));
        run(t, "INSERT INTO pkdb.users VALUES " + IntStream.rangeClosed(1, 4)
                .mapToObj(i -> "(" + i + ", 'v" + i + "', " + (i * 100) + ")").collect(Collectors.joining(", ")));
        run(b, "DELETE FROM pkdb.users WHERE id = 5");
        run(b, "DELETE FROM pkdb.users WHERE id = 6");
        Map<Object, String> expected = new TreeMap<>();
        for (int i = 1; i <= 10; i++) {
            if (i != 5 && i != 6) {
                expected.put(i, i <= 4 ? "+I[" + i + ", v" + i + ", " + (i * 100) + "]" : "+I[" + i + ", u" + i + ", " + (i * 10) + "]");
            }
        }
        // The `full` streaming read (the default for a PK table): 10 +I, 4 x (-U, +U), 2 -D.
        List<Row> changelog = take(t, "SELECT * FROM pkdb.users", 20);
        assertEquals(expected, materialise(changelog));
        Map<RowKind, Long> kinds = changelog.stream().collect(Collectors.groupingBy(Row::getKind, Collectors.counting()));
        assertEquals(Map.of(RowKind.INSERT, 10L, RowKind.UPDATE_BEFORE, 4L, RowKind.UPDATE_AFTER, 4L, RowKind.DELETE, 2L), kinds);

        // An upsert sink fed by that changelog (deletes included) ends equal to its source.
        TableResult copy = t.executeSql("INSERT INTO pkdb.users_copy SELECT * FROM pkdb.users");
        try {
            awaitEqual(b, "pkdb.users_copy", expected);
        } finally {
            copy.getJobClient().ifPresent(JobClient::cancel);
        }

        // Batch: point query (Lookup), LIMIT (LimitScan), COUNT(*) (GetTableStats).
        assertEquals(List.of("+I[3, v3, 300]"), sorted(all(b, "SELECT * FROM pkdb.users WHERE id = 3")));
        assertEquals(List.of(), sorted(all(b, "SELECT * FROM pkdb.users WHERE id = 5")));
        List<Row> limited = all(b, "SELECT * FROM pkdb.users LIMIT 3");
        assertEquals(3, limited.size());
        limited.forEach(r -> assertTrue(expected.containsValue(r.toString()), r + " is not a live row"));
        assertEquals(List.of("+I[8]"), sorted(all(b, "SELECT COUNT(*) FROM pkdb.users")));

        // Lookup join against the PK table.
        run(t, "CREATE TEMPORARY TABLE default_catalog.default_database.probe (k INT, p AS PROCTIME()) WITH ("
                + "'connector' = 'datagen', 'number-of-rows' = '10', 'fields.k.kind' = 'sequence',"
                + " 'fields.k.start' = '1', 'fields.k.end' = '10')");
        List<Row> joined = all(t, "SELECT pr.k, u.name, u.score FROM default_catalog.default_database.probe AS pr"
                + " LEFT JOIN pkdb.users FOR SYSTEM_TIME AS OF pr.p AS u ON pr.k = u.id");
        List<String> expectedJoin = IntStream.rangeClosed(1, 10).mapToObj(i -> i == 5 || i == 6 ? "+I[" + i + ", null, null]"
                : i <= 4 ? "+I[" + i + ", v" + i + ", " + (i * 100) + "]" : "+I[" + i + ", u" + i + ", " + (i * 10) + "]")
                .sorted().collect(Collectors.toList());
        assertEquals(expectedJoin, sorted(joined));
    }

    /**
     * Polls a PK table with a batch scan (LIMIT: a LimitScan per bucket) until it holds exactly
     * the expected rows, then checks one key with a point query (a Lookup) too.
     */
    void awaitEqual(TableEnvironment b, String table, Map<Object, String> expected) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        List<String> want = expected.values().stream().sorted().toList();
        List<String> seen = List.of();
        while (true) {
            seen = sorted(all(b, "SELECT * FROM " + table + " LIMIT 2048"));
            if (seen.equals(want)) {
                Object key = expected.keySet().iterator().next();
                assertEquals(List.of(expected.get(key)), sorted(all(b, "SELECT * FROM " + table + " WHERE id = " + key)));
                return;
            }
            if (System.nanoTime() > deadline) {
                fail(table + " never reached " + want + "; last seen " + seen);
            }
            Thread.sleep(200);
        }
    }

    // --- exactly-once across a killed job ---------------------------------------------------

    @Test
    void checkpointedJobKilledAndRestartedNeitherLosesNorDuplicates() throws Exception {
        Path checkpoints = Files.createTempDirectory("fjord-flink-checkpoints-");
        Map<String, String> conf = new HashMap<>();
        conf.put("execution.checkpointing.interval", "300ms");
        conf.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.put("state.checkpoints.dir", checkpoints.toUri().toString());
        conf.put("state.backend.type", "hashmap");
        TableEnvironment t = env(true, 1, conf);
        TableEnvironment b = batch();
        run(t, "CREATE DATABASE cpdb");
        run(t, "CREATE TABLE cpdb.src (id INT, v STRING) WITH ('bucket.num' = '2')");
        run(t, "CREATE TABLE cpdb.dst (id INT, v STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '2')");
        run(t, "CREATE TABLE cpdb.dst_log (id INT, v STRING) WITH ('bucket.num' = '1')");
        run(t, "INSERT INTO cpdb.src VALUES " + IntStream.rangeClosed(1, 100).mapToObj(i -> "(" + i + ", 'a" + i + "')").collect(Collectors.joining(", ")));

        String job = "EXECUTE STATEMENT SET BEGIN INSERT INTO cpdb.dst SELECT * FROM cpdb.src; INSERT INTO cpdb.dst_log SELECT * FROM cpdb.src; END";
        TableResult first = t.executeSql(job);
        Map<Object, String> expected = new TreeMap<>();
        IntStream.rangeClosed(1, 100).forEach(i -> expected.put(i, "+I[" + i + ", a" + i + "]"));
        awaitEqual(b, "cpdb.dst", expected);
        awaitCheckpoint(checkpoints);
        // Kill: cancel without a savepoint; only the retained checkpoint survives. It is looked up
        // after the cancel: while the job ran, each new checkpoint deleted the one before.
        first.getJobClient().orElseThrow().cancel().get(60, TimeUnit.SECONDS);
        Path checkpoint = awaitCheckpoint(checkpoints);

        run(t, "INSERT INTO cpdb.src VALUES " + IntStream.rangeClosed(101, 150).mapToObj(i -> "(" + i + ", 'a" + i + "')").collect(Collectors.joining(", ")));
        Map<String, String> resume = new HashMap<>(conf);
        resume.put("execution.savepoint.path", checkpoint.toUri().toString());
        TableEnvironment t2 = env(true, 1, resume);
        TableResult second = t2.executeSql(job);
        try {
            IntStream.rangeClosed(101, 150).forEach(i -> expected.put(i, "+I[" + i + ", a" + i + "]"));
            awaitEqual(b, "cpdb.dst", expected);
        } finally {
            second.getJobClient().orElseThrow().cancel().get(60, TimeUnit.SECONDS);
        }
        // The log sink is at-least-once in the 0.9.1 connector (no transactions): every row is
        // there, and a duplicate can only be a row the first job read before it was killed (one
        // replayed from the checkpoint); the rows appended after the kill are there exactly once.
        List<Row> logRows = all(b, "SELECT * FROM cpdb.dst_log LIMIT 2048");
        Map<String, Long> counts = logRows.stream().collect(Collectors.groupingBy(Row::toString, Collectors.counting()));
        assertEquals(new java.util.TreeSet<>(expected.values()), new java.util.TreeSet<>(counts.keySet()));
        IntStream.rangeClosed(101, 150).forEach(i ->
                assertEquals(1L, counts.get("+I[" + i + ", a" + i + "]"), "row " + i + " in cpdb.dst_log"));
    }

    /** The newest completed checkpoint directory (chk-N with its _metadata). */
    static Path awaitCheckpoint(Path root) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            try (Stream<Path> s = Files.walk(root, 2)) {
                Optional<Path> newest = s.filter(p -> p.getFileName().toString().startsWith("chk-"))
                        .filter(p -> Files.exists(p.resolve("_metadata")))
                        .max((a, c) -> Integer.compare(num(a), num(c)));
                if (newest.isPresent()) {
                    return newest.get();
                }
            }
            Thread.sleep(100);
        }
        throw new AssertionError("no completed checkpoint under " + root);
    }

    static int num(Path p) {
        return Integer.parseInt(p.getFileName().toString().substring(4));
    }
}
