//! The primary-key workload through the official Rust client (fluss-rs
//! 1.0.0): upserts into a `user_behavior` table keyed by
//! `(user_id, item_id)`, then point lookups of existing keys, against any
//! server that speaks the Fluss protocol (Fjord, or the Java server of
//! `scripts/fluss-java-server.sh`; `scripts/bench-kv-java.sh` runs the
//! latter end to end). One JSON line per phase on stdout.
//!
//! ```text
//! cargo run --release -p fjord --example fluss_rs_kv_bench -- \
//!     --bootstrap 127.0.0.1:9123 --server-pid 12345 --mode both --keys 1600000
//! ```
//!
//! The workload, fixed by `--keys`, `--update-fraction` and `--seed`:
//! `--keys` distinct keys are written once each, in order, and
//! `keys * f / (1 - f)` further writes (rounded) update a key written
//! earlier (uniformly at random), spread evenly through the run, so `f` of
//! all writes are updates (1 600 000 keys at 0.2: 2 000 000 writes). Key `k`
//! is `user_id = k / 16` and an `item_id` whose low 4 bits are `k % 16` (so
//! every key is distinct) over a scrambled high part; `category_id =
//! item_id % 9439` and `behavior` (pv / cart / fav / buy, skewed) come from
//! `fjord_format::fixtures::user_behavior_batch`, the generator of the other
//! benchmarks; `ts` is a base time plus the write's index, so every write
//! is distinct and a lookup can tell which write it sees.
//!
//! Upsert phase: one `UpsertWriter`, fluss-rs's defaults (acks=all,
//! idempotence on) but `writer_batch_size = --batch-size`. Every write's own
//! result future is awaited (by a task that receives them in chunks), since
//! fluss-rs 1.0.0's `flush()` returns Ok even when the server failed
//! batches; one failed write fails the run.
//!
//! Lookup phase: `--in-flight` `Lookuper`s (its `lookup` takes `&mut
//! self`) over the client's shared, batching lookup client look up
//! `--lookups` keys drawn uniformly from the written ones, each starting
//! the next key when its lookup is answered, so that many lookups are
//! outstanding at all times. `--drive tasks` gives each lookuper a task of
//! its own; `--drive stream` keeps all of them in one task's
//! `FuturesUnordered` (`fjord bench lookup --drive` has the same two
//! ways). Each result must
//! be the key's last write (`ts`, `behavior`, the key columns; which write
//! that is is found per key before the timed phase, as `fjord bench lookup`
//! does); a missing key or a stale value fails the run. Latency is per lookup, call to result.
//!
//! CPU: this process's getrusage (user + system, all threads) over each
//! timed phase; with `--server-pid`, the server's utime + stime from
//! `/proc/PID/stat` (all its threads, in clock ticks, usually 10 ms) over the
//! same interval. Generating the workload is not timed.
//!
//! Mind apache/fluss#2967: the Java server fails a KV batch whose changelog
//! passes 131 072 rows. At the default 1 MiB batch a batch holds about
//! 30 000 of these records (under 40 000 changelog rows with updates' -U/+U
//! pairs); batches above ~3 MiB can cross the limit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use arrow::array::AsArray;
use clap::{Parser, ValueEnum};
use fluss::client::{FlussConnection, LookupResult, Lookuper, WriteResultFuture};
use fluss::config::Config;
use fluss::metadata::{DataTypes, Schema, TableDescriptor, TablePath};
use fluss::row::{DataGetters, GenericRow, TimestampNtz};
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::json;
use tokio::sync::mpsc;

/// Database of the benchmark tables (as `fjord bench`).
const DATABASE: &str = "bench";
/// Items per user in the key mapping; a power of two (see [`key_columns`]).
const ITEMS_PER_USER: u64 = 16;
/// Categories, as in `fjord_format::fixtures`.
const CATEGORIES: i64 = 9_439;
/// `ts` of write 0 (2017-11-25, the fixtures' first timestamp).
const BASE_TS_MS: i64 = 1_511_544_070_000;
/// Write result futures handed to the checking task at once.
const CHECK_CHUNK: usize = 16_384;
const BEHAVIORS: [&str; 4] = ["pv", "cart", "fav", "buy"];

