//! Crash safety of primary-key tables, with the official Rust client
//! (`fluss-rs` 1.0.0, lib `fluss`) against the real `fjord server` binary.
//!
//! A fluss-rs upsert writer runs a deterministic stream of upserts and
//! deletes over a few hundred keys, with up to [`WINDOW`] writes in flight,
//! and remembers every write whose own result was Ok (acknowledged). In the
//! middle of the stream the server is killed with SIGKILL (no shutdown code
//! runs), then restarted on the same data dir and address; the writer rides
//! through (what it still held goes to the restarted server or fails) and is
//! flushed before anything is checked. Three rounds kill it at different
//! points. After each restart this proves:
//! - every acknowledged write is there: a lookup of every key ever written
//!   returns the value of the key's last acknowledged write, or `None` when
//!   that write was a delete;
//! - writes in flight at the kill may or may not be there, but a key only
//!   ever holds a value that one of its own writes gave it (the last
//!   acknowledged one or an unacknowledged later one), never a mix, an
//!   older one or another key's;
//! - the changelog read from the earliest offset with fluss-rs's
//!   `LogScanner` is consistent (`+I` only for absent keys, `-U`/`-D` carry
//!   the row the key held, no write applied twice) and replays to exactly
//!   what the lookups return, so the recovered KV store and its changelog
//!   agree.

mod support;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::time::Duration;

use fluss::client::{FlussConnection, FlussTable, WriteResultFuture, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::metadata::{DataTypes, Schema, TableDescriptor, TablePath};
use fluss::record::ChangeType;
use fluss::row::{DataGetters, Datum, GenericRow};
use fluss::rpc::message::OffsetSpec;
use support::{FjordServer, STEP_TIMEOUT};
use tempfile::TempDir;
use tokio::task::JoinSet;

const DB: &str = "kv_crash";
const TABLE: &str = "accounts";
const BUCKETS: i32 = 3;
/// Keys of the stream: few enough that most writes update or delete a key
/// written before.
const KEYS: u64 = 300;
/// Most writes awaiting their result at once: at the kill, up to this many
/// are queued, sent or being applied.
const WINDOW: usize = 256;
/// Per round: acknowledged writes, then how long the stream runs on, before
/// the kill. The delay only moves the kill point (batches on the wire,
/// being applied, being made durable); what is checked holds for any point.
const KILL_AFTER: [(usize, Duration); 3] = [
    (200, Duration::from_millis(5)),
    (900, Duration::from_millis(40)),
    (450, Duration::from_millis(15)),
];
/// Sentinel upserts (new keys) after each recovery: they end every bucket's
/// changelog with a record, so the changelog reader knows where it ends.
const SENTINELS: u64 = 30;
/// First key of the sentinels; the stream's keys are below.
const SENTINEL_KEY: i64 = 1_000_000;
/// Lookupers run side by side, so fluss-rs batches their keys.
const LOOKUP_TASKS: usize = 6;
/// How long one `poll` waits for data before the scan loop checks its deadline.
const POLL_WAIT: Duration = Duration::from_millis(300);
/// How long the results of outstanding writes are awaited once flush returned
/// (they are set by then, or never).
const STRANDED_WAIT: Duration = Duration::from_secs(1);

/// A row of the table: `v` names the write that gave it, `s` repeats it.
type Value = (i64, String);

/// splitmix64: the deterministic stream.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Write `j` of the stream: its key and the value it gives (`None`: a delete).
fn stream_op(j: u64) -> (i64, Option<Value>) {
    let r = mix(j);
    let key = (r % KEYS) as i64;
    let value = (!(r >> 32).is_multiple_of(4)).then(|| {
        let pad = "·".repeat(((r >> 40) % 64) as usize);
        (j as i64, format!("write {j} of key {key} {pad}"))
    });
    (key, value)
}

fn sentinel(round: usize, i: u64) -> (i64, Value) {
    let key = SENTINEL_KEY + (round as i64) * 1_000 + i as i64;
    (key, (-key, format!("sentinel {i} of round {round}")))
}

fn row(key: i64, value: Option<&Value>) -> GenericRow<'static> {
    let (v, s) = match value {
        Some((v, s)) => (Datum::Int64(*v), Datum::from(s.clone())),
        None => (Datum::Null, Datum::Null),
    };
    GenericRow {
        values: vec![Datum::Int64(key), v, s],
    }
}

