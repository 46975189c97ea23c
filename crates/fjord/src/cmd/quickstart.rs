//! `fjord quickstart`: starts `fjord server` (this same binary) on a
//! temporary data dir and a free loopback port, creates a log table, writes
//! rows through the native client, reads them all back, checks them, prints
//! what it did and how fast, and stops the server cleanly.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use fjord_client::{FlussClient, LogScanner, OffsetSpec, ScannerConfig, TablePath, WriterConfig};
use fjord_format::fixtures::{user_behavior_batch, user_behavior_schema};
use fjord_format::schema::{
    DatabaseDescriptor, TableDescriptor, TableDistribution, TABLE_LOG_ARROW_COMPRESSION_TYPE,
};

/// How long the server may take to say it is ready.
const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Command-line arguments of `fjord quickstart`.
#[derive(clap::Args)]
pub struct Args {
    /// Rows to write and read back.
    #[arg(long, default_value_t = 1_000_000)]
    rows: usize,
    /// Rows per log batch sent.
    #[arg(long, default_value_t = 65_536)]
    batch_rows: usize,
    /// Buckets of the table.
    #[arg(long, default_value_t = 4)]
    buckets: i32,
    /// Arrow body compression of the table: ZSTD, LZ4_FRAME or NONE.
    #[arg(long, default_value = "ZSTD")]
    compression: String,
}

/// Runs `fjord quickstart`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.rows == 0 || args.batch_rows == 0 || args.buckets <= 0 {
        bail!("--rows, --batch-rows and --buckets must be positive");
    }
    let data_dir = std::env::temp_dir().join(format!("fjord-quickstart-{}", std::process::id()));
    let mut server = ServerProcess::start(&data_dir)?;
    println!(
        "started fjord server on {} (data dir {})",
        server.addr,
        data_dir.display()
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(write_and_read(&server.addr, &args));
    server.stop();
    let _ = std::fs::remove_dir_all(&data_dir);
    result
}