/// How the lookups are kept outstanding (as `fjord bench lookup --drive`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Drive {
    /// A task per lookup in flight.
    Tasks,
    /// One task with every lookup in flight in a `FuturesUnordered`.
    Stream,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Upsert,
    Lookup,
    Both,
}

/// fluss-rs on the primary-key (upsert / lookup) workload.
#[derive(Parser)]
struct Args {
    /// `host:port` of the server.
    #[arg(long)]
    bootstrap: String,
    #[arg(long, value_enum, default_value_t = Mode::Both)]
    mode: Mode,
    /// Distinct keys written (and the key space of the lookups).
    #[arg(long, default_value_t = 1_600_000)]
    keys: u32,
    /// Share of all writes that update a key written before, in [0, 1).
    #[arg(long, default_value_t = 0.2)]
    update_fraction: f64,
    #[arg(long, default_value_t = 4)]
    buckets: i32,
    /// Writer batch size in bytes (fluss-rs `writer_batch_size`).
    #[arg(long, default_value_t = 1 << 20)]
    batch_size: i32,
    /// Lookups outstanding at once.
    #[arg(long, default_value_t = 256)]
    in_flight: usize,
    /// How the lookups are kept outstanding.
    #[arg(long, value_enum, default_value_t = Drive::Tasks)]
    drive: Drive,
    /// Keys per lookup request (fluss-rs `lookup_max_batch_size`; default:
    /// fluss-rs's, 128). fluss-rs sends one lookup request at a time and
    /// waits up to `lookup_batch_timeout_ms` (100) for a full one, so with
    /// fewer lookups in flight than this it waits the timeout every time.
    #[arg(long)]
    lookup_batch_size: Option<usize>,
    /// Lookups to time (default: as many as --keys).
    #[arg(long)]
    lookups: Option<usize>,
    /// The server's pid, for its CPU per record from /proc/PID/stat.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Table name, `name` (in database `bench`) or `db.name`. Default: a
    /// fresh name. `--mode lookup` needs the table of an earlier
    /// `--mode upsert` run with the same --keys, --update-fraction and --seed.
    #[arg(long)]
    table: Option<String>,
    /// Seed of the workload (keys, update targets, lookup keys, values).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keep the table after `--mode both` (it is always kept after `upsert`).
    #[arg(long)]
    keep: bool,
    /// The changelog's Arrow compression (`table.log.arrow.compression.type`,
    /// e.g. `NONE`, `LZ4_FRAME`, `ZSTD`); default: the server's (ZSTD in
    /// Fluss 0.9.1). `scripts/bench-kv-client.sh` passes `NONE`, as
    /// `fjord bench upsert` defaults to.
    #[arg(long)]
    compression: Option<String>,
    /// Worker threads of the client's runtime (0: one per core, tokio's
    /// default), as `fjord bench upsert|lookup --runtime-threads`.
    #[arg(long, default_value_t = 0)]
    runtime_threads: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.keys == 0 || !(0.0..1.0).contains(&args.update_fraction) {
        bail!("--keys must be positive and --update-fraction in [0, 1)");
    }
    if args.buckets <= 0 || args.batch_size <= 0 || args.in_flight == 0 {
        bail!("--buckets, --batch-size and --in-flight must be positive");
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if args.runtime_threads > 0 {
        runtime.worker_threads(args.runtime_threads);
    }
    runtime.enable_all().build()?.block_on(run(&args))
}

async fn run(args: &Args) -> anyhow::Result<()> {
    let defaults = Config::default();
    let config = Config {
        bootstrap_servers: args.bootstrap.clone(),
        writer_batch_size: args.batch_size,
        lookup_max_batch_size: args
            .lookup_batch_size
            .unwrap_or(defaults.lookup_max_batch_size),
        ..defaults
    };
    let lookup_batch_size = config.lookup_max_batch_size;
    let connection = FlussConnection::new(config)
        .await
        .context("connecting with fluss-rs")?;
    let admin = connection.get_admin()?;
    let path = table_path(args)?;
    let plan = Arc::new(Plan::new(args));

    if args.mode != Mode::Lookup {
        admin
            .create_database(path.database(), None, true)
            .await
            .with_context(|| format!("creating database {}", path.database()))?;
        admin
            .create_table(
                &path,
                &descriptor(args.buckets, args.compression.as_deref())?,
                false,
            )
            .await
            .with_context(|| format!("creating {path} (it must not exist for an upsert run)"))?;
    }
    let table = connection.get_table(&path).await?;

    if args.mode != Mode::Lookup {
        eprintln!(
            "upsert: {} writes of {} keys ({} updates) into {path}, {} buckets, batch {} B",
            plan.writes.len(),
            args.keys,
            plan.writes.len() - args.keys as usize,
            args.buckets,
            args.batch_size
        );
        let writer = table.new_upsert()?.create_writer()?;
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<WriteResultFuture>>();
        // Awaits every write's own result, in write order.
        let checker = tokio::spawn(async move {
            let (mut index, mut failed, mut first) = (0usize, 0usize, None);
            while let Some(chunk) = rx.recv().await {
                for result in chunk {
                    if let Err(e) = result.await {
                        failed += 1;
                        first.get_or_insert_with(|| format!("write {index}: {e}"));
                    }
                    index += 1;
                }
            }
            (index, failed, first)
        });

        let server0 = server_cpu(args.server_pid)?;
        let (cpu0, wall0) = (cpu(), Instant::now());
        let mut row = GenericRow::new(5);
        let mut chunk = Vec::with_capacity(CHECK_CHUNK);
        for (w, &k) in plan.writes.iter().enumerate() {
            let (user, item) = key_columns(k);
            row.set_field(0, user);
            row.set_field(1, item);
            row.set_field(2, item % CATEGORIES);
            row.set_field(3, BEHAVIORS[plan.behaviors[w] as usize]);
            row.set_field(4, TimestampNtz::new(BASE_TS_MS + w as i64));
            chunk.push(writer.upsert(&row)?);
            if chunk.len() == CHECK_CHUNK {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHECK_CHUNK));
                if tx.send(full).is_err() {
                    bail!("the write result checker stopped");
                }
            }
        }
        if tx.send(chunk).is_err() {
            bail!("the write result checker stopped");
        }
        drop(tx);
        writer.flush().await?;
        let (checked, failed, first) = checker.await?;
        let (wall, used) = (wall0.elapsed(), cpu() - cpu0);
        let server = server_cpu(args.server_pid)?
            .zip(server0)
            .map(|(b, a)| b - a);
        if checked != plan.writes.len() {
            bail!("checked {checked} of {} writes", plan.writes.len());
        }
        if failed > 0 {
            bail!(
                "{failed} of {checked} writes failed; the first: {}",
                first.unwrap_or_default()
            );
        }
        let n = plan.writes.len() as f64;
        let secs = wall.as_secs_f64();
        println!(
            "{}",
            json!({
                "bench": "upsert",
                "client": "fluss-rs",
                "compression": args.compression.as_deref().unwrap_or("default"),
                "records": plan.writes.len(),
                "keys": args.keys,
                "updates": plan.writes.len() - args.keys as usize,
                "buckets": args.buckets,
                "batch_size": args.batch_size,
                "secs": round(secs, 3),
                "records_per_s": round(n / secs, 0),
                "client_cpu_ns_per_record": round(used.as_nanos() as f64 / n, 1),
                "server_cpu_ns_per_record": server.map(|s| round(s.as_nanos() as f64 / n, 1)),
            })
        );
    }

    if args.mode != Mode::Upsert {
        let lookups = args.lookups.unwrap_or(args.keys as usize);
        let targets = Arc::new(plan.lookup_targets(lookups, args.seed));
        let mut lookupers = Vec::with_capacity(args.in_flight);
        for _ in 0..args.in_flight {
            lookupers.push(table.new_lookup()?.create_lookuper()?);
        }
        eprintln!(
            "lookup: {lookups} lookups of {path}, {} in flight",
            args.in_flight
        );
        let next = Arc::new(AtomicUsize::new(0));
        let server0 = server_cpu(args.server_pid)?;
        let (cpu0, wall0) = (cpu(), Instant::now());
        let tasks: Vec<_> = match args.drive {
            Drive::Tasks => lookupers
                .into_iter()
                .map(|lookuper| {
                    let (targets, next) = (targets.clone(), next.clone());
                    tokio::spawn(lookup_worker(lookuper, targets, next))
                })
                .collect(),
            // Spawned, so it runs on a worker as the tasks do.
            Drive::Stream => vec![tokio::spawn(lookup_stream(lookupers, targets.clone()))],
        };
        let mut latencies = Vec::with_capacity(lookups);
        let (mut errors, mut first) = (0usize, None);
        for task in tasks {
            let done = task.await?;
            latencies.extend_from_slice(&done.latencies_ns);
            errors += done.errors;
            if first.is_none() {
                first = done.first_error;
            }
        }
        let (wall, used) = (wall0.elapsed(), cpu() - cpu0);
        let server = server_cpu(args.server_pid)?
            .zip(server0)
            .map(|(b, a)| b - a);
        if errors > 0 {
            bail!(
                "{errors} of {lookups} lookups failed; the first: {}",
                first.unwrap_or_default()
            );
        }
        if latencies.len() != lookups {
            bail!("timed {} of {lookups} lookups", latencies.len());
        }
        latencies.sort_unstable();
        let n = lookups as f64;
        let secs = wall.as_secs_f64();
        println!(
            "{}",
            json!({
                "bench": "lookup",
                "client": "fluss-rs",
                "lookups": lookups,
                "keys": args.keys,
                "in_flight": args.in_flight,
                "lookup_batch_size": lookup_batch_size,
                "drive": match args.drive {
                    Drive::Tasks => "tasks",
                    Drive::Stream => "stream",
                },
                "secs": round(secs, 3),
                "lookups_per_s": round(n / secs, 0),
                "p50_us": round(percentile(&latencies, 0.50) as f64 / 1e3, 1),
                "p99_us": round(percentile(&latencies, 0.99) as f64 / 1e3, 1),
                "client_cpu_ns_per_lookup": round(used.as_nanos() as f64 / n, 1),
                "server_cpu_ns_per_lookup": server.map(|s| round(s.as_nanos() as f64 / n, 1)),
            })
        );
    }

    if args.mode == Mode::Both && !args.keep {
        admin.drop_table(&path, true).await?;
    } else {
        eprintln!("table {path} kept");
    }
    Ok(())
}

