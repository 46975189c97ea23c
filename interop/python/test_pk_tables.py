"""Primary-key tables with the official Python client, pyfluss 1.0.0, used
unmodified against the real `fjord server` binary (see conftest.py).

One table holds a value column of every Arrow type pyfluss maps to a Fluss
type that Fjord's primary-key tables store. A deterministic list of
operations (inserts, updates, identical re-upserts, deletes of present and
absent keys, re-inserts, partial updates and partial deletes) is written
through the client's upsert writers, every write's own handle awaited, and
applied to a model of Fluss's semantics (`KvTablet.processUpsert`/
`processDeletion`, `PartialUpdater` at v0.9.1-incubating; FULL changelog
image). Lookups, the changelog and limit scans are then compared with that
model. Other tables cover a composite key of many key types, prefix lookups
by a bucket key that is a strict prefix of the primary key, many KV batches
in flight, a partitioned table, and the refusals a user meets. Two strict
xfails record where Fjord differs from Fluss (their reasons say how).

pyfluss limits that shape the tests (client-side, not Fjord): row writes
carry TIME at millisecond precision (sub-millisecond values are refused)
and timestamps at microsecond precision (a `pd.Timestamp` is read as a
`datetime`); a naive pre-epoch datetime with a sub-millisecond part is
refused; so values are chosen exactly representable. The client refuses
Arrow batch log scans of primary-key tables, so the changelog is read
record by record (`create_log_scanner`) and assembled into Arrow here. A
Lookuper serializes its lookups (see lookup_many). pyfluss has no API for
GetTableStats, KV snapshots or insert-if-not-exists lookups (see the Java
tests for those).
"""

import asyncio
import datetime as dt
import time
from decimal import Decimal

import pyarrow as pa
import pytest

import fluss

# Upper bound of one client step (a request, a flush, a scan), so a server that
# never answers fails the test with a message instead of hanging it.
STEP_TIMEOUT_S = 120
DATABASE = "interop_py_pk"
BUCKETS = 3
UTC = dt.timezone.utc
# Lookupers used together for bulk lookups (see lookup_many).
LOOKUPERS = 64

# Every Arrow type pyfluss 1.0.0 maps to a Fluss type, in the Arrow type it
# reads back (aliases such as large_string, large_binary, date64 and uint8
# map to the same Fluss types). float16, decimal256, null and duration have
# no Fluss type; list, map and struct (ARRAY, MAP, ROW) are covered by
# test_nested_value_columns below.
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("i64", pa.int64()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("flag", pa.bool_()),
        pa.field("name", pa.string()),
        pa.field("dec_small", pa.decimal128(5, 2)),
        pa.field("dec_compact", pa.decimal128(18, 4)),
        pa.field("dec_wide", pa.decimal128(38, 10)),
        pa.field("day", pa.date32()),
        pa.field("t_s", pa.time32("s")),
        pa.field("t_ms", pa.time32("ms")),
        pa.field("t_us", pa.time64("us")),
        pa.field("t_ns", pa.time64("ns")),
        pa.field("ts_s", pa.timestamp("s")),
        pa.field("ts_ms", pa.timestamp("ms")),
        pa.field("ts_us", pa.timestamp("us")),
        pa.field("ts_ns", pa.timestamp("ns")),
        pa.field("ltz_s", pa.timestamp("s", tz="UTC")),
        pa.field("ltz_ms", pa.timestamp("ms", tz="UTC")),
        pa.field("ltz_us", pa.timestamp("us", tz="UTC")),
        pa.field("ltz_ns", pa.timestamp("ns", tz="UTC")),
        pa.field("blob", pa.binary()),
        pa.field("fixed", pa.binary(4)),
    ]
)
COLUMNS = SCHEMA.names
KEY = "id"
# Partial updates write these columns (the primary key plus two others).
PARTIAL = ["id", "name", "i64"]
# Keys 0..KEYS-1 are written in full; KEYS..KEYS+2 only by partial updates;
# ABSENT are never written (deletes of them must succeed and change nothing).
KEYS = 240
ABSENT = range(KEYS + 10, KEYS + 30)


