//! A compacted primary-key changelog read by the official Rust client,
//! `fluss-rs` 1.0.0, unmodified, against the real `fjord server` binary with
//! small segments and a table whose `table.log.ttl` is 1 ms, so the
//! server's maintenance compacts its changelog on its own while the test
//! writes. What this proves:
//! - fluss-rs's `LogScanner` reads a compacted changelog from the earliest
//!   offset: it tolerates gaps between batches (offsets jump), batches that
//!   start after the fetch offset and header-only end markers, and the
//!   records it gets materialise (`+I`/`+U` put, `-D` delete) to exactly the
//!   table, which fluss-rs lookups return too (both equal to a model);
//! - a fluss-rs scanner that read part of the changelog before a compaction
//!   and goes on after it ends with the same table;
//! - after a clean restart, the same holds.
//!
//! Compaction runs in the server's background; the test waits (bounded by
//! the step timeout) for the server's own report of a compaction covering
//! what it needs, never for a fixed time.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use fluss::client::{FlussConnection, FlussTable, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::metadata::{DataTypes, Schema, TableDescriptor, TablePath};
use fluss::record::ChangeType;
use fluss::row::{DataGetters, Datum, GenericRow};
use fluss::rpc::message::OffsetSpec;
use support::{FjordServer, STEP_TIMEOUT};
use tempfile::TempDir;

const DB: &str = "interop_compaction";
const TABLE: &str = "kv";
/// How long one `poll` waits for data.
const POLL_WAIT: Duration = Duration::from_millis(300);
/// Keys of the table.
const KEYS: i32 = 30;
/// Writes per flushed round: small KV batches, so each changelog batch fits
/// the small `log.batch.max-size` below.
const ROUND_WRITES: usize = 12;

/// Server options: small segments, so a few hundred writes seal several;
/// compaction whenever anything is due.
const SERVER_OPTIONS: &[&str] = &[
    "log.segment.file-size=16kb",
    "log.batch.max-size=8kb",
    "log.index.interval-size=1kb",
    "kv.changelog-compaction.min-dirty-ratio=0",
];

/// The table as the model keeps it: key → (v, s).
type Table = BTreeMap<i32, (i64, String)>;

fn path() -> TablePath {
    TablePath::new(DB, TABLE)
}

fn descriptor() -> TableDescriptor {
    let schema = Schema::builder()
        .column("k", DataTypes::int().as_non_nullable())
        .column("v", DataTypes::bigint())
        .column("s", DataTypes::string())
        .primary_key(vec!["k".to_owned()])
        .expect("primary key")
        .build()
        .expect("schema");
    TableDescriptor::builder()
        .schema(schema)
        .distributed_by(Some(1), vec![])
        .property("table.log.ttl", "1 ms")
        .build()
        .expect("descriptor")
}