fn read_value(r: &dyn DataGetters) -> Result<(i64, Value), String> {
    let e = |e: fluss::error::Error| format!("{e:?}");
    let key = r.get_long(0).map_err(e)?;
    if r.is_null_at(1).map_err(e)? || r.is_null_at(2).map_err(e)? {
        return Err(format!("key {key}: a row with null columns"));
    }
    let value = (
        r.get_long(1).map_err(e)?,
        r.get_string(2).map_err(e)?.to_owned(),
    );
    Ok((key, value))
}

/// What the test knows of one key.
#[derive(Default, Debug)]
struct KeyState {
    /// The value of the last acknowledged write (or of the last recovery's
    /// lookup); `None`: absent.
    known: Option<Value>,
    /// Writes issued after it whose outcome is unknown (in flight at the
    /// kill, or failed): (write number, value it gives).
    maybe: Vec<(u64, Option<Value>)>,
}

impl KeyState {
    fn allowed(&self) -> Vec<Option<&Value>> {
        std::iter::once(self.known.as_ref())
            .chain(self.maybe.iter().map(|(_, v)| v.as_ref()))
            .collect()
    }
}

struct Stream {
    next: u64,
    keys: BTreeMap<i64, KeyState>,
    /// Every value ever written, by `v`: (key, value). A value read back must
    /// be one of these, on its own key.
    values: HashMap<i64, (i64, Value)>,
    acked: usize,
    unknown: usize,
    /// Writes whose result fluss-rs never set after the client was closed.
    stranded: usize,
}

async fn connect(server: &FjordServer) -> FlussConnection {
    let config = Config {
        bootstrap_servers: server.bootstrap_servers(),
        // A batch on the wire at the kill soon fails (its outcome is
        // unknown: it may have been applied); batches still queued go to the
        // restarted server. (Idempotent fluss-rs writers need at least one.)
        writer_retries: 1,
        // Batches go out within a millisecond of their writes, so at the kill
        // some are on the wire or being applied, not only queued in the
        // client (0 trips a debug assertion in fluss-rs 1.0.0's sender).
        writer_batch_timeout_ms: 1,
        lookup_batch_timeout_ms: 5,
        ..Config::default()
    };
    server.step("connect", FlussConnection::new(config)).await
}

fn path() -> TablePath {
    TablePath::new(DB, TABLE)
}

/// Runs the stream until `kill_after` writes of this round are acknowledged
/// and `kill_delay` more has passed with the stream flowing, kills the
/// server (SIGKILL) right there with writes in flight, restarts it on `dir`,
/// lets the client finish what it held (sent to the restarted server or
/// failed) and collects every outstanding result.
async fn write_until_killed(
    server: &mut FjordServer,
    conn: &FlussConnection,
    table: &FlussTable<'_>,
    stream: &mut Stream,
    (kill_after, kill_delay): (usize, Duration),
    dir: &Path,
) {
    let writer = table
        .new_upsert()
        .expect("new_upsert")
        .create_writer()
        .expect("upsert writer");
    let mut outstanding: VecDeque<(u64, WriteResultFuture)> = VecDeque::new();
    let mut acked = 0usize;
    let mut kill_at: Option<tokio::time::Instant> = None;
    while kill_at.is_none_or(|at| tokio::time::Instant::now() < at) {
        while outstanding.len() < WINDOW {
            let j = stream.next;
            stream.next += 1;
            let (key, value) = stream_op(j);
            let r = row(key, value.as_ref());
            let ack = match &value {
                Some(_) => writer.upsert(&r),
                None => writer.delete(&r),
            }
            .unwrap_or_else(|e| panic!("fluss-rs refused write {j}: {e:?}"));
            if let Some(v) = &value {
                stream.values.insert(v.0, (key, v.clone()));
            }
            stream.keys.entry(key).or_default().maybe.push((j, value));
            outstanding.push_back((j, ack));
        }
        let (j, ack) = outstanding.pop_front().expect("a write is outstanding");
        server
            .step(&format!("result of write {j} before the kill"), ack)
            .await;
        acknowledge(stream, j);
        acked += 1;
        if acked == kill_after {
            kill_at = Some(tokio::time::Instant::now() + kill_delay);
        }
    }
    let unknown_before = stream.unknown;

    // The crash: no shutdown code runs on the server.
    let listen = server.addr().to_string();
    server.kill();
    // The same server comes back on the same data dir and address. The
    // client rides through: what it still holds is sent to the restarted
    // server or fails; flush waits until every write has its result, so
    // nothing of this round lands after the checks begin.
    *server = FjordServer::start_listening(dir, &listen);
    server
        .step("flush the writes held through the crash", writer.flush())
        .await;
    // Every result is set once flush returns; a write fluss-rs 1.0.0 never
    // gives a result to counts as unknown (it was never acknowledged).
    let deadline = tokio::time::Instant::now() + STRANDED_WAIT;
    for (j, ack) in outstanding.drain(..) {
        match tokio::time::timeout_at(deadline, ack).await {
            Ok(Ok(())) => acknowledge(stream, j),
            Ok(Err(_)) => stream.unknown += 1,
            Err(_) => {
                stream.unknown += 1;
                stream.stranded += 1;
            }
        }
    }
    server
        .step("close the connection", conn.close(Duration::from_secs(5)))
        .await;
    eprintln!(
        "kv_crash: killed after {acked} acknowledged writes of this round; of the {} \
         outstanding then, {} have an unknown outcome",
        WINDOW,
        stream.unknown - unknown_before
    );
}