def full_row(i, version):
    """Row `id=i` at `version`: every value a function of both, a null at a
    different stride per column, negative, empty, non-ASCII, extreme and
    pre-epoch values mixed in. Every value is exactly representable by its
    column (and by pyfluss's row writer)."""
    n = i * 7 + version * 1000

    def v(fn, every):
        return None if (n + every) % every == 0 else fn(n)

    epoch = dt.datetime(2024, 1, 1)
    return {
        "id": i,
        "i8": v(lambda n: n % 256 - 128, 3),
        "i16": v(lambda n: (n * 7) % 65536 - 32768, 5),
        "i32": v(lambda n: (n * 2654435761) % 2**32 - 2**31, 7),
        "i64": v(lambda n: (n * 0x9E3779B97F4A7C15) % 2**64 - 2**63, 11),
        # Multiples of 1/4 below 2**20: exact in float32.
        "f32": v(lambda n: (n % 4096) / 4.0 - 512.0, 13),
        "f64": v(lambda n: n * -1.5e-3 if n % 29 else 1.7976931348623157e308, 17),
        "flag": v(lambda n: n % 2 == 0, 19),
        "name": v(lambda n: ["", f"user-{n}", f"Fjörð-{n}-ß✓", "x" * (n % 97)][n % 4], 23),
        "dec_small": v(lambda n: Decimal(n % 199999 - 99999).scaleb(-2), 4),
        "dec_compact": v(lambda n: Decimal(n * 37 - 500000).scaleb(-4), 29),
        "dec_wide": v(lambda n: Decimal(n * 10**20 + 7).scaleb(-10) * (-1 if n % 2 else 1), 31),
        "day": v(lambda n: dt.date(1970, 1, 1) + dt.timedelta(days=(n % 40000) - 20000), 37),
        "t_s": v(lambda n: dt.time(n % 24, n % 60, (n * 7) % 60), 41),
        "t_ms": v(lambda n: dt.time(n % 24, n % 60, n % 60, (n % 1000) * 1000), 43),
        "t_us": v(lambda n: dt.time(23, 59, 59, 999000 - (n % 1000) * 1000), 47),
        "t_ns": v(lambda n: dt.time((n * 5) % 24, 0, 0, (n % 997) * 1000), 53),
        "ts_s": v(lambda n: epoch + dt.timedelta(seconds=n * 3607 - 10**9), 59),
        "ts_ms": v(lambda n: epoch + dt.timedelta(milliseconds=n * 17 - 10**11), 61),
        "ts_us": v(lambda n: epoch + dt.timedelta(microseconds=n * 1001), 67),
        "ts_ns": v(lambda n: epoch - dt.timedelta(microseconds=n * 999_983), 71),
        "ltz_s": v(lambda n: (epoch + dt.timedelta(seconds=n)).replace(tzinfo=UTC), 73),
        "ltz_ms": v(lambda n: (epoch - dt.timedelta(milliseconds=n * 13)).replace(tzinfo=UTC), 79),
        "ltz_us": v(lambda n: (epoch + dt.timedelta(microseconds=n * 7)).replace(tzinfo=UTC), 83),
        "ltz_ns": v(lambda n: (dt.datetime(1969, 12, 31, 23, 59, 59, 999999) + dt.timedelta(microseconds=n)).replace(tzinfo=UTC), 89),
        "blob": v(lambda n: n.to_bytes(8, "little")[: n % 9], 97),
        "fixed": v(lambda n: (n * 2654435761 % 2**32).to_bytes(4, "big"), 101),
    }


class Model:
    """Fluss's primary-key semantics under the default merge engine and the
    FULL changelog image: the current rows and, per key, the changelog rows
    (change type short string, full row) in the order they are written."""

    def __init__(self, columns, key):
        self.columns = columns
        self.key = key
        self.rows = {}
        self.log = {}

    def _emit(self, k, change, row):
        self.log.setdefault(k, []).append((change, dict(row)))

    def upsert(self, row):
        k = row[self.key]
        old = self.rows.get(k)
        if old is None:
            self._emit(k, "+I", row)
        else:
            self._emit(k, "-U", old)
            self._emit(k, "+U", row)
        self.rows[k] = dict(row)

    def delete(self, k):
        old = self.rows.pop(k, None)
        if old is not None:
            self._emit(k, "-D", old)

    def partial_upsert(self, values, targets):
        """Target columns from `values`, the others from the old row (null
        when the key is absent)."""
        old = self.rows.get(values[self.key], {})
        self.upsert({c: values[c] if c in targets else old.get(c) for c in self.columns})

    def partial_delete(self, k, targets):
        """Deletes the row when every non-target column is null; otherwise
        nulls the non-key target columns (an update)."""
        old = self.rows.get(k)
        if old is None:
            return
        if all(old[c] is None for c in self.columns if c not in targets):
            self.delete(k)
        else:
            self.upsert({c: None if c in targets and c != self.key else old[c] for c in self.columns})

    def change_count(self):
        return sum(len(v) for v in self.log.values())


def operations():
    """The writes, in three phases (one writer each): (kind, payload)."""
    phase1 = [("upsert", full_row(i, 0)) for i in range(KEYS)]
    phase2 = []
    for i in range(KEYS):
        if i % 3 == 0:
            phase2.append(("upsert", full_row(i, 1)))
        if i % 9 == 0:
            # A second update of the same key in the same batch.
            phase2.append(("upsert", full_row(i, 2)))
        if i % 5 == 1:
            phase2.append(("delete", i))
        if i % 10 == 1:
            # Deleted above, inserted again.
            phase2.append(("upsert", full_row(i, 3)))
        if i % 13 == 2:
            # An identical re-upsert still updates (-U/+U).
            phase2.append(("upsert", full_row(i, 0)))
    # Deletes of keys never written: no changelog, but a successful write.
    phase2 += [("delete", k) for k in ABSENT[:5]]
    phase3 = []
    for i in range(0, KEYS, 4):
        phase3.append(("partial_upsert", {"id": i, "name": f"partial-{i}", "i64": -i}))
    for i in range(KEYS, KEYS + 3):
        # Partial upserts of new keys: inserted with nulls elsewhere.
        phase3.append(("partial_upsert", {"id": i, "name": None if i % 2 else "new", "i64": i}))
    for i in range(0, KEYS, 8):
        # Full rows: the target columns are nulled (-U/+U).
        phase3.append(("partial_delete", i))
    # Rows holding only target columns: deleted (-D).
    phase3.append(("partial_delete", KEYS))
    phase3.append(("partial_delete", KEYS + 1))
    phase4 = [("upsert", full_row(i, 4)) for i in range(0, KEYS, 16)]
    return [phase1, phase2, phase3, phase4]


async def step(server, what, awaitable):
    """Awaits one client step, bounded by STEP_TIMEOUT_S; failures name the step
    and carry the server's stderr."""
    try:
        return await asyncio.wait_for(awaitable, STEP_TIMEOUT_S)
    except asyncio.TimeoutError:
        pytest.fail(f"{what}: no answer within {STEP_TIMEOUT_S}s\n"
                    f"--- fjord server stderr ---\n{server.stderr()}")
    except fluss.FlussError as e:
        pytest.fail(f"{what}: {e} (error code {e.error_code})\n"
                    f"--- fjord server stderr ---\n{server.stderr()}")


