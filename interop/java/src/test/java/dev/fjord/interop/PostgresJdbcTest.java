package dev.fjord.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.Date;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Postgres JDBC driver (org.postgresql:postgresql from Maven) against {@code fjord server
 * --pg-listen}: password authentication against the server's {@code sql.users}, the metadata a
 * tool reads on connect (DBeaver, BI tools: {@code getTables}, {@code getColumns}), prepared
 * statements with parameters of several types, every column kind read back value by value, a
 * large result read through a cursor with a fetch size, and an error with Postgres's SQLState.
 *
 * <p>The driver speaks the extended protocol for every statement (Parse/Bind/Execute), sends
 * {@code SET extra_float_digits} and its own session settings on connect, and answers the
 * metadata calls by querying {@code pg_catalog}.
 */
@Timeout(120)
class PostgresJdbcTest {
    private static final String USER = "alice";
    private static final String PASSWORD = "s3cret";
    /** Enough rows for many fetches of {@link #FETCH_SIZE} and many Arrow batches. */
    private static final int BIG_ROWS = 50_000;

    private static final int FETCH_SIZE = 1_000;

    private static FjordServer server;

    @BeforeAll
    static void startServer() throws Exception {
        server =
                FjordServer.start(
                        "--pg-listen", "127.0.0.1:0", "--set", "sql.users=" + USER + ":" + PASSWORD);
        try (Connection c = connect(); Statement s = c.createStatement()) {
            s.execute("CREATE DATABASE IF NOT EXISTS jdbcshop");
        }
    }

    @AfterAll
    static void stopServer() throws Exception {
        if (server != null) {
            try {
                assertEquals(0, server.stop(), server.stderr());
            } finally {
                server.close();
            }
        }
    }

    private static String url() {
        return "jdbc:postgresql://" + server.endpoint("postgres") + "/fjord";
    }

    private static Connection connect() throws SQLException {
        return DriverManager.getConnection(url(), USER, PASSWORD);
    }

    @Test
    void aWrongPasswordIsRefusedWithItsSqlState() {
        for (String[] who : new String[][] {{USER, "wrong"}, {"bob", PASSWORD}}) {
            SQLException e =
                    assertThrows(
                            SQLException.class,
                            () -> DriverManager.getConnection(url(), who[0], who[1]).close());
            assertEquals("28P01", e.getSQLState(), e.toString());
        }
    }

    @Test
    void metadataListsTablesAndColumns() throws Exception {
        try (Connection c = connect(); Statement s = c.createStatement()) {
            s.execute(
                    "CREATE TABLE jdbcshop.meta (id BIGINT, name STRING, price DECIMAL(10, 2),"
                            + " day DATE) WITH ('bucket.num' = '1')");
            DatabaseMetaData md = c.getMetaData();
            assertEquals("PostgreSQL", md.getDatabaseProductName());

            List<String> schemas = new ArrayList<>();
            try (ResultSet rs = md.getSchemas()) {
                while (rs.next()) {
                    schemas.add(rs.getString("TABLE_SCHEM"));
                }
            }
            assertTrue(schemas.contains("jdbcshop"), schemas.toString());

            List<String> tables = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, "jdbcshop", "%", new String[] {"TABLE"})) {
                while (rs.next()) {
                    assertEquals("jdbcshop", rs.getString("TABLE_SCHEM"));
                    assertEquals("TABLE", rs.getString("TABLE_TYPE"));
                    tables.add(rs.getString("TABLE_NAME"));
                }
            }
            assertTrue(tables.contains("meta"), tables.toString());

