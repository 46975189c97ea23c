//! `AppendWriter::append_rows` against an in-process server: slices of
//! irregular lengths (across the 256-row run boundary) store exactly the
//! rows given, in order per bucket; a refused row stops the slice there
//! (the rows before it are stored, the error names its index, the writer
//! keeps working); batches sealed inside one call lose and duplicate
//! nothing at their seams; partitioned and hash-bucketed tables get the
//! rows in the same partitions and buckets as `append` puts them; and a
//! slice far larger than the buffer memory waits for acknowledgements.
//! Ignored until fixed: rows much larger than the ones before them are
//! taken in a slice as `append` takes them (batches sealed at the batch
//! size, no memory error).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Int64Type, TimestampMillisecondType};
use arrow_array::{Array, RecordBatch};
use fjord_client::row::{Datum, Timestamp};
use fjord_client::{AppendWriter, FlussClient, LogScanner, ScannerConfig, TableInfo, TablePath};
use fjord_client::{WriterConfig, WriterStats};
use fjord_format::schema::{Schema, TableDescriptor, TableDistribution};
use fjord_format::types::DataType;
use support::{
    create_bucketed_table, create_described_table, create_log_table, read_all_by_bucket, Fault,
    TestServer,
};

/// Bound on every wait, so a writer or server that hangs fails the test.
const STEP: Duration = Duration::from_secs(60);
/// Text the string column is cut from: every length 0..=40 occurs, so
/// empty strings and strings past Arrow's 16-byte inline size are written.
const TEXT: &str = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ";
/// Slice lengths cycled through: single rows, one short of, exactly and
/// one past a run (256 rows), empty slices and long ones.
const SLICES: [usize; 9] = [1, 255, 256, 257, 1000, 0, 2, 511, 7];

/// A row as read back: `(id, s, ts millis, amount unscaled)`.
type Stored = (i64, Option<String>, Option<i64>, Option<i128>);

/// `id BIGINT NOT NULL, s STRING, ts TIMESTAMP(3), amount DECIMAL(10, 2)`:
/// BIGINT, STRING and TIMESTAMP(3) take the run path's column-wise fill,
/// DECIMAL the value-by-value one.
fn schema() -> Schema {
    Schema::builder()
        .column("id", DataType::bigint().not_null())
        .column("s", DataType::string())
        .column("ts", DataType::timestamp(3).expect("timestamp"))
        .column("amount", DataType::decimal(10, 2).expect("decimal"))
        .build()
        .expect("schema")
}

/// Row `k` of [`schema`]: each nullable column NULL now and then (on
/// different rows), string lengths 0 to 40.
fn row(k: i64) -> Vec<Datum<'static>> {
    let len = (k * 7 % 41) as usize;
    vec![
        Datum::BigInt(k),
        if k % 5 == 1 {
            Datum::Null
        } else {
            Datum::String(&TEXT[..len])
        },
        if k % 7 == 2 {
            Datum::Null
        } else {
            Datum::Timestamp(Timestamp::from_millis(1_700_000_000_000 + k * 1_001))
        },
        if k % 11 == 3 {
            Datum::Null
        } else {
            Datum::Decimal(i128::from(k * 12_345 - 1_000_000))
        },
    ]
}

fn rows(ids: std::ops::Range<i64>) -> Vec<Vec<Datum<'static>>> {
    ids.map(row).collect()
}