/// What one lookup task measured.
struct WorkerResult {
    latencies_ns: Vec<u64>,
    errors: usize,
    first_error: Option<String>,
}

/// Looks up the next unclaimed target until none is left; one lookup
/// outstanding per task.
async fn lookup_worker(
    mut lookuper: Lookuper,
    targets: Arc<Vec<Target>>,
    next: Arc<AtomicUsize>,
) -> WorkerResult {
    let mut done = WorkerResult::new();
    let mut key = GenericRow::new(2);
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(target) = targets.get(i) else {
            return done;
        };
        let (user, item) = key_columns(target.k);
        key.set_field(0, user);
        key.set_field(1, item);
        let start = Instant::now();
        let result = lookuper.lookup(&key).await;
        done.record(target, start.elapsed(), result);
    }
}

/// Looks up every target from one task, each of `lookupers` taking the
/// next target when its lookup is answered.
async fn lookup_stream(lookupers: Vec<Lookuper>, targets: Arc<Vec<Target>>) -> WorkerResult {
    let mut done = WorkerResult::new();
    let mut next = targets.iter();
    let mut pending = FuturesUnordered::new();
    for lookuper in lookupers {
        if let Some(target) = next.next() {
            let slot = Slot {
                lookuper,
                key: GenericRow::new(2),
            };
            pending.push(timed_lookup(slot, target));
        }
    }
    while let Some((slot, target, latency, result)) = pending.next().await {
        done.record(target, latency, result);
        if let Some(target) = next.next() {
            pending.push(timed_lookup(slot, target));
        }
    }
    done
}

