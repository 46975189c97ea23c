//! The upsert writer under faults, through a misbehaving TCP proxy: a PutKv
//! answer lost with its connection after the server applied the batch is
//! retried without a duplicate in the changelog (idempotence); storage
//! pressure (STORAGE_BACKPRESSURE, KV_STORAGE_EXCEPTION, a PutKv answer's
//! `pressure`) holds buckets back and never fails a batch; a slow server
//! makes the writer wait instead of buffering beyond
//! `client.writer.buffer.memory-size`. The lookuper under faults: a lost
//! Lookup answer and buckets refused with a retriable error are resent
//! with their own keys and every lookup reads its row.

mod support;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fjord_client::row::Datum;
use fjord_client::{
    ChangeType, FlussClient, LogScanner, LookupConfig, ScannerConfig, TableInfo, TablePath,
    WriterConfig,
};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use support::{create_pk_table, Fault, TestServer, HANG};

fn schema() -> Schema {
    Schema::builder()
        .column("id", DataType::bigint().with_nullable(false))
        .column("payload", DataType::string())
        .primary_key(["id"])
        .build()
        .unwrap()
}

/// The changelog of every bucket of `table` up to the writer's end
/// offsets: (change type, id) of each record.
async fn changelog(
    client: &FlussClient,
    table: &TableInfo,
    ends: &[fjord_client::BucketOffset],
) -> Vec<(ChangeType, i64)> {
    let route = client.table_route(table).await.unwrap();
    let mut scanner = LogScanner::new(table.clone(), route, ScannerConfig::default()).unwrap();
    for end in ends {
        scanner.subscribe(end.bucket, 0).unwrap();
    }
    let mut next: Vec<i64> = vec![0; table.bucket_count() as usize];
    let mut out = Vec::new();
    while ends
        .iter()
        .any(|e| next[e.bucket as usize] < e.log_end_offset)
    {
        for batch in tokio::time::timeout(HANG, scanner.poll())
            .await
            .unwrap()
            .unwrap()
        {
            for (i, row) in batch.rows().unwrap().iter().enumerate() {
                let Datum::BigInt(id) = row.get(0) else {
                    panic!("id {:?}", row.get(0))
                };
                out.push((batch.change_type(i), id));
            }
            next[batch.bucket as usize] = batch.next_offset();
        }
    }
    out
}

