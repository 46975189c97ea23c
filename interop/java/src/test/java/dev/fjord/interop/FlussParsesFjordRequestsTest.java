package dev.fjord.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import org.apache.fluss.rpc.messages.ApiMessage;
import org.apache.fluss.rpc.messages.CreateTableRequest;
import org.apache.fluss.rpc.messages.FetchLogRequest;
import org.apache.fluss.rpc.messages.InitWriterRequest;
import org.apache.fluss.rpc.messages.ListOffsetsRequest;
import org.apache.fluss.rpc.messages.MetadataRequest;
import org.apache.fluss.rpc.messages.PbFetchLogReqForBucket;
import org.apache.fluss.rpc.messages.PbFetchLogReqForTable;
import org.apache.fluss.rpc.messages.PbProduceLogReqForBucket;
import org.apache.fluss.rpc.messages.PbTablePath;
import org.apache.fluss.rpc.messages.ProduceLogRequest;
import org.apache.fluss.shaded.netty4.io.netty.buffer.ByteBuf;
import org.apache.fluss.shaded.netty4.io.netty.buffer.Unpooled;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Apache Fluss Java server's own request parser reads the requests Fjord's native client
 * encodes, every field in its place.
 *
 * <p>The bodies come from the {@code dump_requests} example of {@code fjord-proto} (built and run
 * here with {@code cargo run}, honouring {@code CARGO_TARGET_DIR}), which encodes them through the
 * very functions the client sends with: the chunked ProduceLog encoder, which writes each bucket's
 * {@code records} after the bucket's other fields, and {@code encode_request} for the rest. Each is
 * parsed with the generated message class and the {@code parseFrom(ByteBuf, size)} call Fluss's
 * {@code NettyServerHandler} uses, and every field value the example wrote is asserted. The
 * expected values below mirror the constants of {@code crates/fjord-proto/examples/dump_requests.rs};
 * the two change together.
 */
class FlussParsesFjordRequestsTest {
    /**
     * Bounds the cargo build and run of the example (a cold build compiles fjord-proto and its
     * dependencies on a small machine), so a stuck build fails the suite instead of hanging it.
     */
    private static final long DUMP_TIMEOUT_SECONDS = 900;

    /** A Fluss request header after the length prefix: api key, api version, request id. */
    private static final int REQUEST_HEADER_BYTES = 2 + 2 + 4;

    private static final long TABLE_ID = 0x1234_5678_9abcL;
    private static final long PARTITION_ID = 1_000_000_007L;
    private static final int PARTITIONED_BUCKET = 7;
    private static final int PLAIN_BUCKET = 2;
    private static final int LARGE_RECORDS_LEN = 600;
    private static final byte[] SMALL_RECORDS =
            "fjord-inline-records".getBytes(StandardCharsets.UTF_8);
    private static final String DATABASE = "fjord_db";
    private static final String TABLE = "orders_log";
    private static final String TABLE_JSON =
            "{\"version\":1,\"schema\":{\"version\":1,\"columns\":[{\"name\":\"id\",\"data_type\":"
                    + "{\"type\":\"BIGINT\"}}]},\"partition_key\":[],\"bucket_count\":3,"
                    + "\"properties\":{},\"custom_properties\":{}}";

    private static Path dumpDir;

