//! The pipeline runtime: one source thread and one sink thread exchanging
//! whole batches over bounded channels, routes applied per batch, and the
//! source position committed to the offset store after the sink confirms.
//!
//! ```text
//! source thread:  free batch ─► Source::next_batch ─► full channel ─┐
//!      ▲                                                             │
//!      └──────────── free channel ◄── Sink::write_batch ◄── routes ◄┘   (caller's thread)
//! ```
//!
//! [`PIPELINE_BATCHES_IN_FLIGHT`] batches exist for the whole run, so after
//! warm-up nothing is allocated per batch, and a slow sink back-pressures the
//! source through the free channel.
//!
//! Commits: a position is committed (with the sink's state) only after the
//! sink's [`Sink::flush`] acknowledged every write up to it, and only as of
//! the batch that first carried it: events in later batches with the same
//! position are replayed by a resume from it, so committing the position
//! with a state taken after them would be wrong (the position a run resumed
//! from counts as carried already). A batch the sink failed on leaves
//! nothing committed past the last complete commit.
//! When the sink reports its service unavailable ([`SinkError::Unavailable`])
//! and a state dir is set, [`run`] waits and starts source and sink again
//! from the last commit, as a restarted process would; likewise, at once,
//! when the source reports a read it cannot continue
//! ([`SourceError::Interrupted`]). Either resumption happens a bounded
//! number of times in a row without a new commit (the sink's retry budget,
//! the source's reconnect budget); then the run fails with the last cause.
//! A source may also mark a position durable
//! ([`EventBatch::set_position_durable`]): it is committed before any
//! later batch reaches the sink.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::config::{PipelineDef, SinkDef, SourceDef};
use crate::event::{EventBatch, BATCH_BYTES_SOFT_MAX, BATCH_EVENTS_MAX};
use crate::offsets::{Committed, OffsetError, OffsetStore};
use crate::position::SourcePosition;
use crate::route::Router;
use crate::sink::fluss::{FlussSink, UNAVAILABLE_BACKOFF_MAX, UNAVAILABLE_BACKOFF_MIN};
use crate::sink::print::PrintSink;
use crate::sink::values::ValuesSink;
use crate::sink::{Checkpoint, Sink, SinkError, SinkStats};
use crate::source::{self, Poll, Source, SourceError, SourceProgress, StartOptions, StopFlag};

/// Batches in circulation between the source and the sink: one being filled,
/// one being written, two queued to absorb jitter. Bounds the pipeline's
/// memory to this many batch arenas.
pub const PIPELINE_BATCHES_IN_FLIGHT: usize = 4;

/// Why a pipeline run failed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The source failed.
    #[error("source: {0}")]
    Source(#[from] SourceError),
    /// The sink failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The offset store failed.
    #[error(transparent)]
    Offsets(#[from] OffsetError),
    /// The source thread died without reporting an error.
    #[error("the source thread stopped unexpectedly (panicked)")]
    SourceThread,
}

/// How to run a pipeline.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Stop once the source reaches the position that was current at start.
    pub until_current: bool,
    /// Raise to stop the pipeline cleanly (the final position is committed).
    pub stop: StopFlag,
}

/// What a finished run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    /// Events delivered to the sink.
    pub events: u64,
    /// Batches delivered.
    pub batches: u64,
    /// Wall time from start of reading to the final commit.
    pub elapsed: Duration,
    /// The position after the last delivered event (committed if a state dir is set).
    pub position: Option<SourcePosition>,
    /// Position the run resumed from, if any.
    pub resumed_from: Option<SourcePosition>,
    /// CPU time (user + system) of the whole process during the run, from `getrusage`.
    pub cpu: Duration,
    /// What the sink did.
    pub sink: SinkStats,
    /// Times the run started again from the last commit after the sink's
    /// service was unavailable.
    pub resumptions: u32,
}

impl RunSummary {
    /// Events per second of wall time.
    pub fn events_per_s(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.events as f64 / seconds
        } else {
            0.0
        }
    }

    /// Process CPU nanoseconds per event.
    pub fn cpu_ns_per_event(&self) -> f64 {
        if self.events > 0 {
            self.cpu.as_nanos() as f64 / self.events as f64
        } else {
            0.0
        }
    }
}