async fn connect(server: &FjordServer) -> FlussConnection {
    let config = Config {
        bootstrap_servers: server.bootstrap_servers(),
        writer_retries: 5,
        lookup_batch_timeout_ms: 5,
        ..Config::default()
    };
    server.step("connect", FlussConnection::new(config)).await
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// Writes `rounds` rounds of upserts (new keys and updates) and deletes of
/// present keys, flushing each round, applying each to `model`.
async fn write(
    server: &FjordServer,
    table: &FlussTable<'_>,
    rng: &mut Rng,
    rounds: usize,
    model: &mut Table,
) {
    let writer = table
        .new_upsert()
        .expect("new_upsert")
        .create_writer()
        .expect("create upsert writer");
    for round in 0..rounds {
        let mut acks = Vec::with_capacity(ROUND_WRITES);
        for _ in 0..ROUND_WRITES {
            let k = rng.below(KEYS as u64) as i32;
            // Only present keys are deleted: a delete of an absent key
            // writes a batch without records.
            if model.contains_key(&k) && rng.below(4) == 0 {
                let row = GenericRow {
                    values: vec![Datum::Int32(k), Datum::Null, Datum::Null],
                };
                acks.push(writer.delete(&row).expect("delete"));
                model.remove(&k);
            } else {
                let v = rng.below(1_000) as i64;
                let s = format!("{k}-{round}-{v}");
                let row = GenericRow {
                    values: vec![Datum::Int32(k), Datum::Int64(v), Datum::from(s.clone())],
                };
                acks.push(writer.upsert(&row).expect("upsert"));
                model.insert(k, (v, s));
            }
        }
        server.step("flush", writer.flush()).await;
        for ack in acks {
            server.step("write result", ack).await;
        }
    }
}

/// The changelog's end (the bucket's latest offset).
async fn latest(server: &FjordServer, conn: &FlussConnection) -> i64 {
    let admin = conn.get_admin().expect("admin");
    let offsets = server
        .step(
            "latest offset",
            admin.list_offsets(&path(), &[0], OffsetSpec::Latest),
        )
        .await;
    offsets[&0]
}

/// A changelog reader: a fluss-rs scanner and what it has materialised.
struct Reader {
    scanner: fluss::client::LogScanner,
    state: Table,
    /// Offsets of the records read, in order.
    offsets: Vec<i64>,
    /// Changes read, per kind.
    kinds: HashMap<&'static str, usize>,
}

impl Reader {
    async fn new(server: &FjordServer, table: &FlussTable<'_>) -> Self {
        let scanner = table
            .new_scan()
            .create_log_scanner()
            .expect("create_log_scanner");
        server
            .step("subscribe", scanner.subscribe(0, EARLIEST_OFFSET))
            .await;
        Self {
            scanner,
            state: Table::new(),
            offsets: Vec::new(),
            kinds: HashMap::new(),
        }
    }

    /// The offset after the last record read (0 before any).
    fn position(&self) -> i64 {
        self.offsets.last().map_or(0, |o| o + 1)
    }

    /// Polls until it has read a record at or past `until - 1`.
    async fn read_until(&mut self, server: &FjordServer, until: i64) {
        let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
        while self.position() < until {
            assert!(
                tokio::time::Instant::now() < deadline,
                "read up to {} of {until} within {STEP_TIMEOUT:?}\n--- fjord server stderr ---\n{}",
                self.position(),
                server.stderr_log()
            );
            let records = server.step("poll", self.scanner.poll(POLL_WAIT)).await;
            for (_, records) in records.into_records_by_buckets() {
                for r in records {
                    let offset = r.offset();
                    assert!(
                        offset >= self.position(),
                        "offset {offset} after {}",
                        self.position()
                    );
                    self.offsets.push(offset);
                    let row = r.row();
                    let k = row.get_int(0).expect("k");
                    let kind = match r.change_type() {
                        ChangeType::Insert | ChangeType::UpdateAfter => {
                            let v = row.get_long(1).expect("v");
                            let s = row.get_string(2).expect("s").to_owned();
                            self.state.insert(k, (v, s));
                            if *r.change_type() == ChangeType::Insert {
                                "+I"
                            } else {
                                "+U"
                            }
                        }
                        ChangeType::Delete => {
                            self.state.remove(&k);
                            "-D"
                        }
                        ChangeType::UpdateBefore => "-U",
                        ChangeType::AppendOnly => panic!("+A in a primary-key changelog"),
                    };
                    *self.kinds.entry(kind).or_default() += 1;
                }
            }
        }
    }

    /// Whether the offsets read skip some (the log has gaps).
    fn saw_gaps(&self) -> bool {
        self.offsets.windows(2).any(|w| w[1] > w[0] + 1) || self.offsets.first() > Some(&0)
    }
}

/// Looks up every key and checks the answers against `model`.
async fn check_lookups(server: &FjordServer, table: &FlussTable<'_>, model: &Table, when: &str) {
    let mut lookuper = table
        .new_lookup()
        .expect("new_lookup")
        .create_lookuper()
        .expect("create lookuper");
    for k in 0..KEYS {
        let key = GenericRow {
            values: vec![Datum::Int32(k)],
        };
        let result = server.step("lookup", lookuper.lookup(&key)).await;
        let row = result.get_single_row().expect("single row");
        let got = row.map(|r| {
            (
                r.get_long(1).expect("v"),
                r.get_string(2).expect("s").to_owned(),
            )
        });
        assert_eq!(got.as_ref(), model.get(&k), "lookup of {k} {when}");
    }
}

/// Waits until the server reports a compaction that ends past `offset` and
/// was logged after the first `log_len` bytes of its stderr; returns the
/// compacted range's end.
async fn compaction_past(server: &FjordServer, log_len: usize, offset: i64) -> i64 {
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    loop {
        let log = server.stderr_log();
        let ends = log[log_len.min(log.len())..]
            .lines()
            .filter(|l| l.contains("compacted the changelog"))
            .filter_map(|l| {
                let at = l.find(" end_offset=")? + " end_offset=".len();
                l[at..]
                    .split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse::<i64>()
                    .ok()
            })
            .max();
        if let Some(end) = ends.filter(|&e| e > offset) {
            return end;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no compaction past offset {offset} within {STEP_TIMEOUT:?}\n--- fjord server stderr ---\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fluss_rs_reads_a_compacted_changelog_from_the_start_and_from_the_middle() {
    let dir = TempDir::new().expect("tempdir");
    let mut server = FjordServer::start_with_options(dir.path(), SERVER_OPTIONS);
    let mut model = Table::new();
    let mut rng = Rng(19);
    {
        let conn = connect(&server).await;
        let admin = conn.get_admin().expect("admin");
        server
            .step("create database", admin.create_database(DB, None, true))
            .await;
        server
            .step(
                "create table",
                admin.create_table(&path(), &descriptor(), false),
            )
            .await;
        let table = server.step("get table", conn.get_table(&path())).await;

        // Phase 1: enough writes for several segments; compactions may run
        // meanwhile.
        write(&server, &table, &mut rng, 40, &mut model).await;
        // A reader reads part of the changelog...
        let mut middle = Reader::new(&server, &table).await;
        let half = latest(&server, &conn).await / 2;
        middle.read_until(&server, half).await;
        let p = middle.position();
        let log_len = server.stderr_log().len();
        // ...the table changes on, and a compaction covers where it stopped.
        write(&server, &table, &mut rng, 40, &mut model).await;
        let compacted_end = compaction_past(&server, log_len, p).await;
        let end = latest(&server, &conn).await;
        assert!(compacted_end <= end);

        // The reader in the middle goes on to the end.
        middle.read_until(&server, end).await;
        assert_eq!(middle.state, model, "the reader from offset {p} ends wrong");

        // A reader from the start sees the compacted changelog: gaps, no
        // -U in the compacted range, and the whole table.
        let mut fresh = Reader::new(&server, &table).await;
        fresh.read_until(&server, end).await;
        assert_eq!(fresh.state, model, "the reader from the start ends wrong");
        assert!(fresh.saw_gaps(), "no gaps: offsets {:?}", fresh.offsets);
        assert!(
            fresh.offsets.len() < end as usize,
            "{} records for {end} offsets",
            fresh.offsets.len()
        );
        check_lookups(&server, &table, &model, "after compaction").await;
    }

    // A clean restart: the same table, read from the start and looked up.
    server.restart();
    let conn = connect(&server).await;
    let table = server.step("get table", conn.get_table(&path())).await;
    let end = latest(&server, &conn).await;
    let mut fresh = Reader::new(&server, &table).await;
    fresh.read_until(&server, end).await;
    assert_eq!(
        fresh.state, model,
        "the reader from the start after a restart"
    );
    check_lookups(&server, &table, &model, "after a restart").await;
}
