//! `fjord bench scan`: writes the workload into a fresh table (not timed),
//! then reads every bucket from the earliest offset through the native log
//! scanner; the timed phase is from the first poll until every row is read.

use std::time::{Duration, Instant};

use anyhow::bail;
use fjord_client::{LogScanner, ScannerConfig, WriterConfig};

use super::report::{Report, Stopwatch};
use super::table::BenchTable;
use super::workload::{generate, Compression, SchemaKind};

/// The longest a scan may take before the benchmark gives up (a scanner that
/// stops making progress must not hang the benchmark script).
const SCAN_DEADLINE: Duration = Duration::from_secs(600);

/// One scan run's parameters.
pub struct ScanRun {
    /// `host:port` of a server.
    pub bootstrap: String,
    /// Workload.
    pub schema: SchemaKind,
    /// Table compression.
    pub compression: Compression,
    /// Records to write and read back.
    pub rows: usize,
    /// Rows per generated (and written) Arrow batch.
    pub batch_rows: usize,
    /// Keep the table after the run instead of dropping it.
    pub keep_table: bool,
}

/// Runs the scan benchmark.
pub async fn run(run: &ScanRun) -> anyhow::Result<Report> {
    let table =
        BenchTable::create(&run.bootstrap, run.schema, run.compression, false, false).await?;
    let workload = generate(run.schema, run.rows, run.batch_rows);
    let mut writer = table
        .client
        .append_writer(&table.info.path, WriterConfig::default())
        .await?;
    for batch in &workload.batches {
        writer.append_batch(batch.clone()).await?;
    }
    writer.close().await?;
    table.check_record_count(workload.rows).await?;
    let arrow_bytes = workload.arrow_bytes;
    drop(workload);

    let route = table.client.table_route(&table.info).await?;
    let mut scanner = LogScanner::new(table.info.clone(), route, ScannerConfig::default())?;
    for bucket in 0..table.info.bucket_count() {
        scanner.subscribe(bucket, 0)?;
    }
    let deadline = Instant::now() + SCAN_DEADLINE;
    let mut read = 0usize;
    let mut polls = 0usize;
    let timed = Stopwatch::start();
    while read < run.rows {
        if Instant::now() > deadline {
            bail!(
                "read {read} of {} records within {SCAN_DEADLINE:?}",
                run.rows
            );
        }
        for batch in scanner.poll().await? {
            read += batch.records.num_rows();
        }
        polls += 1;
    }
    let (wall, cpu) = timed.stop();
    if read != run.rows {
        bail!("read {read} records, wrote {}", run.rows);
    }
    if !run.keep_table {
        table.drop().await?;
    }
    Ok(Report {
        op: "scan",
        client: "fjord",
        input: "arrow",
        schema: run.schema.name(),
        compression: run.compression.name(),
        records: read,
        arrow_bytes,
        wall,
        cpu,
        generate_cpu: Duration::ZERO,
        extra: vec![("polls", polls as f64)],
    })
}