async def step_error(server, what, awaitable):
    """Awaits one client step that must fail with a FlussError; returns it."""
    try:
        result = await asyncio.wait_for(awaitable, STEP_TIMEOUT_S)
    except asyncio.TimeoutError:
        pytest.fail(f"{what}: no answer within {STEP_TIMEOUT_S}s\n"
                    f"--- fjord server stderr ---\n{server.stderr()}")
    except fluss.FlussError as e:
        return e
    pytest.fail(f"{what}: expected a FlussError, got {result!r}")


async def connect(server):
    config = fluss.Config({"bootstrap.servers": server.address, "writer.retries": "5"})
    return await step(server, "connect", fluss.FlussConnection.create(config))


async def create_pk_table(server, admin, name, schema, primary_keys, **descriptor):
    path = fluss.TablePath(DATABASE, name)
    await step(server, "create database", admin.create_database(DATABASE, ignore_if_exists=True))
    td = fluss.TableDescriptor(fluss.Schema(schema, primary_keys=primary_keys), **descriptor)
    await step(server, f"create table {name}", admin.create_table(path, td, ignore_if_exists=False))
    return path


async def write_all(server, writer, ops, what):
    """Queues every operation, flushes, then awaits each write's own handle
    (flush only waits; a refused write reports on its handle)."""
    handles = []
    for kind, payload in ops:
        if kind in ("upsert", "partial_upsert"):
            handles.append((f"{kind} {payload['id']}", writer.upsert(payload)))
        else:
            handles.append((f"{kind} {payload}", writer.delete({"id": payload})))
    await step(server, f"flush {what}", writer.flush())
    for name, handle in handles:
        await step(server, f"{what}: {name}", handle.wait())


async def lookup_many(server, table, keys, prefix_columns=None, what="lookups"):
    """Looks up every key (a dict) concurrently; returns the results in key
    order. pyfluss 1.0.0's Lookuper holds a lock across each lookup, and each
    lookup waits the client's 100 ms batch linger, so one Lookuper answers
    about ten lookups a second however many are awaited together; a pool of
    lookupers lets the client batch keys into shared Lookup requests."""
    pool = []
    for _ in range(min(LOOKUPERS, len(keys)) or 1):
        builder = table.new_lookup()
        if prefix_columns is not None:
            builder = builder.lookup_by(prefix_columns)
        pool.append(builder.create_lookuper())
    return await step(server, what, asyncio.gather(
        *(pool[n % len(pool)].lookup(k) for n, k in enumerate(keys))))


def assert_row(actual, expected, what):
    assert actual is not None, f"{what}: expected {expected}, got None"
    assert list(actual) == COLUMNS, f"{what}: columns {list(actual)}"
    for c in COLUMNS:
        assert actual[c] == expected[c], (
            f"{what}: column {c!r} is {actual[c]!r}, expected {expected[c]!r}"
        )
        assert type(actual[c]) is type(expected[c]) or expected[c] is None, (
            f"{what}: column {c!r} has type {type(actual[c])}, expected {type(expected[c])}"
        )


def as_arrow(rows, schema=SCHEMA):
    return pa.Table.from_pylist(rows, schema=schema).sort_by(schema.names[0])


def assert_same_table(actual, expected, what):
    """Same schema and the same values row for row (both sorted by the first
    column); names the first differing column and row."""
    assert actual.schema == expected.schema, f"{what}: schema {actual.schema} != {expected.schema}"
    assert actual.num_rows == expected.num_rows, (
        f"{what}: {actual.num_rows} rows, expected {expected.num_rows}"
    )
    for name in expected.column_names:
        a, e = actual.column(name), expected.column(name)
        if not a.equals(e):
            a_list, e_list = a.to_pylist(), e.to_pylist()
            row = next(r for r in range(len(e_list)) if a_list[r] != e_list[r])
            pytest.fail(f"{what}: column {name!r} differs first at row {row}: "
                        f"got {a_list[row]!r}, expected {e_list[row]!r}")


async def read_changelog(server, table, expected_count, buckets):
    """The changelog of every bucket from the earliest offset, record by
    record: [(bucket, offset, change type, row)] until `expected_count`
    records arrived, then one more poll that must bring nothing."""
    scanner = await step(server, "create log scanner", table.new_scan().create_log_scanner())
    scanner.subscribe_buckets({b: fluss.EARLIEST_OFFSET for b in range(buckets)})
    records = []
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while len(records) < expected_count:
        if time.monotonic() > deadline:
            pytest.fail(f"changelog: {len(records)} of {expected_count} records within "
                        f"{STEP_TIMEOUT_S}s\n--- fjord server stderr ---\n{server.stderr()}")
        polled = await step(server, "poll changelog", scanner.poll(500))
        for bucket, recs in polled.items():
            for r in recs:
                records.append((bucket.bucket_id, r.offset, r.change_type, r.row))
    extra = await step(server, "poll after the last change", scanner.poll(1000))
    assert extra.is_empty(), f"changelog has {extra.count()} records more than the model: {extra}"
    return records


