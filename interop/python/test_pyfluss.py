"""Interop with the official Python client, pyfluss 1.0.0, used unmodified
against the real `fjord server` binary (see conftest.py).

A pyarrow table with one column per type a Fluss log table supports is
written, read back as Arrow and compared column by column; projection and
list offsets are checked against the same data, and the errors a user meets
must carry the Fluss error codes.
"""

import asyncio
import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

import fluss

# Upper bound of one client step (a request, a flush, a scan), so a server that
# never answers fails the test with a message instead of hanging it.
STEP_TIMEOUT_S = 120
BUCKETS = 3
ROWS = 20_000
DATABASE = "interop_py"

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("i64", pa.int64()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("flag", pa.bool_()),
        pa.field("name", pa.string()),
        pa.field("dec_compact", pa.decimal128(18, 4)),
        pa.field("dec_wide", pa.decimal128(38, 10)),
        pa.field("day", pa.date32()),
        pa.field("clock", pa.time32("ms")),
        pa.field("ts_ms", pa.timestamp("ms")),
        pa.field("ts_us", pa.timestamp("us")),
        pa.field("ts_ns", pa.timestamp("ns")),
        pa.field("ts_ltz", pa.timestamp("us", tz="UTC")),
        pa.field("blob", pa.binary()),
        pa.field("fixed", pa.binary(4)),
    ]
)


def rows(first_id, count):
    """Deterministic rows: every value a function of id, nulls at a different
    stride per column, negative, empty, non-ASCII and extreme values mixed in."""
    ids = list(range(first_id, first_id + count))

    def col(fn, every):
        return [None if i % every == 0 else fn(i) for i in ids]

    epoch = dt.datetime(2024, 1, 1)
    columns = {
        "id": ids,
        "i8": col(lambda i: i % 256 - 128, 3),
        "i16": col(lambda i: (i * 7) % 65536 - 32768, 5),
        "i32": col(lambda i: (i * 2654435761) % 2**32 - 2**31, 7),
        "i64": col(lambda i: (i * 0x9E3779B97F4A7C15) % 2**64 - 2**63, 11),
        "f32": col(lambda i: i / 3.0, 13),
        "f64": col(lambda i: i * -1.5e-3, 17),
        "flag": col(lambda i: i % 2 == 0, 19),
        "name": col(lambda i: ["", f"user-{i}", f"Fjörð-{i}-ß✓", "x" * (i % 97)][i % 4], 23),
        "dec_compact": col(lambda i: Decimal(i * 37 - 500000).scaleb(-4), 29),
        "dec_wide": col(lambda i: Decimal(i * 10**20 + 7).scaleb(-10) * (-1 if i % 2 else 1), 31),
        "day": col(lambda i: dt.date(1970, 1, 1) + dt.timedelta(days=19000 + i % 4000), 37),
        "clock": col(lambda i: dt.time(i % 24, i % 60, i % 60, (i % 1000) * 1000), 41),
        "ts_ms": col(lambda i: epoch + dt.timedelta(milliseconds=i * 17), 43),
        "ts_us": col(lambda i: epoch + dt.timedelta(microseconds=i * 1001), 47),
        "ts_ns": col(lambda i: 1_700_000_000_000_000_000 + i * 1_000_003, 53),
        "ts_ltz": col(lambda i: (epoch + dt.timedelta(seconds=i)).replace(tzinfo=dt.timezone.utc), 59),
        "blob": col(lambda i: i.to_bytes(8, "little")[: i % 9], 61),
        "fixed": col(lambda i: i.to_bytes(4, "big", signed=False), 67),
    }
    return pa.Table.from_pydict(columns, schema=SCHEMA)


async def step(server, what, awaitable):
    """Awaits one client step, bounded by STEP_TIMEOUT_S; failures name the step
    and carry the server's stderr."""
    try:
        return await asyncio.wait_for(awaitable, STEP_TIMEOUT_S)
    except asyncio.TimeoutError:
        pytest.fail(
            f"{what}: no answer within {STEP_TIMEOUT_S}s\n"
            f"--- fjord server stderr ---\n{server.stderr()}"
        )
    except fluss.FlussError as e:
        pytest.fail(
            f"{what}: {e}\n"
            f"--- fjord server stderr ---\n{server.stderr()}"
        )


async def step_error(server, what, awaitable):
    """Awaits one client step that must fail with a FlussError; returns it."""
    try:
        result = await asyncio.wait_for(awaitable, STEP_TIMEOUT_S)
    except asyncio.TimeoutError:
        pytest.fail(
            f"{what}: no answer within {STEP_TIMEOUT_S}s\n"
            f"--- fjord server stderr ---\n{server.stderr()}"
        )
    except fluss.FlussError as e:
        return e
    pytest.fail(f"{what}: expected a FlussError, got {result!r}")


async def connect(server):
    config = fluss.Config(
        {
            "bootstrap.servers": server.address,
            # Bounded so a persistent server error surfaces instead of retrying.
            "writer.retries": "5",
        }
    )
    return await step(server, "connect", fluss.FlussConnection.create(config))


def assert_same_table(actual, expected):
    """Same column names and types, and the same values row for row (both
    sorted by id); names the first differing column and row."""
    assert [(f.name, f.type) for f in actual.schema] == [
        (f.name, f.type) for f in expected.schema
    ], f"scanned schema {actual.schema} differs from written {expected.schema}"
    assert actual.num_rows == expected.num_rows, "row count differs"
    actual = actual.sort_by("id")
    expected = expected.sort_by("id")
    for name in expected.column_names:
        a, e = actual.column(name), expected.column(name)
        if not a.equals(e):
            a_list, e_list = a.to_pylist(), e.to_pylist()
            row = next(r for r in range(len(e_list)) if a_list[r] != e_list[r])
            pytest.fail(
                f"column {name!r} differs first at row {row} (sorted by id): "
                f"scanned {a_list[row]!r}, written {e_list[row]!r}"
            )