/// User + system CPU time consumed so far by the whole process (`getrusage`).
pub fn process_cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the zero-initialised struct passed to it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Tuning of [`drive`].
#[derive(Clone, Copy, Debug)]
pub struct DriveConfig {
    /// Least time between two durable offset commits (0: after every batch).
    pub commit_interval: Duration,
    /// Most events per batch.
    pub batch_events_max: usize,
    /// Time between two progress lines in the log (0: none).
    pub progress_interval: Duration,
}

impl Default for DriveConfig {
    fn default() -> Self {
        DriveConfig {
            commit_interval: crate::config::STATE_COMMIT_INTERVAL_DEFAULT,
            batch_events_max: BATCH_EVENTS_MAX,
            progress_interval: Duration::ZERO,
        }
    }
}

/// Name of a source type as stored with its offsets.
fn source_type(def: &SourceDef) -> &str {
    match def {
        SourceDef::MySql(c) => &c.source_type,
        SourceDef::DebeziumJson(_) => "debezium-json",
    }
}

/// Opens the source a definition names.
pub fn open_source(def: SourceDef, start: StartOptions) -> Result<Box<dyn Source>, SourceError> {
    match def {
        SourceDef::MySql(config) => source::mysql::open(config, start),
        SourceDef::DebeziumJson(config) => source::debezium::open(config, start),
    }
}

/// Builds the sink a definition names, writing printed output to stdout.
pub fn open_sink(def: &PipelineDef) -> Result<Box<dyn Sink>, SinkError> {
    Ok(match &def.sink {
        SinkDef::Print => Box::new(PrintSink::new(std::io::stdout())),
        SinkDef::Values { print } => Box::new(ValuesSink::new(print.then(std::io::stdout))),
        SinkDef::Fluss(options) => Box::new(FlussSink::new(
            options.clone(),
            def.pipeline.schema_change_behavior,
        )?),
    })
}

/// Sleeps up to `wait`, waking early if `stop` is raised; false if it was.
fn sleep_unless_stopped(wait: Duration, stop: &StopFlag) -> bool {
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if stop.is_raised() {
            return false;
        }
        thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
    }
    !stop.is_raised()
}

/// How long a run waits for a sink whose service is unavailable.
struct UnavailableBudget {
    /// Resumptions in a row without a new commit before the run fails.
    retries: u32,
    /// The option that sets `retries`, for messages.
    option: &'static str,
    /// The service, for messages (the `fluss` sink's bootstrap servers).
    service: String,
}

impl UnavailableBudget {
    fn of(def: &PipelineDef) -> UnavailableBudget {
        match &def.sink {
            SinkDef::Fluss(options) => UnavailableBudget {
                retries: options.server_retries(),
                option: "properties.client.writer.retries",
                service: format!(
                    "the Fjord server at {}",
                    options.bootstrap_servers.join(",")
                ),
            },
            // Only the fluss sink has a service that can go away.
            SinkDef::Print | SinkDef::Values { .. } => UnavailableBudget {
                retries: 0,
                option: "",
                service: "the sink's service".to_string(),
            },
        }
    }

    /// The error that ends the run after `retries` resumptions failed;
    /// `last` is the last attempt's error.
    #[cold]
    fn exhausted(&self, last: SinkError) -> PipelineError {
        let SinkError::Unavailable { sink, message } = last else {
            return PipelineError::Sink(last);
        };
        PipelineError::Sink(SinkError::Failed {
            sink,
            message: format!(
                "{} is unavailable: gave up after {} resumptions without progress ({}: {}); last error: {message}",
                self.service, self.retries, self.option, self.retries
            ),
        })
    }
}