@pytest.fixture(scope="module")
def all_types_table(fjord_server):
    """Creates the every-type table, writes the operations and returns
    (path, model). Each phase uses its own writer and ends with every handle
    awaited, so the order across writers is the order of the phases."""
    model = Model(COLUMNS, KEY)

    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        path = await create_pk_table(fjord_server, admin, "all_types", SCHEMA, [KEY],
                                     bucket_count=BUCKETS)
        table = await step(fjord_server, "get table", conn.get_table(path))
        assert table.has_primary_key()
        assert table.arrow_schema == SCHEMA, f"table's Arrow schema {table.arrow_schema}"
        info = await step(fjord_server, "get table info", admin.get_table_info(path))
        assert info.get_primary_keys() == [KEY]
        assert info.get_bucket_keys() == [KEY], "bucket key defaults to the primary key"
        assert info.num_buckets == BUCKETS

        for n, ops in enumerate(operations(), start=1):
            partial = any(kind.startswith("partial") for kind, _ in ops)
            upsert = table.new_upsert()
            if partial:
                upsert = upsert.partial_update_by_name(PARTIAL)
            await write_all(fjord_server, upsert.create_writer(), ops, f"phase {n}")
            for kind, payload in ops:
                if kind == "upsert":
                    model.upsert(payload)
                elif kind == "delete":
                    model.delete(payload)
                elif kind == "partial_upsert":
                    model.partial_upsert(payload, PARTIAL)
                else:
                    model.partial_delete(payload, PARTIAL)
        await conn.close()
        return path

    return asyncio.run(body()), model


def test_lookup_of_every_key_matches_the_model(fjord_server, all_types_table):
    """Proves Lookup: after inserts, updates, deletes, re-inserts, partial
    updates and partial deletes of a table with a column of every supported
    type, a lookup of every key written (and of keys never written) returns
    exactly the model's current row, value and Python type per column, or
    None for an absent key. The lookups run concurrently, so the client
    batches several keys per Lookup request."""
    path, model = all_types_table

    async def body():
        conn = await connect(fjord_server)
        table = await step(fjord_server, "get table", conn.get_table(path))
        keys = list(range(ABSENT.stop))
        found = await lookup_many(fjord_server, table, [{"id": k} for k in keys])
        present = 0
        for k, row in zip(keys, found):
            expected = model.rows.get(k)
            if expected is None:
                assert row is None, f"key {k} is deleted or was never written, lookup gave {row}"
            else:
                assert_row(row, expected, f"lookup of key {k}")
                present += 1
        # The operations left both present and absent keys, and nulls.
        assert 0 < present < len(keys)
        assert any(r["name"] is None for r in model.rows.values())
        # A lookup by a list of key values (primary-key order) agrees.
        some = next(iter(model.rows))
        lookuper = table.new_lookup().create_lookuper()
        assert_row(await step(fjord_server, "lookup by list", lookuper.lookup([some])),
                   model.rows[some], f"lookup of [{some}]")
        await conn.close()

    asyncio.run(body())


def test_changelog_from_earliest_has_fluss_change_types_and_rows(fjord_server, all_types_table):
    """Proves the PK changelog (FetchLog of the table's Arrow changelog with
    per-row change types): read from the earliest offset of every bucket, it
    holds exactly the model's changes, per key in write order: +I for a new
    key, -U old/+U new for an update (also an identical re-upsert and a
    partial update), -D with the full old row for a delete, nothing for a
    delete of an absent key, and a partial delete as -U/+U or -D by Fluss's
    rule. Also: every key's changes stay in one bucket, offsets increase
    within a bucket, each bucket's latest offset is past its last change,
    and the changes assembled into Arrow (with a change-type column) equal
    the model's as an Arrow table of the schema's types."""
    path, model = all_types_table

    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        table = await step(fjord_server, "get table", conn.get_table(path))
        records = await read_changelog(fjord_server, table, model.change_count(), BUCKETS)

        by_key, bucket_of, last_offset = {}, {}, {}
        for bucket, offset, change, row in sorted(records, key=lambda r: (r[0], r[1])):
            assert offset > last_offset.get(bucket, -1), f"bucket {bucket} offset {offset} repeats"
            last_offset[bucket] = offset
            k = row["id"]
            assert bucket_of.setdefault(k, bucket) == bucket, f"key {k} in two buckets"
            by_key.setdefault(k, []).append((change.short_string(), row))
        assert sorted(by_key) == sorted(model.log), "keys in the changelog"
        for k, expected in model.log.items():
            got = by_key[k]
            assert [c for c, _ in got] == [c for c, _ in expected], f"change types of key {k}"
            for n, ((change, row), (_, want)) in enumerate(zip(got, expected)):
                assert_row(row, want, f"change {n} ({change}) of key {k}")
        kinds = {c for changes in model.log.values() for c, _ in changes}
        assert kinds == {"+I", "-U", "+U", "-D"}, kinds

        latest = await step(fjord_server, "latest offsets",
                            admin.list_offsets(path, list(range(BUCKETS)), fluss.OffsetSpec.latest()))
        earliest = await step(fjord_server, "earliest offsets",
                              admin.list_offsets(path, list(range(BUCKETS)), fluss.OffsetSpec.earliest()))
        for b in range(BUCKETS):
            assert earliest[b] == 0, f"earliest offset of bucket {b}: {earliest}"
            assert latest[b] > last_offset[b], f"bucket {b}: latest {latest[b]}, last change {last_offset[b]}"

        # The same changes as Arrow tables of the schema's types, plus the
        # change type and the change's position in its key's history.
        arrow_schema = SCHEMA.append(pa.field("_change", pa.string())).append(pa.field("_n", pa.int32()))
        order = [("id", "ascending"), ("_n", "ascending")]

        def as_table(log):
            rows = [dict(row, _change=c, _n=n)
                    for changes in log.values() for n, (c, row) in enumerate(changes)]
            return pa.Table.from_pylist(rows, schema=arrow_schema).sort_by(order)

        assert_same_table(as_table(by_key), as_table(model.log), "changelog as Arrow")
        await conn.close()

    asyncio.run(body())