/// Write `j` was acknowledged: its value is now the key's known one, and the
/// key's earlier unknown writes can no longer show.
fn acknowledge(stream: &mut Stream, j: u64) {
    let (key, value) = stream_op(j);
    let state = stream
        .keys
        .get_mut(&key)
        .expect("issued writes are tracked");
    state.maybe.retain(|(w, _)| *w > j);
    state.known = value;
    stream.acked += 1;
}

/// Looks up `keys` with fluss-rs, several lookupers at once; returns what each
/// key holds.
async fn lookup_all(
    server: &FjordServer,
    table: &FlussTable<'_>,
    keys: &[i64],
) -> BTreeMap<i64, Option<Value>> {
    let mut tasks = JoinSet::new();
    for chunk in keys.chunks(keys.len().div_ceil(LOOKUP_TASKS)) {
        let mut lookuper = table
            .new_lookup()
            .expect("new_lookup")
            .create_lookuper()
            .expect("lookuper");
        let chunk = chunk.to_vec();
        tasks.spawn(async move {
            let mut out = Vec::with_capacity(chunk.len());
            for key in chunk {
                let key_row = GenericRow {
                    values: vec![Datum::Int64(key)],
                };
                let result = lookuper
                    .lookup(&key_row)
                    .await
                    .map_err(|e| format!("lookup of {key}: {e:?}"))?;
                let row = result
                    .get_single_row()
                    .map_err(|e| format!("lookup of {key}: {e:?}"))?;
                let value = match row {
                    Some(r) => {
                        let (got_key, value) = read_value(&r)?;
                        if got_key != key {
                            return Err(format!("lookup of {key} returned key {got_key}"));
                        }
                        Some(value)
                    }
                    None => None,
                };
                out.push((key, value));
            }
            Ok::<_, String>(out)
        });
    }
    server
        .step("lookups after the restart", async {
            let mut all = BTreeMap::new();
            while let Some(done) = tasks.join_next().await {
                all.extend(done.map_err(|e| e.to_string())??);
            }
            Ok::<_, String>(all)
        })
        .await
}

