"""The ADBC Flight SQL driver (PyPI adbc-driver-flightsql) against `fjord
server --flight-sql-listen`: statements over Flight SQL, a query answering
a pyarrow table equal to what was written, basic auth when users are
configured, and the refusal to serve without users off loopback.
"""

import datetime
import decimal
import subprocess
import tempfile

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pytest

from conftest import FjordServer, _fjord_bin


def uri(server):
    return "grpc://" + server.endpoint("flight sql")


def run(conn, sql):
    """Runs one statement; answers its result as a pyarrow table."""
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def test_a_query_answers_the_table_written(fjord_sql_server):
    expected = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "name": pa.array(["tea", None, "cake"], pa.string()),
            "qty": pa.array([2, 1, None], pa.int32()),
            "price": pa.array(
                [decimal.Decimal("3.50"), decimal.Decimal("4.25"), None], pa.decimal128(10, 2)
            ),
            "ok": pa.array([True, False, None], pa.bool_()),
            "day": pa.array([datetime.date(2026, 1, 2), None, datetime.date(2026, 12, 31)],
                            pa.date32()),
            "ts": pa.array([datetime.datetime(2026, 1, 2, 3, 4, 5, 678000), None,
                            datetime.datetime(2026, 12, 31, 23, 59, 59)], pa.timestamp("ms")),
        }
    )
    with flight_sql.connect(uri(fjord_sql_server)) as conn:
        run(conn, "CREATE DATABASE IF NOT EXISTS adbc")
        run(
            conn,
            "CREATE TABLE adbc.items (id BIGINT, name STRING, qty INT, price DECIMAL(10, 2), "
            "ok BOOLEAN, day DATE, ts TIMESTAMP(3)) WITH ('bucket.num' = '1')",
        )
        inserted = run(
            conn,
            "INSERT INTO adbc.items VALUES "
            "(1, 'tea', 2, 3.50, true, DATE '2026-01-02', TIMESTAMP '2026-01-02 03:04:05.678'), "
            "(2, NULL, 1, 4.25, false, NULL, NULL), "
            "(3, 'cake', NULL, NULL, NULL, DATE '2026-12-31', TIMESTAMP '2026-12-31 23:59:59')",
        )
        assert inserted.to_pylist() == [{"count": 3}]
        got = run(conn, "SELECT * FROM adbc.items ORDER BY id")
    assert got.schema.names == expected.schema.names
    assert got.schema.types == expected.schema.types
    assert got.equals(expected.cast(got.schema))


def test_errors_come_back_as_driver_errors(fjord_sql_server):
    with flight_sql.connect(uri(fjord_sql_server)) as conn:
        with pytest.raises(flight_sql.Error) as failed:
            run(conn, "SELECT nope FROM adbc.items")
        assert "nope" in str(failed.value)
        assert run(conn, "SELECT 1 AS one").to_pylist() == [{"one": 1}]


@pytest.fixture(scope="module")
def server_with_users():
    binary = _fjord_bin()
    with tempfile.TemporaryDirectory(prefix="fjord-pytest-") as data_dir:
        server = FjordServer(
            binary,
            data_dir,
            ["--flight-sql-listen", "127.0.0.1:0", "--set", "sql.users=alice:s3cret"],
        )
        try:
            yield server
        finally:
            assert server.stop() == 0, server.stderr()


def test_basic_auth_admits_users_and_refuses_others(server_with_users):
    good = {"username": "alice", "password": "s3cret"}
    with flight_sql.connect(uri(server_with_users), db_kwargs=good) as conn:
        assert run(conn, "SELECT 42 AS answer").to_pylist() == [{"answer": 42}]
    for who in [{"username": "alice", "password": "wrong"}, {"username": "bob", "password": "s3cret"}]:
        with pytest.raises(flight_sql.Error) as failed:
            with flight_sql.connect(uri(server_with_users), db_kwargs=who) as conn:
                run(conn, "SELECT 1")
        assert "authentication failed" in str(failed.value)
    # Without credentials every call is refused.
    with pytest.raises(flight_sql.Error) as failed:
        with flight_sql.connect(uri(server_with_users)) as conn:
            run(conn, "SELECT 1")
    assert "basic auth" in str(failed.value)