def test_limit_scan_returns_each_buckets_current_rows(fjord_server, all_types_table):
    """Proves LimitScan (`new_scan().limit(n).create_bucket_batch_scanner`)
    on a PK table: with a limit above the row count, the buckets' Arrow
    tables together equal the model's current rows (every column and type,
    no deleted row, each key once); a small limit returns exactly that many
    current rows of the bucket; a projection returns only its columns."""
    path, model = all_types_table

    async def body():
        conn = await connect(fjord_server)
        table = await step(fjord_server, "get table", conn.get_table(path))
        table_id = table.get_table_info().table_id
        parts = []
        for b in range(BUCKETS):
            scanner = table.new_scan().limit(10_000).create_bucket_batch_scanner(
                fluss.TableBucket(table_id, b))
            part = await step(fjord_server, f"limit scan of bucket {b}", scanner.to_arrow())
            assert part.num_rows > 0, f"bucket {b} is empty"
            parts.append(part)
        scanned = pa.concat_tables(parts).sort_by("id")
        assert_same_table(scanned, as_arrow(list(model.rows.values())), "limit scans of all buckets")

        for b, part in enumerate(parts):
            scanner = table.new_scan().limit(5).create_bucket_batch_scanner(fluss.TableBucket(table_id, b))
            few = await step(fjord_server, f"limit 5 of bucket {b}", scanner.to_arrow())
            assert few.num_rows == min(5, part.num_rows), f"bucket {b}: {few.num_rows} rows"
            assert few.schema == SCHEMA
            for row in few.to_pylist():
                assert row in part.to_pylist(), f"bucket {b}: limit scan row {row} is not current"

            columns = ["name", "id", "ltz_ns"]
            scanner = (table.new_scan().project_by_name(columns).limit(10_000)
                       .create_bucket_batch_scanner(fluss.TableBucket(table_id, b)))
            projected = await step(fjord_server, f"projected limit scan of bucket {b}", scanner.to_arrow())
            assert_same_table(projected.sort_by("name").sort_by("id"),
                              part.select(columns).sort_by("id"), f"projected limit scan of bucket {b}")
        await conn.close()

    asyncio.run(body())