/// Runs a pipeline definition to its end (source end, `until_current`, or
/// stop). With a state dir, a sink whose service is unavailable makes the
/// run wait and start again from the last commit (source and sink opened
/// anew), each attempt logged, until it comes back, the run is stopped, or
/// the sink's retry budget (`properties.client.writer.retries` for the
/// `fluss` sink) is spent by attempts in a row that committed nothing new;
/// then the run fails with an error naming the service and the last cause.
pub fn run(def: PipelineDef, options: RunOptions) -> Result<RunSummary, PipelineError> {
    let store = match &def.pipeline.state_dir {
        Some(dir) => Some(Arc::new(OffsetStore::open(dir, source_type(&def.source))?)),
        None => None,
    };
    let budget = UnavailableBudget::of(&def);
    let mut first_resume = None;
    let mut backoff = UNAVAILABLE_BACKOFF_MIN;
    let mut resumptions = 0u32;
    // Failed attempts since the last one that committed a new position.
    let mut failures_in_a_row = 0u32;
    // The same for attempts the source cut off (`SourceError::Interrupted`).
    let mut interruptions_in_a_row = 0u32;
    if def.pipeline.parallelism > 1 {
        tracing::info!(
            parallelism = def.pipeline.parallelism,
            "pipeline.parallelism is a hint here: Fjord runs the pipeline on one source thread and one sink thread, which keeps every table's changes in binlog order"
        );
    }
    let started = Instant::now();
    let cpu_started = process_cpu_time();
    loop {
        let committed = match &store {
            Some(store) => store.load_committed()?.unwrap_or_default(),
            None => Committed::default(),
        };
        if let Some(position) = &committed.position {
            tracing::info!(?position, "resuming after the last committed position");
        }
        if resumptions == 0 {
            first_resume = committed.position.clone();
        }
        // This attempt's own stop flag: raised by the caller's, and by
        // `drive` when the attempt ends, without touching the caller's.
        let attempt_stop = options.stop.child();
        let start = StartOptions {
            resume: committed.position.clone(),
            until_current: options.until_current,
            stop: attempt_stop.clone(),
        };
        let attempt = (|| -> Result<RunSummary, PipelineError> {
            let mut sink = open_sink(&def)?;
            sink.restore(committed.sink_state.as_deref(), store.clone())?;
            let source = open_source(def.source.clone(), start)?;
            drive(
                source,
                sink,
                Router::new(def.routes.clone()),
                store.as_deref(),
                DriveConfig {
                    commit_interval: def.pipeline.state_commit_interval,
                    batch_events_max: BATCH_EVENTS_MAX,
                    progress_interval: def.pipeline.progress_interval,
                },
                &attempt_stop,
            )
        })();
        match attempt {
            Err(PipelineError::Sink(e)) if e.is_unavailable() && store.is_some() => {
                let now = match &store {
                    Some(store) => store.load_committed()?.unwrap_or_default().position,
                    None => None,
                };
                if now != committed.position {
                    // The attempt got somewhere: a new outage, a new budget.
                    failures_in_a_row = 0;
                    backoff = UNAVAILABLE_BACKOFF_MIN;
                }
                failures_in_a_row += 1;
                if failures_in_a_row > budget.retries {
                    return Err(budget.exhausted(e));
                }
                tracing::warn!(
                    error = %e,
                    wait = ?backoff,
                    "{} is unavailable; resuming from the last committed position when it is back (retry {} of {})",
                    budget.service,
                    failures_in_a_row,
                    budget.retries
                );
                if !sleep_unless_stopped(backoff, &options.stop) {
                    return Err(PipelineError::Sink(e));
                }
                backoff = (backoff * 2).min(UNAVAILABLE_BACKOFF_MAX);
                resumptions += 1;
                continue;
            }
            Err(PipelineError::Source(SourceError::Interrupted(cause))) if store.is_some() => {
                let now = match &store {
                    Some(store) => store.load_committed()?.unwrap_or_default().position,
                    None => None,
                };
                if now != committed.position {
                    interruptions_in_a_row = 0;
                }
                interruptions_in_a_row += 1;
                let retries = source_retries(&def);
                if interruptions_in_a_row > retries {
                    return Err(PipelineError::Source(SourceError::Database(format!(
                        "{cause}; gave up after {retries} resumptions without progress \
                         (connect.max-retries: {retries})"
                    ))));
                }
                tracing::warn!(
                    "{cause}; resuming from the last committed position (retry {} of {})",
                    interruptions_in_a_row,
                    retries
                );
                resumptions += 1;
                continue;
            }
            Err(e) => return Err(e),
            Ok(mut summary) => {
                // Events and batches are the last attempt's (earlier ones
                // failed and are replayed from the last commit).
                summary.resumed_from = first_resume;
                summary.resumptions = resumptions;
                summary.elapsed = started.elapsed();
                summary.cpu = process_cpu_time().saturating_sub(cpu_started);
                return Ok(summary);
            }
        }
    }
}