/// One lookup in flight of `--drive stream`: its lookuper and its key row,
/// both reused for its next key (as each task of `--drive tasks` reuses
/// its own), so the driver allocates nothing per lookup.
struct Slot {
    lookuper: Lookuper,
    key: GenericRow<'static>,
}

/// Looks `target` up with the slot's lookuper, timed; gives the slot back.
async fn timed_lookup(
    mut slot: Slot,
    target: &Target,
) -> (Slot, &Target, Duration, fluss::error::Result<LookupResult>) {
    let (user, item) = key_columns(target.k);
    slot.key.set_field(0, user);
    slot.key.set_field(1, item);
    let start = Instant::now();
    let result = slot.lookuper.lookup(&slot.key).await;
    (slot, target, start.elapsed(), result)
}

impl WorkerResult {
    fn new() -> Self {
        Self {
            latencies_ns: Vec::new(),
            errors: 0,
            first_error: None,
        }
    }

    /// Records one lookup of `target`: its latency, and a problem when the
    /// row is not the target's last write.
    fn record(
        &mut self,
        target: &Target,
        latency: Duration,
        result: fluss::error::Result<LookupResult>,
    ) {
        self.latencies_ns.push(latency.as_nanos() as u64);
        let k = target.k;
        let problem = match result {
            Ok(found) => match found.get_single_row() {
                Ok(Some(row)) => target.check(&row).err(),
                Ok(None) => {
                    let (user, item) = key_columns(k);
                    Some(format!("key {k} ({user}, {item}) not found"))
                }
                Err(e) => Some(format!("key {k}: undecodable result: {e}")),
            },
            Err(e) => Some(format!("key {k}: {e}")),
        };
        if let Some(problem) = problem {
            self.errors += 1;
            self.first_error.get_or_insert(problem);
        }
    }
}