# A composite primary key of (nearly) every key-able type, bucketed by all
# of it: the client's key encoding and bucketing must agree with Fjord's.
KEY_SCHEMA = pa.schema(
    [
        pa.field("k_str", pa.string(), nullable=False),
        pa.field("k_i8", pa.int8(), nullable=False),
        pa.field("k_i16", pa.int16(), nullable=False),
        pa.field("k_i64", pa.int64(), nullable=False),
        pa.field("k_bool", pa.bool_(), nullable=False),
        pa.field("k_dec", pa.decimal128(20, 3), nullable=False),
        pa.field("k_day", pa.date32(), nullable=False),
        pa.field("k_ts", pa.timestamp("us"), nullable=False),
        pa.field("k_ltz", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("k_bin", pa.binary(), nullable=False),
        pa.field("value", pa.int64()),
    ]
)
KEY_COLUMNS = KEY_SCHEMA.names[:-1]


def composite_key(i):
    return {
        "k_str": ["", "a", "Fjörð", "a" * 300][i % 4] + str(i // 4),
        "k_i8": i % 256 - 128,
        "k_i16": -i,
        "k_i64": (i * 0x9E3779B97F4A7C15) % 2**64 - 2**63,
        "k_bool": i % 2 == 1,
        "k_dec": Decimal(i * 1_000_003 - 10**9).scaleb(-3),
        "k_day": dt.date(1970, 1, 1) + dt.timedelta(days=i * 37 - 5000),
        # Pre-epoch, whole milliseconds: pyfluss 1.0.0 cannot write a naive
        # pre-epoch datetime with a sub-millisecond part (its NTZ conversion
        # computes a negative nano-of-millisecond and refuses the row).
        "k_ts": dt.datetime(1960, 1, 1) + dt.timedelta(milliseconds=i * 123_457),
        "k_ltz": dt.datetime(2030, 1, 1, tzinfo=UTC) - dt.timedelta(milliseconds=i * 999),
        "k_bin": bytes(range(i % 7)) + i.to_bytes(2, "big"),
    }


def test_composite_key_of_many_types(fjord_server):
    """Proves key encoding and bucketing agree between pyfluss and Fjord for
    a composite primary key of string, tinyint, smallint, bigint, boolean,
    decimal, date, timestamp, timestamp_ltz and bytes columns: upserts then
    updates of half the keys and deletes of a quarter, each handle awaited;
    every key's lookup returns its current row or None; the limit scans of
    all buckets hold exactly the current rows; and the changelog holds
    +I/-U/+U/-D per key as the model says."""
    keys = 120

    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        path = await create_pk_table(fjord_server, admin, "composite_key", KEY_SCHEMA, KEY_COLUMNS,
                                     bucket_count=BUCKETS)
        table = await step(fjord_server, "get table", conn.get_table(path))
        model = Model(KEY_SCHEMA.names, "_key")
        writer = table.new_upsert().create_writer()
        handles = []
        rows = [dict(composite_key(i), value=i) for i in range(keys)]
        for row in rows:
            handles.append(writer.upsert(row))
        for row in rows[::2]:
            handles.append(writer.upsert(dict(row, value=-row["value"])))
        for row in rows[1::4]:
            handles.append(writer.delete(composite_key(row["value"])))
        await step(fjord_server, "flush", writer.flush())
        for n, h in enumerate(handles):
            await step(fjord_server, f"write {n}", h.wait())
        # The model keys rows by their key tuple.
        def keyed(row):
            return dict(row, _key=tuple(row[c] for c in KEY_COLUMNS))
        for row in rows:
            model.upsert(keyed(row))
        for row in rows[::2]:
            model.upsert(keyed(dict(row, value=-row["value"])))
        for row in rows[1::4]:
            model.delete(keyed(row)["_key"])

        lookup_keys = [composite_key(i) for i in range(keys + 5)]
        found = await lookup_many(fjord_server, table, lookup_keys)
        for i, (k, got) in enumerate(zip(lookup_keys, found)):
            want = model.rows.get(tuple(k[c] for c in KEY_COLUMNS))
            if want is None:
                assert got is None, f"key {i}: expected no row, got {got}"
            else:
                want = {c: want[c] for c in KEY_SCHEMA.names}
                assert got == want, f"key {i}: lookup {got}, expected {want}"

        table_id = table.get_table_info().table_id
        parts = []
        for b in range(BUCKETS):
            scanner = table.new_scan().limit(1000).create_bucket_batch_scanner(fluss.TableBucket(table_id, b))
            parts.append(await step(fjord_server, f"limit scan {b}", scanner.to_arrow()))
        assert sum(p.num_rows > 0 for p in parts) > 1, "the keys did not spread over buckets"
        current = [{c: r[c] for c in KEY_SCHEMA.names} for r in model.rows.values()]
        assert_same_table(pa.concat_tables(parts).sort_by("value"),
                          pa.Table.from_pylist(current, schema=KEY_SCHEMA).sort_by("value"),
                          "limit scans")

        records = await read_changelog(fjord_server, table, model.change_count(), BUCKETS)
        by_key = {}
        for _, _, change, row in sorted(records, key=lambda r: (r[0], r[1])):
            by_key.setdefault(tuple(row[c] for c in KEY_COLUMNS), []).append(
                (change.short_string(), row))
        want = {k: [(c, {n: r[n] for n in KEY_SCHEMA.names}) for c, r in v] for k, v in model.log.items()}
        assert by_key == want
        await conn.close()

    asyncio.run(body())


PREFIX_SCHEMA = pa.schema(
    [
        pa.field("tenant", pa.string(), nullable=False),
        pa.field("region", pa.int32(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("amount", pa.decimal128(10, 2)),
    ]
)


def test_prefix_lookup_by_bucket_key(fjord_server):
    """Proves PrefixLookup (`new_lookup().lookup_by(cols)`): on a table with
    primary key (tenant, region, id) bucketed by (tenant, region), a strict
    prefix of the key, a prefix lookup returns exactly the current rows
    under that prefix (after updates and deletes), an empty list for an
    unknown prefix, and all prefixes are answered concurrently."""

    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        path = await create_pk_table(fjord_server, admin, "prefix", PREFIX_SCHEMA,
                                     ["tenant", "region", "id"], bucket_count=BUCKETS,
                                     bucket_keys=["tenant", "region"])
        table = await step(fjord_server, "get table", conn.get_table(path))
        current = {}
        writer = table.new_upsert().create_writer()
        handles = []
        for t in range(6):
            for r in range(3):
                for n in range(t * 3 + r):
                    row = {"tenant": f"tenant-{t}", "region": r, "id": n * 1000 - 5,
                           "amount": Decimal(t * 100 + r * 10 + n).scaleb(-2)}
                    handles.append(writer.upsert(row))
                    current[(row["tenant"], r, row["id"])] = (n, row)
        for (tenant, r, i), (n, row) in list(current.items()):
            if n % 3 == 1:
                handles.append(writer.delete({"tenant": tenant, "region": r, "id": i}))
                del current[(tenant, r, i)]
            elif r == 1:
                row = dict(row, amount=None)
                handles.append(writer.upsert(row))
                current[(tenant, r, i)] = (n, row)
        current = {k: row for k, (_, row) in current.items()}
        await step(fjord_server, "flush", writer.flush())
        for n, h in enumerate(handles):
            await step(fjord_server, f"write {n}", h.wait())

        prefixes = [(f"tenant-{t}", r) for t in range(7) for r in range(4)]
        results = await lookup_many(fjord_server, table, [{"tenant": t, "region": r} for t, r in prefixes],
                                    prefix_columns=["tenant", "region"], what="prefix lookups")
        nonempty = 0
        for (t, r), rows in zip(prefixes, results):
            want = sorted((v for k, v in current.items() if k[:2] == (t, r)), key=lambda v: v["id"])
            got = sorted(rows, key=lambda v: v["id"])
            assert got == want, f"prefix ({t}, {r}): {got}, expected {want}"
            nonempty += bool(want)
        assert nonempty > 10
        await conn.close()

    asyncio.run(body())


def test_many_batches_in_flight(fjord_server):
    """Proves the write path under load with many KV batches per bucket:
    through a connection whose writer batches are 16 KiB, 20,000 upserts and
    deletes of 2,000 keys (every handle awaited); afterwards every key's
    lookup, the limit scans and the changelog (per key in write order, with
    change types) equal the model."""
    keys, writes = 2_000, 20_000
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("n", pa.int64()),
                        pa.field("label", pa.string())])

    async def body():
        config = fluss.Config({"bootstrap.servers": fjord_server.address, "writer.retries": "5",
                               "writer.batch-size": str(16 * 1024),
                               "writer.dynamic-batch-size.enabled": "false",
                               "writer.dynamic-batch-size-min": str(16 * 1024)})
        conn = await step(fjord_server, "connect", fluss.FlussConnection.create(config))
        admin = conn.get_admin()
        path = await create_pk_table(fjord_server, admin, "volume", schema, ["id"], bucket_count=BUCKETS)
        table = await step(fjord_server, "get table", conn.get_table(path))
        model = Model(schema.names, "id")
        writer = table.new_upsert().create_writer()
        handles = []
        for w in range(writes):
            k = (w * 2654435761) % keys
            if w % 7 == 3:
                handles.append(writer.delete({"id": k}))
                model.delete(k)
            else:
                row = {"id": k, "n": w, "label": "v" * 60 + str(w)}
                handles.append(writer.upsert(row))
                model.upsert(row)
        await step(fjord_server, "flush", writer.flush())
        for w, h in enumerate(handles):
            await step(fjord_server, f"write {w}", h.wait())

        found = await lookup_many(fjord_server, table, [{"id": k} for k in range(keys)])
        for k, got in zip(range(keys), found):
            assert got == model.rows.get(k), f"lookup of {k}"

        table_id = table.get_table_info().table_id
        parts = []
        for b in range(BUCKETS):
            scanner = table.new_scan().limit(100_000).create_bucket_batch_scanner(fluss.TableBucket(table_id, b))
            parts.append(await step(fjord_server, f"limit scan {b}", scanner.to_arrow()))
        assert_same_table(pa.concat_tables(parts).sort_by("id"), as_arrow(list(model.rows.values()), schema),
                          "limit scans")

        records = await read_changelog(fjord_server, table, model.change_count(), BUCKETS)
        by_key = {}
        for _, _, change, row in sorted(records, key=lambda r: (r[0], r[1])):
            by_key.setdefault(row["id"], []).append((change.short_string(), row))
        assert by_key.keys() == model.log.keys()
        for k, want in model.log.items():
            assert by_key[k] == want, f"changelog of key {k}"
        await conn.close()

    asyncio.run(body())


PARTITIONED_SCHEMA = pa.schema(
    [
        pa.field("dt", pa.string(), nullable=False),
        pa.field("tenant", pa.string(), nullable=False),
        pa.field("id", pa.int64(), nullable=False),
        pa.field("v", pa.string()),
    ]
)


def test_partitioned_table(fjord_server):
    """Proves a partitioned PK table with pyfluss: primary key (dt, tenant,
    id), partitioned by dt (two partitions created through the admin),
    bucketed by tenant (a strict prefix of the physical key). The same
    (tenant, id) in both partitions stays two rows; after inserts, updates
    and deletes (each handle awaited) every key's lookup returns its
    partition's row or None; a prefix lookup by (dt, tenant) returns exactly
    that partition's rows of the tenant; limit scans of every bucket of a
    partition hold exactly its current rows; and each partition's changelog
    holds exactly its changes with their change types."""
    days = ["2024-01-01", "2024-01-02"]

    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        path = await create_pk_table(fjord_server, admin, "partitioned", PARTITIONED_SCHEMA,
                                     ["dt", "tenant", "id"], partition_keys=["dt"],
                                     bucket_count=BUCKETS, bucket_keys=["tenant"])
        for day in days:
            await step(fjord_server, f"create partition {day}", admin.create_partition(path, {"dt": day}))
        infos = await step(fjord_server, "list partitions", admin.list_partition_infos(path))
        partition_ids = {p.partition_name: p.partition_id for p in infos}
        assert sorted(partition_ids) == days

        table = await step(fjord_server, "get table", conn.get_table(path))
        model = Model(PARTITIONED_SCHEMA.names, "_key")

        def keyed(row):
            return dict(row, _key=(row["dt"], row["tenant"], row["id"]))

        writer = table.new_upsert().create_writer()
        handles = []
        for rnd in range(3):
            for day in days:
                for t in range(4):
                    for i in range(12):
                        row = {"dt": day, "tenant": f"t{t}", "id": i, "v": f"{day}/t{t}/{i}@{rnd}"}
                        if rnd == 2 and i % 3:
                            continue
                        if rnd == 1 and (i + t) % 4 == 0 and day == days[0]:
                            handles.append(writer.delete({"dt": day, "tenant": f"t{t}", "id": i}))
                            model.delete(keyed(row)["_key"])
                        else:
                            handles.append(writer.upsert(row))
                            model.upsert(keyed(row))
        await step(fjord_server, "flush", writer.flush())
        for n, h in enumerate(handles):
            await step(fjord_server, f"write {n}", h.wait())

        def plain(row):
            return {c: row[c] for c in PARTITIONED_SCHEMA.names}

        keys = [(d, f"t{t}", i) for d in days for t in range(5) for i in range(13)]
        found = await lookup_many(fjord_server, table,
                                  [{"dt": d, "tenant": t, "id": i} for d, t, i in keys])
        for k, got in zip(keys, found):
            want = model.rows.get(k)
            assert got == (None if want is None else plain(want)), f"lookup of {k}"

        prefixes = [(day, f"t{t}") for day in days for t in range(5)]
        results = await lookup_many(fjord_server, table, [{"dt": d, "tenant": t} for d, t in prefixes],
                                    prefix_columns=["dt", "tenant"], what="prefix lookups")
        for (day, tenant), got in zip(prefixes, results):
            want = [plain(r) for k, r in model.rows.items() if k[:2] == (day, tenant)]
            assert sorted(got, key=lambda r: r["id"]) == sorted(want, key=lambda r: r["id"]), (
                f"prefix lookup of {day}/{tenant}")

        table_id = table.get_table_info().table_id
        for day in days:
            pid = partition_ids[day]
            parts = []
            for b in range(BUCKETS):
                scanner = table.new_scan().limit(1000).create_bucket_batch_scanner(
                    fluss.TableBucket.with_partition(table_id, pid, b))
                parts.append(await step(fjord_server, f"limit scan {day}/{b}", scanner.to_arrow()))
            want = [plain(r) for k, r in model.rows.items() if k[0] == day]
            got = pa.concat_tables(parts)
            assert got.num_rows == len(want), f"rows of partition {day}"
            key = lambda r: (r["tenant"], r["id"])
            assert sorted(got.to_pylist(), key=key) == sorted(want, key=key), f"limit scans of {day}"

            scanner = await step(fjord_server, "create log scanner", table.new_scan().create_log_scanner())
            scanner.subscribe_partition_buckets({(pid, b): fluss.EARLIEST_OFFSET for b in range(BUCKETS)})
            expected = sum(len(v) for k, v in model.log.items() if k[0] == day)
            by_key = {}
            received = 0
            deadline = time.monotonic() + STEP_TIMEOUT_S
            while received < expected:
                if time.monotonic() > deadline:
                    pytest.fail(f"changelog of {day}: {received} of {expected} records\n"
                                f"--- fjord server stderr ---\n{fjord_server.stderr()}")
                polled = await step(fjord_server, "poll", scanner.poll(500))
                for bucket, recs in polled.items():
                    assert bucket.partition_id == pid, f"a record of partition {bucket.partition_id}"
                    for r in recs:
                        by_key.setdefault((r.row["dt"], r.row["tenant"], r.row["id"]), []).append(
                            (r.change_type.short_string(), r.row))
                        received += 1
            extra = await step(fjord_server, "poll after the last change", scanner.poll(1000))
            assert extra.is_empty(), f"changelog of {day} has {extra.count()} extra records"
            want_log = {k: [(c, plain(r)) for c, r in v] for k, v in model.log.items() if k[0] == day}
            assert by_key == want_log, f"changelog of partition {day}"
        await conn.close()

    asyncio.run(body())


def test_limit_scan_with_a_large_limit(fjord_server):
    """Proves a limit scan whose limit exceeds the bucket's rows by far
    returns the bucket's rows, as Fluss does for any positive limit."""

    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        schema = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("v", pa.string())])
        path = await create_pk_table(fjord_server, admin, "large_limit", schema, ["id"], bucket_count=1)
        table = await step(fjord_server, "get table", conn.get_table(path))
        writer = table.new_upsert().create_writer()
        for i in range(3):
            await step(fjord_server, f"upsert {i}", writer.upsert({"id": i, "v": str(i)}).wait())
        scanner = table.new_scan().limit(2_000_000).create_bucket_batch_scanner(
            fluss.TableBucket(table.get_table_info().table_id, 0))
        got = await step(fjord_server, "limit scan with limit 2000000", scanner.to_arrow())
        assert sorted(got.column("id").to_pylist()) == [0, 1, 2]
        await conn.close()

    asyncio.run(body())