/// Reads the whole changelog from the earliest offset (until each bucket's
/// last record is the one before its latest offset) and replays it, checking
/// each record against the state it applies to. Returns the replayed rows.
async fn replay_changelog(
    server: &FjordServer,
    conn: &FlussConnection,
    table: &FlussTable<'_>,
) -> BTreeMap<i64, Value> {
    let admin = conn.get_admin().expect("admin");
    let buckets: Vec<i32> = (0..BUCKETS).collect();
    let latest = server
        .step(
            "latest changelog offsets",
            admin.list_offsets(&path(), &buckets, OffsetSpec::Latest),
        )
        .await;
    let scanner = table
        .new_scan()
        .create_log_scanner()
        .expect("create_log_scanner");
    let from: HashMap<i32, i64> = buckets.iter().map(|&b| (b, EARLIEST_OFFSET)).collect();
    server
        .step(
            "subscribe to the changelog",
            scanner.subscribe_buckets(&from),
        )
        .await;
    let mut records: BTreeMap<i32, Vec<(i64, ChangeType, i64, Value)>> = BTreeMap::new();
    let done = |records: &BTreeMap<i32, Vec<(i64, ChangeType, i64, Value)>>| {
        buckets.iter().all(|b| {
            let end = latest[b];
            end == 0 || records.get(b).and_then(|r| r.last()).map(|r| r.0) == Some(end - 1)
        })
    };
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    while !done(&records) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the changelog did not reach the latest offsets {latest:?} within {STEP_TIMEOUT:?}; \
             last offsets read: {:?}",
            records
                .iter()
                .map(|(b, r)| (b, r.last().map(|x| x.0)))
                .collect::<Vec<_>>()
        );
        let polled = server
            .step("poll the changelog", scanner.poll(POLL_WAIT))
            .await;
        for (tb, recs) in polled.into_records_by_buckets() {
            let out = records.entry(tb.bucket_id()).or_default();
            for r in recs {
                let (key, value) = read_value(r.row())
                    .unwrap_or_else(|e| panic!("changelog record at {}: {e}", r.offset()));
                out.push((r.offset(), *r.change_type(), key, value));
            }
        }
    }

    let mut state: BTreeMap<i64, Value> = BTreeMap::new();
    let mut bucket_of: HashMap<i64, i32> = HashMap::new();
    // Every write gives a value no other write gives, so a value set twice
    // means a write was applied twice (a retry across the crash not seen as
    // a duplicate).
    let mut set_by: HashMap<i64, i64> = HashMap::new();
    for (bucket, recs) in &records {
        let mut last_offset = -1;
        for (offset, change, key, value) in recs {
            let at = format!("bucket {bucket} offset {offset} ({change:?} key {key})");
            assert!(*offset > last_offset, "{at}: offsets out of order");
            assert!(*offset < latest[bucket], "{at}: past the latest offset");
            last_offset = *offset;
            assert_eq!(
                *bucket_of.entry(*key).or_insert(*bucket),
                *bucket,
                "{at}: the key is in two buckets"
            );
            if matches!(change, ChangeType::Insert | ChangeType::UpdateAfter) {
                if let Some(earlier) = set_by.insert(value.0, *offset) {
                    panic!("{at}: value {value:?} set again (first at offset {earlier})");
                }
            }
            match change {
                ChangeType::Insert => {
                    assert_eq!(state.get(key), None, "{at}: insert of a present key");
                    state.insert(*key, value.clone());
                }
                ChangeType::UpdateBefore | ChangeType::Delete => {
                    assert_eq!(
                        state.get(key),
                        Some(value),
                        "{at}: the before-image is not the key's row"
                    );
                    if *change == ChangeType::Delete {
                        state.remove(key);
                    }
                }
                ChangeType::UpdateAfter => {
                    assert!(state.contains_key(key), "{at}: update of an absent key");
                    state.insert(*key, value.clone());
                }
                ChangeType::AppendOnly => panic!("{at}: append-only record"),
            }
        }
    }
    state
}