async fn write_and_read(addr: &str, args: &Args) -> anyhow::Result<()> {
    let client = FlussClient::connect(&[addr.to_owned()]).await?;
    let admin = client.admin();
    let path = TablePath::new("quickstart", "user_behavior");
    admin
        .create_database(&path.database, &DatabaseDescriptor::default(), true)
        .await?;
    let mut properties = std::collections::BTreeMap::new();
    properties.insert(
        TABLE_LOG_ARROW_COMPRESSION_TYPE.to_owned(),
        args.compression.clone(),
    );
    let descriptor = TableDescriptor::new(
        user_behavior_schema(),
        Some("the seed documents' user_behavior workload".to_owned()),
        Vec::new(),
        Some(TableDistribution {
            bucket_count: Some(args.buckets),
            bucket_keys: Vec::new(),
        }),
        properties,
        Default::default(),
    )?;
    admin.create_table(&path, &descriptor, false).await?;
    let table = client.table_info(&path).await?;
    println!(
        "created log table {path} (table id {}, {} buckets, {} compression)",
        table.table_id,
        table.bucket_count(),
        args.compression
    );
    let route = client.table_route(&table).await?;

    // Generate first so that the timing below is the writer's and the server's.
    let mut batches = Vec::new();
    let mut remaining = args.rows;
    let mut seed = 0u64;
    let mut expected_user_id_sum: i128 = 0;
    while remaining > 0 {
        let rows = remaining.min(args.batch_rows);
        let batch = user_behavior_batch(rows, seed);
        expected_user_id_sum += sum_i64(&batch, 0);
        batches.push(batch);
        remaining -= rows;
        seed += 1;
    }

    let mut writer = client.append_writer(&path, WriterConfig::default()).await?;
    let cpu_start = process_cpu();
    let start = Instant::now();
    let mut completions = Vec::with_capacity(batches.len());
    for batch in batches {
        completions.push(writer.append_batch(batch).await?);
    }
    writer.flush().await?;
    let mut acks = Vec::with_capacity(completions.len());
    for completion in completions {
        acks.push(completion.await?);
    }
    let write_elapsed = start.elapsed();
    let write_cpu = process_cpu() - cpu_start;
    println!(
        "wrote {} rows in {} batches (acks=all) in {:.3} s: {:.0} rows/s, {:.0} ns of client CPU per row",
        args.rows,
        acks.len(),
        write_elapsed.as_secs_f64(),
        args.rows as f64 / write_elapsed.as_secs_f64(),
        write_cpu.as_nanos() as f64 / args.rows as f64,
    );

    let buckets: Vec<i32> = (0..table.bucket_count()).collect();
    let ends = admin
        .list_offsets(&table, &buckets, OffsetSpec::Latest)
        .await?;
    let total_end: i64 = ends.iter().sum();
    if total_end != args.rows as i64 {
        bail!(
            "the buckets' high watermarks add up to {total_end}, expected {}",
            args.rows
        );
    }

    let mut scanner = LogScanner::new(table.clone(), route.clone(), ScannerConfig::default())?;
    for &bucket in &buckets {
        scanner.subscribe(bucket, 0)?;
    }
    let start = Instant::now();
    let mut read_rows = 0usize;
    let mut user_id_sum: i128 = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    while read_rows < args.rows {
        if Instant::now() > deadline {
            bail!(
                "read only {read_rows} of {} rows before giving up",
                args.rows
            );
        }
        for scanned in scanner.poll().await? {
            read_rows += scanned.records.num_rows();
            user_id_sum += sum_i64(&scanned.records, 0);
        }
    }
    let read_elapsed = start.elapsed();
    if read_rows != args.rows || user_id_sum != expected_user_id_sum {
        bail!(
            "read back {read_rows} rows with user_id sum {user_id_sum}; wrote {} rows with sum {expected_user_id_sum}",
            args.rows
        );
    }
    println!(
        "read back {read_rows} rows in {:.3} s: {:.0} rows/s; row count and user_id checksum match",
        read_elapsed.as_secs_f64(),
        read_rows as f64 / read_elapsed.as_secs_f64()
    );

    let mut projected = LogScanner::new(
        table.clone(),
        route,
        ScannerConfig {
            projection: Some(vec![0, 3]),
            ..ScannerConfig::default()
        },
    )?;
    projected.subscribe(0, 0)?;
    let sample = projected.poll().await?;
    if let Some(first) = sample.first() {
        println!(
            "projection pushdown: bucket 0 read with columns {:?} only ({} rows in the first fetch)",
            first
                .records
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect::<Vec<_>>(),
            sample.iter().map(|s| s.records.num_rows()).sum::<usize>()
        );
    }
    admin.drop_table(&path, false).await?;
    println!("dropped {path}; done");
    Ok(())
}

fn sum_i64(batch: &arrow_array::RecordBatch, column: usize) -> i128 {
    batch
        .column(column)
        .as_primitive::<Int64Type>()
        .iter()
        .flatten()
        .map(i128::from)
        .sum()
}

/// CPU time (user + system) of this process so far.
fn process_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we pass; no other effects.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// A `fjord server` child process, stopped with SIGTERM on [`ServerProcess::stop`] or drop.
struct ServerProcess {
    child: Option<Child>,
    addr: String,
}

impl ServerProcess {
    fn start(data_dir: &std::path::Path) -> anyhow::Result<ServerProcess> {
        let exe = std::env::current_exe().context("locating the fjord binary")?;
        let mut child = Command::new(exe)
            .arg("server")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting fjord server")?;
        let stderr = child.stderr.take().context("server stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && line.contains("fjord server ready") {
                    if let Some(addr) = line
                        .split("listening on ")
                        .nth(1)
                        .and_then(|rest| rest.split([',', ' ']).next())
                    {
                        let _ = tx.send(Ok(addr.to_owned()));
                        sent = true;
                    }
                } else if !sent {
                    let _ = tx.send(Err(line));
                }
            }
        });
        let deadline = Instant::now() + SERVER_READY_TIMEOUT;
        let mut log = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Ok(addr)) => {
                    return Ok(ServerProcess {
                        child: Some(child),
                        addr,
                    })
                }
                Ok(Err(line)) => log.push(line),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!(
                        "fjord server did not become ready; its log:\n{}",
                        log.join("\n")
                    );
                }
            }
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: sending a signal to our own child process id.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}