/// Resumptions in a row after [`SourceError::Interrupted`] without a new
/// commit before the run fails: the source's own reconnect budget (each
/// resumption's connection attempts already wait and retry).
fn source_retries(def: &PipelineDef) -> u32 {
    match &def.source {
        SourceDef::MySql(config) => config.connect_max_retries,
        SourceDef::DebeziumJson(_) => 0,
    }
}

enum Message {
    Batch(EventBatch),
    End,
    Failed(SourceError),
}

fn source_loop(
    mut source: Box<dyn Source>,
    full: mpsc::SyncSender<Message>,
    free: mpsc::Receiver<EventBatch>,
    stop: StopFlag,
) {
    loop {
        if stop.is_raised() {
            let _ = full.send(Message::End);
            return;
        }
        // The sink side hands every batch back; a closed channel means it quit.
        let Ok(mut batch) = free.recv() else { return };
        batch.clear();
        match source.next_batch(&mut batch) {
            Ok(poll) => {
                let forward = !batch.is_empty() || batch.position().is_some();
                if forward && full.send(Message::Batch(batch)).is_err() {
                    return;
                }
                if poll == Poll::End {
                    let _ = full.send(Message::End);
                    return;
                }
            }
            Err(e) => {
                let _ = full.send(Message::Failed(e));
                return;
            }
        }
    }
}

/// Runs `source` into `sink` on two threads until the source ends or `stop` is
/// raised; commits positions to `store` at most every `config.commit_interval`
/// and once at the end (also after a failure: what the sink confirmed stays
/// confirmed).
pub fn drive(
    source: Box<dyn Source>,
    mut sink: Box<dyn Sink>,
    mut router: Router,
    store: Option<&OffsetStore>,
    config: DriveConfig,
    stop: &StopFlag,
) -> Result<RunSummary, PipelineError> {
    let commit_interval = config.commit_interval;
    let (full_tx, full_rx) = mpsc::sync_channel::<Message>(PIPELINE_BATCHES_IN_FLIGHT);
    let (free_tx, free_rx) = mpsc::sync_channel::<EventBatch>(PIPELINE_BATCHES_IN_FLIGHT);
    for _ in 0..PIPELINE_BATCHES_IN_FLIGHT {
        free_tx
            .send(EventBatch::new(
                config.batch_events_max,
                BATCH_BYTES_SOFT_MAX,
            ))
            .expect("free channel has room for every batch");
    }
    let started = Instant::now();
    let cpu_started = process_cpu_time();
    let progress = source.progress();
    let stop_source = stop.clone();
    let source_thread = thread::Builder::new()
        .name("cdc-source".to_string())
        .spawn(move || source_loop(source, full_tx, free_rx, stop_source))
        .map_err(|e| {
            PipelineError::Source(SourceError::Io {
                context: "starting the source thread".to_string(),
                source: e,
            })
        })?;

    let mut events = 0u64;
    let mut batches = 0u64;
    // The position the source resumed from counts as carried already: a
    // first batch that repeats it holds events after it (a resumed
    // snapshot inside a table), which a commit must not cover.
    let mut confirmed: Option<SourcePosition> = match store {
        Some(store) => store.load_committed()?.and_then(|c| c.position),
        None => None,
    };
    let mut uncommitted = false;
    let mut last_commit = Instant::now();
    let mut reporter = Reporter::new(config.progress_interval, progress);
    // Set when the sink failed inside a batch: its writes are then a
    // partial batch, and nothing may be committed after them.
    let mut sink_failed = false;
    let result: Result<(), PipelineError> = loop {
        let message = match full_rx.recv() {
            Ok(m) => m,
            Err(_) => break Err(PipelineError::SourceThread),
        };
        match message {
            Message::Batch(mut batch) => {
                router.apply(&mut batch);
                if let Err(e) = sink.write_batch(&batch) {
                    sink_failed = true;
                    break Err(e.into());
                }
                events += batch.len() as u64;
                batches += 1;
                let wrote_events = !batch.is_empty();
                let durable = batch.position_is_durable().then(|| batch.take_position());
                if let Some(Some(position)) = durable {
                    if events > 0 {
                        break Err(PipelineError::Source(SourceError::Config(
                            "the source asked for a durable position after events of the run (a source bug)"
                                .to_string(),
                        )));
                    }
                    // Nothing of this run reached the sink: the position
                    // goes with the sink state as last committed.
                    if let Some(store) = store {
                        if let Err(e) = store.commit_position(&position) {
                            break Err(e.into());
                        }
                    }
                    confirmed = Some(position);
                    uncommitted = false;
                    let _ = free_tx.send(batch);
                    continue;
                }
                if let Some(position) = batch.take_position() {
                    if confirmed.as_ref() != Some(&position) {
                        confirmed = Some(position);
                        uncommitted = true;
                    } else if wrote_events {
                        // The source could not move its position past
                        // these events (a snapshot table read whole): a
                        // resume from it replays them, so the sink's state
                        // may only be committed with it as of the batch
                        // that first carried it (a log table's marks
                        // taken later would hide these events from the
                        // replay matcher, and they would be written twice).
                        uncommitted = false;
                    }
                }
                // The source may have quit already (error or end); then the
                // batch is simply dropped.
                let _ = free_tx.send(batch);
                if uncommitted && last_commit.elapsed() >= commit_interval {
                    match commit(&mut *sink, store, confirmed.as_ref()) {
                        Err(e) => {
                            sink_failed = matches!(e, PipelineError::Sink(_));
                            break Err(e);
                        }
                        Ok(committed) => uncommitted = !committed,
                    }
                    last_commit = Instant::now();
                }
                reporter.maybe_report(events, &*sink);
            }
            Message::End => break Ok(()),
            Message::Failed(e) => break Err(e.into()),
        }
    };
    // Let a blocked source thread finish: it notices the closed channels.
    stop.raise();
    drop(free_tx);
    drop(full_rx);
    // Unless the sink failed inside a batch, deliver and commit what the
    // sink has confirmed so far: a restart then resumes right after it.
    let final_commit = if sink_failed {
        Ok(())
    } else if uncommitted {
        commit(&mut *sink, store, confirmed.as_ref()).map(|_| ())
    } else {
        sink.flush().map_err(PipelineError::from)
    };
    let joined = source_thread.join();
    result?;
    final_commit?;
    if joined.is_err() {
        return Err(PipelineError::SourceThread);
    }
    reporter.report(events, &*sink);
    Ok(RunSummary {
        events,
        batches,
        elapsed: started.elapsed(),
        position: confirmed,
        resumed_from: None,
        cpu: process_cpu_time().saturating_sub(cpu_started),
        sink: sink.stats(),
        resumptions: 0,
    })
}

