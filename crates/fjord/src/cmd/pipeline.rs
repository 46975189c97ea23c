//! `fjord pipeline run pipeline.yaml [--until-current]`: runs a CDC pipeline
//! defined in Flink CDC 3 pipeline YAML (see `fjord_cdc::config`).
//!
//! With `--until-current` the source stops at the position that was current
//! when the pipeline started, and one JSON summary line follows the sink's
//! output on stdout:
//! `{"pipeline":…,"events":…,"batches":…,"elapsed_s":…,"events_per_s":…,"cpu_s":…,"cpu_ns_per_event":…,`
//! `"resumptions":…,"sink":{"rows":…,"deletes":…,"schema_changes":…,"flushes":…,"flush_wait_s":…,`
//! `"skipped_replays":…,"tables":{"db.t":{"rows":…,"deletes":…},…}}}`
//! (CPU is the whole process's user + system time from `getrusage`; the
//! sink figures are what a table sink wrote: rows upserted or appended,
//! deletes, tables created or changed, flushes and the time spent waiting
//! for their acknowledgements, replayed events found already written after
//! a restart).
//!
//! While it runs, a progress line goes to stderr every
//! `pipeline.progress.interval-ms` (default 5 s): events and their rate,
//! the source's phase and lag behind its head, rows per sink table.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use fjord_cdc::runtime::{self, RunOptions};
use fjord_cdc::source::StopFlag;

/// Command-line arguments of `fjord pipeline`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Run a pipeline definition (Flink CDC 3 YAML: source, sink, route, pipeline).
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// The pipeline definition file.
    definition: PathBuf,
    /// Stop after reaching the source position that was current at start, then
    /// print a JSON summary line (events, events_per_s, cpu_ns_per_event).
    #[arg(long)]
    until_current: bool,
}

/// How often the signal watcher checks for SIGINT/SIGTERM.
const SIGNAL_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How long a stop request may take before the process exits anyway: a
/// source blocked in a read (stdin without input, a silent server) cannot see
/// the stop flag; what the sink confirmed is already committed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Set by the signal handler; only an atomic store is async-signal-safe.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

/// Routes SIGINT/SIGTERM to a clean stop (the final position is committed).
fn install_signal_handlers(stop: StopFlag, done: std::sync::Arc<AtomicBool>) {
    let handler = on_signal as extern "C" fn(libc::c_int);
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
    }
    let _ = std::thread::Builder::new()
        .name("signal-watch".to_string())
        .spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if SIGNALLED.load(Ordering::Relaxed) {
                    tracing::info!("stop requested; finishing the current batch");
                    stop.raise();
                    let asked = std::time::Instant::now();
                    while !done.load(Ordering::Relaxed) {
                        if asked.elapsed() >= STOP_GRACE {
                            tracing::warn!(
                                "the source did not stop within {STOP_GRACE:?}; exiting without a final commit"
                            );
                            std::process::exit(130);
                        }
                        std::thread::sleep(SIGNAL_POLL_INTERVAL);
                    }
                    return;
                }
                std::thread::sleep(SIGNAL_POLL_INTERVAL);
            }
        });
}

/// Runs `fjord pipeline`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Run(run) => run_pipeline(run),
    }
}

fn run_pipeline(args: RunArgs) -> anyhow::Result<()> {
    let path = &args.definition;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading pipeline definition {}", path.display()))?;
    let def = fjord_cdc::config::parse(&text).map_err(|e| match e.line {
        0 => anyhow::anyhow!("{}: {}", path.display(), e.message),
        line => anyhow::anyhow!("{}:{line}: {}", path.display(), e.message),
    })?;
    let name = def.pipeline.name.clone();
    let stop = StopFlag::new();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    install_signal_handlers(stop.clone(), done.clone());
    let result = runtime::run(
        def,
        RunOptions {
            until_current: args.until_current,
            stop,
        },
    );
    done.store(true, Ordering::Relaxed);
    let summary = result.context("pipeline failed")?;
    let sink = &summary.sink;
    let tables: Vec<String> = sink
        .tables
        .iter()
        .map(|t| {
            format!(
                "{}:{{\"rows\":{},\"deletes\":{}}}",
                json_string(&t.table),
                t.rows,
                t.deletes
            )
        })
        .collect();
    let line = format!(
        "{{\"pipeline\":{},\"events\":{},\"batches\":{},\"elapsed_s\":{:.6},\"events_per_s\":{:.1},\"cpu_s\":{:.6},\"cpu_ns_per_event\":{:.1},\"resumptions\":{},\"sink\":{{\"rows\":{},\"deletes\":{},\"schema_changes\":{},\"flushes\":{},\"flush_wait_s\":{:.6},\"skipped_replays\":{},\"tables\":{{{}}}}}}}",
        json_string(name.as_deref().unwrap_or("")),
        summary.events,
        summary.batches,
        summary.elapsed.as_secs_f64(),
        summary.events_per_s(),
        summary.cpu.as_secs_f64(),
        summary.cpu_ns_per_event(),
        summary.resumptions,
        sink.tables.iter().map(|t| t.rows).sum::<u64>(),
        sink.tables.iter().map(|t| t.deletes).sum::<u64>(),
        sink.schema_changes,
        sink.flushes,
        sink.flush_wait.as_secs_f64(),
        sink.skipped_replays,
        tables.join(","),
    );
    if args.until_current {
        println!("{line}");
    } else {
        tracing::info!(summary = %line, "pipeline finished");
    }
    Ok(())
}

/// A JSON string literal (the summary is written once per run).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
