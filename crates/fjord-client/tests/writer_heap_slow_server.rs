//! The writer's REAL heap against a slow server (issue 4: "back-pressure
//! holds memory within the configured bound when the server is slow").
//!
//! `writer_faults.rs` checks the writer's own count of reserved buffer
//! memory, which stays within `client.writer.buffer.memory-size` by
//! construction. This binary measures what the process actually holds: a
//! counting `#[global_allocator]` tracks the live heap of the client's
//! threads (the test thread, the client runtime's workers and the writer's
//! encoder thread) and its exact peak — every allocation updates the peak,
//! nothing is sampled. The in-process server and the slowing proxy run on
//! a runtime of their own whose threads are not counted: the bytes they
//! hold are the server's, not the writer's.
//!
//! Each test writes about ten times the buffer memory through a proxy that
//! holds every answer, so the writer must wait for acknowledgements, and
//! asserts that the heap grown above the baseline (client, table and writer
//! built, no row appended yet) stays within [`HEAP_BUDGET_BYTES`], derived
//! below from the writer's documented holdings. The tests take turns
//! ([`counting_heap::serial`]): the counter is process-wide.

mod counting_heap;
mod support;

use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use fjord_client::row::Datum;
use fjord_client::{AppendWriter, TablePath, WriterConfig, WriterStats};
use support::{create_log_table, read_all, Fault, TestServer};

// ---- The writer's configuration -------------------------------------------

/// `client.writer.buffer.memory-size` (the option below says the same).
const MEMORY_BYTES: usize = 256 * 1024;
const MEMORY_OPTION: &str = "256kb";
/// `client.writer.batch-size`: a sixteenth of the memory.
const BATCH_BYTES: usize = 16 * 1024;
const BATCH_OPTION: &str = "16kb";
/// Buckets of the table. The writer's default sticky assigner fills one
/// bucket's batch at a time, so one batch is open at any moment.
const BUCKETS: i32 = 4;
/// Bytes of the STRING column of every row.
const PAYLOAD_BYTES: usize = 100;
/// Rows written per test: ~2.7 MB of Arrow data, about ten times the
/// buffer memory.
const ROWS: i64 = 24_000;
/// How long the proxy holds every answer (one after another per
/// connection): a server far slower than the writer.
const ANSWER_DELAY: Duration = Duration::from_millis(10);

// ---- The heap budget, from the writer's documented holdings ---------------
//
// The writer's constants are crate-private; their values are restated here
// with where they come from (crates/fjord-client/src/writer/).
//
// Seal threshold S (accumulator.rs `seal_threshold`): batch-size / ratio,
// the ratio clamped to [0.05, 1], at most memory / 4. With compression NONE
// an encoded batch is its Arrow bytes plus IPC framing, so the learned
// ratio is >= 1 and S = BATCH_BYTES. With `batch-timeout` at a minute no
// batch is sealed by age, so every batch but the last (sealed by flush)
// is sealed by the row (or `append_rows` run, cut at one row past the
// threshold) that crosses S: a batch's Arrow bytes are at most S + one row.