@pytest.mark.parametrize("flag", ["--pg-listen", "--flight-sql-listen"])
def test_no_users_off_loopback_refuses_to_start(flag):
    with tempfile.TemporaryDirectory(prefix="fjord-pytest-") as data_dir:
        done = subprocess.run(
            [_fjord_bin(), "server", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
             flag, "0.0.0.0:0"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode != 0
    assert "sql.users" in done.stderr and "loopback" in done.stderr, done.stderr


def test_get_objects_and_table_schema_describe_the_tables(fjord_sql_server):
    """What a tool reads on connect: ADBC's get_objects (Flight SQL's
    GetCatalogs, GetDbSchemas and GetTables with each table's schema) and
    get_table_schema (GetTables with include_schema)."""
    with flight_sql.connect(uri(fjord_sql_server)) as conn:
        run(conn, "CREATE DATABASE IF NOT EXISTS adbcmeta")
        run(
            conn,
            "CREATE TABLE adbcmeta.users (id BIGINT, name STRING, score INT, "
            "PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '1')",
        )
        run(conn, "CREATE TABLE adbcmeta.events (ts TIMESTAMP(3), kind STRING)")
        catalogs = conn.adbc_get_objects(depth="catalogs").read_all().to_pylist()
        assert [c["catalog_name"] for c in catalogs] == ["fjord"]
        objects = (
            conn.adbc_get_objects(depth="all", db_schema_filter="adbcmeta").read_all().to_pylist()
        )
        assert [c["catalog_name"] for c in objects] == ["fjord"]
        schemas = objects[0]["catalog_db_schemas"]
        assert [s["db_schema_name"] for s in schemas] == ["adbcmeta"]
        tables = {t["table_name"]: t for t in schemas[0]["db_schema_tables"]}
        assert sorted(tables) == ["events", "users"]
        assert {t["table_type"] for t in tables.values()} == {"TABLE"}
        columns = [(c["column_name"], c["ordinal_position"]) for c in tables["users"]["table_columns"]]
        assert columns == [("id", 1), ("name", 2), ("score", 3)]
        # A table-name pattern narrows the listing.
        only = conn.adbc_get_objects(
            depth="tables", db_schema_filter="adbcmeta", table_name_filter="ev%"
        ).read_all().to_pylist()
        assert [t["table_name"] for t in only[0]["catalog_db_schemas"][0]["db_schema_tables"]] == [
            "events"
        ]
        schema = conn.adbc_get_table_schema("users", db_schema_filter="adbcmeta")
        assert schema.names == ["id", "name", "score"]
        assert schema.types == [pa.int64(), pa.string(), pa.int32()]
        assert conn.adbc_get_table_schema("events", db_schema_filter="adbcmeta").types == [
            pa.timestamp("ms"),
            pa.string(),
        ]


def test_parameters_bind_to_prepared_statements(fjord_sql_server):
    """cursor.execute(sql, parameters): CreatePreparedStatement, the
    parameters bound by DoPut, then GetFlightInfo/DoGet of the bound
    statement; values of several types, cast to the columns' types."""
    with flight_sql.connect(uri(fjord_sql_server)) as conn:
        run(conn, "CREATE DATABASE IF NOT EXISTS adbcmeta")
        run(
            conn,
            "CREATE TABLE adbcmeta.orders (id BIGINT, item STRING, qty INT, price DOUBLE, "
            "PRIMARY KEY (id) NOT ENFORCED) WITH ('bucket.num' = '2')",
        )
        run(
            conn,
            "INSERT INTO adbcmeta.orders VALUES (1, 'tea', 2, 3.5), (2, 'cake', 1, 4.25), "
            "(3, 'tea', 5, 1.0)",
        )
        with conn.cursor() as cur:
            cur.execute(
                "SELECT id, qty FROM adbcmeta.orders "
                "WHERE item = $1 AND qty >= $2 AND price > $3 ORDER BY id",
                ("tea", 2, 0.5),
            )
            assert cur.fetchall() == [(1, 2), (3, 5)]
            # The point lookup, again with other keys.
            for key, item in [(2, "cake"), (1, "tea"), (3, "tea")]:
                cur.execute("SELECT item FROM adbcmeta.orders WHERE id = $1", (key,))
                assert cur.fetchall() == [(item,)]
            # Text that would break a query built by concatenation is a value.
            cur.execute(
                "SELECT count(*) AS n FROM adbcmeta.orders WHERE item = $1",
                ("x'; DROP TABLE y; --",),
            )
            assert cur.fetchall() == [(0,)]
            # An INSERT with parameters writes (once) and answers its count.
            cur.execute("INSERT INTO adbcmeta.orders VALUES ($1, $2, $3, $4)", (4, "jam", 7, 2.5))
            cur.execute("SELECT item, qty, price FROM adbcmeta.orders WHERE id = $1", (4,))
            assert cur.fetchall() == [("jam", 7, 2.5)]
            # Without parameters a statement still runs as before.
            cur.execute("SELECT count(*) AS n FROM adbcmeta.orders")
            assert cur.fetchall() == [(4,)]
