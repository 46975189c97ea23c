//! A measurement, not a test: client CPU per row of the row path into an
//! in-process server, for profiling with `perf record`. Run:
//!
//! ```text
//! FJORD_PROBE_ROWS=5000000 FJORD_PROBE_COMPRESSION=NONE \
//!   cargo bench -p fjord-client --bench writer_probe
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMillisecondType};
use fjord_client::row::{Datum, Timestamp};
use fjord_client::{TablePath, WriterConfig};
use fjord_format::fixtures::{user_behavior_batch, user_behavior_schema};
use support::{create_log_table, TestServer};

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rows: usize = std::env::var("FJORD_PROBE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let compression =
        std::env::var("FJORD_PROBE_COMPRESSION").unwrap_or_else(|_| "NONE".to_owned());
    let server = TestServer::start().await;
    let client = server.client().await;
    let path = TablePath::new("probe", "user_behavior");
    create_log_table(&client, &path, user_behavior_schema(), 4, &compression).await;
    let source = user_behavior_batch(65_536, 7);
    let user = source
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec();
    let item = source
        .column(1)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec();
    let category = source
        .column(2)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec();
    let behavior = source.column(3).as_string::<i32>();
    let behavior: Vec<&str> = (0..source.num_rows()).map(|i| behavior.value(i)).collect();
    let ts = source
        .column(4)
        .as_primitive::<TimestampMillisecondType>()
        .values()
        .to_vec();
    let mut writer = client
        .append_writer(&path, WriterConfig::default())
        .await
        .expect("writer");
    let n = source.num_rows();
    let wall = Instant::now();
    let thread_start = thread_cpu_ns();
    let process_start = process_cpu_ns();
    for i in 0..rows {
        let j = i % n;
        let row = [
            Datum::BigInt(user[j]),
            Datum::BigInt(item[j]),
            Datum::BigInt(category[j]),
            Datum::String(behavior[j]),
            Datum::Timestamp(Timestamp::from_millis(ts[j])),
        ];
        writer.append(&row).await.expect("append");
    }
    let append_thread_ns = thread_cpu_ns() - thread_start;
    writer.flush().await.expect("flush");
    let elapsed = wall.elapsed();
    // The server shares the process: its CPU is in the process figure.
    let process_ns = process_cpu_ns() - process_start;
    println!(
        "{{\"rows\":{rows},\"compression\":\"{compression}\",\"append_thread_ns_per_row\":{:.1},\"process_ns_per_row_incl_server\":{:.1},\"rows_per_s\":{:.0},\"stats\":\"{:?}\"}}",
        append_thread_ns as f64 / rows as f64,
        process_ns as f64 / rows as f64,
        rows as f64 / elapsed.as_secs_f64(),
        writer.stats()
    );
    server.stop().await;
}
