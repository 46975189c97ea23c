"""psycopg 3 (PyPI) against `fjord server --pg-listen`: Flink DDL and
INSERT over the Postgres protocol, parameters bound by the extended
protocol, every column kind arriving as its Python type, a large result
streamed row by row, and an error that leaves the connection usable.
"""

import datetime
import decimal

import psycopg
import pytest

# Rows of the streamed table: enough for many Arrow batches and pgwire
# flushes, small enough to write quickly.
BIG_ROWS = 200_000


def connect(server):
    host, port = server.endpoint("postgres").rsplit(":", 1)
    # No users configured: loopback accepts any user without a password.
    return psycopg.connect(
        host=host, port=int(port), user="pytest", dbname="fjord", autocommit=True
    )


@pytest.fixture(scope="module")
def conn(fjord_sql_server):
    with connect(fjord_sql_server) as c:
        c.execute("CREATE DATABASE IF NOT EXISTS pyshop")
        yield c


def test_every_column_kind_arrives_as_its_python_type(conn):
    conn.execute(
        """CREATE TABLE pyshop.kinds (
            b BOOLEAN, ti TINYINT, si SMALLINT, i INT, bi BIGINT,
            f FLOAT, d DOUBLE, dec DECIMAL(10, 2), s STRING, c CHAR(3),
            by BYTES, dt DATE, tm TIME, ts TIMESTAMP(3), ltz TIMESTAMP_LTZ(3)
        ) WITH ('bucket.num' = '1')"""
    )
    cur = conn.execute(
        """INSERT INTO pyshop.kinds VALUES
            (true, 1, 2, 3, 4, 1.5, 2.25, 3.50, 'tea', 'abc', X'00ff',
             DATE '2026-01-02', TIME '12:34:56', TIMESTAMP '2026-01-02 03:04:05.678',
             TIMESTAMP '2026-01-02 03:04:05.678'),
            (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
             NULL, NULL, NULL, NULL)"""
    )
    assert cur.rowcount == 2
    rows = conn.execute("SELECT * FROM pyshop.kinds ORDER BY i NULLS LAST").fetchall()
    assert len(rows) == 2
    first = rows[0]
    expected = (
        True,
        1,
        2,
        3,
        4,
        1.5,
        2.25,
        decimal.Decimal("3.50"),
        "tea",
        "abc",
        b"\x00\xff",
        datetime.date(2026, 1, 2),
        datetime.time(12, 34, 56),
        datetime.datetime(2026, 1, 2, 3, 4, 5, 678000),
    )
    assert first[:14] == expected
    # TIMESTAMP_LTZ is an instant: an aware datetime at that instant (UTC).
    ltz = first[14]
    assert ltz.tzinfo is not None
    assert ltz == datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)
    assert rows[1] == (None,) * 15
    for value, kind in zip(first, [bool, int, int, int, int, float, float, decimal.Decimal,
                                   str, str, bytes, datetime.date, datetime.time,
                                   datetime.datetime, datetime.datetime]):
        assert isinstance(value, kind), (value, kind)


def test_parameters_are_bound_server_side(conn):
    conn.execute(
        "CREATE TABLE pyshop.orders (id BIGINT, item STRING, qty INT, "
        "PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '2')"
    )
    conn.execute("INSERT INTO pyshop.orders VALUES (1, 'tea', 2), (2, 'cake', 1), (3, 'tea', 5)")
    cur = conn.cursor()
    # The extended protocol: Parse with $1/$2, Bind with the values.
    cur.execute(
        "SELECT id, qty FROM pyshop.orders WHERE item = %s AND qty >= %s ORDER BY id",
        ("tea", 2),
    )
    assert cur.fetchall() == [(1, 2), (3, 5)]
    cur.execute("SELECT item FROM pyshop.orders WHERE id = %s", (2,))
    assert cur.fetchall() == [("cake",)]
    # Text that would break a query built by string concatenation.
    cur.execute("SELECT count(*) FROM pyshop.orders WHERE item = %s", ("x'; DROP TABLE y; --",))
    assert cur.fetchone() == (0,)
    # Prepared once, executed many times.
    for id_, item in [(1, "tea"), (2, "cake"), (3, "tea")]:
        cur.execute("SELECT item FROM pyshop.orders WHERE id = %s", (id_,), prepare=True)
        assert cur.fetchone() == (item,)


def test_a_large_result_is_streamed(conn):
    conn.execute("CREATE TABLE pyshop.big (id BIGINT, name STRING) WITH ('bucket.num' = '2')")
    cur = conn.execute(
        f"INSERT INTO pyshop.big SELECT value, concat('row-', CAST(value AS VARCHAR)) "
        f"FROM range({BIG_ROWS})"
    )
    assert cur.rowcount == BIG_ROWS
    count = 0
    total = 0
    # cursor.stream: libpq's single-row mode, rows handled as they arrive.
    for id_, name in conn.cursor().stream("SELECT id, name FROM pyshop.big"):
        assert name == f"row-{id_}"
        count += 1
        total += id_
    assert count == BIG_ROWS
    assert total == BIG_ROWS * (BIG_ROWS - 1) // 2


def test_an_error_is_reported_and_the_connection_goes_on(conn):
    with pytest.raises(psycopg.Error) as failed:
        conn.execute("SELECT nope FROM pyshop.orders")
    assert "nope" in str(failed.value)
    # 42703: undefined_column, what Postgres answers.
    assert failed.value.sqlstate == "42703"
    with pytest.raises(psycopg.Error) as failed:
        conn.execute("ALTER TABLE pyshop.orders RENAME TO x")
    assert "unsupported" in str(failed.value)
    assert conn.execute("SELECT 1").fetchone() == (1,)