/// Estimated Arrow bytes of one row (`RowBatchBuilder::estimated_bytes`):
/// BIGINT value, STRING offset and data, two validity bits (rounded up).
const ROW_BYTES: usize = 8 + 4 + PAYLOAD_BYTES + 1;
/// Heap of one batch's column buffers: its bytes (S + one row) twice over,
/// as a buffer that outgrows its presized room doubles (the first batch
/// grows from nothing; later ones are presized from the last), plus the
/// 64-byte rounding of its three buffers.
const BATCH_HEAP_BYTES: usize = 2 * (BATCH_BYTES + ROW_BYTES) + 3 * 64;
/// Column-buffer sets alive at once: the open batch, the sealed batches not
/// yet encoded (backlog.rs `ENCODE_BACKLOG_MAX` = 2, plus the one whose row
/// found the backlog full and waits), and the encoded ones kept for reuse
/// (accumulator.rs `RECYCLED_BATCHES_MAX` = 4; their `RECYCLED_BYTES_MAX`
/// of 32 MiB does not bind at this size). The open batch takes its buffers
/// from the kept ones, so the three add up and no more.
const BATCH_SETS: usize = 1 + (2 + 1) + 4;
/// IPC framing of one encoded batch beyond its Arrow bytes (log batch
/// header, IPC message metadata, 8-byte padding of three buffers): well
/// under this.
const FRAMING_BYTES: usize = 1024;
/// encode.rs `ENCODE_HEADROOM_BYTES`: room an encode buffer gets beyond the
/// estimate.
const ENCODE_HEADROOM_BYTES: usize = 4096;
/// encode.rs `OUTPUT_BUFFER_HEADROOM_DIVISOR`: a fresh encode buffer gets a
/// sixteenth more room.
const OUTPUT_HEADROOM_DIVISOR: usize = 16;
/// Capacity of one encode buffer: (S + one row + framing + headroom) plus
/// a sixteenth (encode.rs `OutputPool::take`; a kept buffer is reused
/// only for a batch it fits, so none is larger).
const OUTPUT_BUFFER_BYTES: usize = {
    let need = BATCH_BYTES + ROW_BYTES + FRAMING_BYTES + ENCODE_HEADROOM_BYTES;
    need + need / OUTPUT_HEADROOM_DIVISOR
};
/// Encoded batches not yet acknowledged: each holds at least S of the
/// memory (its reservation, cut to its encoded length, which is larger
/// with NONE), so at most memory / S of them, plus the small last one.
const UNACKED_MAX: usize = MEMORY_BYTES / BATCH_BYTES + 1;
/// Encode buffers alive at once: the unacknowledged ones, the one being
/// encoded into, and those kept after acknowledgement for reuse (encode.rs
/// `OUTPUT_BUFFERS_MAX` = 8).
const OUTPUT_BUFFERS: usize = UNACKED_MAX + 1 + 8;
/// What the writer's background work holds per batch in flight besides its
/// bytes (the request's task, its `Vec` of batches, the protobuf request
/// and its chunks, the answer's slot and body, channel blocks): a few
/// hundred bytes each, allowed 2 KiB for each of the 26
/// [`OUTPUT_BUFFERS`] (52 KiB), rounded up to 64 KiB.
const BOOKKEEPING_BYTES: usize = 64 * 1024;
/// The most heap the writer may grow by while the server is slow:
/// 8 column-buffer sets of 32.4 KiB + 26 encode buffers of 22.4 KiB +
/// 64 KiB = 906 KiB (928,192 bytes), about 3.5 times the buffer memory,
/// which counts Arrow and encoded bytes, not the buffers' capacity, the
/// recycled sets or the kept encode buffers. A writer without
/// back-pressure would hold all ~2.7 MB written (more, in buffers).
const HEAP_BUDGET_BYTES: usize =
    BATCH_SETS * BATCH_HEAP_BYTES + OUTPUT_BUFFERS * OUTPUT_BUFFER_BYTES + BOOKKEEPING_BYTES;

/// How the test hands rows to the writer.
#[derive(Clone, Copy, Debug)]
enum Input {
    /// One `append` per row.
    Append,
    /// `append_rows` with slices of [`ROWS_PER_CALL`] rows.
    AppendRows,
}

/// Rows per `append_rows` call.
const ROWS_PER_CALL: usize = 500;

/// What one write phase observed.
struct Observed {
    stats: WriterStats,
    baseline: isize,
    peak: isize,
}

#[test]
fn a_slow_server_keeps_the_writers_real_heap_within_budget_through_append() {
    let _turn = counting_heap::serial();
    check_heap_against_slow_server(Input::Append, "append");
}

#[test]
fn a_slow_server_keeps_the_writers_real_heap_within_budget_through_append_rows() {
    let _turn = counting_heap::serial();
    check_heap_against_slow_server(Input::AppendRows, "append_rows");
}