    @BeforeAll
    static void dumpRequests() throws IOException, InterruptedException {
        Path repo = repositoryRoot();
        dumpDir = Files.createTempDirectory("fjord-dump-requests-");
        Path log = Files.createTempFile("fjord-dump-requests-", ".log");
        try {
            Process cargo =
                    new ProcessBuilder(
                                    "cargo",
                                    "run",
                                    "-q",
                                    "-p",
                                    "fjord-proto",
                                    "--example",
                                    "dump_requests",
                                    "--",
                                    dumpDir.toString())
                            .directory(repo.toFile())
                            .redirectErrorStream(true)
                            .redirectOutput(log.toFile())
                            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                            .start();
            if (!cargo.waitFor(DUMP_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                cargo.destroyForcibly().waitFor();
                throw new IllegalStateException(
                        "`cargo run --example dump_requests` did not finish within "
                                + DUMP_TIMEOUT_SECONDS
                                + "s\n--- cargo output ---\n"
                                + Files.readString(log, StandardCharsets.UTF_8));
            }
            if (cargo.exitValue() != 0) {
                throw new IllegalStateException(
                        "`cargo run --example dump_requests` in "
                                + repo
                                + " failed (exit code "
                                + cargo.exitValue()
                                + ")\n--- cargo output ---\n"
                                + Files.readString(log, StandardCharsets.UTF_8));
            }
        } finally {
            Files.deleteIfExists(log);
        }
    }

    @AfterAll
    static void deleteDump() throws IOException {
        if (dumpDir == null || !Files.exists(dumpDir)) {
            return;
        }
        try (var paths = Files.walk(dumpDir)) {
            for (Path p : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
                Files.deleteIfExists(p);
            }
        }
    }

    /**
     * The Cargo workspace this Maven project lives in: the nearest directory at or above the
     * working directory (Maven's project directory) holding {@code crates/fjord-proto}.
     */
    private static Path repositoryRoot() {
        Path start = Path.of(System.getProperty("user.dir")).toAbsolutePath();
        for (Path dir = start; dir != null; dir = dir.getParent()) {
            if (Files.isRegularFile(dir.resolve("Cargo.toml"))
                    && Files.isRegularFile(dir.resolve("crates/fjord-proto/Cargo.toml"))) {
                return dir;
            }
        }
        throw new IllegalStateException(
                "no Fjord workspace (Cargo.toml with crates/fjord-proto) at or above " + start);
    }

    /**
     * Parses the body in {@code file} into {@code message} the way Fluss's {@code
     * NettyServerHandler} does: from a buffer holding the whole frame, after reading the length
     * prefix and header, bounded by the size the length prefix gives. Asserts that the parser
     * consumed exactly the body.
     */
    private static <T extends ApiMessage> T parse(String file, T message) throws IOException {
        byte[] body = Files.readAllBytes(dumpDir.resolve(file));
        ByteBuf frame = Unpooled.buffer(4 + REQUEST_HEADER_BYTES + body.length);
        frame.writeInt(REQUEST_HEADER_BYTES + body.length);
        // The header's values do not reach the parser; the server picks the class by api key.
        frame.writeZero(REQUEST_HEADER_BYTES);
        frame.writeBytes(body);

        int frameLength = frame.readInt();
        frame.skipBytes(REQUEST_HEADER_BYTES);
        message.parseFrom(frame, frameLength - REQUEST_HEADER_BYTES);
        assertEquals(0, frame.readableBytes(), file + ": bytes left after the message");
        return message;
    }

    /** The large records payload: byte {@code i} is {@code (7 i + 3) mod 256}. */
    private static byte[] largeRecords() {
        byte[] records = new byte[LARGE_RECORDS_LEN];
        for (int i = 0; i < records.length; i++) {
            records[i] = (byte) (i * 7 + 3);
        }
        return records;
    }

    private static void assertTablePath(PbTablePath path) {
        assertTrue(path.hasDatabaseName() && path.hasTableName(), "table path fields present");
        assertEquals(DATABASE, path.getDatabaseName());
        assertEquals(TABLE, path.getTableName());
    }

    @Test
    void produceLogWithRecordsLastParsesIntoEveryField() throws IOException {
        ProduceLogRequest request = parse("produce_log.bin", new ProduceLogRequest());
        assertTrue(request.hasAcks() && request.hasTableId() && request.hasTimeoutMs());
        assertEquals(-1, request.getAcks());
        assertEquals(TABLE_ID, request.getTableId());
        assertEquals(30_123, request.getTimeoutMs());
        assertEquals(2, request.getBucketsReqsCount());

        PbProduceLogReqForBucket partitioned = request.getBucketsReqAt(0);
        assertTrue(partitioned.hasPartitionId(), "first bucket's partition id");
        assertEquals(PARTITION_ID, partitioned.getPartitionId());
        assertEquals(PARTITIONED_BUCKET, partitioned.getBucketId());
        assertTrue(partitioned.hasRecords(), "first bucket's records");
        assertEquals(LARGE_RECORDS_LEN, partitioned.getRecordsSize());
        assertArrayEquals(largeRecords(), partitioned.getRecords());

        PbProduceLogReqForBucket plain = request.getBucketsReqAt(1);
        assertFalse(plain.hasPartitionId(), "second bucket has no partition id");
        assertEquals(PLAIN_BUCKET, plain.getBucketId());
        assertTrue(plain.hasRecords(), "second bucket's records");
        assertArrayEquals(SMALL_RECORDS, plain.getRecords());
    }

    @Test
    void fetchLogParsesIntoEveryField() throws IOException {
        FetchLogRequest request = parse("fetch_log.bin", new FetchLogRequest());
        assertEquals(-1, request.getFollowerServerId());
        assertEquals(16_777_219, request.getMaxBytes());
        assertTrue(request.hasMaxWaitMs() && request.hasMinBytes());
        assertEquals(517, request.getMaxWaitMs());
        assertEquals(3, request.getMinBytes());
        assertEquals(1, request.getTablesReqsCount());

        PbFetchLogReqForTable table = request.getTablesReqAt(0);
        assertEquals(TABLE_ID, table.getTableId());
        assertTrue(table.isProjectionPushdownEnabled());
        assertArrayEquals(new int[] {0, 2, 5}, table.getProjectedFields());
        assertEquals(2, table.getBucketsReqsCount());

        PbFetchLogReqForBucket partitioned = table.getBucketsReqAt(0);
        assertTrue(partitioned.hasPartitionId(), "first bucket's partition id");
        assertEquals(PARTITION_ID, partitioned.getPartitionId());
        assertEquals(PARTITIONED_BUCKET, partitioned.getBucketId());
        assertEquals(9_876_543_210L, partitioned.getFetchOffset());
        assertEquals(1_048_579, partitioned.getMaxFetchBytes());

        PbFetchLogReqForBucket plain = table.getBucketsReqAt(1);
        assertFalse(plain.hasPartitionId(), "second bucket has no partition id");
        assertEquals(PLAIN_BUCKET, plain.getBucketId());
        assertEquals(12, plain.getFetchOffset());
        assertEquals(1_048_581, plain.getMaxFetchBytes());
    }

    @Test
    void initWriterParsesItsTablePath() throws IOException {
        InitWriterRequest request = parse("init_writer.bin", new InitWriterRequest());
        assertEquals(1, request.getTablePathsCount());
        assertTablePath(request.getTablePathAt(0));
    }

    @Test
    void metadataParsesTablePathsAndPackedPartitionIds() throws IOException {
        MetadataRequest request = parse("metadata.bin", new MetadataRequest());
        assertEquals(1, request.getTablePathsCount());
        assertTablePath(request.getTablePathAt(0));
        assertEquals(0, request.getPartitionsPathsCount());
        assertArrayEquals(new long[] {PARTITION_ID, 42}, request.getPartitionsIds());
    }

    @Test
    void listOffsetsParsesIntoEveryField() throws IOException {
        ListOffsetsRequest request = parse("list_offsets.bin", new ListOffsetsRequest());
        assertEquals(-1, request.getFollowerServerId());
        assertEquals(2, request.getOffsetType());
        assertEquals(TABLE_ID, request.getTableId());
        assertTrue(request.hasPartitionId(), "partition id");
        assertEquals(PARTITION_ID, request.getPartitionId());
        assertArrayEquals(
                new int[] {PARTITIONED_BUCKET, 0, PLAIN_BUCKET}, request.getBucketIds());
        assertTrue(request.hasStartTimestamp(), "start timestamp");
        assertEquals(1_764_547_200_123L, request.getStartTimestamp());
    }

    @Test
    void createTableParsesPathJsonAndFlag() throws IOException {
        CreateTableRequest request = parse("create_table.bin", new CreateTableRequest());
        assertTrue(request.hasTablePath() && request.hasTableJson() && request.hasIgnoreIfExists());
        assertTablePath(request.getTablePath());
        assertEquals(TABLE_JSON, new String(request.getTableJson(), StandardCharsets.UTF_8));
        assertTrue(request.isIgnoreIfExists());
    }
}
