"""Partitioned tables with the official Python client, pyfluss 1.0.0, used
unmodified against the real `fjord server` binary (see conftest.py).

Partitions are created, listed (all and by partial spec) and dropped with the
names, ids and specs the client parses (the same expectations the fluss-rs
test in crates/fjord/tests/interop_partitions.rs checks); rows written to two
partitions are scanned back per partition with only that partition's rows;
an auto-partitioned table has its pre-created partitions as soon as it is
created; the errors a user meets carry the Fluss error codes.
"""

import asyncio
import datetime as dt

import pyarrow as pa

import fluss
from test_pyfluss import connect, step, step_error

DATABASE = "interop_py_parts"
BUCKETS = 2

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("dt", pa.string()),
    ]
)


def rows(day, ids):
    """Rows of one partition (the client takes a batch's partition from its
    first row, so one batch holds one partition)."""
    ids = list(ids)
    return pa.RecordBatch.from_pydict(
        {"id": ids, "name": [f"user-{i}" for i in ids], "dt": [day] * len(ids)},
        schema=SCHEMA,
    )


async def create_partitioned_table(server, admin, name, properties=None):
    path = fluss.TablePath(DATABASE, name)
    await step(server, "create database", admin.create_database(DATABASE, ignore_if_exists=True))
    descriptor = fluss.TableDescriptor(
        fluss.Schema(SCHEMA),
        partition_keys=["dt"],
        bucket_count=BUCKETS,
        properties=properties or {},
    )
    await step(server, "create partitioned table", admin.create_table(path, descriptor, ignore_if_exists=False))
    return path


async def listed(server, admin, path, spec=None):
    """{partition name: partition id}."""
    infos = await step(server, "list partitions", admin.list_partition_infos(path, spec))
    return {p.partition_name: p.partition_id for p in infos}


async def scan_partition(server, fluss_table, partition_id):
    scanner = await step(server, "create scanner", fluss_table.new_scan().create_record_batch_log_scanner())
    scanner.subscribe_partition_buckets({(partition_id, b): fluss.EARLIEST_OFFSET for b in range(BUCKETS)})
    return await step(server, "scan partition to_arrow", scanner.to_arrow())


def test_partitions_are_created_listed_written_scanned_and_dropped(fjord_server):
    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        path = await create_partitioned_table(fjord_server, admin, "events")
        for day in ("20240101", "20240102"):
            await step(fjord_server, "create partition", admin.create_partition(path, {"dt": day}))
        parts = await listed(fjord_server, admin, path)
        assert sorted(parts) == ["20240101", "20240102"], parts
        assert len(set(parts.values())) == 2, f"partition ids are not distinct: {parts}"
        assert await listed(fjord_server, admin, path, {"dt": "20240102"}) == {"20240102": parts["20240102"]}

        err = await step_error(fjord_server, "create an existing partition",
                               admin.create_partition(path, {"dt": "20240101"}))
        assert err.error_code == fluss.ErrorCode.PARTITION_ALREADY_EXISTS, repr(err)
        await step(fjord_server, "create an existing partition, ignored",
                   admin.create_partition(path, {"dt": "20240101"}, ignore_if_exists=True))
        err = await step_error(fjord_server, "create a partition with a bad spec",
                               admin.create_partition(path, {"region": "eu"}))
        assert err.error_code == fluss.ErrorCode.PARTITION_SPEC_INVALID_EXCEPTION, repr(err)

        fluss_table = await step(fjord_server, "get table", conn.get_table(path))
        writer = fluss_table.new_append().create_writer()
        acks = [writer.write_arrow_batch(rows("20240101", range(0, 40))),
                writer.write_arrow_batch(rows("20240102", range(1000, 1025)))]
        await step(fjord_server, "flush", writer.flush())
        for i, ack in enumerate(acks):
            await step(fjord_server, f"acknowledgement of batch {i}", ack.wait())

        latest = await step(fjord_server, "latest offsets of one partition",
                            admin.list_partition_offsets(path, "20240101", list(range(BUCKETS)),
                                                         fluss.OffsetSpec.latest()))
        assert sum(latest.values()) == 40, latest
        for day, ids in (("20240101", range(0, 40)), ("20240102", range(1000, 1025))):
            read = (await scan_partition(fjord_server, fluss_table, parts[day])).sort_by("id")
            assert read.column("id").to_pylist() == list(ids), day
            assert set(read.column("dt").to_pylist()) == {day}

        await step(fjord_server, "drop partition", admin.drop_partition(path, {"dt": "20240101"}))
        assert await listed(fjord_server, admin, path) == {"20240102": parts["20240102"]}
        err = await step_error(fjord_server, "drop a dropped partition",
                               admin.drop_partition(path, {"dt": "20240101"}))
        assert err.error_code == fluss.ErrorCode.PARTITION_NOT_EXISTS, repr(err)
        # Re-created, it gets a new id: ids are never reused.
        await step(fjord_server, "create the partition again", admin.create_partition(path, {"dt": "20240101"}))
        again = await listed(fjord_server, admin, path)
        assert again["20240101"] > max(parts.values()), (again, parts)
        await conn.close()

    asyncio.run(body())


def test_auto_partitioned_table_has_its_precreated_partitions(fjord_server):
    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        before = dt.datetime.now(dt.timezone.utc).date()
        path = await create_partitioned_table(fjord_server, admin, "auto_daily", {
            "table.auto-partition.enabled": "true",
            "table.auto-partition.time-unit": "DAY",
            "table.auto-partition.num-precreate": "3",
            "table.auto-partition.time-zone": "UTC",
        })
        after = dt.datetime.now(dt.timezone.utc).date()
        names = sorted(await listed(fjord_server, admin, path))
        # The server pre-creates today and the next two days (UTC); `before`
        # and `after` differ only if the test straddles midnight.
        expected = [
            [(day + dt.timedelta(days=i)).strftime("%Y%m%d") for i in range(3)]
            for day in {before, after}
        ]
        assert names in expected, names
        await conn.close()

    asyncio.run(body())


def test_partition_calls_on_a_table_without_partition_keys_are_refused(fjord_server):
    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        await step(fjord_server, "create database", admin.create_database(DATABASE, ignore_if_exists=True))
        path = fluss.TablePath(DATABASE, "plain")
        await step(fjord_server, "create table",
                   admin.create_table(path, fluss.TableDescriptor(fluss.Schema(SCHEMA))))
        err = await step_error(fjord_server, "create a partition of a plain table",
                               admin.create_partition(path, {"dt": "20240101"}))
        assert err.error_code == fluss.ErrorCode.TABLE_NOT_PARTITIONED_EXCEPTION, repr(err)
        await conn.close()

    asyncio.run(body())
