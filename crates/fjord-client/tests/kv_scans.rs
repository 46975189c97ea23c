//! A primary-key table bucket's current rows through the native client:
//! LimitScan returns the first rows in key order; a ScanKv scanner streams
//! every row once, in key order, batch after batch; a scanner dropped
//! before its end closes its server session (the server keeps at most 8
//! per bucket, so scanners dropped one after another would otherwise run
//! out).

mod support;

use fjord_client::row::Datum;
use fjord_client::{KvBucket, TablePath, WriterConfig};
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use support::{create_pk_table, TestServer, HANG};

const ROWS: i32 = 500;

async fn table_of_rows(
    server: &TestServer,
    name: &str,
) -> (fjord_client::FlussClient, fjord_client::TableInfo) {
    let client = server.client().await;
    let path = TablePath::new("scans", name);
    let schema = Schema::builder()
        .column("id", DataType::int().with_nullable(false))
        .column("text", DataType::string())
        .primary_key(["id"])
        .build()
        .unwrap();
    let table = create_pk_table(&client, &path, schema, 1, &[], &[], &[]).await;
    let mut writer = client
        .upsert_writer(&path, WriterConfig::default())
        .await
        .unwrap();
    let text = "x".repeat(40);
    // Written in reverse: the scans return key order, not write order.
    for id in (0..ROWS).rev() {
        writer
            .upsert(&[Datum::Int(id), Datum::String(&text)])
            .await
            .unwrap();
    }
    writer.flush().await.unwrap();
    (client, table)
}

/// The ids of `rows`, as read.
fn ids(rows: &fjord_client::KvRows) -> Vec<i32> {
    rows.iter()
        .map(|r| match r.get(0) {
            Datum::Int(id) => id,
            other => panic!("id {other:?}"),
        })
        .collect()
}

/// Key order of INT keys: the order of their compacted (varint) bytes.
fn key_order(mut ids: Vec<i32>) -> Vec<i32> {
    ids.sort_by_key(|id| {
        let mut v = *id as u32;
        let mut bytes = Vec::new();
        loop {
            let low = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                bytes.push(low);
                break;
            }
            bytes.push(low | 0x80);
        }
        bytes
    });
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_scan_returns_the_first_rows_in_key_order() {
    let server = TestServer::start().await;
    let (client, table) = table_of_rows(&server, "limit").await;
    let rows = client
        .limit_scan(&table, KvBucket::new(0), 7)
        .await
        .unwrap();
    let all = key_order((0..ROWS).collect());
    assert_eq!(ids(&rows), all[..7]);
    let batch = rows.to_record_batch().unwrap();
    assert_eq!(batch.num_rows(), 7);
    let e = client
        .limit_scan(&table, KvBucket::new(3), 1)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kv_scanner_streams_every_row_once_in_key_order() {
    let server = TestServer::start().await;
    let (client, table) = table_of_rows(&server, "whole").await;
    // About 20 rows a batch.
    let mut scanner = client
        .kv_scanner(&table, KvBucket::new(0), 1_000)
        .await
        .unwrap();
    let mut read = Vec::new();
    let mut batches = 0;
    while let Some(rows) = tokio::time::timeout(HANG, scanner.next_batch())
        .await
        .unwrap()
        .unwrap()
    {
        batches += 1;
        read.extend(ids(&rows));
    }
    assert!(batches > 5, "{batches} batches");
    assert_eq!(read, key_order((0..ROWS).collect()));
    assert!(scanner.log_offset().is_some(), "the snapshot's offset");
    assert!(
        scanner.next_batch().await.unwrap().is_none(),
        "stays at its end"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scanners_dropped_before_their_end_close_their_sessions() {
    let server = TestServer::start().await;
    let (client, table) = table_of_rows(&server, "dropped").await;
    // Twice the server's 8 sessions per bucket: each must be closed for
    // the next to open (a refused open is retried until the drop's close
    // has reached the server; a close that never comes hangs the test).
    for round in 0..16 {
        tokio::time::timeout(HANG, async {
            loop {
                let mut scanner = client
                    .kv_scanner(&table, KvBucket::new(0), 100)
                    .await
                    .unwrap();
                match scanner.next_batch().await {
                    Ok(Some(rows)) => {
                        assert!(!rows.is_empty());
                        return;
                    }
                    Ok(None) => panic!("round {round}: no rows"),
                    Err(e) if e.to_string().contains("TOO_MANY_SCANNERS") => {
                        tokio::task::yield_now().await
                    }
                    Err(e) => panic!("round {round}: {e}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("round {round}: dropped scanners kept their sessions"));
    }
    // An explicit close is answered.
    let mut scanner = client
        .kv_scanner(&table, KvBucket::new(0), 100)
        .await
        .unwrap();
    scanner.next_batch().await.unwrap();
    scanner.close().await.unwrap();
    server.stop().await;
}