def test_refusals_carry_fluss_error_codes(fjord_server):
    """Proves the server-side refusals a user of PK tables meets reach the
    client with Fluss's error codes, and leave the table unchanged: a delete
    on a table with 'table.delete.behavior'='disable' fails its own handle
    with DELETION_DISABLED_EXCEPTION (57) while the row stays; a primary key
    of an ARRAY column is refused with INVALID_TABLE_EXCEPTION."""

    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        schema = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("v", pa.string())])
        path = await create_pk_table(fjord_server, admin, "no_delete", schema, ["id"], bucket_count=1,
                                     properties={"table.delete.behavior": "disable"})
        table = await step(fjord_server, "get table", conn.get_table(path))
        writer = table.new_upsert().create_writer()
        await step(fjord_server, "upsert", writer.upsert({"id": 1, "v": "kept"}).wait())
        err = await step_error(fjord_server, "delete with deletes disabled",
                               writer.delete({"id": 1}).wait())
        assert err.error_code == fluss.ErrorCode.DELETION_DISABLED_EXCEPTION, repr(err)
        lookuper = table.new_lookup().create_lookuper()
        assert await step(fjord_server, "lookup", lookuper.lookup({"id": 1})) == {"id": 1, "v": "kept"}

        nested_key = pa.schema([pa.field("k", pa.list_(pa.int32()), nullable=False)])
        err = await step_error(fjord_server, "create a table keyed by an ARRAY", admin.create_table(
            fluss.TablePath(DATABASE, "array_key"),
            fluss.TableDescriptor(fluss.Schema(nested_key, primary_keys=["k"]), bucket_count=1)))
        assert err.error_code == fluss.ErrorCode.INVALID_TABLE_EXCEPTION, repr(err)
        await conn.close()

    asyncio.run(body())