/// The deterministic workload: which key each write hits, each write's
/// behaviour, and each key's last write.
struct Plan {
    /// Key of each write, in write order.
    writes: Vec<u32>,
    /// Index into [`BEHAVIORS`] of each write.
    behaviors: Vec<u8>,
    /// Index of each key's last write.
    last_write: Vec<u32>,
}

impl Plan {
    fn new(args: &Args) -> Self {
        let keys = args.keys as usize;
        let f = args.update_fraction;
        let updates = (keys as f64 * f / (1.0 - f)).round() as usize;
        let total = keys + updates;
        let mut rng = SplitMix(args.seed);
        let mut writes = Vec::with_capacity(total);
        let mut last_write = vec![0u32; keys];
        let (mut written, mut updated) = (0usize, 0usize);
        for w in 0..total {
            // Updates due by the end of write w, spread evenly.
            let due = (w + 1) * updates / total;
            let update = written == keys || (updated < due && written > 0);
            let k = if update {
                updated += 1;
                (rng.next() % written as u64) as usize
            } else {
                written += 1;
                written - 1
            };
            writes.push(k as u32);
            last_write[k] = w as u32;
        }
        debug_assert_eq!((written, updated), (keys, updates));
        let batch = fjord_format::fixtures::user_behavior_batch(total, args.seed);
        let behaviors = batch
            .column(3)
            .as_string::<i32>()
            .iter()
            .map(|b| match b {
                Some("cart") => 1,
                Some("fav") => 2,
                Some("buy") => 3,
                _ => 0,
            })
            .collect();
        Plan {
            writes,
            behaviors,
            last_write,
        }
    }

    /// `count` keys drawn uniformly from the written ones, each with what
    /// its lookup must find (its last write), found here, before the
    /// timed phase: read in order while timing, not from tables of
    /// millions of entries at random (two cache misses a lookup, which
    /// were a sixth of the lookup phase's CPU). The fluss-rs example and
    /// `fjord bench lookup` do the same.
    fn lookup_targets(&self, count: usize, seed: u64) -> Vec<Target> {
        let keys = self.last_write.len() as u64;
        let mut rng = SplitMix(seed ^ 0x6C6F_6F6B_7570_7321);
        (0..count)
            .map(|_| {
                let k = (rng.next() % keys) as u32;
                let w = self.last_write[k as usize];
                Target {
                    k,
                    w,
                    behavior: self.behaviors[w as usize],
                }
            })
            .collect()
    }
}