/// Flushes the sink, then commits `position` with the sink's state; false
/// when the sink held the commit back ([`Checkpoint::Hold`]).
fn commit(
    sink: &mut dyn Sink,
    store: Option<&OffsetStore>,
    position: Option<&SourcePosition>,
) -> Result<bool, PipelineError> {
    sink.flush()?;
    if let (Some(store), Some(position)) = (store, position) {
        match sink.checkpoint()? {
            Checkpoint::Hold => return Ok(false),
            Checkpoint::Commit(sink_state) => store.commit_all(&Committed {
                position: Some(position.clone()),
                sink_state,
            })?,
        }
    }
    Ok(true)
}

/// Writes a progress line to the log every interval: events and their
/// rate, the source's lag, and rows per sink table.
struct Reporter {
    interval: Duration,
    source: Option<SourceProgress>,
    last: Instant,
    last_events: u64,
}

impl Reporter {
    fn new(interval: Duration, source: Option<SourceProgress>) -> Reporter {
        Reporter {
            interval,
            source,
            last: Instant::now(),
            last_events: 0,
        }
    }

    #[inline]
    fn maybe_report(&mut self, events: u64, sink: &dyn Sink) {
        if self.interval.is_zero() || self.last.elapsed() < self.interval {
            return;
        }
        self.report(events, sink);
    }