async def create_table(server, admin, name):
    path = fluss.TablePath(DATABASE, name)
    await step(server, "create database", admin.create_database(DATABASE, ignore_if_exists=True))
    descriptor = fluss.TableDescriptor(
        fluss.Schema(SCHEMA), bucket_count=BUCKETS, bucket_keys=["id"]
    )
    await step(server, "create table", admin.create_table(path, descriptor, ignore_if_exists=False))
    return path


async def write(server, conn, path, table):
    fluss_table = await step(server, "get table", conn.get_table(path))
    writer = fluss_table.new_append().create_writer()
    # Several Arrow batches, as a user streaming data would send.
    acks = [writer.write_arrow_batch(b) for b in table.to_batches(max_chunksize=5_000)]
    await step(server, "flush", writer.flush())
    # flush() only waits; a batch the server refused reports it on its handle.
    for i, ack in enumerate(acks):
        await step(server, f"acknowledgement of batch {i}", ack.wait())
    return fluss_table


async def read_all(server, fluss_table, project=None):
    scan = fluss_table.new_scan()
    if project is not None:
        scan = scan.project_by_name(project)
    scanner = await step(server, "create scanner", scan.create_record_batch_log_scanner())
    scanner.subscribe_buckets({b: fluss.EARLIEST_OFFSET for b in range(BUCKETS)})
    return await step(server, "scan to_arrow", scanner.to_arrow())


def test_arrow_round_trip_of_every_column_type(fjord_server):
    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        path = await create_table(fjord_server, admin, "all_types")
        written = rows(0, ROWS)
        fluss_table = await write(fjord_server, conn, path, written)

        info = await step(fjord_server, "get table info", admin.get_table_info(path))
        assert info.num_buckets == BUCKETS
        assert info.get_bucket_keys() == ["id"]
        assert fluss_table.arrow_schema == SCHEMA, "table's Arrow schema differs from the written one"

        read = await read_all(fjord_server, fluss_table)
        assert_same_table(read, written)
        await conn.close()

    asyncio.run(body())


def test_projection_returns_only_the_named_columns(fjord_server):
    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        path = await create_table(fjord_server, admin, "projection")
        written = rows(0, ROWS)
        fluss_table = await write(fjord_server, conn, path, written)

        # In schema order, and reordered (the client asks the server for the
        # sorted set and reorders itself).
        for columns in (["id", "name", "dec_wide", "ts_ltz"], ["blob", "i32", "id"]):
            read = await read_all(fjord_server, fluss_table, project=columns)
            assert_same_table(read, written.select(columns))
        await conn.close()

    asyncio.run(body())


def test_list_offsets_reports_each_bucket(fjord_server):
    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        path = await create_table(fjord_server, admin, "offsets")
        buckets = list(range(BUCKETS))

        latest = await step(
            fjord_server, "latest offsets of an empty table",
            admin.list_offsets(path, buckets, fluss.OffsetSpec.latest()),
        )
        assert latest == {b: 0 for b in buckets}

        await write(fjord_server, conn, path, rows(0, ROWS))
        earliest = await step(
            fjord_server, "earliest offsets",
            admin.list_offsets(path, buckets, fluss.OffsetSpec.earliest()),
        )
        latest = await step(
            fjord_server, "latest offsets",
            admin.list_offsets(path, buckets, fluss.OffsetSpec.latest()),
        )
        assert earliest == {b: 0 for b in buckets}
        assert all(latest[b] > 0 for b in buckets), f"a bucket got no rows: {latest}"
        assert sum(latest.values()) == ROWS, f"latest offsets {latest}"

        # Every row was appended after the table was created, and none of them
        # has a commit time in the future.
        created_ms = (await step(fjord_server, "table info", admin.get_table_info(path))).created_time
        by_creation = await step(
            fjord_server, "offsets by timestamp (table creation)",
            admin.list_offsets(path, buckets, fluss.OffsetSpec.timestamp(created_ms)),
        )
        assert by_creation == {b: 0 for b in buckets}, f"offsets at {created_ms}: {by_creation}"
        await conn.close()

    asyncio.run(body())


def test_missing_table_and_database_get_fluss_error_codes(fjord_server):
    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        missing_db = fluss.TablePath("interop_py_missing", "t")
        err = await step_error(fjord_server, "get info of a missing database",
                               admin.get_database_info("interop_py_missing"))
        assert err.error_code == fluss.ErrorCode.DATABASE_NOT_EXIST, repr(err)
        err = await step_error(fjord_server, "create table in a missing database",
                               admin.create_table(missing_db, fluss.TableDescriptor(fluss.Schema(SCHEMA))))
        assert err.error_code == fluss.ErrorCode.DATABASE_NOT_EXIST, repr(err)

        await step(fjord_server, "create database", admin.create_database(DATABASE, ignore_if_exists=True))
        missing = fluss.TablePath(DATABASE, "no_such_table")
        err = await step_error(fjord_server, "get info of a missing table", admin.get_table_info(missing))
        assert err.error_code == fluss.ErrorCode.TABLE_NOT_EXIST, repr(err)
        err = await step_error(fjord_server, "open a missing table", conn.get_table(missing))
        assert err.error_code == fluss.ErrorCode.TABLE_NOT_EXIST, repr(err)
        assert not await step(fjord_server, "missing table exists", admin.table_exists(missing))
        await conn.close()

    asyncio.run(body())