/// One lookup to make: key `k`, whose last write was `w`, of behaviour
/// `behavior` (an index into [`BEHAVIORS`]).
struct Target {
    k: u32,
    w: u32,
    behavior: u8,
}

impl Target {
    /// Whether `row` is the target key's last write.
    fn check(&self, row: &dyn DataGetters) -> Result<(), String> {
        let (k, w) = (self.k, self.w as usize);
        let (user, item) = key_columns(k);
        let read = (|| -> fluss::error::Result<(i64, i64, i64, String)> {
            Ok((
                row.get_long(0)?,
                row.get_long(1)?,
                row.get_timestamp_ntz(4, 3)?.get_millisecond(),
                row.get_string(3)?.to_owned(),
            ))
        })()
        .map_err(|e| format!("key {k}: unreadable row: {e}"))?;
        let want = (
            user,
            item,
            BASE_TS_MS + w as i64,
            BEHAVIORS[self.behavior as usize].to_owned(),
        );
        if read != want {
            return Err(format!(
                "key {k}: read (user_id, item_id, ts, behavior) = {read:?}, its last write {w} was {want:?}"
            ));
        }
        Ok(())
    }
}

/// `(user_id, item_id)` of key `k`: 16 keys per user, told apart by the
/// item's low 4 bits, over a scrambled high part, so distinct keys give
/// distinct pairs.
fn key_columns(k: u32) -> (i64, i64) {
    let k = u64::from(k);
    let high = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i64;
    (
        (k / ITEMS_PER_USER) as i64,
        high * ITEMS_PER_USER as i64 + (k % ITEMS_PER_USER) as i64,
    )
}

/// splitmix64: a deterministic, dependency-free generator.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn table_path(args: &Args) -> anyhow::Result<TablePath> {
    match args.table.as_deref() {
        Some(name) => Ok(match name.split_once('.') {
            Some((db, table)) => TablePath::new(db, table),
            None => TablePath::new(DATABASE, name),
        }),
        None if args.mode == Mode::Lookup => bail!("--mode lookup needs --table"),
        None => {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default();
            Ok(TablePath::new(
                DATABASE,
                format!("fluss_rs_kv_{}_{stamp}", std::process::id()),
            ))
        }
    }
}

/// `user_behavior` with PRIMARY KEY (user_id, item_id), bucketed by it,
/// with `compression` as the changelog's Arrow compression when given.
fn descriptor(buckets: i32, compression: Option<&str>) -> anyhow::Result<TableDescriptor> {
    let schema = Schema::builder()
        .column("user_id", DataTypes::bigint())
        .column("item_id", DataTypes::bigint())
        .column("category_id", DataTypes::bigint())
        .column("behavior", DataTypes::string())
        .column("ts", DataTypes::timestamp_with_precision(3))
        .primary_key(["user_id", "item_id"])?
        .build()?;
    let mut builder = TableDescriptor::builder()
        .schema(schema)
        .distributed_by(Some(buckets), Vec::new())
        .comment("fluss-rs primary-key bench workload");
    if let Some(compression) = compression {
        builder = builder.property("table.log.arrow.compression.type", compression);
    }
    Ok(builder.build()?)
}

/// The value at quantile `q` of sorted `values` (nearest rank).
fn percentile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn round(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

/// CPU time (user + system) of this process so far.
fn cpu() -> Duration {
    // SAFETY: getrusage only writes into the zeroed struct we pass it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// utime + stime of process `pid` (all its threads) from /proc/PID/stat.
fn server_cpu(pid: Option<u32>) -> anyhow::Result<Option<Duration>> {
    let Some(pid) = pid else {
        return Ok(None);
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (is the server running?)"))?;
    // The command name, in parentheses, may hold spaces: count fields after it.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // Field 3 (state) is fields[0]; utime and stime are fields 14 and 15.
    let ticks = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("/proc/{pid}/stat: no field {}", i + 3))
    };
    let total = ticks(11)? + ticks(12)?;
    // SAFETY: sysconf only reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        bail!("sysconf(_SC_CLK_TCK) failed");
    }
    Ok(Some(Duration::from_nanos(
        total * 1_000_000_000 / hz as u64,
    )))
}