    #[cold]
    fn report(&mut self, events: u64, sink: &dyn Sink) {
        if self.interval.is_zero() {
            return;
        }
        let seconds = self.last.elapsed().as_secs_f64().max(1e-9);
        let rate = (events - self.last_events) as f64 / seconds;
        self.last = Instant::now();
        self.last_events = events;
        let mut line = format!("{events} events ({rate:.0}/s)");
        if let Some(source) = &self.source {
            let p = source.get();
            line.push_str(&format!(", source {}", p.phase));
            if p.behind_bytes == Some(0) {
                line.push_str(", at the head");
            } else if let Some(ms) = p.event_time_ms {
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                line.push_str(&format!(
                    ", lag {:.1} s",
                    (now_ms - ms).max(0) as f64 / 1000.0
                ));
            }
            match (p.behind_bytes, &p.head) {
                (Some(0), _) => {}
                (Some(bytes), Some(head)) => {
                    line.push_str(&format!(", {bytes} bytes behind the head ({head})"))
                }
                (None, Some(head)) => line.push_str(&format!(", head {head}")),
                (_, None) => {}
            }
        }
        let stats = sink.stats();
        for t in &stats.tables {
            line.push_str(&format!("; {} {} rows", t.table, t.rows));
            if t.deletes > 0 {
                line.push_str(&format!(" {} deletes", t.deletes));
            }
        }
        tracing::info!("pipeline progress: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;

    /// The one-column table `d.t (id BIGINT)` the scripted sources emit rows of.
    fn id_table() -> std::sync::Arc<crate::schema::TableSchema> {
        use crate::schema::{Column, TableId, TableSchema};
        use crate::types::DataType;
        std::sync::Arc::new(
            TableSchema::new(
                TableId::new("d", "t"),
                1,
                vec![Column::new("id", DataType::BigInt, false)],
                &[],
            )
            .unwrap(),
        )
    }

    /// Emits one event per batch forever, with position = events so far.
    struct Endless {
        schema: std::sync::Arc<crate::schema::TableSchema>,
        produced: u64,
    }

    impl Source for Endless {
        fn next_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
            let slot = batch.table_slot(&self.schema);
            let mut w = batch.row_writer(slot);
            w.set_i64(0, self.produced as i64);
            let row = w.finish().expect("tiny row");
            batch.push_insert(slot, row);
            self.produced += 1;
            batch.set_position(SourcePosition::InputOffset {
                bytes: self.produced,
            });
            Ok(Poll::Ready)
        }
    }

    /// Raises the stop flag once it has seen `stop_after` events.
    struct StopAfter {
        seen: u64,
        stop_after: u64,
        stop: StopFlag,
    }

    impl Sink for StopAfter {
        fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError> {
            self.seen += batch
                .events()
                .filter(|e| matches!(e, Event::Change(_)))
                .count() as u64;
            if self.seen >= self.stop_after {
                self.stop.raise();
            }
            Ok(())
        }
        fn flush(&mut self) -> Result<(), SinkError> {
            Ok(())
        }
    }

    /// Emits `positions.len()` batches of one event each, the i-th with
    /// position `positions[i]`, then ends.
    struct Scripted {
        schema: std::sync::Arc<crate::schema::TableSchema>,
        positions: Vec<u64>,
        next: usize,
    }

    impl Source for Scripted {
        fn next_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
            let Some(&bytes) = self.positions.get(self.next) else {
                return Ok(Poll::End);
            };
            let slot = batch.table_slot(&self.schema);
            let mut w = batch.row_writer(slot);
            w.set_i64(0, self.next as i64);
            let row = w.finish().expect("tiny row");
            batch.push_insert(slot, row);
            batch.set_position(SourcePosition::InputOffset { bytes });
            self.next += 1;
            Ok(Poll::Ready)
        }
    }

    /// A durable position first (no events), then what `inner` emits.
    struct DurableFirst {
        durable: Option<u64>,
        inner: Scripted,
    }