fn check_heap_against_slow_server(input: Input, table: &str) {
    // The server's runtime: its threads (workers and blocking pool) are not
    // counted; neither is starting the server from this thread.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(counting_heap::uncounted_thread)
        .enable_all()
        .build()
        .expect("server runtime");
    let server = counting_heap::uncounted(|| {
        server_rt.block_on(TestServer::start_behind_proxy(Fault::DelayAnswers(
            ANSWER_DELAY,
        )))
    });
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("client runtime");
    let observed = client_rt.block_on(write_and_read_back(&server, input, table));
    counting_heap::uncounted(|| server_rt.block_on(server.stop()));
    drop(client_rt);
    drop(server_rt);

    let Observed {
        stats,
        baseline,
        peak,
    } = observed;
    let growth = peak - baseline;
    eprintln!(
        "{input:?}: heap grew by at most {growth} bytes (budget {HEAP_BUDGET_BYTES}); {stats:?}"
    );
    assert!(
        stats.bytes > 8 * MEMORY_BYTES as u64,
        "{input:?} wrote well beyond the buffer memory: {stats:?}"
    );
    assert!(
        stats.memory_waits > 0,
        "{input:?}: the slow server made the writer wait for memory: {stats:?}"
    );
    // The counter sees the writer's buffers (encoder thread included): the
    // heap grew by more than one batch while it wrote.
    assert!(
        growth > BATCH_BYTES as isize,
        "{input:?}: the heap grew by only {growth} bytes: are the writer's threads counted?"
    );
    assert!(
        growth <= HEAP_BUDGET_BYTES as isize,
        "{input:?}: the writer's heap grew by {growth} bytes above its baseline of \
         {baseline} while the server was slow; the budget is {HEAP_BUDGET_BYTES} \
         (buffer.memory-size {MEMORY_BYTES}); {stats:?}"
    );
}

/// Creates the table and writer, writes [`ROWS`] rows through `input`
/// while the heap's peak is tracked, flushes, and reads every row back.
async fn write_and_read_back(server: &TestServer, input: Input, table: &str) -> Observed {
    let client = server.client().await;
    let path = TablePath::new("heap", table);
    let info = create_log_table(&client, &path, support::id_text_schema(), BUCKETS, "NONE").await;
    let options = [
        ("client.writer.buffer.memory-size", MEMORY_OPTION),
        ("client.writer.batch-size", BATCH_OPTION),
        // Batches are sealed by size only (see the budget's derivation).
        ("client.writer.batch-timeout", "1 min"),
    ];
    let mut writer = client
        .append_writer(&path, WriterConfig::from_options(options).expect("config"))
        .await
        .expect("writer");
    let payload = "x".repeat(PAYLOAD_BYTES);
    let mut rows: Vec<[Datum<'_>; 2]> =
        vec![[Datum::BigInt(0), Datum::String(&payload)]; ROWS_PER_CALL];

    let baseline = counting_heap::mark();
    match input {
        Input::Append => {
            for id in 0..ROWS {
                writer
                    .append(&[Datum::BigInt(id), Datum::String(&payload)])
                    .await
                    .expect("append");
            }
        }
        Input::AppendRows => append_in_slices(&mut writer, &mut rows).await,
    }
    tokio::time::timeout(Duration::from_secs(60), writer.flush())
        .await
        .expect("flush in time")
        .expect("flush");
    let peak = counting_heap::peak();
    let stats = writer.stats();
    drop(writer);

    let mut ids: Vec<i64> = read_all(&client, &info, ROWS as usize)
        .await
        .iter()
        .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids.len(),
        ROWS as usize,
        "{input:?}: every row read back once"
    );
    assert!(
        ids.iter().copied().eq(0..ROWS),
        "{input:?}: the rows read back are exactly those written"
    );
    Observed {
        stats,
        baseline,
        peak,
    }
}

/// Writes ids `0..ROWS` with `append_rows`, [`ROWS_PER_CALL`] at a time,
/// reusing `rows` (allocated before the baseline).
async fn append_in_slices(writer: &mut AppendWriter, rows: &mut [[Datum<'_>; 2]]) {
    let mut next = 0;
    while next < ROWS {
        let n = (ROWS - next).min(rows.len() as i64) as usize;
        for (i, row) in rows[..n].iter_mut().enumerate() {
            row[0] = Datum::BigInt(next + i as i64);
        }
        writer.append_rows(&rows[..n]).await.expect("append_rows");
        next += n as i64;
    }
}
