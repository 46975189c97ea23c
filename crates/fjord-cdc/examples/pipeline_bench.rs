//! Measures the pipeline runtime and the built-in source/sink paths without a
//! database: one JSON line per case with events, events_per_s and
//! cpu_ns_per_event (process CPU from getrusage).
//!
//! `cargo run --release -p fjord-cdc --example pipeline_bench [events]`
//!
//! Cases (all on the seed's `user_behavior` schema: user_id, item_id,
//! category_id BIGINT, behavior VARCHAR(16), ts TIMESTAMP_LTZ(0)):
//! - `synthetic→values`: a source that writes rows into batches, the runtime's
//!   two threads and channel hand-offs, the values sink (the floor every
//!   source adds its decoding cost to);
//! - `synthetic→print(/dev/null)`: the same into the print sink's JSON formatter;
//! - `debezium-json→values`: Debezium envelopes with schema read from a file.

use std::io::Write;
use std::sync::Arc;

use fjord_cdc::config::{DebeziumJsonConfig, DecimalHandling};
use fjord_cdc::event::EventBatch;
use fjord_cdc::filter::TableFilter;
use fjord_cdc::position::SourcePosition;
use fjord_cdc::route::Router;
use fjord_cdc::runtime::{drive, DriveConfig, RunSummary};
use fjord_cdc::schema::{Column, TableId, TableSchema};
use fjord_cdc::sink::print::PrintSink;
use fjord_cdc::sink::values::ValuesSink;
use fjord_cdc::sink::Sink;
use fjord_cdc::source::{debezium, Poll, Source, SourceError, StartOptions, StopFlag};
use fjord_cdc::types::DataType;

const BEHAVIORS: [&str; 4] = ["pv", "cart", "fav", "buy"];

fn schema() -> Arc<TableSchema> {
    Arc::new(
        TableSchema::new(
            TableId::new("test", "user_behavior"),
            1,
            vec![
                Column::new("user_id", DataType::BigInt, true),
                Column::new("item_id", DataType::BigInt, true),
                Column::new("category_id", DataType::BigInt, true),
                Column::new("behavior", DataType::Varchar { length: 16 }, true),
                Column::new("ts", DataType::TimestampLtz { precision: 0 }, true),
            ],
            &[],
        )
        .expect("valid schema"),
    )
}

/// Deterministic pseudo-random numbers (xorshift), cheap enough not to dominate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

struct Synthetic {
    schema: Arc<TableSchema>,
    remaining: u64,
    rng: Rng,
    produced: u64,
}

impl Source for Synthetic {
    fn next_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
        let slot = batch.table_slot(&self.schema);
        while !batch.is_full() && self.remaining > 0 {
            let r = self.rng.next();
            let mut w = batch.row_writer(slot);
            w.set_i64(0, (r % 1_000_000) as i64);
            w.set_i64(1, ((r >> 20) % 5_000_000) as i64);
            w.set_i64(2, ((r >> 40) % 10_000) as i64);
            w.set_str(3, BEHAVIORS[(r >> 60) as usize & 3]);
            w.set_micros(
                4,
                1_511_658_000_000_000 + (self.produced as i64) * 1_000_000,
            );
            let row = w.finish().expect("small row");
            batch.push_insert(slot, row);
            self.remaining -= 1;
            self.produced += 1;
        }
        batch.set_position(SourcePosition::InputOffset {
            bytes: self.produced,
        });
        Ok(if self.remaining == 0 {
            Poll::End
        } else {
            Poll::Ready
        })
    }
}

fn report(case: &str, summary: &RunSummary) {
    println!(
        "{{\"case\":\"{case}\",\"events\":{},\"elapsed_s\":{:.3},\"events_per_s\":{:.0},\"cpu_ns_per_event\":{:.1}}}",
        summary.events,
        summary.elapsed.as_secs_f64(),
        summary.events_per_s(),
        summary.cpu_ns_per_event()
    );
}

fn synthetic(events: u64) -> Box<dyn Source> {
    Box::new(Synthetic {
        schema: schema(),
        remaining: events,
        rng: Rng(0x9e37_79b9_7f4a_7c15),
        produced: 0,
    })
}

fn run(case: &str, source: Box<dyn Source>, sink: Box<dyn Sink>) {
    let summary = drive(
        source,
        sink,
        Router::default(),
        None,
        DriveConfig::default(),
        &StopFlag::new(),
    )
    .expect("benchmark pipeline runs");
    report(case, &summary);
}

fn debezium_file(events: u64) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("fjord-cdc-bench-{events}.json"));
    if path.exists() {
        return path;
    }
    let schema = r#"{"type":"struct","fields":[{"type":"struct","optional":true,"field":"before","fields":[{"type":"int64","optional":true,"field":"user_id"},{"type":"int64","optional":true,"field":"item_id"},{"type":"int64","optional":true,"field":"category_id"},{"type":"string","optional":true,"field":"behavior"},{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","field":"ts"}]},{"type":"struct","optional":true,"field":"after","fields":[{"type":"int64","optional":true,"field":"user_id"},{"type":"int64","optional":true,"field":"item_id"},{"type":"int64","optional":true,"field":"category_id"},{"type":"string","optional":true,"field":"behavior"},{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","field":"ts"}]},{"type":"string","field":"op"}]}"#;
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("temp file"));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..events {
        let r = rng.next();
        writeln!(
            out,
            r#"{{"schema":{schema},"payload":{{"before":null,"after":{{"user_id":{},"item_id":{},"category_id":{},"behavior":"{}","ts":"2017-11-{:02}T{:02}:{:02}:{:02}Z"}},"source":{{"db":"test","table":"user_behavior"}},"op":"c"}}}}"#,
            r % 1_000_000,
            (r >> 20) % 5_000_000,
            (r >> 40) % 10_000,
            BEHAVIORS[(r >> 60) as usize & 3],
            25 + (i / 86_400) % 5,
            (i / 3600) % 24,
            (i / 60) % 60,
            i % 60
        )
        .expect("write temp file");
    }
    out.flush().expect("flush temp file");
    path
}

fn main() {
    let events: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5_000_000);
    run(
        "synthetic→values",
        synthetic(events),
        Box::new(ValuesSink::<std::io::Sink>::new(None)),
    );
    let devnull = std::fs::File::create("/dev/null").expect("/dev/null");
    run(
        "synthetic→print(/dev/null)",
        synthetic(events),
        Box::new(PrintSink::new(devnull)),
    );
    let json_events = events / 5;
    let path = debezium_file(json_events);
    let config = DebeziumJsonConfig {
        path: Some(path.clone()),
        tables: TableFilter::all(),
        decimal_handling: DecimalHandling::Precise,
    };
    let source = debezium::open(config, StartOptions::default()).expect("open input");
    run(
        "debezium-json(with schema)→values",
        source,
        Box::new(ValuesSink::<std::io::Sink>::new(None)),
    );
}