    impl Source for DurableFirst {
        fn next_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
            if let Some(bytes) = self.durable.take() {
                batch.set_position_durable(SourcePosition::InputOffset { bytes });
                return Ok(Poll::Ready);
            }
            self.inner.next_batch(batch)
        }
    }

    /// Fails the run on its first batch with events, after the durable
    /// position's batch (which has none).
    struct FailOnEvents;

    impl Sink for FailOnEvents {
        fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError> {
            if batch.is_empty() {
                return Ok(());
            }
            Err(SinkError::Failed {
                sink: "test",
                message: "refused".into(),
            })
        }
        fn flush(&mut self) -> Result<(), SinkError> {
            Ok(())
        }
    }

    #[test]
    fn events_after_the_position_resumed_from_are_not_committed_with_it() {
        let schema = id_table();
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "test").unwrap();
        store
            .commit_all(&Committed {
                position: Some(SourcePosition::InputOffset { bytes: 5 }),
                sink_state: Some("at 5".into()),
            })
            .unwrap();
        // A resumed source whose batches cannot move past the position it
        // resumed from (a snapshot table read whole again).
        drive(
            Box::new(Scripted {
                schema,
                positions: vec![5, 5],
                next: 0,
            }),
            Box::new(Counting::default()),
            Router::default(),
            Some(&store),
            DriveConfig {
                commit_interval: Duration::ZERO,
                batch_events_max: 1,
                progress_interval: Duration::ZERO,
            },
            &StopFlag::new(),
        )
        .unwrap();
        let c = store.load_committed().unwrap().unwrap();
        assert_eq!(c.position, Some(SourcePosition::InputOffset { bytes: 5 }));
        assert_eq!(c.sink_state.as_deref(), Some("at 5"));
    }

    #[test]
    fn a_durable_position_is_committed_before_the_next_batch_is_written() {
        let schema = id_table();
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "test").unwrap();
        store.commit_sink_state("earlier").unwrap();
        // A commit interval no run reaches: only the durable position is
        // committed before the sink fails on the first events.
        let result = drive(
            Box::new(DurableFirst {
                durable: Some(7),
                inner: Scripted {
                    schema,
                    positions: vec![8, 9],
                    next: 0,
                },
            }),
            Box::new(FailOnEvents),
            Router::default(),
            Some(&store),
            DriveConfig {
                commit_interval: Duration::from_secs(3600),
                batch_events_max: 1,
                progress_interval: Duration::ZERO,
            },
            &StopFlag::new(),
        );
        assert!(result.is_err());
        let c = store.load_committed().unwrap().unwrap();
        assert_eq!(c.position, Some(SourcePosition::InputOffset { bytes: 7 }));
        assert_eq!(c.sink_state.as_deref(), Some("earlier"));
    }

    /// Its state is the number of events written when it is taken.
    #[derive(Default)]
    struct Counting {
        written: u64,
    }

    impl Sink for Counting {
        fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError> {
            self.written += batch.len() as u64;
            Ok(())
        }
        fn flush(&mut self) -> Result<(), SinkError> {
            Ok(())
        }
        fn checkpoint(&mut self) -> Result<Checkpoint, SinkError> {
            Ok(Checkpoint::Commit(Some(self.written.to_string())))
        }
    }

    fn committed_after(positions: Vec<u64>) -> Committed {
        let schema = id_table();
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "test").unwrap();
        drive(
            Box::new(Scripted {
                schema,
                positions,
                next: 0,
            }),
            Box::new(Counting::default()),
            Router::default(),
            Some(&store),
            DriveConfig {
                commit_interval: Duration::ZERO,
                batch_events_max: 1,
                progress_interval: Duration::ZERO,
            },
            &StopFlag::new(),
        )
        .unwrap();
        store.load_committed().unwrap().unwrap()
    }

    #[test]
    fn a_position_is_committed_with_the_state_of_the_batch_that_first_carried_it() {
        // Moving positions: each committed with the events up to it.
        let c = committed_after(vec![1, 2, 3]);
        assert_eq!(c.position, Some(SourcePosition::InputOffset { bytes: 3 }));
        assert_eq!(c.sink_state.as_deref(), Some("3"));
        // Batches repeating a position hold events a resume from it
        // replays: the state stays the one of its first batch.
        let c = committed_after(vec![1, 2, 2, 2]);
        assert_eq!(c.position, Some(SourcePosition::InputOffset { bytes: 2 }));
        assert_eq!(c.sink_state.as_deref(), Some("2"));
    }

    #[test]
    fn stop_request_ends_the_run_and_commits_the_last_confirmed_position() {
        let schema = id_table();
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path(), "test").unwrap();
        let stop = StopFlag::new();
        let summary = drive(
            Box::new(Endless {
                schema,
                produced: 0,
            }),
            Box::new(StopAfter {
                seen: 0,
                stop_after: 10,
                stop: stop.clone(),
            }),
            Router::default(),
            Some(&store),
            // Never commit on the interval: only the final commit can store it.
            DriveConfig {
                commit_interval: Duration::from_secs(3600),
                batch_events_max: 1,
                progress_interval: Duration::ZERO,
            },
            &stop,
        )
        .unwrap();
        assert!(summary.events >= 10);
        assert_eq!(
            store.load().unwrap(),
            Some(SourcePosition::InputOffset {
                bytes: summary.events
            })
        );
        assert_eq!(summary.position, store.load().unwrap());
    }
}
