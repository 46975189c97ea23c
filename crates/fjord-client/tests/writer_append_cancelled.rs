//! An `append` future dropped part-way (the caller's `select!` or timeout
//! gave up on it) loses nothing and doubles nothing: the row it had
//! already put into a batch is written once, the buffer memory its batch
//! was short of is still settled by the next call (so every reservation is
//! given back once the rows are acknowledged), and a row whose partition
//! it was still creating is not written until it is appended again.
//!
//! `AppendWriter::append` returns a hand-written future (writer/mod.rs
//! `Append`) whose waiting path is built only when the row must wait; these
//! tests drop it exactly while it waits, found by polling it once with a
//! waker that does nothing.

mod support;

use support::{append_in_time, flush_in_time, HANG};

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::RecordBatch;
use fjord_client::row::Datum;
use fjord_client::{TablePath, WriterConfig};
use support::{Fault, TestServer};

/// Rows the memory test writes at most before an append has to wait: far
/// more than the buffer memory holds, so one must.
const ROWS_MAX: i64 = 20_000;
/// Bytes of every row's STRING value.
const PAYLOAD_BYTES: usize = 1000;

/// Polls `future` once with a waker that does nothing: whether it finished
/// (and with what) or must wait.
fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Ids of column 0 of `batches`.
fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_dropped_while_waiting_for_memory_writes_its_row_once_and_leaks_no_memory() {
    // Slow answers: buffer memory runs out while the caller appends.
    let server =
        TestServer::start_behind_proxy(Fault::DelayAnswers(Duration::from_millis(50))).await;
    let client = server.client().await;
    let path = TablePath::new("cancel", "memory");
    let table =
        support::create_log_table(&client, &path, support::id_text_schema(), 1, "NONE").await;
    let config = WriterConfig::from_options([
        ("client.writer.buffer.memory-size", "64kb"),
        ("client.writer.batch-size", "16kb"),
    ])
    .expect("valid options");
    let mut writer = client.append_writer(&path, config).await.expect("writer");
    let text = "x".repeat(PAYLOAD_BYTES);

    // Append until one row has to wait; drop that append while it waits.
    let mut dropped_at = None;
    for id in 0..ROWS_MAX {
        let row = [Datum::BigInt(id), Datum::String(&text)];
        let mut append = Box::pin(writer.append(&row[..]));
        match poll_once(append.as_mut()) {
            Poll::Ready(result) => result.expect("append"),
            Poll::Pending => {
                drop(append);
                dropped_at = Some(id);
                break;
            }
        }
    }
    let dropped_at = dropped_at.expect("an append waited for buffer memory");

    // The writer goes on: a few more rows, awaited as usual.
    let more = dropped_at + 1..dropped_at + 20;
    for id in more.clone() {
        let row = [Datum::BigInt(id), Datum::String(&text)];
        append_in_time(&mut writer, &row[..]).await;
    }
    flush_in_time(&mut writer).await;
    assert_eq!(
        writer.stats().buffered_bytes,
        0,
        "every batch is acknowledged, yet buffer memory is still reserved: \
         the dropped append's reservation was lost or counted twice"
    );

    // The waiting row was already in its batch when its append was
    // dropped (it waited for the memory that batch lacked): written once,
    // like every row before and after it.
    let expected: Vec<i64> = (0..more.end).collect();
    let mut read = ids(&support::read_all(&client, &table, expected.len()).await);
    read.sort_unstable();
    assert_eq!(
        read, expected,
        "every row once, the dropped append's row included"
    );
    writer.close().await.expect("close");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_dropped_while_its_partition_is_created_writes_the_row_only_when_appended_again()
{
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("cancel", "partition");
    let schema = fjord_format::schema::Schema::builder()
        .column("id", fjord_format::types::DataType::bigint())
        .column("dt", fjord_format::types::DataType::string())
        .build()
        .expect("schema");
    let table =
        support::create_partitioned_table(&client.admin(), &path, schema, &["dt"], Some(1)).await;
    let mut writer = client
        .append_writer(&path, WriterConfig::default())
        .await
        .expect("writer");

    // The first row of a new partition waits for the partition to be
    // created; drop its append then.
    let first = [Datum::BigInt(1), Datum::String("20261203")];
    let mut append = Box::pin(writer.append(&first[..]));
    if let Poll::Ready(result) = poll_once(append.as_mut()) {
        panic!("a new partition's first row did not wait for the partition: {result:?}");
    }
    drop(append);

    // Appended again, then another row: each written once.
    for id in [1, 2] {
        let row = [Datum::BigInt(id), Datum::String("20261203")];
        append_in_time(&mut writer, &row[..]).await;
    }
    flush_in_time(&mut writer).await;
    assert_eq!(writer.stats().buffered_bytes, 0, "no memory left reserved");

    let admin = client.admin();
    let partitions = admin.list_partitions(&path, None).await.expect("list");
    assert_eq!(partitions.len(), 1, "one partition: {partitions:?}");
    let batches =
        support::read_partition_batches(&client, &table, partitions[0].partition_id, 2, HANG).await;
    let read: BTreeSet<i64> = ids(&batches).into_iter().collect();
    assert_eq!(
        ids(&batches).len(),
        2,
        "two rows, none twice: {:?}",
        ids(&batches)
    );
    assert_eq!(read, BTreeSet::from([1, 2]));
    writer.close().await.expect("close");
    server.stop().await;
}
