//! A silent client failure made visible: a fetcher that is answered with
//! records at an offset and keeps asking for that same offset (a client
//! failing to decode the answer and retrying forever) is logged once with
//! the bucket and the offset; a fetcher that advances is not.
//!
//! The log is captured by a small `tracing` subscriber installed for the
//! whole test binary; each test looks only at warnings naming its own
//! table id and bucket.

mod support;

use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use fjord_proto::messages as pb;
use fjord_proto::{Request, Response};
use support::batches::*;
use support::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// The server's threshold (`api::fetch_progress::STALLED_FETCH_REPEATS`).
const STALLED_FETCH_REPEATS: usize = 5;

/// Warnings logged by the process, each as its fields (`name=value`).
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl Subscriber for Capture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() == Level::WARN {
            let mut line = String::new();
            event.record(&mut Fields(&mut line));
            WARNINGS.lock().unwrap().push(line);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn capture_warnings() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| tracing::subscriber::set_global_default(Capture).unwrap());
}

/// The stall warnings naming `table_id` and `bucket`.
fn stall_warnings(table_id: i64, bucket: i32) -> Vec<String> {
    let table = format!("table_id={table_id} ");
    let bucket = format!("bucket={bucket} ");
    WARNINGS
        .lock()
        .unwrap()
        .iter()
        .filter(|w| {
            w.contains("fetcher not advancing") && w.contains(&table) && w.contains(&bucket)
        })
        .cloned()
        .collect()
}

async fn append(c: &mut Client, table_id: i64, bucket_id: i32, ids: std::ops::Range<i32>) {
    let request = Request::ProduceLog(pb::ProduceLogRequest {
        acks: -1,
        table_id,
        timeout_ms: 30_000,
        buckets_req: vec![pb::PbProduceLogReqForBucket {
            bucket_id,
            records: batch(ids, 1, None).into(),
            ..Default::default()
        }],
    });
    let Ok(Response::ProduceLog(r)) = c.call(request).await else {
        panic!("produce failed")
    };
    assert_eq!(r.buckets_resp[0].error_code, None);
}

/// Fetches `offset` of the bucket; returns the records' length and the
/// high watermark.
async fn fetch_at(c: &mut Client, table_id: i64, bucket_id: i32, offset: i64) -> (usize, i64) {
    let Ok(Response::FetchLog(r)) = c.call(fetch(table_id, bucket_id, offset, None, 0)).await
    else {
        panic!("fetch failed")
    };
    let b = &r.tables_resp[0].buckets_resp[0];
    assert_eq!(b.error_code, None);
    (
        b.records.as_ref().map_or(0, |r| r.len()),
        b.high_watermark.unwrap(),
    )
}

#[tokio::test]
async fn client_refetching_an_offset_it_was_sent_records_at_is_logged_once() {
    capture_warnings();
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    append(&mut c, info.table_id, 1, 0..10).await;
    append(&mut c, info.table_id, 1, 10..20).await;

    // A client that fails to decode what it gets: the same fetch again and
    // again, each answered with records.
    for i in 0..STALLED_FETCH_REPEATS * 3 {
        let (bytes, _) = fetch_at(&mut c, info.table_id, 1, 10).await;
        assert!(bytes > 0);
        let expected = usize::from(i + 1 >= STALLED_FETCH_REPEATS);
        assert_eq!(
            stall_warnings(info.table_id, 1).len(),
            expected,
            "after {} fetches",
            i + 1
        );
    }
    let warning = &stall_warnings(info.table_id, 1)[0];
    for field in [
        "partition_id=None ".to_owned(),
        "fetch_offset=10 ".to_owned(),
        format!("times={STALLED_FETCH_REPEATS} "),
        "follower_server_id=-1 ".to_owned(),
    ] {
        assert!(warning.contains(&field), "{field} missing from {warning}");
    }
    assert!(
        warning.contains("it may be failing to decode the response"),
        "{warning}"
    );

    // It moves on, then gets stuck again: a new stall, a second warning.
    let (_, hw) = fetch_at(&mut c, info.table_id, 1, 0).await;
    assert_eq!(hw, 20);
    for _ in 0..STALLED_FETCH_REPEATS {
        fetch_at(&mut c, info.table_id, 1, 10).await;
    }
    let warnings = stall_warnings(info.table_id, 1);
    assert_eq!(warnings.len(), 2, "{warnings:?}");

    // Other buckets of the table were never stalled.
    assert!(stall_warnings(info.table_id, 0).is_empty());
    server.stop().await;
}

#[tokio::test]
async fn client_that_advances_or_waits_at_the_end_is_not_logged() {
    capture_warnings();
    let dir = tempfile::tempdir().unwrap();
    let (server, mut c, info) = server_with_log_table(dir.path()).await;
    // Bucket 2: each fetch moves past what it was sent.
    let mut offset = 0;
    for round in 0..STALLED_FETCH_REPEATS as i32 * 2 {
        append(&mut c, info.table_id, 2, round * 10..round * 10 + 10).await;
        let (bytes, hw) = fetch_at(&mut c, info.table_id, 2, offset).await;
        assert!(bytes > 0);
        offset = hw;
    }
    // Caught up: asking for the end again and again returns no records, so
    // it is waiting, not stalled.
    for _ in 0..STALLED_FETCH_REPEATS * 2 {
        let (bytes, _) = fetch_at(&mut c, info.table_id, 2, offset).await;
        assert_eq!(bytes, 0);
    }
    assert!(stall_warnings(info.table_id, 2).is_empty());
    server.stop().await;
}