/// Upserts `(id, payload)` for every id, then flushes.
async fn write_ids(
    client: &FlussClient,
    path: &TablePath,
    options: &[(&str, &str)],
    ids: std::ops::Range<i64>,
    payload: &str,
) -> fjord_client::UpsertWriter {
    let mut writer = client
        .upsert_writer(
            path,
            WriterConfig::from_options(options.iter().copied()).unwrap(),
        )
        .await
        .expect("writer");
    for id in ids {
        writer
            .upsert(&[Datum::BigInt(id), Datum::String(payload)])
            .await
            .expect("upsert");
    }
    tokio::time::timeout(HANG, writer.flush())
        .await
        .expect("flush in time")
        .expect("every batch acknowledged after retries");
    writer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_put_kv_answers_are_retried_without_a_duplicate_in_the_changelog() {
    let server = TestServer::start_behind_proxy(Fault::DropPutKvAnswers(2)).await;
    let client = server.client().await;
    let path = TablePath::new("faults", "lost_put_kv");
    let table = create_pk_table(&client, &path, schema(), 2, &[], &[], &[]).await;
    const ROWS: i64 = 20_000;
    let options = [
        ("client.writer.batch-size", "16kb"),
        ("client.writer.batch-timeout", "1h"),
    ];
    let writer = write_ids(&client, &path, &options, 0..ROWS, "payload").await;
    assert_eq!(server.dropped.load(Ordering::SeqCst), 2, "two answers lost");
    assert!(writer.stats().retries >= 2, "{:?}", writer.stats());
    let log = changelog(&client, &table, &writer.log_end_offsets()).await;
    assert_eq!(
        log.len(),
        ROWS as usize,
        "one record per upsert, none twice"
    );
    assert!(log.iter().all(|(change, _)| *change == ChangeType::Insert));
    let ids: HashSet<i64> = log.iter().map(|(_, id)| *id).collect();
    assert_eq!(ids.len(), ROWS as usize);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_backpressure_and_kv_storage_errors_hold_buckets_back_and_never_fail_a_batch() {
    for (code, name) in [(72, "STORAGE_BACKPRESSURE"), (11, "KV_STORAGE_EXCEPTION")] {
        let fault = Fault::RewritePutKvAnswers {
            n: 3,
            error_code: Some(code),
            pressure: None,
        };
        let server = TestServer::start_behind_proxy(fault).await;
        let client = server.client().await;
        let path = TablePath::new("faults", format!("storage_busy_{code}"));
        let table = create_pk_table(&client, &path, schema(), 1, &[], &[], &[]).await;
        // Fewer retries than refusals: storage pressure does not spend them.
        let options = [
            ("client.writer.batch-size", "16kb"),
            ("client.writer.retries", "1"),
            ("client.writer.kv-backpressure.max-throttle", "20 ms"),
        ];
        let writer = write_ids(&client, &path, &options, 0..5_000, "payload").await;
        assert_eq!(server.dropped.load(Ordering::SeqCst), 3, "{name}");
        let stats = writer.stats();
        assert!(stats.retries >= 3, "{name}: {stats:?}");
        if code == 72 {
            assert!(stats.throttles >= 3, "{name}: {stats:?}");
        }
        // The refused batches had been applied: their retries are
        // duplicates, answered as written, and appear once.
        let log = changelog(&client, &table, &writer.log_end_offsets()).await;
        assert_eq!(log.len(), 5_000, "{name}");
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_storage_pressure_throttles_the_bucket() {
    let fault = Fault::RewritePutKvAnswers {
        n: 4,
        error_code: None,
        pressure: Some(0.5),
    };
    let server = TestServer::start_behind_proxy(fault).await;
    let client = server.client().await;
    let path = TablePath::new("faults", "pressure");
    create_pk_table(&client, &path, schema(), 1, &[], &[], &[]).await;
    let options = [
        ("client.writer.batch-size", "16kb"),
        ("client.writer.kv-backpressure.max-throttle", "40 ms"),
    ];
    let writer = write_ids(&client, &path, &options, 0..5_000, "payload").await;
    let stats = writer.stats();
    assert!(stats.throttles >= 4, "{stats:?}");
    assert_eq!(stats.retries, 0, "pressure is not an error: {stats:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_keeps_buffered_bytes_within_the_bound() {
    let server =
        TestServer::start_behind_proxy(Fault::DelayAnswers(Duration::from_millis(20))).await;
    let client = server.client().await;
    let path = TablePath::new("faults", "slow_kv");
    let table = create_pk_table(&client, &path, schema(), 4, &[], &[], &[]).await;
    const BOUND: u64 = 256 * 1024;
    let options = [
        ("client.writer.buffer.memory-size", "256kb"),
        ("client.writer.batch-size", "16kb"),
    ];
    // About 4 MiB of records: sixteen times the bound.
    const ROWS: i64 = 100_000;
    let payload = "x".repeat(24);
    let writer = write_ids(&client, &path, &options, 0..ROWS, &payload).await;
    let stats = writer.stats();
    assert!(
        stats.bytes > 8 * BOUND,
        "wrote well beyond the bound: {stats:?}"
    );
    assert!(stats.max_buffered_bytes <= BOUND, "{stats:?}");
    assert!(stats.memory_waits > 0, "the writer had to wait: {stats:?}");
    assert_eq!(
        stats.buffered_bytes, 0,
        "everything acknowledged: {stats:?}"
    );
    let log = changelog(&client, &table, &writer.log_end_offsets()).await;
    assert_eq!(log.len(), ROWS as usize);
    server.stop().await;
}

/// Looks up every id of `ids` at once (64 callers) and checks each reads
/// its own row (its id, and `payload`).
async fn lookup_every_id(
    client: &FlussClient,
    path: &TablePath,
    ids: std::ops::Range<i64>,
    payload: &'static str,
) {
    let lookuper = client
        .lookuper(path, LookupConfig::default())
        .await
        .expect("lookuper");
    let callers: Vec<_> = (0..64)
        .map(|caller| {
            let lookuper = lookuper.clone();
            let ids = ids.clone();
            tokio::spawn(async move {
                for id in ids.filter(|id| id % 64 == caller) {
                    let row = lookuper
                        .lookup(&[Datum::BigInt(id)])
                        .await
                        .unwrap_or_else(|e| panic!("lookup of {id}: {e}"))
                        .unwrap_or_else(|| panic!("id {id} not found"));
                    assert_eq!(row.get(0), Datum::BigInt(id));
                    assert_eq!(row.get(1), Datum::String(payload));
                }
            })
        })
        .collect();
    for caller in callers {
        tokio::time::timeout(HANG, caller)
            .await
            .expect("lookups in time")
            .expect("a caller failed");
    }
}

/// Lookup requests whose answers are lost with their connection, or
/// whose every bucket answers KV_STORAGE_EXCEPTION (retriable), are sent
/// again with the keys they carried: the request took the keys over from
/// its lookups, and a resend must have them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_and_refused_lookup_answers_are_resent_with_their_keys() {
    for fault in [
        Fault::DropLookupAnswers(2),
        Fault::RewriteLookupAnswers {
            n: 3,
            error_code: 11,
        },
    ] {
        let server = TestServer::start_behind_proxy(fault).await;
        let client = server.client().await;
        let path = TablePath::new("faults", "lookup_resend");
        create_pk_table(&client, &path, schema(), 2, &[], &[], &[]).await;
        const IDS: i64 = 3_000;
        write_ids(&client, &path, &[], 0..IDS, "looked-up").await;
        lookup_every_id(&client, &path, 0..IDS, "looked-up").await;
        let expected = match fault {
            Fault::DropLookupAnswers(n) | Fault::RewriteLookupAnswers { n, .. } => n,
            _ => unreachable!(),
        };
        assert_eq!(
            server.dropped.load(Ordering::SeqCst),
            expected,
            "{fault:?}: answers lost or refused"
        );
        server.stop().await;
    }
}

/// A key holds one of `client.lookup.queue-size` places until it is
/// answered, with a row or with an error. With room for 4 keys and retries
/// off, the keys of 8 refused answers fail (at least 8 of them, more than
/// the room), and their places come back: afterwards every id is looked up
/// by 16 callers, which would wait forever on a room that kept them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_failed_by_the_server_give_back_their_places_in_the_queue() {
    const REFUSED: usize = 8;
    let server = TestServer::start_behind_proxy(Fault::RewriteLookupAnswers {
        n: REFUSED,
        error_code: 11,
    })
    .await;
    let client = server.client().await;
    let path = TablePath::new("faults", "lookup_room");
    create_pk_table(&client, &path, schema(), 2, &[], &[], &[]).await;
    const IDS: i64 = 600;
    write_ids(&client, &path, &[], 0..IDS, "roomy").await;
    let config = LookupConfig::from_options([
        ("client.lookup.queue-size", "4"),
        ("client.lookup.max-retries", "0"),
    ])
    .expect("lookup options");
    let lookuper = client.lookuper(&path, config).await.expect("lookuper");
    let callers: Vec<_> = (0..16)
        .map(|caller| {
            let lookuper = lookuper.clone();
            tokio::spawn(async move {
                let mut failed = 0;
                for id in (0..IDS).filter(|id| id % 16 == caller) {
                    // A refused key is looked up again by its caller.
                    loop {
                        match lookuper.lookup(&[Datum::BigInt(id)]).await {
                            Ok(row) => {
                                let row = row.unwrap_or_else(|| panic!("id {id} not found"));
                                assert_eq!(row.get(1), Datum::String("roomy"));
                                break;
                            }
                            Err(e) => {
                                assert!(
                                    e.to_string().contains("KV_STORAGE_EXCEPTION"),
                                    "id {id}: {e}"
                                );
                                failed += 1;
                            }
                        }
                    }
                }
                failed
            })
        })
        .collect();
    let mut failed = 0;
    for caller in callers {
        failed += tokio::time::timeout(HANG, caller)
            .await
            .expect("lookups in time: places of failed keys not given back?")
            .expect("a caller failed");
    }
    assert!(
        (REFUSED..=REFUSED * 4).contains(&failed),
        "{failed} lookups failed; {REFUSED} answers of at most 4 keys each were refused"
    );
    assert_eq!(server.dropped.load(Ordering::SeqCst), REFUSED);
    server.stop().await;
}