/// After a restart: every acknowledged write is there, in-flight writes are
/// there or not, every value is one its key was given, and the changelog
/// replays to the looked-up rows. Then what the server holds becomes what
/// the test knows.
async fn verify(server: &FjordServer, stream: &mut Stream, round: usize) {
    let conn = connect(server).await;
    let table = server.step("get table", conn.get_table(&path())).await;
    let keys: Vec<i64> = stream.keys.keys().copied().collect();
    let found = lookup_all(server, &table, &keys).await;
    let mut lost = Vec::new();
    // Keys whose unacknowledged later write is what the server kept.
    let mut landed = 0;
    for (key, state) in &stream.keys {
        let got = found[key].as_ref();
        if got != state.known.as_ref() {
            landed += 1;
        }
        if let Some((v, s)) = got {
            let origin = stream.values.get(v);
            assert_eq!(
                origin.map(|(k, value)| (*k, value)),
                Some((*key, &(*v, s.clone()))),
                "round {round}: key {key} holds {got:?}, a value none of its writes gave it"
            );
        }
        if !state.allowed().contains(&got) {
            lost.push(format!(
                "key {key}: holds {got:?}; the last acknowledged write left {:?}, \
                 unacknowledged later writes {:?}",
                state.known, state.maybe
            ));
        }
    }
    assert!(
        lost.is_empty(),
        "round {round}: {} keys do not hold their acknowledged value:\n{}\n\
         --- fjord server stderr ---\n{}",
        lost.len(),
        lost.join("\n"),
        server.stderr_log()
    );

    eprintln!(
        "kv_crash: round {round}: {} keys checked, {landed} hold a write in flight at the kill",
        stream.keys.len()
    );

    // Sentinels end every bucket's changelog with a record; then the
    // changelog must replay to what the lookups returned.
    let writer = table
        .new_upsert()
        .expect("new_upsert")
        .create_writer()
        .expect("writer");
    let mut acks = Vec::new();
    for i in 0..SENTINELS {
        let (key, value) = sentinel(round, i);
        acks.push((key, writer.upsert(&row(key, Some(&value))).expect("queued")));
        stream.values.insert(value.0, (key, value.clone()));
        stream.keys.insert(
            key,
            KeyState {
                known: Some(value),
                maybe: Vec::new(),
            },
        );
    }
    server.step("flush the sentinels", writer.flush()).await;
    for (key, ack) in acks {
        server
            .step(&format!("result of the sentinel of key {key}"), ack)
            .await;
    }
    let replayed = replay_changelog(server, &conn, &table).await;
    for (key, state) in stream.keys.iter_mut() {
        let looked_up = if *key >= SENTINEL_KEY {
            state.known.clone()
        } else {
            found[key].clone()
        };
        assert_eq!(
            replayed.get(key),
            looked_up.as_ref(),
            "round {round}: key {key}: the changelog replays to another row than the lookup"
        );
        state.known = looked_up;
        state.maybe.clear();
    }
    assert!(
        replayed.keys().all(|k| stream.keys.contains_key(k)),
        "round {round}: the changelog has keys no write named"
    );
    drop(table);
    server
        .step("close connection", conn.close(Duration::from_secs(5)))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_upserts_and_deletes_survive_sigkill() {
    let dir = TempDir::new().expect("temp data dir");
    let mut server = FjordServer::start(dir.path());
    {
        let conn = connect(&server).await;
        let admin = conn.get_admin().expect("admin");
        let schema = Schema::builder()
            .column("id", DataTypes::bigint().as_non_nullable())
            .column("v", DataTypes::bigint())
            .column("s", DataTypes::string())
            .primary_key(["id"])
            .expect("primary key")
            .build()
            .expect("schema");
        let descriptor = TableDescriptor::builder()
            .schema(schema)
            .distributed_by(Some(BUCKETS), vec![])
            .build()
            .expect("descriptor");
        server
            .step("create database", admin.create_database(DB, None, false))
            .await;
        server
            .step(
                "create table",
                admin.create_table(&path(), &descriptor, false),
            )
            .await;
        server
            .step("close connection", conn.close(Duration::from_secs(5)))
            .await;
    }
    let mut stream = Stream {
        next: 0,
        keys: BTreeMap::new(),
        values: HashMap::new(),
        acked: 0,
        unknown: 0,
        stranded: 0,
    };
    for (round, kill_point) in KILL_AFTER.into_iter().enumerate() {
        {
            let conn = connect(&server).await;
            let table = server.step("get table", conn.get_table(&path())).await;
            write_until_killed(
                &mut server,
                &conn,
                &table,
                &mut stream,
                kill_point,
                dir.path(),
            )
            .await;
        }
        verify(&server, &mut stream, round).await;
    }
    assert!(
        stream.acked >= KILL_AFTER.iter().map(|(n, _)| n).sum::<usize>(),
        "{} writes acknowledged",
        stream.acked
    );
    eprintln!(
        "kv_crash: {} writes issued, {} acknowledged, {} with unknown outcome \
         ({} never given a result by fluss-rs)",
        stream.next, stream.acked, stream.unknown, stream.stranded
    );
    server.stop();
}
