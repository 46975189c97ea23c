package dev.fjord.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.fluss.client.Connection;
import org.apache.fluss.client.ConnectionFactory;
import org.apache.fluss.client.admin.Admin;
import org.apache.fluss.client.admin.OffsetSpec;
import org.apache.fluss.client.lookup.LookupResult;
import org.apache.fluss.client.lookup.Lookuper;
import org.apache.fluss.client.metadata.KvSnapshots;
import org.apache.fluss.client.table.Table;
import org.apache.fluss.client.table.scanner.ScanRecord;
import org.apache.fluss.client.table.scanner.batch.BatchScanner;
import org.apache.fluss.client.table.scanner.log.LogScanner;
import org.apache.fluss.client.table.scanner.log.ScanRecords;
import org.apache.fluss.client.table.writer.DeleteResult;
import org.apache.fluss.client.table.writer.UpsertResult;
import org.apache.fluss.client.table.writer.UpsertWriter;
import org.apache.fluss.config.Configuration;
import org.apache.fluss.exception.DeletionDisabledException;
import org.apache.fluss.exception.InvalidTableException;
import org.apache.fluss.metadata.AggFunctions;
import org.apache.fluss.metadata.DatabaseDescriptor;
import org.apache.fluss.metadata.PartitionSpec;
import org.apache.fluss.metadata.Schema;
import org.apache.fluss.metadata.TableBucket;
import org.apache.fluss.metadata.TableDescriptor;
import org.apache.fluss.metadata.TableInfo;
import org.apache.fluss.metadata.TablePath;
import org.apache.fluss.row.BinaryString;
import org.apache.fluss.rpc.protocol.MergeMode;
import org.apache.fluss.row.Decimal;
import org.apache.fluss.row.GenericRow;
import org.apache.fluss.row.InternalRow;
import org.apache.fluss.row.TimestampLtz;
import org.apache.fluss.row.TimestampNtz;
import org.apache.fluss.types.DataTypes;
import org.apache.fluss.types.RowType;
import org.apache.fluss.utils.CloseableIterator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Primary-key tables with the official Fluss Java client (the reference implementation Flink
 * uses), unmodified, against the real {@code fjord server} binary.
 *
 * <p>A deterministic list of writes (inserts, updates, identical re-upserts, deletes of present
 * and absent keys, re-inserts, partial updates and partial deletes) goes through {@code
 * newUpsert()} writers, every write's own future checked, and is applied to a model of Fluss's
 * semantics (v0.9.1-incubating {@code KvTablet.processUpsert/processDeletion}, {@code
 * PartialUpdater}; FULL changelog image). Lookups, limit scans, the changelog (LogScanner from
 * earliest) and the row count (GetTableStats) are compared with the model, for both KV formats
 * the client writes (COMPACTED and INDEXED). Further tests cover many KV batches in flight,
 * prefix lookups, a partitioned table, the merge engines (first_row, versioned, aggregation,
 * MergeMode.OVERWRITE), the WAL changelog image, KV snapshot metadata and the refusals a user
 * meets. Each test asserts
 * Fluss's behaviour.
 *
 * <p>Not reachable from this client version (0.9.1): ScanKv (a batch scanner without a limit
 * throws UnsupportedOperationException client-side) and the KV snapshot reader (Fjord reports no
 * snapshots).
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class FlussJavaClientPkTablesTest {
    /** Upper bound of one client step, so a silent server fails the test instead of hanging it. */
    private static final long STEP_TIMEOUT_SECONDS = 120;

    private static final int BUCKETS = 3;
    private static final String DATABASE = "interop_java_pk";
    /** Keys 0..KEYS-1 are written in full; KEYS..KEYS+2 only by partial updates. */
    private static final int KEYS = 300;
    /** Keys never written: deletes of them succeed and change nothing. */
    private static final int ABSENT_FROM = KEYS + 10;

    private static final int ABSENT_TO = KEYS + 30;

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

    // ---------------------------------------------------------------- the every-type table

    /** Column names of the every-type table, in schema order. */
    private static final String[] COLUMNS = {
        "id", "flag", "tiny", "small", "num", "big", "ratio", "score", "code", "name",
        "dec_small", "dec_compact", "dec_wide", "day", "t0", "t3", "ts0", "ts3", "ts6", "ts9",
        "ltz0", "ltz3", "ltz6", "ltz9", "fixed", "payload"
    };

    /** Every type the Java client writes into a PK table except ARRAY, MAP and ROW. */
    private static Schema allTypesSchema() {
        return Schema.newBuilder()
                .column("id", DataTypes.INT().copy(false))
                .column("flag", DataTypes.BOOLEAN())
                .column("tiny", DataTypes.TINYINT())
                .column("small", DataTypes.SMALLINT())
                .column("num", DataTypes.INT())
                .column("big", DataTypes.BIGINT())
                .column("ratio", DataTypes.FLOAT())
                .column("score", DataTypes.DOUBLE())
                .column("code", DataTypes.CHAR(6))
                .column("name", DataTypes.STRING())
                .column("dec_small", DataTypes.DECIMAL(5, 2))
                .column("dec_compact", DataTypes.DECIMAL(18, 4))
                .column("dec_wide", DataTypes.DECIMAL(38, 10))
                .column("day", DataTypes.DATE())
                .column("t0", DataTypes.TIME(0))
                .column("t3", DataTypes.TIME(3))
                .column("ts0", DataTypes.TIMESTAMP(0))
                .column("ts3", DataTypes.TIMESTAMP(3))
                .column("ts6", DataTypes.TIMESTAMP(6))
                .column("ts9", DataTypes.TIMESTAMP(9))
                .column("ltz0", DataTypes.TIMESTAMP_LTZ(0))
                .column("ltz3", DataTypes.TIMESTAMP_LTZ(3))
                .column("ltz6", DataTypes.TIMESTAMP_LTZ(6))
                .column("ltz9", DataTypes.TIMESTAMP_LTZ(9))
                .column("fixed", DataTypes.BINARY(4))
                .column("payload", DataTypes.BYTES())
                .primaryKey("id")
                .build();
    }

    private static final RowType ROW_TYPE = allTypesSchema().getRowType();

    /** Partial updates write these columns: the primary key and two others. */
    private static final String[] PARTIAL = {"id", "name", "big"};

    private static final Set<Integer> PARTIAL_POSITIONS =
            Arrays.stream(PARTIAL)
                    .map(c -> Arrays.asList(COLUMNS).indexOf(c))
                    .collect(Collectors.toSet());

    /**
     * Row {@code id} at {@code version} as the client's internal values: every value a function
     * of both, a null at a different stride per column, negative, empty, non-ASCII, extreme,
     * pre-epoch and nanosecond values mixed in; each exactly representable at its column's
     * precision. Pre-epoch timestamps are whole milliseconds: the 0.9.1 client cannot read a
     * pre-epoch TIMESTAMP(6/9) or TIMESTAMP_LTZ(6/9) with a sub-millisecond part from an Arrow
     * changelog ({@code ArrowTimestampNtzColumnVector.getTimestampNtz} splits micros/nanos with
     * truncating division, so the nano-of-millisecond is negative and {@code
     * TimestampNtz.fromMillis} throws IllegalArgumentException), whichever server wrote it.
     */
    private static Object[] fullRow(int id, int version) {
        long n = id * 7L + version * 1000L;
        long epochMillis = 1_704_067_200_000L; // 2024-01-01T00:00:00Z
        return new Object[] {
            id,
            nullEvery(n, 3, () -> n % 2 == 0),
            nullEvery(n, 5, () -> (byte) (n % 256 - 128)),
            nullEvery(n, 7, () -> (short) (n * 7 % 65_536 - 32_768)),
            nullEvery(n, 11, () -> (int) (n * 2_654_435_761L)),
            nullEvery(n, 13, () -> n * 0x9E3779B97F4A7C15L),
            nullEvery(n, 17, () -> (float) (n % 4096) / 4f - 512f),
            nullEvery(n, 19, () -> n % 29 == 0 ? Double.MAX_VALUE : n * -1.5e-3),
            nullEvery(n, 23, () -> BinaryString.fromString(new String[] {"", "ab", "ß✓", "xyzxyz"}[(int) (n % 4)])),
            nullEvery(n, 29, () -> BinaryString.fromString(name(n))),
            nullEvery(n, 4, () -> Decimal.fromUnscaledLong(n % 199_999 - 99_999, 5, 2)),
            nullEvery(n, 31, () -> Decimal.fromUnscaledLong(n * 37 - 500_000, 18, 4)),
            nullEvery(n, 37, () -> Decimal.fromBigDecimal(
                    new java.math.BigDecimal(java.math.BigInteger.valueOf(n).multiply(java.math.BigInteger.TEN.pow(20))
                            .add(java.math.BigInteger.valueOf(7)).multiply(java.math.BigInteger.valueOf(n % 2 == 0 ? 1 : -1)), 10),
                    38, 10)),
            nullEvery(n, 41, () -> (int) (n % 40_000 - 20_000)),
            nullEvery(n, 43, () -> (int) (n * 7 % 86_400) * 1000),
            nullEvery(n, 47, () -> (int) (n * 7_919 % 86_400_000)),
            nullEvery(n, 53, () -> TimestampNtz.fromMillis((n * 3607 - 1_000_000_000L) * 1000)),
            nullEvery(n, 59, () -> TimestampNtz.fromMillis(epochMillis + n * 17 - 100_000_000_000L)),
            nullEvery(n, 61, () -> TimestampNtz.fromMillis(epochMillis - n * 1_001, (int) (n % 1000) * 1000)),
            nullEvery(n, 67, () -> TimestampNtz.fromMillis(epochMillis - n * 999_983, (int) (n * 7_919 % 1_000_000))),
            nullEvery(n, 71, () -> TimestampLtz.fromEpochMillis((epochMillis / 1000 + n) * 1000)),
            nullEvery(n, 73, () -> TimestampLtz.fromEpochMillis(epochMillis - n * 13)),
            nullEvery(n, 79, () -> TimestampLtz.fromEpochMillis(-n * 3 - 1)),
            nullEvery(n, 83, () -> TimestampLtz.fromEpochMillis(epochMillis + n, (int) (n * 31 % 1_000_000))),
            nullEvery(n, 89, () -> new byte[] {(byte) n, (byte) (n >> 8), (byte) (n >> 16), (byte) 0xFF}),
            nullEvery(n, 97, () -> payload(n)),
        };
    }

    private static String name(long n) {
        switch ((int) (n % 4)) {
            case 0:
                return "";
            case 1:
                return "user-" + n;
            case 2:
                return "Fjörð-" + n + "-ß✓";
            default:
                return "x".repeat((int) (n % 97));
        }
    }

    private static byte[] payload(long n) {
        byte[] bytes = new byte[(int) (n % 9)];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) (n >>> (8 * i));
        }
        return bytes;
    }

    private static Object nullEvery(long n, int every, Supplier<Object> value) {
        return n % every == 0 ? null : value.get();
    }

    /** An internal value as a comparable plain Java value. */
    private static Object plain(Object internal) {
        if (internal instanceof BinaryString) {
            return internal.toString();
        } else if (internal instanceof Decimal) {
            return ((Decimal) internal).toBigDecimal();
        } else if (internal instanceof TimestampNtz) {
            TimestampNtz t = (TimestampNtz) internal;
            return "ntz:" + t.getMillisecond() + "+" + t.getNanoOfMillisecond();
        } else if (internal instanceof TimestampLtz) {
            TimestampLtz t = (TimestampLtz) internal;
            return "ltz:" + t.getEpochMillisecond() + "+" + t.getNanoOfMillisecond();
        } else if (internal instanceof byte[]) {
            return "0x" + HexFormat.of().formatHex((byte[]) internal);
        }
        return internal;
    }

    private static List<Object> plainRow(Object[] internal) {
        List<Object> row = new ArrayList<>(internal.length);
        for (Object v : internal) {
            row.add(plain(v));
        }
        return row;
    }

    /** Reads every field of a row of {@code rowType} as plain values. */
    private static List<Object> read(InternalRow row, RowType rowType) {
        assertEquals(rowType.getFieldCount(), row.getFieldCount(), "field count of " + row);
        List<Object> values = new ArrayList<>(rowType.getFieldCount());
        for (int i = 0; i < rowType.getFieldCount(); i++) {
            values.add(plain(InternalRow.createFieldGetter(rowType.getTypeAt(i), i).getFieldOrNull(row)));
        }
        return values;
    }

    /** One change of the model's changelog, and the index of the write that caused it. */
    private static final class Change {
        final String type;
        final List<Object> row;
        final int write;

        Change(String type, List<Object> row, int write) {
            this.type = type;
            this.row = row;
            this.write = write;
        }
    }

    /**
     * Fluss's primary-key semantics under the default merge engine and the FULL changelog image:
     * the current rows by key and, per key, the changes in write order.
     */
    private static final class Model {
        final Map<Object, List<Object>> rows = new HashMap<>();
        final Map<Object, List<Change>> log = new HashMap<>();
        final int[] keyPositions;

        Model(int... keyPositions) {
            this.keyPositions = keyPositions;
        }

        Object key(List<Object> row) {
            List<Object> key = new ArrayList<>();
            for (int p : keyPositions) {
                key.add(row.get(p));
            }
            return key;
        }

        private void emit(Object key, String type, List<Object> row, int write) {
            log.computeIfAbsent(key, k -> new ArrayList<>()).add(new Change(type, row, write));
        }

        void upsert(List<Object> row, int write) {
            Object key = key(row);
            List<Object> old = rows.put(key, row);
            if (old == null) {
                emit(key, "+I", row, write);
            } else {
                emit(key, "-U", old, write);
                emit(key, "+U", row, write);
            }
        }

        void delete(Object key, int write) {
            List<Object> old = rows.remove(key);
            if (old != null) {
                emit(key, "-D", old, write);
            }
        }

        /** Target columns from {@code values}, the others from the old row (null if absent). */
        void partialUpsert(List<Object> values, Set<Integer> targets, int write) {
            List<Object> old = rows.get(key(values));
            List<Object> merged = new ArrayList<>();
            for (int i = 0; i < values.size(); i++) {
                merged.add(targets.contains(i) ? values.get(i) : old == null ? null : old.get(i));
            }
            upsert(merged, write);
        }

        /**
         * Deletes the row when all its non-target columns are null, else nulls its non-key
         * target columns ({@code PartialUpdater.deleteRow}).
         */
        void partialDelete(Object key, Set<Integer> targets, Set<Integer> keyColumns, int write) {
            List<Object> old = rows.get(key);
            if (old == null) {
                return;
            }
            boolean othersNull = true;
            for (int i = 0; i < old.size(); i++) {
                othersNull &= targets.contains(i) || old.get(i) == null;
            }
            if (othersNull) {
                delete(key, write);
            } else {
                List<Object> updated = new ArrayList<>(old);
                for (int t : targets) {
                    if (!keyColumns.contains(t)) {
                        updated.set(t, null);
                    }
                }
                upsert(updated, write);
            }
        }

        int changeCount() {
            return log.values().stream().mapToInt(List::size).sum();
        }
    }

    /** One write: an upsert of a row, or a delete of a key (a row with only its key set). */
    private static final class Op {
        final boolean delete;
        final Object[] row;

        private Op(boolean delete, Object[] row) {
            this.delete = delete;
            this.row = row;
        }

        static Op upsert(Object[] row) {
            return new Op(false, row);
        }

        static Op delete(int id) {
            Object[] row = new Object[COLUMNS.length];
            row[0] = id;
            return new Op(true, row);
        }

        static Op partial(int id, String name, Long big) {
            Object[] row = new Object[COLUMNS.length];
            row[0] = id;
            row[Arrays.asList(COLUMNS).indexOf("name")] = name == null ? null : BinaryString.fromString(name);
            row[Arrays.asList(COLUMNS).indexOf("big")] = big;
            return new Op(false, row);
        }
    }

    /** The writes in four phases (one writer each; phase 3 is a partial-update writer). */
    private static List<List<Op>> phases() {
        List<Op> p1 = new ArrayList<>();
        for (int i = 0; i < KEYS; i++) {
            p1.add(Op.upsert(fullRow(i, 0)));
        }
        List<Op> p2 = new ArrayList<>();
        for (int i = 0; i < KEYS; i++) {
            if (i % 3 == 0) {
                p2.add(Op.upsert(fullRow(i, 1)));
            }
            if (i % 9 == 0) {
                p2.add(Op.upsert(fullRow(i, 2))); // a second update in the same batch
            }
            if (i % 5 == 1) {
                p2.add(Op.delete(i));
            }
            if (i % 10 == 1) {
                p2.add(Op.upsert(fullRow(i, 3))); // deleted above, inserted again
            }
            if (i % 13 == 2) {
                p2.add(Op.upsert(fullRow(i, 0))); // identical re-upsert: still -U/+U
            }
        }
        for (int i = ABSENT_FROM; i < ABSENT_FROM + 5; i++) {
            p2.add(Op.delete(i)); // absent keys: no change
        }
        List<Op> p3 = new ArrayList<>();
        for (int i = 0; i < KEYS; i += 4) {
            p3.add(Op.partial(i, "partial-" + i, (long) -i));
        }
        for (int i = KEYS; i < KEYS + 3; i++) {
            p3.add(Op.partial(i, i % 2 == 0 ? "new" : null, (long) i)); // new keys
        }
        for (int i = 0; i < KEYS; i += 8) {
            p3.add(Op.delete(i)); // full rows: target columns nulled (-U/+U)
        }
        p3.add(Op.delete(KEYS)); // only target columns set: deleted (-D)
        p3.add(Op.delete(KEYS + 1));
        List<Op> p4 = new ArrayList<>();
        for (int i = 0; i < KEYS; i += 16) {
            p4.add(Op.upsert(fullRow(i, 4)));
        }
        return List.of(p1, p2, p3, p4);
    }

    /** What the server answered to one write: its bucket and the log end offset after it. */
    private static final class WriteAck {
        final int bucket;
        final long logEndOffset;

        WriteAck(TableBucket bucket, long logEndOffset) {
            assertNotNull(bucket, "a write result without a bucket");
            this.bucket = bucket.getBucket();
            this.logEndOffset = logEndOffset;
        }
    }

    /**
     * Writes every phase through its own writer, checking each write's future, and applies it to
     * the model; returns every write's acknowledgement, in write order.
     */
    private static List<WriteAck> writeAll(Table table, Model model) {
        Set<Integer> keyColumns = Set.of(0);
        List<WriteAck> acks = new ArrayList<>();
        int phaseNo = 0;
        for (List<Op> phase : phases()) {
            phaseNo++;
            boolean partial = phaseNo == 3;
            UpsertWriter writer =
                    partial
                            ? table.newUpsert().partialUpdate(PARTIAL).createWriter()
                            : table.newUpsert().createWriter();
            List<CompletableFuture<?>> futures = new ArrayList<>();
            for (Op op : phase) {
                GenericRow row = GenericRow.of(op.row);
                futures.add(op.delete ? writer.delete(row) : writer.upsert(row));
            }
            // flush() blocks without a bound of its own; run it where step() can time it out.
            step("flush phase " + phaseNo, CompletableFuture.runAsync(writer::flush));
            for (int i = 0; i < phase.size(); i++) {
                Op op = phase.get(i);
                Object result = step("phase " + phaseNo + " write " + i + " (key " + op.row[0] + ")", futures.get(i));
                int write = acks.size();
                if (result instanceof UpsertResult) {
                    assertFalse(op.delete);
                    UpsertResult r = (UpsertResult) result;
                    acks.add(new WriteAck(r.getBucket(), r.getLogEndOffset()));
                } else {
                    assertTrue(op.delete);
                    DeleteResult r = (DeleteResult) result;
                    acks.add(new WriteAck(r.getBucket(), r.getLogEndOffset()));
                }
                List<Object> values = plainRow(op.row);
                Object key = model.key(values);
                if (partial && op.delete) {
                    model.partialDelete(key, PARTIAL_POSITIONS, keyColumns, write);
                } else if (partial) {
                    model.partialUpsert(values, PARTIAL_POSITIONS, write);
                } else if (op.delete) {
                    model.delete(key, write);
                } else {
                    model.upsert(values, write);
                }
            }
        }
        return acks;
    }

    /** A scanned change: bucket, offset, change type and plain row. */
    private static final class Scanned {
        final int bucket;
        final long offset;
        final String type;
        final List<Object> row;

        Scanned(int bucket, long offset, String type, List<Object> row) {
            this.bucket = bucket;
            this.offset = offset;
            this.type = type;
            this.row = row;
        }
    }

    /**
     * The changelog of every bucket from the beginning until {@code expected} records arrived,
     * then one more poll that must bring nothing.
     */
    private static List<Scanned> readChangelog(Table table, RowType rowType, int buckets, int expected) {
        List<Scanned> scanned = new ArrayList<>();
        try (LogScanner scanner = table.newScan().createLogScanner()) {
            for (int b = 0; b < buckets; b++) {
                scanner.subscribeFromBeginning(b);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STEP_TIMEOUT_SECONDS);
            while (scanned.size() < expected) {
                if (System.nanoTime() > deadline) {
                    fail("changelog: " + scanned.size() + " of " + expected + " records within "
                            + STEP_TIMEOUT_SECONDS + "s\n--- fjord server stderr ---\n" + server.stderr());
                }
                collect(scanner.poll(Duration.ofMillis(500)), rowType, scanned);
            }
            List<Scanned> extra = new ArrayList<>();
            collect(scanner.poll(Duration.ofSeconds(1)), rowType, extra);
            assertTrue(extra.isEmpty(), "the changelog has " + extra.size() + " records more than the model");
        } catch (Exception e) {
            throw new AssertionError("changelog scan failed\n--- fjord server stderr ---\n" + server.stderr(), e);
        }
        scanned.sort(Comparator.<Scanned>comparingInt(s -> s.bucket).thenComparingLong(s -> s.offset));
        return scanned;
    }

    private static void collect(ScanRecords records, RowType rowType, List<Scanned> into) {
        for (TableBucket bucket : records.buckets()) {
            for (ScanRecord record : records.records(bucket)) {
                into.add(new Scanned(bucket.getBucket(), record.logOffset(),
                        record.getChangeType().shortString(), read(record.getRow(), rowType)));
            }
        }
    }

    /** Every row of a bucket through a limit scan (LimitScan). */
    private static List<List<Object>> limitScan(Table table, TableBucket bucket, int limit, int[] projection, RowType rowType) {
        var scan = table.newScan().limit(limit);
        if (projection != null) {
            scan = scan.project(projection);
        }
        List<List<Object>> rows = new ArrayList<>();
        try (BatchScanner scanner = scan.createBatchScanner(bucket)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STEP_TIMEOUT_SECONDS);
            while (true) {
                CloseableIterator<InternalRow> batch = scanner.pollBatch(Duration.ofSeconds(1));
                if (batch == null) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    fail("limit scan of " + bucket + " did not end\n--- fjord server stderr ---\n" + server.stderr());
                }
                while (batch.hasNext()) {
                    rows.add(read(batch.next(), rowType));
                }
                batch.close();
            }
        } catch (Exception e) {
            throw new AssertionError("limit scan of " + bucket + " failed\n--- fjord server stderr ---\n" + server.stderr(), e);
        }
        return rows;
    }

    /**
     * Proves, for both KV formats the Java client writes, the whole PK-table path through the
     * Java client: a table of every non-nested type created through Admin; four phases of
     * upserts, updates, identical re-upserts, deletes (of present and absent keys), re-inserts,
     * partial updates ({@code partialUpdate("id", "name", "big")}, including new keys) and partial
     * deletes, every write's future checked; each write's result names the bucket its key's
     * changes land in, with a log end offset past them; a lookup of every key ever written (and
     * of never-written keys) returns exactly the model's row or null; the changelog read with
     * LogScanner from the beginning holds exactly the model's changes per key, with their change
     * types (+I, -U/+U, -D) and full rows; limit scans of every bucket together hold exactly the
     * current rows (and a projection only its columns, a small limit only that many current
     * rows); GetTableStats counts the current rows; list offsets report the changelog's ends.
     */
    @ParameterizedTest(name = "table.kv.format={0}")
    @ValueSource(strings = {"COMPACTED", "INDEXED"})
    void upsertsDeletesPartialUpdatesLookupsScansAndChangelog(String kvFormat) throws Exception {
        TablePath path = TablePath.of(DATABASE, "all_types_" + kvFormat.toLowerCase());
        TableDescriptor descriptor = TableDescriptor.builder()
                .schema(allTypesSchema())
                .distributedBy(BUCKETS)
                .property("table.kv.format", kvFormat)
                .comment("fjord java pk interop table")
                .build();
        step("create table " + path, admin.createTable(path, descriptor, false));
        TableInfo info = step("get table info", admin.getTableInfo(path));
        assertTrue(info.hasPrimaryKey());
        assertEquals(List.of("id"), info.getPrimaryKeys());
        assertEquals(List.of("id"), info.getBucketKeys(), "bucket key defaults to the primary key");
        assertEquals(BUCKETS, info.getNumBuckets());
        assertEquals(allTypesSchema(), info.getSchema(), "schema as stored by the server");

        try (Table table = connection.getTable(path)) {
            Model model = new Model(0);
            List<WriteAck> acks = writeAll(table, model);

            // Lookups of every key, concurrently (the client batches them).
            Lookuper lookuper = table.newLookup().createLookuper();
            Map<Integer, CompletableFuture<LookupResult>> lookups = new TreeMap<>();
            for (int id = 0; id < ABSENT_TO; id++) {
                lookups.put(id, lookuper.lookup(GenericRow.of(id)));
            }
            int present = 0;
            for (Map.Entry<Integer, CompletableFuture<LookupResult>> e : lookups.entrySet()) {
                InternalRow row = step("lookup of key " + e.getKey(), e.getValue()).getSingletonRow();
                List<Object> expected = model.rows.get(List.of(e.getKey()));
                if (expected == null) {
                    assertNull(row, "key " + e.getKey() + " is absent, lookup gave " + row);
                } else {
                    assertNotNull(row, "key " + e.getKey() + " is present, lookup gave nothing");
                    assertEquals(expected, read(row, ROW_TYPE), "lookup of key " + e.getKey());
                    present++;
                }
            }
            assertTrue(present > 0 && present < ABSENT_TO, "present keys: " + present);

            // The changelog, per key in write order, against the model.
            List<Scanned> changelog = readChangelog(table, ROW_TYPE, BUCKETS, model.changeCount());
            Map<Object, List<Scanned>> byKey = new HashMap<>();
            Map<Integer, Long> lastOffset = new HashMap<>();
            for (Scanned s : changelog) {
                Long last = lastOffset.put(s.bucket, s.offset);
                assertTrue(last == null || last < s.offset, "bucket " + s.bucket + " offsets do not increase");
                byKey.computeIfAbsent(model.key(s.row), k -> new ArrayList<>()).add(s);
            }
            assertEquals(new HashSet<>(model.log.keySet()), byKey.keySet(), "keys in the changelog");
            Set<String> kinds = new HashSet<>();
            for (Map.Entry<Object, List<Change>> e : model.log.entrySet()) {
                List<Change> want = e.getValue();
                List<Scanned> got = byKey.get(e.getKey());
                assertEquals(want.stream().map(c -> c.type).collect(Collectors.toList()),
                        got.stream().map(s -> s.type).collect(Collectors.toList()), "change types of key " + e.getKey());
                for (int i = 0; i < want.size(); i++) {
                    Change c = want.get(i);
                    Scanned s = got.get(i);
                    kinds.add(c.type);
                    assertEquals(c.row, s.row, "change " + i + " (" + c.type + ") of key " + e.getKey());
                    WriteAck ack = acks.get(c.write);
                    assertEquals(ack.bucket, s.bucket, "bucket of key " + e.getKey() + " per its write result");
                    assertTrue(s.offset < ack.logEndOffset, "change " + i + " of key " + e.getKey() + " at offset "
                            + s.offset + " is not below its write's log end offset " + ack.logEndOffset);
                }
            }
            assertEquals(Set.of("+I", "-U", "+U", "-D"), kinds);

            List<Integer> buckets = IntStream.range(0, BUCKETS).boxed().collect(Collectors.toList());
            Map<Integer, Long> earliest = step("earliest offsets", admin.listOffsets(path, buckets, new OffsetSpec.EarliestSpec()).all());
            Map<Integer, Long> latest = step("latest offsets", admin.listOffsets(path, buckets, new OffsetSpec.LatestSpec()).all());
            for (int b = 0; b < BUCKETS; b++) {
                assertEquals(0L, earliest.get(b), "earliest offset of bucket " + b);
                assertTrue(latest.get(b) > lastOffset.get(b), "bucket " + b + " latest " + latest + " last change " + lastOffset);
            }
            for (WriteAck ack : acks) {
                assertTrue(ack.logEndOffset <= latest.get(ack.bucket), "a write's log end offset is past the latest offset");
            }

            // Limit scans of every bucket hold exactly the current rows.
            List<List<Object>> scanned = new ArrayList<>();
            Map<Integer, List<List<Object>>> perBucket = new HashMap<>();
            for (int b = 0; b < BUCKETS; b++) {
                TableBucket tb = new TableBucket(info.getTableId(), b);
                List<List<Object>> rows = limitScan(table, tb, 10_000, null, ROW_TYPE);
                assertFalse(rows.isEmpty(), "bucket " + b + " is empty");
                perBucket.put(b, rows);
                scanned.addAll(rows);

                List<List<Object>> few = limitScan(table, tb, 5, null, ROW_TYPE);
                assertEquals(Math.min(5, rows.size()), few.size(), "limit 5 of bucket " + b);
                assertTrue(rows.containsAll(few), "limit 5 of bucket " + b + " returned a row that is not current");

                int[] projection = {9, 0, 23};
                RowType projected = ROW_TYPE.project(projection);
                List<List<Object>> narrow = limitScan(table, tb, 10_000, projection, projected);
                List<List<Object>> wantNarrow = rows.stream()
                        .map(r -> Arrays.stream(projection).mapToObj(r::get).collect(Collectors.toList()))
                        .collect(Collectors.toList());
                assertEquals(sortedByFirstInt(wantNarrow, 1), sortedByFirstInt(narrow, 1), "projected limit scan of bucket " + b);
            }
            assertEquals(sortedByFirstInt(new ArrayList<>(model.rows.values()), 0), sortedByFirstInt(scanned, 0), "limit scans of all buckets");

            long rowCount = step("table stats", admin.getTableStats(path)).getRowCount();
            assertEquals(model.rows.size(), rowCount, "GetTableStats row count");

            KvSnapshots snapshots = step("latest kv snapshots", admin.getLatestKvSnapshots(path));
            assertEquals(info.getTableId(), snapshots.getTableId());
            assertEquals(Set.copyOf(buckets), snapshots.getBucketIds());
            for (int b = 0; b < BUCKETS; b++) {
                assertFalse(snapshots.getSnapshotId(b).isPresent(), "Fjord keeps no KV snapshots");
                assertFalse(snapshots.getLogOffset(b).isPresent());
            }
        }
        step("drop table", admin.dropTable(path, false));
    }

    private static List<List<Object>> sortedByFirstInt(List<List<Object>> rows, int keyPosition) {
        List<List<Object>> sorted = new ArrayList<>(rows);
        sorted.sort(Comparator.comparingInt(r -> (Integer) r.get(keyPosition)));
        return sorted;
    }

    // ---------------------------------------------------------------- volume

    /**
     * Proves the write path under load with many KV batches per bucket in flight: through a
     * connection whose writer batches are 16 KiB (so the default five in-flight requests per
     * bucket, each an idempotent writer's next sequence, are used), 40,000 upserts and deletes of
     * 4,000 keys, every future checked; afterwards every key's lookup, the limit scans, the row
     * count, and the changelog (per key, in write order, with change types) all equal the model.
     */
    @Test
    void manyBatchesInFlight() throws Exception {
        TablePath path = TablePath.of(DATABASE, "volume");
        Schema schema = mergeSchema(false);
        RowType rowType = schema.getRowType();
        step("create table", admin.createTable(path, TableDescriptor.builder().schema(schema)
                .distributedBy(BUCKETS).build(), false));
        Configuration conf = new Configuration();
        conf.setString("bootstrap.servers", server.address());
        conf.setString("client.writer.retries", "5");
        conf.setString("client.writer.batch-size", "16kb");
        int keys = 4_000;
        int writes = 40_000;
        Model model = new Model(0);
        try (Connection small = ConnectionFactory.createConnection(conf);
                Table table = small.getTable(path)) {
            UpsertWriter writer = table.newUpsert().createWriter();
            List<CompletableFuture<?>> futures = new ArrayList<>(writes);
            String pad = "v".repeat(60);
            for (int w = 0; w < writes; w++) {
                int id = (int) ((w * 2_654_435_761L) % keys);
                if (w % 7 == 3) {
                    futures.add(writer.delete(GenericRow.of(id, null, null)));
                    model.delete(List.of(id), w);
                } else {
                    Object[] row = {id, (long) w, BinaryString.fromString(pad + w)};
                    futures.add(writer.upsert(GenericRow.of(row)));
                    model.upsert(plainRow(row), w);
                }
            }
            step("flush", CompletableFuture.runAsync(writer::flush));
            for (int w = 0; w < writes; w++) {
                step("write " + w, futures.get(w));
            }

            Lookuper lookuper = table.newLookup().createLookuper();
            List<CompletableFuture<LookupResult>> lookups = new ArrayList<>();
            for (int id = 0; id < keys; id++) {
                lookups.add(lookuper.lookup(GenericRow.of(id)));
            }
            for (int id = 0; id < keys; id++) {
                InternalRow row = step("lookup " + id, lookups.get(id)).getSingletonRow();
                assertEquals(model.rows.get(List.of(id)), row == null ? null : read(row, rowType), "lookup of " + id);
            }

            long tableId = table.getTableInfo().getTableId();
            Set<List<Object>> scanned = new HashSet<>();
            for (int b = 0; b < BUCKETS; b++) {
                scanned.addAll(limitScan(table, new TableBucket(tableId, b), 100_000, null, rowType));
            }
            assertEquals(new HashSet<>(model.rows.values()), scanned, "limit scans");
            assertEquals(model.rows.size(), step("table stats", admin.getTableStats(path)).getRowCount());

            List<Scanned> changelog = readChangelog(table, rowType, BUCKETS, model.changeCount());
            Map<Object, List<String>> byKey = new HashMap<>();
            for (Scanned s : changelog) {
                byKey.computeIfAbsent(model.key(s.row), k -> new ArrayList<>()).add(s.type + " " + s.row);
            }
            Map<Object, List<String>> want = new HashMap<>();
            model.log.forEach((k, v) -> want.put(k, v.stream().map(c -> c.type + " " + c.row).collect(Collectors.toList())));
            assertEquals(want.keySet(), byKey.keySet());
            for (Object k : want.keySet()) {
                assertEquals(want.get(k), byKey.get(k), "changelog of key " + k);
            }
        }
        step("drop table", admin.dropTable(path, false));
    }

    // ---------------------------------------------------------------- prefix lookups

    /**
     * Proves PrefixLookup ({@code newLookup().lookupBy(cols)}): on a table with primary key
     * (tenant, region, id) bucketed by (tenant, region), a strict prefix of the key, a prefix
     * lookup returns exactly the current rows under that prefix after inserts, updates and
     * deletes, and no rows for an unknown prefix; and a primary-key lookup of the same table
     * finds each row.
     */
    @Test
    void prefixLookupByBucketKey() throws Exception {
        TablePath path = TablePath.of(DATABASE, "prefix");
        Schema schema = Schema.newBuilder()
                .column("tenant", DataTypes.STRING().copy(false))
                .column("region", DataTypes.INT().copy(false))
                .column("id", DataTypes.BIGINT().copy(false))
                .column("amount", DataTypes.DECIMAL(10, 2))
                .primaryKey("tenant", "region", "id")
                .build();
        step("create table", admin.createTable(path,
                TableDescriptor.builder().schema(schema).distributedBy(BUCKETS, "tenant", "region").build(), false));
        RowType rowType = schema.getRowType();
        Map<List<Object>, List<Object>> current = new HashMap<>();
        try (Table table = connection.getTable(path)) {
            UpsertWriter writer = table.newUpsert().createWriter();
            List<CompletableFuture<?>> futures = new ArrayList<>();
            for (int t = 0; t < 6; t++) {
                for (int r = 0; r < 3; r++) {
                    for (int n = 0; n < t * 3 + r; n++) {
                        long id = n * 1000L - 5;
                        Object amount = n % 4 == 3 ? null : Decimal.fromUnscaledLong(t * 100 + r * 10 + n, 10, 2);
                        Object[] row = {BinaryString.fromString("tenant-" + t), r, id, amount};
                        futures.add(writer.upsert(GenericRow.of(row)));
                        current.put(List.of("tenant-" + t, r, id), plainRow(row));
                        if (n % 3 == 1) {
                            futures.add(writer.delete(GenericRow.of(row)));
                            current.remove(List.of("tenant-" + t, r, id));
                        } else if (r == 1) {
                            Object[] updated = {row[0], r, id, Decimal.fromUnscaledLong(-n, 10, 2)};
                            futures.add(writer.upsert(GenericRow.of(updated)));
                            current.put(List.of("tenant-" + t, r, id), plainRow(updated));
                        }
                    }
                }
            }
            step("flush", CompletableFuture.runAsync(writer::flush));
            for (int i = 0; i < futures.size(); i++) {
                step("write " + i, futures.get(i));
            }

            // All lookups in flight at once (the client batches them).
            Lookuper prefix = table.newLookup().lookupBy("tenant", "region").createLookuper();
            Map<List<Object>, CompletableFuture<LookupResult>> prefixLookups = new HashMap<>();
            for (int t = 0; t < 7; t++) {
                for (int r = 0; r < 4; r++) {
                    prefixLookups.put(List.of("tenant-" + t, r),
                            prefix.lookup(GenericRow.of(BinaryString.fromString("tenant-" + t), r)));
                }
            }
            int nonEmpty = 0;
            for (Map.Entry<List<Object>, CompletableFuture<LookupResult>> e : prefixLookups.entrySet()) {
                List<Object> p = e.getKey();
                List<List<Object>> got = step("prefix lookup " + p, e.getValue())
                        .getRowList().stream().map(row -> read(row, rowType)).collect(Collectors.toList());
                List<List<Object>> want = current.entrySet().stream()
                        .filter(c -> c.getKey().subList(0, 2).equals(p))
                        .map(Map.Entry::getValue).collect(Collectors.toList());
                Comparator<List<Object>> byId = Comparator.comparingLong(row -> (Long) row.get(2));
                got.sort(byId);
                want.sort(byId);
                assertEquals(want, got, "prefix lookup of " + p);
                nonEmpty += want.isEmpty() ? 0 : 1;
            }
            assertTrue(nonEmpty > 10, "non-empty prefixes: " + nonEmpty);

            Lookuper byKey = table.newLookup().createLookuper();
            Map<List<Object>, CompletableFuture<LookupResult>> keyLookups = new HashMap<>();
            for (List<Object> k : current.keySet()) {
                keyLookups.put(k, byKey.lookup(GenericRow.of(BinaryString.fromString((String) k.get(0)), k.get(1), k.get(2))));
            }
            for (Map.Entry<List<Object>, CompletableFuture<LookupResult>> e : keyLookups.entrySet()) {
                InternalRow row = step("lookup " + e.getKey(), e.getValue()).getSingletonRow();
                assertNotNull(row, "lookup of " + e.getKey());
                assertEquals(current.get(e.getKey()), read(row, rowType), "lookup of " + e.getKey());
            }
        }
        step("drop table", admin.dropTable(path, false));
    }

    // ---------------------------------------------------------------- partitioned PK tables

    /**
     * Proves a partitioned PK table through the Java client: primary key (dt, tenant, id),
     * partitioned by dt (two partitions created through Admin), bucketed by tenant (a strict
     * prefix of the physical key (tenant, id)). The same (tenant, id) written to both partitions
     * stays two independent rows; after inserts, updates and deletes (every future checked) a
     * lookup of every key returns the partition's current row or null; a prefix lookup by (dt,
     * tenant) returns exactly that partition's rows of the tenant; limit scans of every bucket of
     * every partition hold exactly the current rows; the changelog of each partition (LogScanner
     * from the beginning, per partition and bucket) holds exactly its changes with their types;
     * GetTableStats counts the rows of all partitions; GetLatestKvSnapshots by partition name
     * lists the partition's buckets without snapshots.
     */
    @Test
    void partitionedTable() throws Exception {
        TablePath path = TablePath.of(DATABASE, "partitioned");
        Schema schema = Schema.newBuilder()
                .column("dt", DataTypes.STRING().copy(false))
                .column("tenant", DataTypes.STRING().copy(false))
                .column("id", DataTypes.BIGINT().copy(false))
                .column("v", DataTypes.STRING())
                .primaryKey("dt", "tenant", "id")
                .build();
        RowType rowType = schema.getRowType();
        step("create table", admin.createTable(path, TableDescriptor.builder().schema(schema)
                .partitionedBy("dt").distributedBy(BUCKETS, "tenant").build(), false));
        List<String> days = List.of("2024-01-01", "2024-01-02");
        for (String day : days) {
            step("create partition " + day, admin.createPartition(path, new PartitionSpec(Map.of("dt", day)), false));
        }
        Map<String, Long> partitionIds = new HashMap<>();
        for (var p : step("list partitions", admin.listPartitionInfos(path))) {
            partitionIds.put(p.getPartitionName(), p.getPartitionId());
        }
        assertEquals(Set.copyOf(days), partitionIds.keySet());

        Model model = new Model(0, 1, 2);
        try (Table table = connection.getTable(path)) {
            UpsertWriter writer = table.newUpsert().createWriter();
            List<CompletableFuture<?>> futures = new ArrayList<>();
            int write = 0;
            for (int round = 0; round < 3; round++) {
                for (String day : days) {
                    for (int t = 0; t < 4; t++) {
                        for (long id = 0; id < 12; id++) {
                            Object[] row = {BinaryString.fromString(day), BinaryString.fromString("t" + t), id,
                                    BinaryString.fromString(day + "/t" + t + "/" + id + "@" + round)};
                            boolean delete = round == 1 && (id + t) % 4 == 0 && day.equals(days.get(0));
                            boolean skip = round == 2 && id % 3 != 0;
                            if (skip) {
                                continue;
                            }
                            if (delete) {
                                futures.add(writer.delete(GenericRow.of(row)));
                                model.delete(model.key(plainRow(row)), write++);
                            } else {
                                futures.add(writer.upsert(GenericRow.of(row)));
                                model.upsert(plainRow(row), write++);
                            }
                        }
                    }
                }
            }
            step("flush", CompletableFuture.runAsync(writer::flush));
            for (int i = 0; i < futures.size(); i++) {
                step("write " + i, futures.get(i));
            }

            Lookuper lookuper = table.newLookup().createLookuper();
            Map<List<Object>, CompletableFuture<LookupResult>> lookups = new HashMap<>();
            for (String day : days) {
                for (int t = 0; t < 5; t++) {
                    for (long id = 0; id < 13; id++) {
                        lookups.put(List.of(day, "t" + t, id), lookuper.lookup(GenericRow.of(
                                BinaryString.fromString(day), BinaryString.fromString("t" + t), id)));
                    }
                }
            }
            for (Map.Entry<List<Object>, CompletableFuture<LookupResult>> e : lookups.entrySet()) {
                InternalRow row = step("lookup " + e.getKey(), e.getValue()).getSingletonRow();
                List<Object> want = model.rows.get(e.getKey());
                assertEquals(want, row == null ? null : read(row, rowType), "lookup of " + e.getKey());
            }

            Lookuper prefix = table.newLookup().lookupBy("dt", "tenant").createLookuper();
            for (String day : days) {
                for (int t = 0; t < 5; t++) {
                    String tenant = "t" + t;
                    List<List<Object>> got = step("prefix lookup " + day + "/" + tenant, prefix.lookup(
                            GenericRow.of(BinaryString.fromString(day), BinaryString.fromString(tenant))))
                            .getRowList().stream().map(row -> read(row, rowType)).collect(Collectors.toList());
                    List<List<Object>> want = model.rows.values().stream()
                            .filter(row -> row.get(0).equals(day) && row.get(1).equals(tenant))
                            .collect(Collectors.toList());
                    Comparator<List<Object>> byId = Comparator.comparingLong(row -> (Long) row.get(2));
                    got.sort(byId);
                    want.sort(byId);
                    assertEquals(want, got, "prefix lookup of " + day + "/" + tenant);
                }
            }

            long tableId = table.getTableInfo().getTableId();
            for (String day : days) {
                long partitionId = partitionIds.get(day);
                List<List<Object>> scanned = new ArrayList<>();
                for (int b = 0; b < BUCKETS; b++) {
                    scanned.addAll(limitScan(table, new TableBucket(tableId, partitionId, b), 10_000, null, rowType));
                }
                Set<List<Object>> want = model.rows.values().stream().filter(row -> row.get(0).equals(day))
                        .collect(Collectors.toSet());
                assertEquals(want.size(), scanned.size(), "rows of partition " + day);
                assertEquals(want, new HashSet<>(scanned), "limit scans of partition " + day);

                List<List<Object>> changes = new ArrayList<>();
                Map<Object, List<String>> byKey = new HashMap<>();
                int expected = model.log.entrySet().stream().filter(e -> ((List<?>) e.getKey()).get(0).equals(day))
                        .mapToInt(e -> e.getValue().size()).sum();
                try (LogScanner scanner = table.newScan().createLogScanner()) {
                    for (int b = 0; b < BUCKETS; b++) {
                        scanner.subscribeFromBeginning(partitionId, b);
                    }
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STEP_TIMEOUT_SECONDS);
                    int received = 0;
                    while (received < expected) {
                        if (System.nanoTime() > deadline) {
                            fail("changelog of " + day + ": " + received + " of " + expected + " records\n"
                                    + "--- fjord server stderr ---\n" + server.stderr());
                        }
                        ScanRecords records = scanner.poll(Duration.ofMillis(500));
                        for (TableBucket bucket : records.buckets()) {
                            assertEquals(partitionId, bucket.getPartitionId(), "a record of another partition");
                            long last = -1;
                            for (ScanRecord record : records.records(bucket)) {
                                assertTrue(record.logOffset() > last);
                                last = record.logOffset();
                                List<Object> row = read(record.getRow(), rowType);
                                byKey.computeIfAbsent(model.key(row), k -> new ArrayList<>())
                                        .add(record.getChangeType().shortString() + " " + row);
                                received++;
                            }
                        }
                    }
                    assertTrue(scanner.poll(Duration.ofSeconds(1)).isEmpty(), "changelog of " + day + " has extra records");
                }
                Map<Object, List<String>> want2 = new HashMap<>();
                model.log.forEach((k, v) -> {
                    if (((List<?>) k).get(0).equals(day)) {
                        want2.put(k, v.stream().map(c -> c.type + " " + c.row).collect(Collectors.toList()));
                    }
                });
                assertEquals(want2, byKey, "changelog of partition " + day);

                KvSnapshots snapshots = step("kv snapshots of " + day, admin.getLatestKvSnapshots(path, day));
                assertEquals(partitionId, snapshots.getPartitionId());
                assertEquals(Set.of(0, 1, 2), snapshots.getBucketIds());
            }
            assertEquals(model.rows.size(), step("table stats", admin.getTableStats(path)).getRowCount(),
                    "GetTableStats row count over both partitions");
        }
        step("drop table", admin.dropTable(path, false));
    }

    // ---------------------------------------------------------------- merge engines

    private static Schema mergeSchema(boolean aggregation) {
        Schema.Builder b = Schema.newBuilder().column("id", DataTypes.INT().copy(false));
        if (aggregation) {
            b.column("total", DataTypes.BIGINT(), AggFunctions.SUM())
                    .column("peak", DataTypes.INT(), AggFunctions.MAX())
                    .column("label", DataTypes.STRING());
        } else {
            b.column("ver", DataTypes.BIGINT()).column("label", DataTypes.STRING());
        }
        return b.primaryKey("id").build();
    }

    /** Writes rows (null second element = delete of the key), each future checked. */
    private static void writeRows(Table table, List<Object[]> ops) {
        UpsertWriter writer = table.newUpsert().createWriter();
        List<CompletableFuture<?>> futures = new ArrayList<>();
        for (Object[] op : ops) {
            GenericRow row = GenericRow.of(op.length == 1 ? new Object[] {op[0], null, null} : op);
            futures.add(op.length == 1 ? writer.delete(row) : writer.upsert(row));
        }
        step("flush", CompletableFuture.runAsync(writer::flush));
        for (int i = 0; i < futures.size(); i++) {
            step("write " + i, futures.get(i));
        }
    }

    private static Object[] r(int id, Object a, String label) {
        return new Object[] {id, a, label == null ? null : BinaryString.fromString(label)};
    }

    private static Object[] r4(int id, Long total, Integer peak, String label) {
        return new Object[] {id, total, peak, label == null ? null : BinaryString.fromString(label)};
    }

    /** The changelog of a one-bucket table as "type row" strings, in offset order. */
    private static List<String> changelogOf(Table table, RowType rowType, int expected) {
        return readChangelog(table, rowType, 1, expected).stream()
                .map(s -> s.type + " " + s.row).collect(Collectors.toList());
    }

    private static List<Object> lookupRow(Table table, RowType rowType, int id) {
        InternalRow row = step("lookup " + id, table.newLookup().createLookuper().lookup(GenericRow.of(id))).getSingletonRow();
        return row == null ? null : read(row, rowType);
    }

    /**
     * Proves the merge engines as Fluss 0.9.1 defines them ({@code server/kv/rowmerger/*}),
     * through the Java client: {@code first_row} keeps the first row (a repeat emits nothing, the
     * changelog is insert-only, a delete is ignored since the coordinator defaults deletes to
     * IGNORE); {@code versioned} replaces the row only when the version column is not lower (an
     * older version emits nothing, an equal one updates); {@code aggregation} merges each column
     * by its function (SUM, MAX, and the default LAST_VALUE_IGNORE_NULLS) with -U/+U per write,
     * a delete is ignored by default, and a writer in {@code MergeMode.OVERWRITE} replaces rows
     * and deletes them.
     */
    @Test
    void mergeEngines() throws Exception {
        // first_row
        TablePath firstRow = TablePath.of(DATABASE, "first_row");
        Schema schema = mergeSchema(false);
        RowType rowType = schema.getRowType();
        step("create first_row table", admin.createTable(firstRow, TableDescriptor.builder().schema(schema)
                .distributedBy(1).property("table.merge-engine", "first_row").build(), false));
        try (Table table = connection.getTable(firstRow)) {
            writeRows(table, List.of(r(1, 5L, "a"), r(1, 9L, "b"), r(2, null, "c"), new Object[] {1}, r(2, 1L, null)));
            assertEquals(List.of("+I [1, 5, a]", "+I [2, null, c]"), changelogOf(table, rowType, 2));
            assertEquals(Arrays.asList(1, 5L, "a"), lookupRow(table, rowType, 1));
            assertEquals(Arrays.asList(2, null, "c"), lookupRow(table, rowType, 2));
        }

        // versioned
        TablePath versioned = TablePath.of(DATABASE, "versioned");
        step("create versioned table", admin.createTable(versioned, TableDescriptor.builder().schema(schema)
                .distributedBy(1).property("table.merge-engine", "versioned")
                .property("table.merge-engine.versioned.ver-column", "ver").build(), false));
        try (Table table = connection.getTable(versioned)) {
            writeRows(table, List.of(r(1, 5L, "a"), r(1, 3L, "older"), r(1, 7L, "b"), r(1, 7L, "same"), new Object[] {1}));
            assertEquals(List.of("+I [1, 5, a]", "-U [1, 5, a]", "+U [1, 7, b]", "-U [1, 7, b]", "+U [1, 7, same]"),
                    changelogOf(table, rowType, 5));
            assertEquals(Arrays.asList(1, 7L, "same"), lookupRow(table, rowType, 1));
        }

        // aggregation
        TablePath aggregation = TablePath.of(DATABASE, "aggregation");
        Schema aggSchema = mergeSchema(true);
        RowType aggType = aggSchema.getRowType();
        step("create aggregation table", admin.createTable(aggregation, TableDescriptor.builder().schema(aggSchema)
                .distributedBy(1).property("table.merge-engine", "aggregation").build(), false));
        try (Table table = connection.getTable(aggregation)) {
            UpsertWriter writer = table.newUpsert().createWriter();
            List<CompletableFuture<?>> futures = new ArrayList<>();
            futures.add(writer.upsert(GenericRow.of(r4(1, 10L, 3, "x"))));
            futures.add(writer.upsert(GenericRow.of(r4(1, 5L, 9, null))));
            futures.add(writer.upsert(GenericRow.of(r4(1, null, 1, "y"))));
            futures.add(writer.delete(GenericRow.of(r4(1, null, null, null))));
            step("flush", CompletableFuture.runAsync(writer::flush));
            for (int i = 0; i < futures.size(); i++) {
                step("aggregation write " + i, futures.get(i));
            }
            assertEquals(List.of("+I [1, 10, 3, x]", "-U [1, 10, 3, x]", "+U [1, 15, 9, x]",
                            "-U [1, 15, 9, x]", "+U [1, 15, 9, y]"),
                    changelogOf(table, aggType, 5));
            assertEquals(Arrays.asList(1, 15L, 9, "y"), lookupRow(table, aggType, 1));

            // MergeMode.OVERWRITE (PutKv agg_mode=1) bypasses the aggregation: the row is
            // replaced, and a delete is allowed (KvTablet's overwriteRowMerger, DeleteBehavior
            // ALLOW).
            UpsertWriter overwrite = table.newUpsert().mergeMode(MergeMode.OVERWRITE).createWriter();
            step("overwrite upsert", overwrite.upsert(GenericRow.of(r4(1, 100L, 1, "o"))));
            step("overwrite upsert of a new key", overwrite.upsert(GenericRow.of(r4(2, 7L, null, null))));
            CompletableFuture<DeleteResult> delete = overwrite.delete(GenericRow.of(r4(2, null, null, null)));
            step("flush", CompletableFuture.runAsync(overwrite::flush));
            step("overwrite delete", delete);
            assertEquals(List.of("+I [1, 10, 3, x]", "-U [1, 10, 3, x]", "+U [1, 15, 9, x]",
                            "-U [1, 15, 9, x]", "+U [1, 15, 9, y]", "-U [1, 15, 9, y]", "+U [1, 100, 1, o]",
                            "+I [2, 7, null, null]", "-D [2, 7, null, null]"),
                    changelogOf(table, aggType, 9));
            assertEquals(Arrays.asList(1, 100L, 1, "o"), lookupRow(table, aggType, 1));
            assertNull(lookupRow(table, aggType, 2));
        }
    }

    /**
     * Proves the WAL changelog image ({@code table.changelog.image} = {@code WAL}, Fluss 0.9+)
     * through the Java client: with the default merge engine and full-row writes, both an insert
     * and an update emit only {@code +U new}, a delete emits {@code -D old}, a delete of an absent
     * key emits nothing, and lookups see the current rows.
     */
    @Test
    void walChangelogImage() throws Exception {
        TablePath path = TablePath.of(DATABASE, "wal");
        Schema schema = mergeSchema(false);
        RowType rowType = schema.getRowType();
        step("create WAL table", admin.createTable(path, TableDescriptor.builder().schema(schema)
                .distributedBy(1).property("table.changelog.image", "WAL").build(), false));
        try (Table table = connection.getTable(path)) {
            writeRows(table, List.of(r(1, 1L, "a"), r(2, 2L, "b"), r(1, 3L, "c"), new Object[] {2}, new Object[] {9}));
            assertEquals(List.of("+U [1, 1, a]", "+U [2, 2, b]", "+U [1, 3, c]", "-D [2, 2, b]"),
                    changelogOf(table, rowType, 4));
            assertEquals(Arrays.asList(1, 3L, "c"), lookupRow(table, rowType, 1));
            assertNull(lookupRow(table, rowType, 2));
        }
    }

    /**
     * Proves GetTableStats of a WAL-image table fails as in Fluss: the row count is not kept
     * under WAL, and Fluss 0.9.1 answers each bucket with error 15 (InvalidTableException, "Row
     * count is disabled for this table ...", from {@code KvTablet.getRowCount} via {@code
     * ReplicaManager.getTableStats}), which the client raises.
     */
    @Test
    void walTableStatsAreRefused() throws Exception {
        TablePath path = TablePath.of(DATABASE, "wal_stats");
        step("create WAL table", admin.createTable(path, TableDescriptor.builder().schema(mergeSchema(false))
                .distributedBy(1).property("table.changelog.image", "WAL").build(), false));
        try (Table table = connection.getTable(path)) {
            writeRows(table, List.<Object[]>of(r(1, 1L, "a")));
        }
        Throwable stats = stepError("table stats of a WAL table", admin.getTableStats(path));
        assertInstanceOf(InvalidTableException.class, stats, "GetTableStats of a WAL table: " + stats);
    }

    /**
     * Proves {@code newLookup().enableInsertIfNotExists()} as Fluss 0.9.1 serves it ({@code
     * ReplicaManager.lookups} with {@code insert_if_not_exists}): on a table without an
     * auto-increment column, a lookup of an absent key inserts a key-only row (every non-key
     * column null; a PutKv with the primary key as target columns) and returns it, a lookup of a
     * present key returns the row unchanged, and the changelog shows one {@code +I} per inserted
     * key.
     */
    @Test
    void lookupInsertIfNotExists() throws Exception {
        TablePath path = TablePath.of(DATABASE, "insert_if_not_exists");
        Schema schema = mergeSchema(false);
        RowType rowType = schema.getRowType();
        step("create table", admin.createTable(path, TableDescriptor.builder().schema(schema)
                .distributedBy(1).build(), false));
        try (Table table = connection.getTable(path)) {
            writeRows(table, List.<Object[]>of(r(1, 1L, "present")));
            Lookuper lookuper = table.newLookup().enableInsertIfNotExists().createLookuper();
            InternalRow present = step("insert-if-not-exists lookup of a present key",
                    lookuper.lookup(GenericRow.of(1))).getSingletonRow();
            assertEquals(Arrays.asList(1, 1L, "present"), read(present, rowType));
            InternalRow inserted = step("insert-if-not-exists lookup of an absent key",
                    lookuper.lookup(GenericRow.of(2))).getSingletonRow();
            assertNotNull(inserted, "the absent key was not inserted");
            assertEquals(Arrays.asList(2, null, null), read(inserted, rowType));
            assertEquals(Arrays.asList(2, null, null), lookupRow(table, rowType, 2));
            assertEquals(List.of("+I [1, 1, present]", "+I [2, null, null]"), changelogOf(table, rowType, 2));
        }
    }

    /**
     * Proves a limit scan with a large limit returns the bucket's rows, as in Fluss 0.9.1, whose
     * LimitScan has no upper bound on {@code limit} ({@code TabletService.limitScan} → {@code
     * Replica.limitKvScan(limit)} → {@code KvTablet.limitScan}); the Flink connector pushes any
     * SQL {@code LIMIT n} down to it ({@code FlinkTableSource.applyLimit}, {@code
     * PushdownUtils.limitScan}).
     */
    @Test
    void limitScanWithALargeLimit() throws Exception {
        TablePath path = TablePath.of(DATABASE, "large_limit");
        Schema schema = mergeSchema(false);
        step("create table", admin.createTable(path, TableDescriptor.builder().schema(schema)
                .distributedBy(1).build(), false));
        try (Table table = connection.getTable(path)) {
            writeRows(table, List.of(r(1, 1L, "a"), r(2, 2L, "b")));
            long tableId = table.getTableInfo().getTableId();
            List<List<Object>> rows = limitScan(table, new TableBucket(tableId, 0), 2_000_000, null, schema.getRowType());
            assertEquals(Set.of(Arrays.asList(1, 1L, "a"), Arrays.asList(2, 2L, "b")), new HashSet<>(rows));
        }
    }

    // ---------------------------------------------------------------- refusals

    /**
     * Proves the server-side refusals a user of PK tables meets reach the Java client as Fluss's
     * exceptions and change nothing: a delete on a table with {@code table.delete.behavior} =
     * {@code disable} fails its own future with DeletionDisabledException while the row stays; a
     * primary key of an ARRAY column is refused with InvalidTableException.
     */
    @Test
    void refusalsGetFlussExceptions() throws Exception {
        TablePath path = TablePath.of(DATABASE, "no_delete");
        Schema schema = mergeSchema(false);
        step("create table", admin.createTable(path, TableDescriptor.builder().schema(schema)
                .distributedBy(1).property("table.delete.behavior", "disable").build(), false));
        try (Table table = connection.getTable(path)) {
            UpsertWriter writer = table.newUpsert().createWriter();
            // Separate batches: a refused delete fails its whole KV batch, as in Fluss
            // (KvTablet.processDeletion throws for the batch).
            step("upsert", writer.upsert(GenericRow.of(r(1, 1L, "kept"))));
            CompletableFuture<DeleteResult> delete = writer.delete(GenericRow.of(r(1, null, null)));
            step("flush", CompletableFuture.runAsync(writer::flush));
            assertInstanceOf(DeletionDisabledException.class, stepError("delete with deletes disabled", delete));
            // The writer still works after the refusal.
            step("upsert after the refusal", writer.upsert(GenericRow.of(r(2, 2L, "later"))));
            assertEquals(Arrays.asList(2, 2L, "later"), lookupRow(table, schema.getRowType(), 2));
            assertEquals(Arrays.asList(1, 1L, "kept"), lookupRow(table, schema.getRowType(), 1));
        }

        Schema arrayKey = Schema.newBuilder()
                .column("k", DataTypes.ARRAY(DataTypes.INT()).copy(false))
                .column("v", DataTypes.STRING())
                .primaryKey("k")
                .build();
        assertInstanceOf(InvalidTableException.class, stepError("create a table keyed by an ARRAY",
                admin.createTable(TablePath.of(DATABASE, "array_key"),
                        TableDescriptor.builder().schema(arrayKey).distributedBy(1).build(), false)));
    }

    // ---------------------------------------------------------------- helpers

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