NESTED_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.int32())),
        pa.field("profile", pa.struct([("age", pa.int32()), ("city", pa.string())])),
    ]
)


def test_nested_value_columns(fjord_server):
    """ARRAY, MAP and ROW value columns of a PK table round-trip through
    pyfluss's upsert and lookup, as Fluss 0.9.1 accepts them (its
    TableDescriptorValidation refuses nested types only in keys)."""

    async def body():
        conn = await connect(fjord_server)
        admin = conn.get_admin()
        path = fluss.TablePath(DATABASE, "nested")
        await step(fjord_server, "create database", admin.create_database(DATABASE, ignore_if_exists=True))
        try:
            await asyncio.wait_for(admin.create_table(
                path, fluss.TableDescriptor(fluss.Schema(NESTED_SCHEMA, primary_keys=["id"]), bucket_count=1)),
                STEP_TIMEOUT_S)
        except fluss.FlussError as e:
            pytest.fail(f"create table with nested value columns: {e}")
        table = await step(fjord_server, "get table", conn.get_table(path))
        row = {"id": 1, "tags": ["a", "b"], "attrs": [("k", 1)], "profile": {"age": 30, "city": "Oslo"}}
        await step(fjord_server, "upsert", table.new_upsert().create_writer().upsert(row).wait())
        got = await step(fjord_server, "lookup", table.new_lookup().create_lookuper().lookup({"id": 1}))
        assert got == row
        await conn.close()

    asyncio.run(body())