/// What the server must hold for a row of [`schema`].
fn stored_of(row: &[Datum<'_>]) -> Stored {
    let Datum::BigInt(id) = row[0] else {
        panic!("id is a BIGINT")
    };
    (
        id,
        row[1].as_str().map(str::to_owned),
        match row[2] {
            Datum::Timestamp(t) => Some(t.millis()),
            _ => None,
        },
        match row[3] {
            Datum::Decimal(v) => Some(v),
            _ => None,
        },
    )
}

/// The rows of a batch read back from a table of [`schema`].
fn stored_rows(batch: &RecordBatch) -> Vec<Stored> {
    let ids = batch.column(0).as_primitive::<Int64Type>();
    let texts = batch.column(1).as_string::<i32>();
    let stamps = batch.column(2).as_primitive::<TimestampMillisecondType>();
    let amounts = batch.column(3).as_primitive::<Decimal128Type>();
    (0..batch.num_rows())
        .map(|i| {
            (
                ids.value(i),
                texts.is_valid(i).then(|| texts.value(i).to_owned()),
                stamps.is_valid(i).then(|| stamps.value(i)),
                amounts.is_valid(i).then(|| amounts.value(i)),
            )
        })
        .collect()
}

/// Checks that the table holds exactly `expected` (rows with increasing
/// ids, in the order appended): each bucket's rows in offset order are in
/// append order, and together they are the expected rows, each once.
fn assert_stored(read: Vec<(i32, RecordBatch)>, expected: &[Stored]) {
    let mut by_bucket: BTreeMap<i32, Vec<Stored>> = BTreeMap::new();
    for (bucket, batch) in read {
        by_bucket
            .entry(bucket)
            .or_default()
            .extend(stored_rows(&batch));
    }
    for (bucket, rows) in &by_bucket {
        if let Some(at) = rows.windows(2).position(|w| w[0].0 >= w[1].0) {
            panic!(
                "bucket {bucket}: id {} stored after id {}",
                rows[at + 1].0,
                rows[at].0
            );
        }
    }
    let mut all: Vec<Stored> = by_bucket.into_values().flatten().collect();
    all.sort_unstable_by_key(|r| r.0);
    assert_eq!(all.len(), expected.len(), "rows stored");
    if let Some(at) = all.iter().zip(expected).position(|(a, e)| a != e) {
        panic!(
            "row {at} stored as {:?}, appended as {:?}",
            all[at], expected[at]
        );
    }
}

async fn writer(client: &FlussClient, path: &TablePath, options: &[(&str, &str)]) -> AppendWriter {
    let config = WriterConfig::from_options(options.iter().copied()).expect("valid options");
    client.append_writer(path, config).await.expect("writer")
}

async fn flush(writer: &mut AppendWriter) -> WriterStats {
    tokio::time::timeout(STEP, writer.flush())
        .await
        .expect("flush in time")
        .expect("flush");
    writer.stats()
}

/// Checks that batches were sealed near `batch_bytes` (`client.writer.batch-size`):
/// their mean encoded size is at most twice it, so no batch kept growing
/// past its seal threshold (e.g. while in debt to the buffer memory).
fn assert_batches_near_size(stats: &WriterStats, batch_bytes: u64) {
    assert!(
        stats.batches > 0 && stats.bytes / stats.batches <= 2 * batch_bytes,
        "mean batch of {} bytes for a batch size of {batch_bytes}: {stats:?}",
        stats.bytes / stats.batches.max(1)
    );
}

/// Checks that both maps hold the same ids under the same keys; on a
/// difference, names the first key whose ids differ and how many ids each
/// side has there.
fn assert_same_placement<K: Ord + std::fmt::Debug>(
    by_rows: &BTreeMap<K, Vec<i64>>,
    by_append: &BTreeMap<K, Vec<i64>>,
) {
    let keys: std::collections::BTreeSet<&K> = by_rows.keys().chain(by_append.keys()).collect();
    for key in keys {
        let (r, a) = (by_rows.get(key), by_append.get(key));
        assert!(
            r == a,
            "{key:?}: append_rows stored {} rows there, append {}",
            r.map_or(0, Vec::len),
            a.map_or(0, Vec::len)
        );
    }
}

/// Appends `rows` with `append_rows` in slices of the [`SLICES`] lengths.
async fn append_in_slices(writer: &mut AppendWriter, rows: &[Vec<Datum<'static>>]) {
    let mut rest = rows;
    for len in SLICES.into_iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (slice, after) = rest.split_at(len.min(rest.len()));
        tokio::time::timeout(STEP, writer.append_rows(slice))
            .await
            .expect("append_rows in time")
            .expect("append_rows");
        rest = after;
    }
}

/// Whether `message` names row `index` (and not, say, row `index`0).
fn names_row(message: &str, index: usize) -> bool {
    let needle = format!("row {index}");
    message
        .match_indices(&needle)
        .any(|(at, _)| !message[at + needle.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_of_irregular_lengths_store_every_row_in_order() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("append_rows", "irregular");
    let table = create_log_table(&client, &path, schema(), 3, "LZ4_FRAME").await;
    let mut w = writer(&client, &path, &[]).await;
    const ROWS: i64 = 5_000;
    let all = rows(0..ROWS);
    // A row appended alone between two slices keeps its place.
    append_in_slices(&mut w, &all[..2_600]).await;
    w.append(&all[2_600]).await.expect("append");
    append_in_slices(&mut w, &all[2_601..]).await;
    flush(&mut w).await;

    let expected: Vec<Stored> = all.iter().map(|r| stored_of(r)).collect();
    assert!(expected.iter().any(|r| r.1.as_deref() == Some("")));
    assert!(expected.iter().any(|r| r.1.is_none() && r.2.is_some()));
    assert_stored(
        read_all_by_bucket(&client, &table, ROWS as usize).await,
        &expected,
    );
    server.stop().await;
}

/// How a row of a slice is made unacceptable.
#[derive(Clone, Copy, Debug)]
enum Bad {
    /// A STRING datum in the BIGINT column (a run-path column).
    WrongType,
    /// NULL in the NOT NULL column.
    NullId,
    /// One field too few.
    ShortRow,
    /// A DECIMAL too wide for DECIMAL(10, 2) (the value-by-value column).
    DecimalOutOfRange,
    /// An INT datum in the DECIMAL column, plus NULL in the NOT NULL
    /// column of the row 10 after: the first column refuses the later row
    /// first, yet the earlier row is the one named and stopped at.
    TwoRefusals,
}

fn spoil(rows: &mut [Vec<Datum<'static>>], index: usize, bad: Bad) {
    match bad {
        Bad::WrongType => rows[index][0] = Datum::String("not a number"),
        Bad::NullId => rows[index][0] = Datum::Null,
        Bad::ShortRow => {
            rows[index].pop();
        }
        Bad::DecimalOutOfRange => rows[index][3] = Datum::Decimal(10_000_000_000),
        Bad::TwoRefusals => {
            rows[index][3] = Datum::Int(7);
            rows[index + 10][0] = Datum::Null;
        }
    }
}

/// Appends 600 rows with row `index` spoiled by `bad` into a new table
/// (`bucket_keys` empty: the run path; else a bucket per row), checks the
/// refusal and that rows `0..index` and then a later good slice are stored.
async fn refused_row_case(
    client: &FlussClient,
    name: &str,
    bucket_keys: &[&str],
    index: usize,
    bad: Bad,
) {
    let path = TablePath::new("append_rows", name);
    let table = create_bucketed_table(client, &path, schema(), 2, bucket_keys, "ZSTD").await;
    let mut w = writer(client, &path, &[]).await;
    let mut slice = rows(0..600);
    spoil(&mut slice, index, bad);
    let error = tokio::time::timeout(STEP, w.append_rows(&slice))
        .await
        .expect("append_rows in time")
        .expect_err("a slice with a bad row is refused");
    assert!(
        names_row(&error.to_string(), index),
        "{bad:?} at {index} ({name}): {error}"
    );
    flush(&mut w).await;
    // The writer keeps working after the refusal.
    let later = rows(1_000..1_300);
    tokio::time::timeout(STEP, w.append_rows(&later))
        .await
        .expect("append_rows in time")
        .expect("a good slice after a refused one");
    flush(&mut w).await;

    let expected: Vec<Stored> = slice[..index]
        .iter()
        .chain(&later)
        .map(|r| stored_of(r))
        .collect();
    assert_stored(
        read_all_by_bucket(client, &table, expected.len()).await,
        &expected,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_row_past_the_first_run_stops_the_slice_there() {
    let server = TestServer::start().await;
    let client = server.client().await;
    refused_row_case(&client, "wrong_type_300", &[], 300, Bad::WrongType).await;
    // The first row of the second run: the run appends nothing.
    refused_row_case(&client, "short_row_256", &[], 256, Bad::ShortRow).await;
    refused_row_case(&client, "two_refusals_300", &[], 300, Bad::TwoRefusals).await;
    // A bucket per row (hashed table): the same contract, row by row.
    refused_row_case(&client, "hashed_300", &["id"], 300, Bad::WrongType).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_row_inside_the_first_run_stops_the_slice_there() {
    let server = TestServer::start().await;
    let client = server.client().await;
    refused_row_case(&client, "null_id_100", &[], 100, Bad::NullId).await;
    refused_row_case(&client, "decimal_100", &[], 100, Bad::DecimalOutOfRange).await;
    // The very first row: nothing of the slice is stored.
    refused_row_case(&client, "wrong_type_0", &[], 0, Bad::WrongType).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_sealed_inside_one_call_lose_and_duplicate_no_row_at_their_seams() {
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("append_rows", "many_batches");
    const BUCKETS: i32 = 3;
    let table = create_log_table(&client, &path, schema(), BUCKETS, "NONE").await;
    let mut w = writer(
        &client,
        &path,
        &[
            ("client.writer.batch-size", "16kb"),
            // Only size seals a batch during the call.
            ("client.writer.batch-timeout", "1h"),
        ],
    )
    .await;
    // About 400 KiB of rows, some 25 batches of 16 KiB, in one call.
    const ROWS: i64 = 8_000;
    let all = rows(0..ROWS);
    tokio::time::timeout(STEP, w.append_rows(&all))
        .await
        .expect("append_rows in time")
        .expect("append_rows");
    let stats = flush(&mut w).await;
    // Flush seals at most one open batch per bucket: more batches than
    // that were sealed by size inside the call.
    assert!(
        stats.batches > 2 * BUCKETS as u64,
        "batches sealed inside the call: {stats:?}"
    );
    assert_batches_near_size(&stats, 16 * 1024);
    let expected: Vec<Stored> = all.iter().map(|r| stored_of(r)).collect();
    assert_stored(
        read_all_by_bucket(&client, &table, ROWS as usize).await,
        &expected,
    );
    server.stop().await;
}

/// `db.<name>`: `id BIGINT, s STRING, dt STRING`, partitioned by `dt`,
/// two buckets per partition by the hash of `id`.
async fn create_partitioned_hashed_table(client: &FlussClient, name: &str) -> TableInfo {
    let schema = Schema::builder()
        .column("id", DataType::bigint())
        .column("s", DataType::string())
        .column("dt", DataType::string())
        .build()
        .expect("schema");
    let descriptor = TableDescriptor::new(
        schema,
        None,
        vec!["dt".to_owned()],
        Some(TableDistribution {
            bucket_count: Some(2),
            bucket_keys: vec!["id".to_owned()],
        }),
        BTreeMap::new(),
        BTreeMap::new(),
    )
    .expect("descriptor");
    let path = TablePath::new("append_rows", name);
    create_described_table(&client.admin(), &path, &descriptor).await
}

/// The sorted ids stored in each (partition name, bucket) of a table
/// made by [`create_partitioned_hashed_table`], once `expected` rows arrived.
async fn ids_by_partition_and_bucket(
    client: &FlussClient,
    table: &TableInfo,
    expected: usize,
) -> BTreeMap<(String, i32), Vec<i64>> {
    let partitions = client
        .admin()
        .list_partitions(&table.path, None)
        .await
        .expect("list partitions");
    let mut scanner =
        LogScanner::new_partitioned(table.clone(), ScannerConfig::default()).expect("scanner");
    let mut names = BTreeMap::new();
    for p in partitions {
        let route = client
            .partition_route(table, p.partition_id)
            .await
            .expect("partition route");
        for bucket in 0..table.bucket_count() {
            scanner
                .subscribe_partition(p.partition_id, route.clone(), bucket, 0)
                .expect("subscribe");
        }
        names.insert(p.partition_id, p.name);
    }
    let deadline = std::time::Instant::now() + STEP;
    let mut out: BTreeMap<(String, i32), Vec<i64>> = BTreeMap::new();
    let mut rows = 0;
    while rows < expected {
        assert!(
            std::time::Instant::now() < deadline,
            "{rows} of {expected} rows within {STEP:?}"
        );
        for batch in scanner.poll().await.expect("poll") {
            let partition = batch.partition_id.expect("a partitioned batch");
            let ids = batch.records.column(0).as_primitive::<Int64Type>();
            rows += ids.len();
            out.entry((names[&partition].clone(), batch.bucket))
                .or_default()
                .extend(ids.values().iter().copied());
        }
    }
    for ids in out.values_mut() {
        ids.sort_unstable();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_and_hashed_tables_get_the_rows_where_append_puts_them() {
    let server = TestServer::start().await;
    let client = server.client().await;
    const ROWS: i64 = 1_500;
    const DAYS: [&str; 3] = ["d1", "d2", "d3"];

    // Hash-bucketed, not partitioned.
    let by_rows = TablePath::new("append_rows", "hashed_by_rows");
    let by_one = TablePath::new("append_rows", "hashed_by_one");
    let rows_table = create_bucketed_table(&client, &by_rows, schema(), 4, &["id"], "ZSTD").await;
    let one_table = create_bucketed_table(&client, &by_one, schema(), 4, &["id"], "ZSTD").await;
    let all = rows(0..ROWS);
    let mut w = writer(&client, &by_rows, &[]).await;
    append_in_slices(&mut w, &all).await;
    flush(&mut w).await;
    let mut w = writer(&client, &by_one, &[]).await;
    for r in &all {
        w.append(r).await.expect("append");
    }
    flush(&mut w).await;
    let per_bucket = |read: Vec<(i32, RecordBatch)>| {
        let mut buckets: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        for (bucket, batch) in read {
            buckets
                .entry(bucket)
                .or_default()
                .extend(stored_rows(&batch).into_iter().map(|r| r.0));
        }
        buckets.values_mut().for_each(|ids| ids.sort_unstable());
        buckets
    };
    let from_rows = per_bucket(read_all_by_bucket(&client, &rows_table, ROWS as usize).await);
    let from_one = per_bucket(read_all_by_bucket(&client, &one_table, ROWS as usize).await);
    assert_eq!(from_one.len(), 4, "rows spread over every bucket");
    assert_eq!(
        from_one.values().map(Vec::len).sum::<usize>(),
        ROWS as usize
    );
    assert_same_placement(&from_rows, &from_one);

    // Partitioned (created on the first row of each day), hashed within.
    let rows_table = create_partitioned_hashed_table(&client, "partitioned_by_rows").await;
    let one_table = create_partitioned_hashed_table(&client, "partitioned_by_one").await;
    // Days change every few rows and recur, within runs and across them.
    let all: Vec<[Datum<'static>; 3]> = (0..ROWS)
        .map(|k| {
            [
                Datum::BigInt(k),
                Datum::String(&TEXT[..(k % 41) as usize]),
                Datum::String(DAYS[(k / 3 % 3) as usize]),
            ]
        })
        .collect();
    let mut w = writer(&client, &rows_table.path, &[]).await;
    let mut rest = &all[..];
    for len in SLICES.into_iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (slice, after) = rest.split_at(len.min(rest.len()));
        w.append_rows(slice).await.expect("append_rows");
        rest = after;
    }
    flush(&mut w).await;
    let mut w = writer(&client, &one_table.path, &[]).await;
    for r in &all {
        w.append(r).await.expect("append");
    }
    flush(&mut w).await;
    let from_rows = ids_by_partition_and_bucket(&client, &rows_table, ROWS as usize).await;
    let from_one = ids_by_partition_and_bucket(&client, &one_table, ROWS as usize).await;
    assert_eq!(from_one.len(), 6, "every bucket of every day holds rows");
    assert_same_placement(&from_rows, &from_one);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slice_larger_than_the_buffer_memory_waits_for_acknowledgements() {
    // Answers held back, so acknowledgements come slower than rows.
    let server =
        TestServer::start_behind_proxy(Fault::DelayAnswers(Duration::from_millis(20))).await;
    let client = server.client().await;
    let path = TablePath::new("append_rows", "back_pressure");
    let table = create_log_table(&client, &path, support::id_text_schema(), 4, "NONE").await;
    const MEMORY: u64 = 256 * 1024;
    let mut w = writer(
        &client,
        &path,
        &[
            ("client.writer.buffer.memory-size", "256kb"),
            ("client.writer.batch-size", "16kb"),
        ],
    )
    .await;
    // About 2 MiB of rows, eight times the buffer memory, in one call.
    const ROWS: i64 = 60_000;
    let payload = "y".repeat(24);
    let all: Vec<[Datum<'_>; 2]> = (0..ROWS)
        .map(|id| [Datum::BigInt(id), Datum::String(&payload)])
        .collect();
    tokio::time::timeout(STEP, w.append_rows(&all))
        .await
        .expect("append_rows completes: it waits for acknowledgements, it does not hang")
        .expect("append_rows waits instead of failing");
    let stats = flush(&mut w).await;
    // (`max_buffered_bytes` is a semaphore's high-water mark and cannot
    // exceed the memory size whatever the writer does: not asserted.)
    assert!(
        stats.bytes > 4 * MEMORY,
        "wrote well past the memory: {stats:?}"
    );
    assert!(stats.memory_waits > 0, "the call had to wait: {stats:?}");
    assert_eq!(
        stats.buffered_bytes, 0,
        "every reservation released: {stats:?}"
    );
    // Under back-pressure a batch in debt waits; it does not keep taking
    // rows past its seal threshold.
    assert_batches_near_size(&stats, 16 * 1024);
    let mut ids: Vec<i64> = read_all_by_bucket(&client, &table, ROWS as usize)
        .await
        .into_iter()
        .flat_map(|(_, b)| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..ROWS).collect::<Vec<_>>(), "every row stored once");
    server.stop().await;
}

/// A server, a one-bucket `id BIGINT, text STRING` table `name` (no
/// compression) and a writer with `memory` of buffer memory and 16 KiB
/// batches: the set-up of the row-size tests.
async fn id_text_writer(
    name: &str,
    memory: &str,
) -> (TestServer, FlussClient, TableInfo, AppendWriter) {
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("append_rows", name);
    let table = create_log_table(&client, &path, support::id_text_schema(), 1, "NONE").await;
    let w = writer(
        &client,
        &path,
        &[
            ("client.writer.buffer.memory-size", memory),
            ("client.writer.batch-size", "16kb"),
        ],
    )
    .await;
    (server, client, table, w)
}

/// Rows far larger than the ones before them: the run ends where a
/// row-by-row writer would seal the batch, from the rows' own sizes (before
/// the fix, 3fdfd4f, the run's length came from the earlier rows' mean
/// size, so 256 rows of 8 KiB went into one 2 MiB batch whose memory
/// deficit exceeded buffer memory, and the writer stayed failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_far_larger_than_the_ones_before_are_taken_as_append_takes_them() {
    let (server, client, table, mut w) = id_text_writer("growing_rows", "1mb").await;
    // Small rows first: the writer learns rows of some 20 bytes.
    let small: Vec<[Datum<'_>; 2]> = (0..1_000)
        .map(|id| [Datum::BigInt(id), Datum::String("small")])
        .collect();
    w.append_rows(&small).await.expect("small rows");
    // Then 256 rows of 8 KiB each (2 MiB, twice the buffer memory): row
    // by row, `append` seals a batch every two of them.
    let big_text = "z".repeat(8 * 1024);
    let big: Vec<[Datum<'_>; 2]> = (1_000..1_256)
        .map(|id| [Datum::BigInt(id), Datum::String(&big_text)])
        .collect();
    tokio::time::timeout(STEP, w.append_rows(&big))
        .await
        .expect("append_rows in time")
        .expect("rows that append takes one by one are taken in a slice too");
    let stats = flush(&mut w).await;
    assert_batches_near_size(&stats, 16 * 1024);
    let mut ids: Vec<i64> = read_all_by_bucket(&client, &table, 1_256)
        .await
        .into_iter()
        .flat_map(|(_, b)| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..1_256).collect::<Vec<_>>());
    server.stop().await;
}

/// A row that buffer memory can never hold is refused, naming it, by
/// `append` and by `append_rows` alike, and the writer goes on: the rows
/// before it are stored, and so are later ones. A row that fits only in a
/// batch of its own gets one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_larger_than_buffer_memory_is_refused_and_the_writer_goes_on() {
    let (server, client, table, mut w) = id_text_writer("giant_rows", "256kb").await;
    let giant = "g".repeat(300 * 1024);
    // Fits buffer memory (256 KiB) alone — 12 fixed bytes, the text and a
    // bitmap byte come to 8 bytes under it — but not with any row before it.
    let large = "l".repeat(256 * 1024 - 12 - 1 - 8);
    let small: Vec<[Datum<'_>; 2]> = (0..10)
        .map(|id| [Datum::BigInt(id), Datum::String("small")])
        .collect();
    w.append_rows(&small).await.expect("small rows");

    let error = w
        .append(&[Datum::BigInt(10), Datum::String(&giant)])
        .await
        .expect_err("a row larger than buffer memory");
    assert!(error.to_string().contains("cannot be buffered"), "{error}");
    // The refusal sealed the small rows; these open a new batch, which the
    // large row does not fit beside: it gets a batch of its own.
    let more: Vec<[Datum<'_>; 2]> = (30..33)
        .map(|id| [Datum::BigInt(id), Datum::String("small")])
        .collect();
    w.append_rows(&more).await.expect("small rows again");
    let batches_before = w.stats().batches;
    w.append(&[Datum::BigInt(11), Datum::String(&large)])
        .await
        .expect("a large row that fits alone");

    let mut slice: Vec<[Datum<'_>; 2]> = (12..20)
        .map(|id| [Datum::BigInt(id), Datum::String("small")])
        .collect();
    slice[5] = [Datum::BigInt(17), Datum::String(&giant)];
    let error = w
        .append_rows(&slice)
        .await
        .expect_err("a giant row in a slice");
    let text = error.to_string();
    assert!(names_row(&text, 5), "{text}");
    assert!(text.contains("cannot be buffered"), "{text}");
    w.append_rows(&[
        [Datum::BigInt(40), Datum::String("small")],
        [Datum::BigInt(41), Datum::String("small")],
        [Datum::BigInt(20), Datum::String(&large)],
    ])
    .await
    .expect("a large row after small ones through append_rows");
    w.append_rows(&[[Datum::BigInt(21), Datum::String("after")]])
        .await
        .expect("the writer goes on");
    let stats = flush(&mut w).await;
    // Small rows 30..33, the large row 11, rows 12..17, rows 40 and 41, the
    // large row 20 and row 21: at least six batches after `batches_before`
    // (each large row alone, the rows before each sealed apart from it).
    assert!(
        stats.batches >= batches_before + 6,
        "{stats:?} from {batches_before}"
    );

    let mut ids: Vec<i64> = read_all_by_bucket(&client, &table, 23)
        .await
        .into_iter()
        .flat_map(|(_, b)| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    let expected: Vec<i64> = (0..10)
        .chain([11])
        .chain(12..17)
        .chain([20, 21])
        .chain(30..33)
        .chain([40, 41])
        .collect();
    assert_eq!(ids, expected);
    server.stop().await;
}