            List<String> columns = new ArrayList<>();
            List<String> types = new ArrayList<>();
            try (ResultSet rs = md.getColumns(null, "jdbcshop", "meta", "%")) {
                while (rs.next()) {
                    columns.add(rs.getString("COLUMN_NAME"));
                    types.add(rs.getString("TYPE_NAME"));
                }
            }
            assertEquals(List.of("id", "name", "price", "day"), columns);
            assertEquals(List.of("int8", "text", "numeric", "date"), types);
        }
    }

    @Test
    void preparedStatementsBindParametersOfSeveralTypes() throws Exception {
        try (Connection c = connect(); Statement s = c.createStatement()) {
            s.execute(
                    "CREATE TABLE jdbcshop.orders (id BIGINT, item STRING, qty INT, price DOUBLE,"
                            + " day DATE, ok BOOLEAN, PRIMARY KEY (id) NOT ENFORCED)"
                            + " WITH ('bucket.num' = '2')");
            s.execute(
                    "INSERT INTO jdbcshop.orders VALUES"
                            + " (1, 'tea', 2, 3.5, DATE '2026-01-02', true),"
                            + " (2, 'cake', 1, 4.25, DATE '2026-01-03', false),"
                            + " (3, 'tea', 5, 1.0, DATE '2026-01-04', true)");
            try (PreparedStatement ps =
                    c.prepareStatement(
                            "SELECT id FROM jdbcshop.orders WHERE item = ? AND qty >= ?"
                                    + " AND price > ? AND day >= ? AND ok = ? ORDER BY id")) {
                ps.setString(1, "tea");
                ps.setInt(2, 2);
                ps.setDouble(3, 0.5);
                ps.setDate(4, Date.valueOf("2026-01-01"));
                ps.setBoolean(5, true);
                assertEquals(List.of(1L, 3L), ids(ps));
                // The same statement again with other values (the driver switches to a named,
                // server-side prepared statement after a few executions).
                for (int i = 0; i < 6; i++) {
                    ps.setString(1, "cake");
                    ps.setInt(2, 1);
                    ps.setDouble(3, 4.0);
                    ps.setDate(4, Date.valueOf("2026-01-03"));
                    ps.setBoolean(5, false);
                    assertEquals(List.of(2L), ids(ps));
                }
            }
            // Text that would break a query built by concatenation is only a value.
            try (PreparedStatement ps =
                    c.prepareStatement("SELECT id FROM jdbcshop.orders WHERE item = ?")) {
                ps.setString(1, "x'; DROP TABLE y; --");
                assertEquals(List.of(), ids(ps));
            }
            // The point lookup on the whole primary key, by a long parameter.
            try (PreparedStatement ps =
                    c.prepareStatement("SELECT item, qty FROM jdbcshop.orders WHERE id = ?")) {
                ps.setLong(1, 2L);
                try (ResultSet rs = ps.executeQuery()) {
                    assertTrue(rs.next());
                    assertEquals("cake", rs.getString(1));
                    assertEquals(1, rs.getInt(2));
                    assertFalse(rs.next());
                }
            }
        }
    }

    private static List<Long> ids(PreparedStatement ps) throws SQLException {
        List<Long> out = new ArrayList<>();
        try (ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                out.add(rs.getLong(1));
            }
        }
        return out;
    }

    @Test
    void everyColumnKindReadsBackAsWritten() throws Exception {
        try (Connection c = connect(); Statement s = c.createStatement()) {
            s.execute(
                    "CREATE TABLE jdbcshop.kinds (b BOOLEAN, ti TINYINT, si SMALLINT, i INT,"
                            + " bi BIGINT, f FLOAT, d DOUBLE, dec DECIMAL(10, 2), s STRING,"
                            + " c CHAR(3), by BYTES, dt DATE, tm TIME, ts TIMESTAMP(3),"
                            + " ltz TIMESTAMP_LTZ(3)) WITH ('bucket.num' = '1')");
            int inserted =
                    s.executeUpdate(
                            "INSERT INTO jdbcshop.kinds VALUES"
                                    + " (true, 1, 2, 3, 4, 1.5, 2.25, 3.50, 'tea', 'abc', X'00ff',"
                                    + " DATE '2026-01-02', TIME '12:34:56',"
                                    + " TIMESTAMP '2026-01-02 03:04:05.678',"
                                    + " TIMESTAMP '2026-01-02 03:04:05.678'),"
                                    + " (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
                                    + " NULL, NULL, NULL, NULL, NULL)");
            assertEquals(2, inserted);
            try (ResultSet rs = s.executeQuery("SELECT * FROM jdbcshop.kinds ORDER BY i NULLS LAST")) {
                assertEquals(15, rs.getMetaData().getColumnCount());
                assertTrue(rs.next());
                assertEquals(true, rs.getBoolean("b"));
                assertEquals(1, rs.getInt("ti"));
                assertEquals(2, rs.getShort("si"));
                assertEquals(3, rs.getInt("i"));
                assertEquals(4L, rs.getLong("bi"));
                assertEquals(1.5f, rs.getFloat("f"));
                assertEquals(2.25, rs.getDouble("d"));
                assertEquals(new BigDecimal("3.50"), rs.getBigDecimal("dec"));
                assertEquals("tea", rs.getString("s"));
                assertEquals("abc", rs.getString("c"));
                assertArrayEquals(new byte[] {0x00, (byte) 0xff}, rs.getBytes("by"));
                assertEquals(LocalDate.of(2026, 1, 2), rs.getObject("dt", LocalDate.class));
                assertEquals(LocalTime.of(12, 34, 56), rs.getObject("tm", LocalTime.class));
                assertEquals(
                        LocalDateTime.of(2026, 1, 2, 3, 4, 5, 678_000_000),
                        rs.getObject("ts", LocalDateTime.class));
                // TIMESTAMP_LTZ is an instant: the same instant (UTC).
                assertEquals(
                        java.time.OffsetDateTime.of(
                                        2026, 1, 2, 3, 4, 5, 678_000_000, java.time.ZoneOffset.UTC)
                                .toInstant(),
                        rs.getObject("ltz", java.time.OffsetDateTime.class).toInstant());
                assertTrue(rs.next());
                for (int col = 1; col <= 15; col++) {
                    assertNull(rs.getObject(col), "column " + col + " of the NULL row");
                }
                assertFalse(rs.next());
            }
        }
    }

    @Test
    void aLargeResultIsReadThroughACursor() throws Exception {
        try (Connection c = connect(); Statement s = c.createStatement()) {
            s.execute(
                    "CREATE TABLE jdbcshop.big (id BIGINT, name STRING) WITH ('bucket.num' = '2')");
            assertEquals(
                    BIG_ROWS,
                    s.executeUpdate(
                            "INSERT INTO jdbcshop.big SELECT value, concat('row-', CAST(value AS"
                                    + " VARCHAR)) FROM range("
                                    + BIG_ROWS
                                    + ")"));
        }
        try (Connection c = connect()) {
            // The driver reads through a portal, FETCH_SIZE rows per Execute, only inside a
            // transaction (autocommit off) and with a fetch size.
            c.setAutoCommit(false);
            try (Statement s = c.createStatement()) {
                s.setFetchSize(FETCH_SIZE);
                long count = 0;
                long total = 0;
                try (ResultSet rs = s.executeQuery("SELECT id, name FROM jdbcshop.big")) {
                    while (rs.next()) {
                        long id = rs.getLong(1);
                        assertEquals("row-" + id, rs.getString(2));
                        count++;
                        total += id;
                    }
                }
                assertEquals(BIG_ROWS, count);
                assertEquals((long) BIG_ROWS * (BIG_ROWS - 1) / 2, total);
            }
            c.commit();
        }
    }

    @Test
    void anUnknownTableIsUndefinedTableAndTheConnectionGoesOn() throws Exception {
        try (Connection c = connect(); Statement s = c.createStatement()) {
            SQLException e =
                    assertThrows(
                            SQLException.class, () -> s.executeQuery("SELECT * FROM jdbcshop.nope"));
            // 42P01: undefined_table, what Postgres answers.
            assertEquals("42P01", e.getSQLState(), e.toString());
            assertTrue(e.getMessage().contains("nope"), e.getMessage());
            try (ResultSet rs = s.executeQuery("SELECT 1")) {
                assertTrue(rs.next());
                assertEquals(1, rs.getInt(1));
            }
        }
    }
}
