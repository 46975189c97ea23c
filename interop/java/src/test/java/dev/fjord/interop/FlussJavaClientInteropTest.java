package dev.fjord.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.client.admin.OffsetSpec;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.ScanRecord;
import org.apache.fluss.client.table.scanner.log.LogScanner;
import org.apache.fluss.client.table.scanner.log.ScanRecords;
import org.apache.fluss.client.table.writer.AppendWriter;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.exception.DatabaseAlreadyExistException;
import org.apache.fluss.exception.DatabaseNotEmptyException;
import org.apache.fluss.exception.DatabaseNotExistException;
import org.apache.fluss.exception.TableAlreadyExistException;
import org.apache.fluss.exception.TableNotExistException;
import org.apache.fluss.metadata.DatabaseDescriptor;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.TableBucket;
import org.apache.fluss.metadata.TableDescriptor;
import org.apache.fluss.metadata.TableInfo;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.BinaryString;
import org.apache.fluss.row.Decimal;
import org.apache.fluss.row.GenericRow;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.row.TimestampLtz;
import org.apache.fluss.row.TimestampNtz;
import org.apache.fluss.types.DataTypes;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Interop with the official Fluss Java client (the reference implementation Flink uses),
 * unmodified, against the real {@code fjord server} binary: create / append / scan / projection
 * round trip, list offsets, and the errors a user meets.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class FlussJavaClientInteropTest {
    /** Upper bound of one client step, so a silent server fails the test instead of hanging it. */
    private static final long STEP_TIMEOUT_SECONDS = 120;

    private static final int BUCKETS = 3;
    private static final int ROWS = 20_000;
    private static final String DATABASE = "interop_java";

    /** Column names, in schema order; index = position in the row. */
    private static final String[] COLUMNS = {
        "id", "tiny", "small", "num", "ratio", "score", "flag", "name", "price", "day", "ts",
        "ts_ltz", "payload"
    };

    private static FjordServer server;
    private static Connection connection;
    private static Admin admin;

    @BeforeAll
    static void startServer() throws Exception {
        server = FjordServer.start();
        Configuration conf = new Configuration();
        conf.setString("bootstrap.servers", server.address());
        // Bounded so a persistent server error surfaces instead of retrying forever.
        conf.setString("client.writer.retries", "5");
        connection = ConnectionFactory.createConnection(conf);
        admin = connection.getAdmin();
        step("create database", admin.createDatabase(DATABASE, DatabaseDescriptor.EMPTY, true));
    }

    @AfterAll
    static void stopServer() throws Exception {
        try {
            if (admin != null) {
                admin.close();
            }
            if (connection != null) {
                connection.close();
            }
        } finally {
            if (server != null) {
                int code = server.stop();
                String log = server.stderr();
                server.close();
                assertEquals(0, code, "fjord server exit code on SIGTERM\n" + log);
            }
        }
    }

    private static Schema schema() {
        return Schema.newBuilder()
                .column("id", DataTypes.BIGINT().copy(false))
                .column("tiny", DataTypes.TINYINT())
                .column("small", DataTypes.SMALLINT())
                .column("num", DataTypes.INT())
                .column("ratio", DataTypes.FLOAT())
                .column("score", DataTypes.DOUBLE())
                .column("flag", DataTypes.BOOLEAN())
                .column("name", DataTypes.STRING())
                .column("price", DataTypes.DECIMAL(12, 2))
                .column("day", DataTypes.DATE())
                .column("ts", DataTypes.TIMESTAMP(6))
                .column("ts_ltz", DataTypes.TIMESTAMP_LTZ(3))
                .column("payload", DataTypes.BYTES())
                .build();
    }

    private static TableDescriptor descriptor() {
        return TableDescriptor.builder()
                .schema(schema())
                .distributedBy(BUCKETS, "id")
                .comment("fjord java interop table")
                .build();
    }

    /** The values of row {@code id}, in schema order, as the client's internal types. */
    private static Object[] internalValues(long id) {
        return new Object[] {
            id,
            (byte) (id % 256 - 128),
            nullEvery(id, 5, () -> (short) (id * 7 % 65_536 - 32_768)),
            nullEvery(id, 10, () -> (int) (id * 2_654_435_761L)),
            (float) (id / 3.0),
            nullEvery(id, 7, () -> id * -1.5e-3),
            nullEvery(id, 11, () -> id % 2 == 0),
            nullEvery(id, 13, () -> BinaryString.fromString(name(id))),
            nullEvery(id, 17, () -> Decimal.fromUnscaledLong(id * 37 - 500_000, 12, 2)),
            nullEvery(id, 19, () -> 19_000 + (int) (id % 4_000)),
            nullEvery(id, 23, () -> TimestampNtz.fromMicros(1_700_000_000_000_000L + id * 1_001)),
            nullEvery(id, 29, () -> TimestampLtz.fromEpochMillis(1_700_000_000_000L + id * 17)),
            nullEvery(id, 31, () -> payload(id)),
        };
    }

    private static String name(long id) {
        switch ((int) (id % 4)) {
            case 0:
                return "";
            case 1:
                return "user-" + id;
            case 2:
                return "Fjörð-" + id + "-ß✓";
            default:
                return "x".repeat((int) (id % 97));
        }
    }

    private static byte[] payload(long id) {
        byte[] bytes = new byte[(int) (id % 9)];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) (id >>> (8 * i));
        }
        return bytes;
    }

    private static Object nullEvery(long id, int every, java.util.function.Supplier<Object> value) {
        return id % every == 0 ? null : value.get();
    }

    /** Row {@code id} as comparable plain Java values (the expected side of a comparison). */
    private static List<Object> expected(long id, int[] columns) {
        Object[] internal = internalValues(id);
        List<Object> values = new ArrayList<>(columns.length);
        for (int c : columns) {
            values.add(plain(internal[c]));
        }
        return values;
    }

    private static Object plain(Object internal) {
        if (internal instanceof BinaryString) {
            return internal.toString();
        } else if (internal instanceof Decimal) {
            return ((Decimal) internal).toBigDecimal();
        } else if (internal instanceof TimestampNtz) {
            return "ntz:" + ((TimestampNtz) internal).toEpochMicros();
        } else if (internal instanceof TimestampLtz) {
            return "ltz:" + ((TimestampLtz) internal).toEpochMicros();
        } else if (internal instanceof byte[]) {
            return "0x" + HexFormat.of().formatHex((byte[]) internal);
        }
        return internal;
    }

    /** Reads the scanned row's fields; {@code columns[i]} is the schema column at position i. */
    private static List<Object> actual(InternalRow row, int[] columns) {
        List<Object> values = new ArrayList<>(columns.length);
        for (int pos = 0; pos < columns.length; pos++) {
            values.add(row.isNullAt(pos) ? null : plain(read(row, pos, columns[pos])));
        }
        return values;
    }

    private static Object read(InternalRow row, int pos, int column) {
        switch (COLUMNS[column]) {
            case "id":
                return row.getLong(pos);
            case "tiny":
                return row.getByte(pos);
            case "small":
                return row.getShort(pos);
            case "num":
                return row.getInt(pos);
            case "ratio":
                return row.getFloat(pos);
            case "score":
                return row.getDouble(pos);
            case "flag":
                return row.getBoolean(pos);
            case "name":
                return row.getString(pos);
            case "price":
                return row.getDecimal(pos, 12, 2);
            case "day":
                return row.getInt(pos);
            case "ts":
                return row.getTimestampNtz(pos, 6);
            case "ts_ltz":
                return row.getTimestampLtz(pos, 3);
            case "payload":
                return row.getBytes(pos);
            default:
                throw new AssertionError("unknown column " + column);
        }
    }

    private static TablePath createTable(String name) {
        TablePath path = TablePath.of(DATABASE, name);
        step("create table " + path, admin.createTable(path, descriptor(), false));
        return path;
    }

    private static void append(Table table, long firstId, long count) {
        AppendWriter writer = table.newAppend().createWriter();
        List<CompletableFuture<?>> acks = new ArrayList<>();
        for (long id = firstId; id < firstId + count; id++) {
            acks.add(writer.append(GenericRow.of(internalValues(id))));
        }
        // flush() blocks without a bound of its own; run it where step() can time it out.
        step("flush", CompletableFuture.runAsync(writer::flush));
        // flush() only waits; a row the server refused reports it on its own future.
        step("acknowledgement of every appended row",
                CompletableFuture.allOf(acks.toArray(new CompletableFuture<?>[0])));
    }

    /**
     * Scans every bucket from the beginning until {@code rows} rows arrived; returns them by id
     * and checks each bucket's offsets are contiguous from 0.
     */
    private static Map<Long, List<Object>> scanAll(Table table, int[] projection, int rows) {
        var scan = table.newScan();
        if (projection != null) {
            scan = scan.project(projection);
        }
        int[] columns = projection != null ? projection : IntStream.range(0, COLUMNS.length).toArray();
        int idPosition = -1;
        for (int i = 0; i < columns.length; i++) {
            if (columns[i] == 0) {
                idPosition = i;
            }
        }
        assertTrue(idPosition >= 0, "scans in this test always include id");
        Map<Long, List<Object>> byId = new TreeMap<>();
        Map<Integer, Long> nextOffset = new HashMap<>();
        try (LogScanner scanner = scan.createLogScanner()) {
            for (int b = 0; b < BUCKETS; b++) {
                scanner.subscribeFromBeginning(b);
                nextOffset.put(b, 0L);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STEP_TIMEOUT_SECONDS);
            int received = 0;
            while (received < rows) {
                if (System.nanoTime() > deadline) {
                    fail("scan returned " + received + " of " + rows + " rows within "
                            + STEP_TIMEOUT_SECONDS + "s\n--- fjord server stderr ---\n" + server.stderr());
                }
                ScanRecords records = scanner.poll(Duration.ofMillis(500));
                for (TableBucket bucket : records.buckets()) {
                    for (ScanRecord record : records.records(bucket)) {
                        int b = bucket.getBucket();
                        assertEquals(nextOffset.get(b), record.logOffset(),
                                "bucket " + b + " offsets are not contiguous");
                        nextOffset.put(b, record.logOffset() + 1);
                        InternalRow row = record.getRow();
                        assertEquals(columns.length, row.getFieldCount(), "projected field count");
                        long id = row.getLong(idPosition);
                        List<Object> previous = byId.put(id, actual(row, columns));
                        assertTrue(previous == null, "row " + id + " scanned twice");
                        received++;
                    }
                }
            }
        } catch (Exception e) {
            throw new AssertionError("scan failed\n--- fjord server stderr ---\n" + server.stderr(), e);
        }
        return byId;
    }

    private static void assertRows(Map<Long, List<Object>> scanned, long firstId, long count, int[] columns) {
        assertEquals(count, scanned.size(), "row count");
        for (long id = firstId; id < firstId + count; id++) {
            assertEquals(expected(id, columns), scanned.get(id), "row " + id + " (columns "
                    + java.util.Arrays.stream(columns).mapToObj(c -> COLUMNS[c]).collect(Collectors.joining(","))
                    + ")");
        }
    }

    private static List<Integer> allBuckets() {
        return IntStream.range(0, BUCKETS).boxed().collect(Collectors.toList());
    }

    @Test
    void appendScanAndProjectionRoundTrip() throws Exception {
        TablePath path = createTable("round_trip");
        TableInfo info = step("get table info", admin.getTableInfo(path));
        assertEquals(BUCKETS, info.getNumBuckets());
        assertEquals(List.of("id"), info.getBucketKeys());
        assertEquals(schema(), info.getSchema(), "schema as stored by the server");

        try (Table table = connection.getTable(path)) {
            append(table, 0, ROWS);

            Map<Integer, Long> earliest =
                    step("earliest offsets", admin.listOffsets(path, allBuckets(), new OffsetSpec.EarliestSpec()).all());
            Map<Integer, Long> latest =
                    step("latest offsets", admin.listOffsets(path, allBuckets(), new OffsetSpec.LatestSpec()).all());
            for (int b = 0; b < BUCKETS; b++) {
                assertEquals(0L, earliest.get(b), "earliest offset of bucket " + b);
                assertTrue(latest.get(b) > 0, "bucket " + b + " got no rows: " + latest);
            }
            assertEquals((long) ROWS, latest.values().stream().mapToLong(Long::longValue).sum(), "latest " + latest);

            int[] all = IntStream.range(0, COLUMNS.length).toArray();
            assertRows(scanAll(table, null, ROWS), 0, ROWS, all);

            int[] projection = {0, 7, 8, 11};
            assertRows(scanAll(table, projection, ROWS), 0, ROWS, projection);
            int[] reordered = {12, 3, 0};
            assertRows(scanAll(table, reordered, ROWS), 0, ROWS, reordered);
        }

        step("drop table", admin.dropTable(path, false));
        assertFalse(step("table exists after drop", admin.tableExists(path)));
    }

    @Test
    void userMistakesGetFlussExceptions() throws Exception {
        TablePath missing = TablePath.of(DATABASE, "missing");
        assertInstanceOf(TableNotExistException.class, stepError("get info of a missing table", admin.getTableInfo(missing)));
        assertInstanceOf(TableNotExistException.class, stepError("drop a missing table", admin.dropTable(missing, false)));
        step("drop a missing table with ignoreIfNotExists", admin.dropTable(missing, true));

        TablePath inMissingDb = TablePath.of("interop_java_missing", "t");
        assertInstanceOf(DatabaseNotExistException.class,
                stepError("create table in a missing database", admin.createTable(inMissingDb, descriptor(), false)));
        assertInstanceOf(DatabaseNotExistException.class,
                stepError("get info of a missing database", admin.getDatabaseInfo("interop_java_missing")));
        assertInstanceOf(DatabaseAlreadyExistException.class,
                stepError("create the database again", admin.createDatabase(DATABASE, DatabaseDescriptor.EMPTY, false)));

        TablePath path = createTable("twice");
        assertInstanceOf(TableAlreadyExistException.class,
                stepError("create the table again", admin.createTable(path, descriptor(), false)));
        step("create the table again with ignoreIfExists", admin.createTable(path, descriptor(), true));
        assertInstanceOf(DatabaseNotEmptyException.class,
                stepError("drop a non-empty database without cascade", admin.dropDatabase(DATABASE, false, false)));
        assertTrue(step("table survives the refused drop", admin.tableExists(path)));
        step("drop table", admin.dropTable(path, false));
    }

    private static <T> T step(String what, CompletableFuture<T> future) {
        try {
            return future.get(STEP_TIMEOUT_SECONDS, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw new AssertionError(what + ": " + e.getCause() + "\n--- fjord server stderr ---\n" + server.stderr(), e.getCause());
        } catch (TimeoutException e) {
            throw new AssertionError(what + ": no answer within " + STEP_TIMEOUT_SECONDS
                    + "s\n--- fjord server stderr ---\n" + server.stderr());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(what + ": interrupted", e);
        }
    }

    /** Waits for a step that must fail and returns its cause. */
    private static Throwable stepError(String what, CompletableFuture<?> future) {
        try {
            Object result = future.get(STEP_TIMEOUT_SECONDS, TimeUnit.SECONDS);
            throw new AssertionError(what + ": expected an error, got " + result);
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (TimeoutException e) {
            throw new AssertionError(what + ": no answer within " + STEP_TIMEOUT_SECONDS
                    + "s\n--- fjord server stderr ---\n" + server.stderr());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(what + ": interrupted", e);
        }
    }
}
