//! Primary-key tables with the official Rust client, `fluss-rs` 1.0.0 (lib
//! `fluss`), used unmodified against the real `fjord server` binary, checked
//! against a small in-memory model of each table's rows and changelog.
//!
//! What this proves, per table created through fluss-rs's admin:
//! - every write fluss-rs makes (upserts of new and existing keys, deletes of
//!   present and absent keys, partial updates by column index and by name,
//!   partial deletes, primary-key-only partial writes) is acknowledged on its
//!   own handle, not just by `flush()`;
//! - a lookup of every key ever written (and of keys never written) returns
//!   exactly the model's row, or `None`;
//! - the changelog read with the ordinary `LogScanner` from the earliest
//!   offset holds, per bucket and in order, exactly the model's `+I`,
//!   `-U`/`+U` and `-D` rows for that bucket's keys;
//! - `new_scan().limit(n)` bucket scans return the first `n` rows of the
//!   bucket in primary-key byte order;
//! - prefix lookups (bucket key a strict prefix of the primary key) return
//!   every row of the prefix in key order, and nothing for absent prefixes;
//! - every scalar type Fluss has (BOOLEAN, TINYINT, SMALLINT, INT, BIGINT,
//!   FLOAT, DOUBLE, STRING, CHAR(n), BYTES, BINARY(n), DECIMAL compact and not,
//!   DATE, TIME(0) and (3), TIMESTAMP(3), (6) and (9), TIMESTAMP_LTZ(3), (6)
//!   and (9)) round-trips as a key column and as a nullable value column,
//!   through upserts, lookups, limit scans and the changelog;
//! - a partitioned table (partition key inside the primary key; partitions
//!   created through the admin, as fluss-rs 1.0.0 does not create them on
//!   write) keeps each partition's rows, changelog and prefixes apart, and a
//!   lookup in a missing partition is `None`;
//! - rows, changelog and scans are unchanged across a clean server restart;
//! - bad input is refused with the error surfaced: partial updates without
//!   the key or with bad columns (fluss-rs refuses them), upserts and lookups
//!   on a log table (fluss-rs refuses them), a delete on a table with
//!   `table.delete.behavior=disable` (DELETION_DISABLED from the server on the
//!   delete's own handle) and a partial update on a `first_row` table
//!   (UNKNOWN_SERVER_ERROR from the server, as Fluss answers), each leaving
//!   the table unchanged and the writer usable.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fluss::client::{FlussConnection, FlussTable, WriteResultFuture, EARLIEST_OFFSET};
use fluss::config::Config;
use fluss::error::FlussError;
use fluss::metadata::{
    BucketStatsRequest, DataField, DataType, DataTypes, KvSnapshot, PartitionSpec, RowType, Schema,
    TableBucket, TableDescriptor, TablePath,
};
use fluss::record::ChangeType;
use fluss::row::encode::KeyEncoderFactory;
use fluss::row::{
    ColumnarRow, DataGetters, Date, Datum, Decimal, GenericRow, Time, TimestampLtz, TimestampNtz,
};
use fluss::rpc::message::OffsetSpec;
use support::{FjordServer, STEP_TIMEOUT};
use tempfile::TempDir;
use tokio::task::JoinSet;

/// The database every table of these tests lives in.
const DB: &str = "interop_kv";
/// How long one `poll` waits for data before the scan loop checks its deadline.
const POLL_WAIT: Duration = Duration::from_millis(300);
/// Lookupers run side by side, so fluss-rs batches their keys into shared
/// Lookup / PrefixLookup requests (several keys and buckets per request).
const LOOKUP_TASKS: usize = 16;
/// Empty polls in a row after which a changelog read that got fewer records
/// than the model expects stops and lets the comparison say what is missing.
const IDLE_POLLS_MAX: usize = 40;

// ---------------------------------------------------------------------------
// Values: an owned, comparable image of one Fluss datum.
// ---------------------------------------------------------------------------

/// One column value as the model keeps it. Floats are kept as their bits, so
/// NaN, -0.0 and infinities compare exactly; decimals as their unscaled value;
/// timestamps as (epoch millis, nano of milli).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Val {
    Null,
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    F32(u32),
    F64(u64),
    Str(String),
    Bin(Vec<u8>),
    Dec(i128),
    Date(i32),
    Time(i32),
    Ts(i64, i32),
    Ltz(i64, i32),
}

impl fmt::Debug for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::Null => write!(f, "null"),
            Val::Bool(v) => write!(f, "{v}"),
            Val::I8(v) => write!(f, "{v}i8"),
            Val::I16(v) => write!(f, "{v}i16"),
            Val::I32(v) => write!(f, "{v}i32"),
            Val::I64(v) => write!(f, "{v}i64"),
            Val::F32(b) => write!(f, "{:?}f32", f32::from_bits(*b)),
            Val::F64(b) => write!(f, "{:?}f64", f64::from_bits(*b)),
            Val::Str(s) => write!(f, "{s:?}"),
            Val::Bin(b) => {
                write!(f, "0x")?;
                b.iter().try_for_each(|x| write!(f, "{x:02x}"))
            }
            Val::Dec(u) => write!(f, "dec({u})"),
            Val::Date(d) => write!(f, "date({d})"),
            Val::Time(t) => write!(f, "time({t}ms)"),
            Val::Ts(m, n) => write!(f, "ts({m}ms+{n}ns)"),
            Val::Ltz(m, n) => write!(f, "ltz({m}ms+{n}ns)"),
        }
    }
}

/// The fluss-rs datum for `v` in a column of type `ty`.
fn datum(v: &Val, ty: &DataType) -> Datum<'static> {
    match (v, ty) {
        (Val::Null, _) => Datum::Null,
        (Val::Bool(b), _) => Datum::Bool(*b),
        (Val::I8(x), _) => Datum::Int8(*x),
        (Val::I16(x), _) => Datum::Int16(*x),
        (Val::I32(x), _) => Datum::Int32(*x),
        (Val::I64(x), _) => Datum::Int64(*x),
        (Val::F32(b), _) => Datum::from(f32::from_bits(*b)),
        (Val::F64(b), _) => Datum::from(f64::from_bits(*b)),
        (Val::Str(s), _) => Datum::from(s.clone()),
        (Val::Bin(b), _) => Datum::from(b.clone()),
        (Val::Dec(u), DataType::Decimal(d)) => Datum::Decimal(
            Decimal::from_unscaled_bytes(&u.to_be_bytes(), d.precision(), d.scale())
                .expect("decimal fits its type"),
        ),
        (Val::Date(d), _) => Datum::Date(Date::new(*d)),
        (Val::Time(t), _) => Datum::Time(Time::new(*t)),
        (Val::Ts(m, n), _) => {
            Datum::TimestampNtz(TimestampNtz::from_millis_nanos(*m, *n).expect("valid timestamp"))
        }
        (Val::Ltz(m, n), _) => {
            Datum::TimestampLtz(TimestampLtz::from_millis_nanos(*m, *n).expect("valid timestamp"))
        }
        (v, ty) => panic!("no datum for {v:?} in a {ty} column"),
    }
}

fn row_of(vals: &[Val], types: &[DataType]) -> GenericRow<'static> {
    GenericRow {
        values: vals.iter().zip(types).map(|(v, t)| datum(v, t)).collect(),
    }
}

/// A signed big-endian integer of at most 16 bytes.
fn i128_from_be(b: &[u8]) -> i128 {
    assert!(b.len() <= 16, "unscaled decimal of {} bytes", b.len());
    let fill = if b.first().is_some_and(|x| x & 0x80 != 0) {
        0xff
    } else {
        0
    };
    let mut out = [fill; 16];
    out[16 - b.len()..].copy_from_slice(b);
    i128::from_be_bytes(out)
}

/// Reads column `pos` of type `ty` from any fluss-rs row (lookup rows,
/// changelog records, limit-scan batches).
fn read_val(row: &dyn DataGetters, pos: usize, ty: &DataType) -> fluss::error::Result<Val> {
    if row.is_null_at(pos)? {
        return Ok(Val::Null);
    }
    Ok(match ty {
        DataType::Boolean(_) => Val::Bool(row.get_boolean(pos)?),
        DataType::TinyInt(_) => Val::I8(row.get_byte(pos)?),
        DataType::SmallInt(_) => Val::I16(row.get_short(pos)?),
        DataType::Int(_) => Val::I32(row.get_int(pos)?),
        DataType::BigInt(_) => Val::I64(row.get_long(pos)?),
        DataType::Float(_) => Val::F32(row.get_float(pos)?.to_bits()),
        DataType::Double(_) => Val::F64(row.get_double(pos)?.to_bits()),
        DataType::Char(c) => Val::Str(row.get_char(pos, c.length() as usize)?.to_owned()),
        DataType::String(_) => Val::Str(row.get_string(pos)?.to_owned()),
        DataType::Bytes(_) => Val::Bin(row.get_bytes(pos)?.to_vec()),
        DataType::Binary(b) => Val::Bin(row.get_binary(pos, b.length())?.to_vec()),
        DataType::Decimal(d) => {
            let dec = row.get_decimal(pos, d.precision() as usize, d.scale() as usize)?;
            Val::Dec(i128_from_be(&dec.to_unscaled_bytes()))
        }
        DataType::Date(_) => Val::Date(row.get_date(pos)?.get_inner()),
        DataType::Time(_) => Val::Time(row.get_time(pos)?.get_inner()),
        DataType::Timestamp(t) => {
            let ts = row.get_timestamp_ntz(pos, t.precision())?;
            Val::Ts(ts.get_millisecond(), ts.get_nano_of_millisecond())
        }
        DataType::TimestampLTz(t) => {
            let ts = row.get_timestamp_ltz(pos, t.precision())?;
            Val::Ltz(ts.get_epoch_millisecond(), ts.get_nano_of_millisecond())
        }
        other => panic!("type {other} is not used by these tests"),
    })
}

fn read_row(row: &dyn DataGetters, types: &[DataType]) -> Result<Vec<Val>, String> {
    types
        .iter()
        .enumerate()
        .map(|(i, t)| read_val(row, i, t).map_err(|e| format!("column {i} ({t}): {e:?}")))
        .collect()
}

// ---------------------------------------------------------------------------
// Deterministic values.
// ---------------------------------------------------------------------------

/// splitmix64: the deterministic source of every generated value.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(1);
        mix(self.0) % n
    }
}

/// Value number `n` of type `ty`: even `n` walk the type's edge values
/// (extremes, zero, negative, empty, non-ASCII, NaN, infinities), odd `n` are
/// pseudo-random. Values stay within what the type and its Arrow changelog
/// column hold exactly (e.g. TIMESTAMP(3) has no sub-millisecond part).
fn sample(ty: &DataType, n: u64) -> Val {
    let r = mix(n ^ 0x5eed);
    let edge = n.is_multiple_of(2);
    let idx = |len: usize| ((n / 2) % len as u64) as usize;
    match ty {
        DataType::Boolean(_) => Val::Bool(r & 1 == 1),
        DataType::TinyInt(_) => {
            let edges = [0, 1, -1, 127, -128];
            Val::I8(if edge {
                edges[idx(edges.len())]
            } else {
                r as i8
            })
        }
        DataType::SmallInt(_) => {
            let edges = [0, -1, 255, 256, i16::MAX, i16::MIN];
            Val::I16(if edge {
                edges[idx(edges.len())]
            } else {
                r as i16
            })
        }
        DataType::Int(_) => {
            let edges = [0, -1, 63, 64, -64, -65, i32::MAX, i32::MIN];
            Val::I32(if edge {
                edges[idx(edges.len())]
            } else {
                r as i32
            })
        }
        DataType::BigInt(_) => {
            let edges = [0, -1, 127, 128, 1 << 35, i64::MAX, i64::MIN];
            Val::I64(if edge {
                edges[idx(edges.len())]
            } else {
                r as i64
            })
        }
        DataType::Float(_) => {
            let edges = [
                0.0f32,
                -0.0,
                1.5,
                -2.25,
                f32::MAX,
                f32::MIN,
                f32::MIN_POSITIVE,
                1e-45,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
            ];
            let v = if edge {
                edges[idx(edges.len())]
            } else {
                (r as i32) as f32 / 7.0
            };
            Val::F32(v.to_bits())
        }
        DataType::Double(_) => {
            let edges = [
                0.0f64,
                -0.0,
                0.1,
                -1e300,
                f64::MAX,
                f64::MIN,
                f64::MIN_POSITIVE,
                5e-324,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
            ];
            let v = if edge {
                edges[idx(edges.len())]
            } else {
                (r as i64) as f64 / 13.0
            };
            Val::F64(v.to_bits())
        }
        DataType::String(_) => {
            let long = "x".repeat(300);
            let edges = [
                "",
                " ",
                "a",
                "Fjörð-ß✓",
                "😀 emoji",
                long.as_str(),
                "nul\0byte",
            ];
            Val::Str(if edge {
                edges[idx(edges.len())].to_owned()
            } else {
                format!("s{n}-{}", "é✓".repeat((r % 4) as usize))
            })
        }
        DataType::Char(c) => {
            let len = c.length() as usize;
            let edges = ["a", "Å", "0", " ", "✓"];
            Val::Str(if edge {
                edges[idx(edges.len())].repeat(len)
            } else {
                let digits = format!("{:020}", r);
                digits[20 - len..].to_owned()
            })
        }
        DataType::Bytes(_) => {
            let edges: [Vec<u8>; 5] = [
                vec![],
                vec![0],
                vec![0xff, 0, 1],
                (0..=255u8).collect(),
                vec![0x80; 40],
            ];
            Val::Bin(if edge {
                edges[idx(edges.len())].clone()
            } else {
                r.to_le_bytes()[..(r % 9) as usize].to_vec()
            })
        }
        DataType::Binary(b) => {
            let len = b.length();
            Val::Bin(if edge {
                match idx(3) {
                    0 => vec![0; len],
                    1 => vec![0xff; len],
                    _ => (1..=len as u8).collect(),
                }
            } else {
                (0..len).map(|i| (r >> (8 * (i % 8))) as u8).collect()
            })
        }
        DataType::Decimal(d) => {
            let max = 10i128.pow(d.precision()) - 1;
            let edges = [0, 1, -1, max, -max, max / 7];
            Val::Dec(if edge {
                edges[idx(edges.len())]
            } else {
                let big = (r as i128) * 1_000_000_007 + mix(r) as i128;
                let v = big % (max + 1);
                if r & 1 == 1 {
                    -v
                } else {
                    v
                }
            })
        }
        DataType::Date(_) => {
            let edges = [0, -1, 1, 19_000, -719_162, 2_932_896];
            Val::Date(if edge {
                edges[idx(edges.len())]
            } else {
                (r % 200_000) as i32 - 100_000
            })
        }
        DataType::Time(t) => Val::Time(if t.precision() == 0 {
            let edges = [0, 1_000, 86_399_000, 43_200_000];
            if edge {
                edges[idx(edges.len())]
            } else {
                (r % 86_400) as i32 * 1_000
            }
        } else {
            let edges = [0, 1, 86_399_999, 43_200_123];
            if edge {
                edges[idx(edges.len())]
            } else {
                (r % 86_400_000) as i32
            }
        }),
        DataType::Timestamp(_) | DataType::TimestampLTz(_) => {
            let precision = match ty {
                DataType::Timestamp(t) => t.precision(),
                DataType::TimestampLTz(t) => t.precision(),
                _ => unreachable!(),
            };
            // Arrow nanosecond timestamps reach about ±292 years from 1970.
            let edges: &[i64] = if precision <= 6 {
                &[
                    0,
                    -1,
                    1,
                    1_700_000_000_123,
                    -62_135_596_800_000,
                    253_402_300_799_999,
                ]
            } else {
                &[
                    0,
                    -1,
                    1,
                    1_700_000_000_123,
                    -8_000_000_000_000,
                    8_000_000_000_000,
                ]
            };
            let millis = if edge {
                edges[idx(edges.len())]
            } else {
                (r % 8_000_000_000_000) as i64 - 4_000_000_000_000
            };
            let m = mix(r);
            let nanos = match precision {
                0..=3 => 0,
                4..=6 => (m % 1_000) as i32 * 1_000,
                _ => (m % 1_000_000) as i32,
            };
            if matches!(ty, DataType::Timestamp(_)) {
                Val::Ts(millis, nanos)
            } else {
                Val::Ltz(millis, nanos)
            }
        }
        other => panic!("type {other} is not used by these tests"),
    }
}

// ---------------------------------------------------------------------------
// Tables and the model.
// ---------------------------------------------------------------------------

/// A primary-key table as these tests create it.
#[derive(Clone)]
struct Spec {
    name: String,
    columns: Vec<(String, DataType)>,
    primary_key: Vec<String>,
    /// Empty: the default (primary key minus partition key).
    bucket_key: Vec<String>,
    partition_key: Option<String>,
    buckets: i32,
    properties: Vec<(String, String)>,
}

impl Spec {
    fn path(&self) -> TablePath {
        TablePath::new(DB, &self.name)
    }

    fn types(&self) -> Vec<DataType> {
        self.columns.iter().map(|(_, t)| t.clone()).collect()
    }

    fn pos(&self, name: &str) -> usize {
        self.columns
            .iter()
            .position(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    }

    fn pk_pos(&self) -> Vec<usize> {
        self.primary_key.iter().map(|n| self.pos(n)).collect()
    }

    fn pk_types(&self) -> Vec<DataType> {
        self.pk_pos()
            .iter()
            .map(|&p| self.columns[p].1.clone())
            .collect()
    }

    fn row_type(&self) -> RowType {
        RowType::new(
            self.columns
                .iter()
                .map(|(n, t)| DataField::new(n.as_str(), t.clone(), None))
                .collect(),
        )
    }

    /// The primary key without the partition key: what the KV store orders by.
    fn physical_pk(&self) -> Vec<String> {
        self.primary_key
            .iter()
            .filter(|k| Some(*k) != self.partition_key.as_ref())
            .cloned()
            .collect()
    }

    fn descriptor(&self) -> TableDescriptor {
        let mut schema = Schema::builder();
        for (name, ty) in &self.columns {
            schema = schema.column(name, ty.clone());
        }
        let schema = schema
            .primary_key(self.primary_key.clone())
            .expect("primary key")
            .build()
            .expect("valid schema");
        let mut d = TableDescriptor::builder()
            .schema(schema)
            .distributed_by(Some(self.buckets), self.bucket_key.clone());
        if let Some(p) = &self.partition_key {
            d = d.partitioned_by(vec![p.clone()]);
        }
        for (k, v) in &self.properties {
            d = d.property(k, v);
        }
        d.build().expect("valid table descriptor")
    }
}

/// A changelog row's kind, as the model writes it and fluss-rs reads it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ch {
    Insert,
    UpdateBefore,
    UpdateAfter,
    Delete,
}

fn ch(c: &ChangeType) -> Ch {
    match c {
        ChangeType::Insert => Ch::Insert,
        ChangeType::UpdateBefore => Ch::UpdateBefore,
        ChangeType::UpdateAfter => Ch::UpdateAfter,
        ChangeType::Delete => Ch::Delete,
        ChangeType::AppendOnly => panic!("an append-only record in a primary-key changelog"),
    }
}

/// The expected state of one table: its rows by key and every changelog row
/// it must have produced, in write order (the default merge engine,
/// `table.changelog.image=FULL`, as `KvTablet.putAsLeader` and
/// `PartialUpdater` of Fluss 0.9.1 emit them).
struct Model {
    pk: Vec<usize>,
    arity: usize,
    rows: BTreeMap<Vec<Val>, Vec<Val>>,
    changelog: Vec<(Ch, Vec<Val>)>,
    /// Every key a write (upsert or delete) named.
    written: BTreeSet<Vec<Val>>,
}

impl Model {
    fn new(spec: &Spec) -> Self {
        Model {
            pk: spec.pk_pos(),
            arity: spec.columns.len(),
            rows: BTreeMap::new(),
            changelog: Vec::new(),
            written: BTreeSet::new(),
        }
    }

    fn key(&self, row: &[Val]) -> Vec<Val> {
        self.pk.iter().map(|&p| row[p].clone()).collect()
    }

    fn is_pk(&self, i: usize) -> bool {
        self.pk.contains(&i)
    }

    fn upsert(&mut self, row: &[Val], targets: Option<&[usize]>) {
        let key = self.key(row);
        self.written.insert(key.clone());
        let merged: Vec<Val> = match targets {
            None => row.to_vec(),
            Some(t) => {
                let old = self.rows.get(&key);
                let pk_only = (0..self.arity).all(|i| t.contains(&i) == self.is_pk(i));
                if pk_only && old.is_some() {
                    return; // PartialUpdater.updateRow: the old value, no change.
                }
                (0..self.arity)
                    .map(|i| match (t.contains(&i), old) {
                        (true, _) => row[i].clone(),
                        (false, Some(old)) => old[i].clone(),
                        (false, None) => Val::Null,
                    })
                    .collect()
            }
        };
        match self.rows.insert(key, merged.clone()) {
            None => self.changelog.push((Ch::Insert, merged)),
            Some(old) => {
                self.changelog.push((Ch::UpdateBefore, old));
                self.changelog.push((Ch::UpdateAfter, merged));
            }
        }
    }

    fn delete(&mut self, row: &[Val], targets: Option<&[usize]>) {
        let key = self.key(row);
        self.written.insert(key.clone());
        let Some(old) = self.rows.get(&key).cloned() else {
            return; // An absent key: nothing changes, nothing is logged.
        };
        let partial = targets.and_then(|t| {
            // PartialUpdater.deleteRow: a real delete only if every column
            // outside the targets is already null; else null the targets.
            let others_null = (0..self.arity).all(|i| t.contains(&i) || old[i] == Val::Null);
            (!others_null).then(|| {
                (0..self.arity)
                    .map(|i| {
                        if t.contains(&i) && !self.is_pk(i) {
                            Val::Null
                        } else {
                            old[i].clone()
                        }
                    })
                    .collect::<Vec<Val>>()
            })
        });
        match partial {
            None => {
                self.rows.remove(&key);
                self.changelog.push((Ch::Delete, old));
            }
            Some(merged) => {
                self.rows.insert(key, merged.clone());
                self.changelog.push((Ch::UpdateBefore, old));
                self.changelog.push((Ch::UpdateAfter, merged));
            }
        }
    }
}

/// One write of a phase: an upsert or a delete of `row`.
#[derive(Clone, Debug)]
struct Op {
    delete: bool,
    row: Vec<Val>,
}

/// Which columns a phase's writer writes.
#[derive(Clone, Debug)]
enum Targets {
    Full,
    /// `partial_update(Some(indexes))`.
    Indexes(Vec<usize>),
    /// `partial_update_with_column_names(names)`.
    Names(Vec<&'static str>),
}

// ---------------------------------------------------------------------------
// Client steps.
// ---------------------------------------------------------------------------

async fn connect(server: &FjordServer) -> FlussConnection {
    let config = Config {
        bootstrap_servers: server.bootstrap_servers(),
        // A server answering with a persistent error fails the write with that
        // error instead of retrying until the step timeout.
        writer_retries: 5,
        lookup_batch_timeout_ms: 5,
        ..Config::default()
    };
    server.step("connect", FlussConnection::new(config)).await
}

async fn create_table<'c>(
    server: &FjordServer,
    conn: &'c FlussConnection,
    spec: &Spec,
) -> FlussTable<'c> {
    let admin = conn.get_admin().expect("admin");
    server
        .step(
            &format!("create database {DB}"),
            admin.create_database(DB, None, true),
        )
        .await;
    server
        .step(
            &format!("create table {}", spec.name),
            admin.create_table(&spec.path(), &spec.descriptor(), false),
        )
        .await;
    let table = server
        .step(
            &format!("get table {}", spec.name),
            conn.get_table(&spec.path()),
        )
        .await;
    let info = table.get_table_info();
    assert!(info.has_primary_key(), "{}: no primary key", spec.name);
    assert_eq!(info.get_num_buckets(), spec.buckets, "{}", spec.name);
    assert_eq!(
        info.get_primary_keys(),
        &spec.primary_key,
        "{}: primary key",
        spec.name
    );
    let expected_bucket_key = if spec.bucket_key.is_empty() {
        spec.physical_pk()
    } else {
        spec.bucket_key.clone()
    };
    assert_eq!(
        info.get_bucket_keys(),
        expected_bucket_key.as_slice(),
        "{}: bucket key",
        spec.name
    );
    table
}

/// Writes `ops` with one writer of `targets`, applying each to `model`, then
/// flushes and checks every write's own result (flush alone does not report
/// failed batches).
async fn write_phase(
    server: &FjordServer,
    table: &FlussTable<'_>,
    spec: &Spec,
    model: &mut Model,
    targets: &Targets,
    ops: &[Op],
) {
    let upsert = table
        .new_upsert()
        .expect("new_upsert on a primary-key table");
    let (upsert, positions) = match targets {
        Targets::Full => (upsert, None),
        Targets::Indexes(idx) => (
            upsert
                .partial_update(Some(idx.clone()))
                .expect("partial_update"),
            Some(idx.clone()),
        ),
        Targets::Names(names) => (
            upsert
                .partial_update_with_column_names(names)
                .expect("partial_update_with_column_names"),
            Some(names.iter().map(|n| spec.pos(n)).collect()),
        ),
    };
    let writer = upsert.create_writer().expect("create upsert writer");
    let types = spec.types();
    let mut acks: Vec<(usize, WriteResultFuture)> = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let row = row_of(&op.row, &types);
        let ack = if op.delete {
            writer.delete(&row)
        } else {
            writer.upsert(&row)
        }
        .unwrap_or_else(|e| panic!("{}: write {i} {op:?} refused by fluss-rs: {e:?}", spec.name));
        acks.push((i, ack));
        if op.delete {
            model.delete(&op.row, positions.as_deref());
        } else {
            model.upsert(&op.row, positions.as_deref());
        }
    }
    server
        .step(&format!("{}: flush", spec.name), writer.flush())
        .await;
    for (i, ack) in acks {
        server
            .step(
                &format!(
                    "{}: result of write {i} ({targets:?}) {:?}",
                    spec.name, ops[i]
                ),
                ack,
            )
            .await;
    }
}

/// Looks up every key ever written and every key of `absent` and compares
/// each answer with the model (`None` for keys without a row).
async fn check_lookups(
    server: &FjordServer,
    table: &FlussTable<'_>,
    spec: &Spec,
    model: &Model,
    absent: &[Vec<Val>],
    when: &str,
) {
    let keys: Vec<Vec<Val>> = model
        .written
        .iter()
        .chain(absent.iter().filter(|k| !model.written.contains(*k)))
        .cloned()
        .collect();
    let pk_types = spec.pk_types();
    let types = spec.types();
    let mut tasks = JoinSet::new();
    for chunk in keys.chunks(keys.len().div_ceil(LOOKUP_TASKS).max(1)) {
        let mut lookuper = table
            .new_lookup()
            .expect("new_lookup on a primary-key table")
            .create_lookuper()
            .expect("create lookuper");
        let chunk = chunk.to_vec();
        let (pk_types, types) = (pk_types.clone(), types.clone());
        tasks.spawn(async move {
            let mut out = Vec::with_capacity(chunk.len());
            for key in chunk {
                let result = lookuper
                    .lookup(&row_of(&key, &pk_types))
                    .await
                    .map_err(|e| format!("lookup of {key:?}: {e:?}"))?;
                let row = result
                    .get_single_row()
                    .map_err(|e| format!("lookup of {key:?}: {e:?}"))?;
                let got = row.map(|r| read_row(&r, &types)).transpose()?;
                out.push((key, got));
            }
            Ok::<_, String>(out)
        });
    }
    let answers = server
        .step(&format!("{}: lookups {when}", spec.name), async {
            let mut all = Vec::new();
            while let Some(done) = tasks.join_next().await {
                all.extend(done.map_err(|e| e.to_string())??);
            }
            Ok::<_, String>(all)
        })
        .await;
    assert_eq!(answers.len(), keys.len());
    for (key, got) in answers {
        assert_eq!(
            got.as_ref(),
            model.rows.get(&key),
            "{}: lookup of {key:?} {when}",
            spec.name
        );
    }
}

/// A bucket of a table: (partition id, bucket id).
type Bucket = (Option<i64>, i32);

/// The changelog as read: per bucket, (offset, change, row) in offset order.
type Changelog = BTreeMap<Bucket, Vec<(i64, Ch, Vec<Val>)>>;

/// The buckets of `spec`, given its partitions as (name, id).
fn all_buckets(spec: &Spec, partitions: &[(String, i64)]) -> Vec<Bucket> {
    if spec.partition_key.is_none() {
        return (0..spec.buckets).map(|b| (None, b)).collect();
    }
    partitions
        .iter()
        .flat_map(|(_, id)| (0..spec.buckets).map(move |b| (Some(*id), b)))
        .collect()
}

/// Reads the whole changelog of `spec` with fluss-rs's `LogScanner` from the
/// earliest offset until `expected` records arrived (or, when fewer come,
/// until [`IDLE_POLLS_MAX`] polls in a row bring nothing); returns, per
/// bucket, the records in offset order.
async fn read_changelog(
    server: &FjordServer,
    table: &FlussTable<'_>,
    spec: &Spec,
    partitions: &[(String, i64)],
    expected: usize,
    projection: Option<&[usize]>,
) -> Changelog {
    let mut scan = table.new_scan();
    if let Some(columns) = projection {
        scan = scan.project(columns).expect("valid projection");
    }
    let scanner = scan
        .create_log_scanner()
        .expect("create_log_scanner on a primary-key table");
    if spec.partition_key.is_some() {
        let offsets: HashMap<(i64, i32), i64> = all_buckets(spec, partitions)
            .into_iter()
            .map(|(p, b)| ((p.expect("partitioned"), b), EARLIEST_OFFSET))
            .collect();
        server
            .step(
                &format!("{}: subscribe to the changelog", spec.name),
                scanner.subscribe_partition_buckets(&offsets),
            )
            .await;
    } else {
        let offsets: HashMap<i32, i64> = (0..spec.buckets).map(|b| (b, EARLIEST_OFFSET)).collect();
        server
            .step(
                &format!("{}: subscribe to the changelog", spec.name),
                scanner.subscribe_buckets(&offsets),
            )
            .await;
    }
    let all_types = spec.types();
    let types: Vec<DataType> = match projection {
        Some(columns) => columns.iter().map(|&c| all_types[c].clone()).collect(),
        None => all_types,
    };
    let mut by_bucket: Changelog = BTreeMap::new();
    let mut received = 0usize;
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    // One poll past the expected count, so a surplus record has a chance to show.
    let mut extra_polls = 1;
    // Fewer records than expected: stop once nothing arrives for a while, so
    // the comparison with the model names the first missing record.
    let mut idle_polls = 0;
    while idle_polls < IDLE_POLLS_MAX {
        if received >= expected {
            if extra_polls == 0 {
                break;
            }
            extra_polls -= 1;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}: the changelog gave {received} of {expected} records within {STEP_TIMEOUT:?}\n\
             --- fjord server stderr ---\n{}",
            spec.name,
            server.stderr_log()
        );
        let records = server
            .step(
                &format!("{}: poll the changelog", spec.name),
                scanner.poll(POLL_WAIT),
            )
            .await;
        idle_polls = if records.is_empty() {
            idle_polls + 1
        } else {
            0
        };
        for (tb, records) in records.into_records_by_buckets() {
            let rows = by_bucket
                .entry((tb.partition_id(), tb.bucket_id()))
                .or_default();
            for r in records {
                let row = read_row(r.row(), &types).unwrap_or_else(|e| {
                    panic!(
                        "{}: changelog record at offset {} of {tb}: {e}",
                        spec.name,
                        r.offset()
                    )
                });
                rows.push((r.offset(), ch(r.change_type()), row));
                received += 1;
            }
        }
    }
    for (bucket, rows) in &by_bucket {
        for pair in rows.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "{}: bucket {bucket:?}: offsets out of order: {} then {}",
                spec.name,
                pair[0].0,
                pair[1].0
            );
        }
    }
    by_bucket
}

/// Checks the changelog against the model: every key's records are in one
/// bucket, and each bucket holds exactly the model's changelog rows of its
/// keys, in order. Returns the bucket of each key.
fn check_changelog(spec: &Spec, model: &Model, changelog: &Changelog) -> HashMap<Vec<Val>, Bucket> {
    let mut bucket_of: HashMap<Vec<Val>, Bucket> = HashMap::new();
    for (bucket, rows) in changelog {
        for (offset, _, row) in rows {
            let key = model.key(row);
            let previous = bucket_of.insert(key.clone(), *bucket);
            assert!(
                previous.is_none() || previous == Some(*bucket),
                "{}: key {key:?} in bucket {previous:?} and in {bucket:?} (offset {offset})",
                spec.name
            );
        }
    }
    for (c, row) in &model.changelog {
        let key = model.key(row);
        assert!(
            bucket_of.contains_key(&key),
            "{}: the changelog has no record of key {key:?}; expected {c:?} {row:?}",
            spec.name
        );
    }
    for (bucket, rows) in changelog {
        let got: Vec<(Ch, Vec<Val>)> = rows.iter().map(|(_, c, r)| (*c, r.clone())).collect();
        let expected: Vec<(Ch, Vec<Val>)> = model
            .changelog
            .iter()
            .filter(|(_, r)| bucket_of.get(&model.key(r)) == Some(bucket))
            .cloned()
            .collect();
        if got != expected {
            let first = got
                .iter()
                .zip(&expected)
                .position(|(g, e)| g != e)
                .unwrap_or(got.len().min(expected.len()));
            panic!(
                "{}: bucket {bucket:?}: the changelog differs from the model at record {first} \
                 (offset {:?}): got {:?}, expected {:?} ({} records read, {} expected)",
                spec.name,
                rows.get(first).map(|r| r.0),
                got.get(first),
                expected.get(first),
                got.len(),
                expected.len()
            );
        }
    }
    let read: usize = changelog.values().map(Vec::len).sum();
    assert_eq!(
        read,
        model.changelog.len(),
        "{}: changelog record count",
        spec.name
    );
    bucket_of
}

/// The changelog read with a projection (columns reordered) holds, per
/// bucket, the model's changelog rows projected, with their change types.
async fn check_projected_changelog(
    server: &FjordServer,
    table: &FlussTable<'_>,
    spec: &Spec,
    model: &Model,
    bucket_of: &HashMap<Vec<Val>, Bucket>,
    projection: &[usize],
) {
    let changelog = read_changelog(
        server,
        table,
        spec,
        &[],
        model.changelog.len(),
        Some(projection),
    )
    .await;
    let project =
        |row: &[Val]| -> Vec<Val> { projection.iter().map(|&c| row[c].clone()).collect() };
    for bucket in all_buckets(spec, &[]) {
        let got: Vec<(Ch, Vec<Val>)> = changelog
            .get(&bucket)
            .into_iter()
            .flatten()
            .map(|(_, c, r)| (*c, r.clone()))
            .collect();
        let expected: Vec<(Ch, Vec<Val>)> = model
            .changelog
            .iter()
            .filter(|(_, r)| bucket_of.get(&model.key(r)) == Some(&bucket))
            .map(|(c, r)| (*c, project(r)))
            .collect();
        assert_eq!(
            got, expected,
            "{}: changelog of bucket {bucket:?} projected on {projection:?}",
            spec.name
        );
    }
}

/// The encoded physical primary key of `row`: what the KV store sorts by.
fn key_bytes(spec: &Spec, encoder: &mut dyn fluss::row::KeyEncoder, row: &[Val]) -> Vec<u8> {
    encoder
        .encode_key(&row_of(row, &spec.types()))
        .expect("encode key")
        .to_vec()
}

fn pk_encoder(spec: &Spec) -> Box<dyn fluss::row::KeyEncoder> {
    KeyEncoderFactory::of_primary_key_encoder(
        &spec.row_type(),
        &spec.physical_pk(),
        &None,
        2,
        false,
    )
    .expect("primary key encoder")
}

/// For each bucket, limit scans of 1, 2, all and more than all rows return
/// the first rows of the bucket in key byte order.
async fn check_limit_scans(
    server: &FjordServer,
    table: &FlussTable<'_>,
    spec: &Spec,
    model: &Model,
    partitions: &[(String, i64)],
    bucket_of: &HashMap<Vec<Val>, Bucket>,
) {
    let mut encoder = pk_encoder(spec);
    let types = spec.types();
    let row_type = Arc::new(spec.row_type());
    let table_id = table.get_table_info().get_table_id();
    for bucket in all_buckets(spec, partitions) {
        let mut expected: Vec<(Vec<u8>, Vec<Val>)> = model
            .rows
            .iter()
            .filter(|(k, _)| bucket_of.get(*k) == Some(&bucket))
            .map(|(_, row)| (key_bytes(spec, encoder.as_mut(), row), row.clone()))
            .collect();
        expected.sort();
        let expected: Vec<Vec<Val>> = expected.into_iter().map(|(_, r)| r).collect();
        let mut limits = vec![1, 2, expected.len().max(1), expected.len() + 5];
        limits.dedup();
        for limit in limits {
            let tb = TableBucket::new_with_partition(table_id, bucket.0, bucket.1);
            let mut scanner = table
                .new_scan()
                .limit(limit as i32)
                .expect("limit")
                .create_bucket_batch_scanner(tb)
                .expect("create bucket batch scanner");
            let batches = server
                .step(
                    &format!("{}: limit {limit} scan of bucket {bucket:?}", spec.name),
                    scanner.collect_all_batches(),
                )
                .await;
            let mut got = Vec::new();
            for batch in batches {
                let rb = Arc::new(batch.batch().clone());
                for i in 0..rb.num_rows() {
                    let row = ColumnarRow::new(Arc::clone(&rb), Arc::clone(&row_type), i, None)
                        .expect("columnar row");
                    got.push(
                        read_row(&row, &types)
                            .unwrap_or_else(|e| panic!("{}: limit scan row {i}: {e}", spec.name)),
                    );
                }
            }
            let want = &expected[..limit.min(expected.len())];
            assert_eq!(
                got, want,
                "{}: limit {limit} scan of bucket {bucket:?}",
                spec.name
            );
        }
    }
}

/// Prefix lookups of `prefixes` (values of the lookup columns: partition key
/// then bucket key) return every row of the prefix in key byte order.
async fn check_prefix_lookups(
    server: &FjordServer,
    table: &FlussTable<'_>,
    spec: &Spec,
    model: &Model,
    prefixes: &[Vec<Val>],
) {
    let lookup_columns: Vec<String> = spec
        .partition_key
        .iter()
        .chain(&spec.bucket_key)
        .cloned()
        .collect();
    let lookup_pos: Vec<usize> = lookup_columns.iter().map(|c| spec.pos(c)).collect();
    let lookup_types: Vec<DataType> = lookup_pos
        .iter()
        .map(|&p| spec.columns[p].1.clone())
        .collect();
    let types = spec.types();
    let mut tasks = JoinSet::new();
    for chunk in prefixes.chunks(prefixes.len().div_ceil(LOOKUP_TASKS).max(1)) {
        let mut lookuper = table
            .new_lookup()
            .expect("new_lookup")
            .lookup_by(lookup_columns.clone())
            .create_lookuper()
            .expect("create prefix lookuper");
        let chunk = chunk.to_vec();
        let (lookup_types, types) = (lookup_types.clone(), types.clone());
        tasks.spawn(async move {
            let mut out = Vec::with_capacity(chunk.len());
            for prefix in chunk {
                let result = lookuper
                    .lookup(&row_of(&prefix, &lookup_types))
                    .await
                    .map_err(|e| format!("prefix lookup of {prefix:?}: {e:?}"))?;
                let rows = result
                    .get_rows()
                    .map_err(|e| format!("prefix lookup of {prefix:?}: {e:?}"))?
                    .iter()
                    .map(|r| read_row(r, &types))
                    .collect::<Result<Vec<_>, _>>()?;
                out.push((prefix, rows));
            }
            Ok::<_, String>(out)
        });
    }
    let answers = server
        .step(&format!("{}: prefix lookups", spec.name), async {
            let mut all = Vec::new();
            while let Some(done) = tasks.join_next().await {
                all.extend(done.map_err(|e| e.to_string())??);
            }
            Ok::<_, String>(all)
        })
        .await;
    assert_eq!(answers.len(), prefixes.len());
    let mut encoder = pk_encoder(spec);
    for (prefix, got) in answers {
        let mut expected: Vec<(Vec<u8>, Vec<Val>)> = model
            .rows
            .values()
            .filter(|row| lookup_pos.iter().zip(&prefix).all(|(&p, v)| &row[p] == v))
            .map(|row| (key_bytes(spec, encoder.as_mut(), row), row.clone()))
            .collect();
        expected.sort();
        let expected: Vec<Vec<Val>> = expected.into_iter().map(|(_, r)| r).collect();
        assert_eq!(got, expected, "{}: prefix lookup of {prefix:?}", spec.name);
    }
}

/// `get_table_stats` counts each bucket's rows as the model does, and
/// `get_latest_kv_snapshots` reports every bucket without a snapshot (so
/// readers rebuild the table from the changelog).
async fn check_stats_and_snapshots(
    server: &FjordServer,
    conn: &FlussConnection,
    table: &FlussTable<'_>,
    spec: &Spec,
    model: &Model,
    partitions: &[(String, i64)],
    bucket_of: &HashMap<Vec<Val>, Bucket>,
) {
    let admin = conn.get_admin().expect("admin");
    let buckets = all_buckets(spec, partitions);
    let stats = server
        .step(
            &format!("{}: get_table_stats", spec.name),
            admin.get_table_stats(
                table.get_table_info().get_table_id(),
                buckets
                    .iter()
                    .map(|&(p, b)| BucketStatsRequest::new(p, b))
                    .collect(),
                vec![],
            ),
        )
        .await;
    let got: BTreeMap<Bucket, Option<i64>> = stats
        .buckets
        .iter()
        .map(|s| {
            assert_eq!(
                s.error, None,
                "{}: stats of bucket {}",
                spec.name, s.bucket_id
            );
            ((s.partition_id, s.bucket_id), s.row_count)
        })
        .collect();
    let expected: BTreeMap<Bucket, Option<i64>> = buckets
        .iter()
        .map(|b| {
            let rows = model.rows.keys().filter(|k| bucket_of.get(*k) == Some(b));
            (*b, Some(rows.count() as i64))
        })
        .collect();
    assert_eq!(got, expected, "{}: row count per bucket", spec.name);

    let partition_names: Vec<Option<&str>> = if spec.partition_key.is_some() {
        partitions.iter().map(|(n, _)| Some(n.as_str())).collect()
    } else {
        vec![None]
    };
    for name in partition_names {
        let snapshots = server
            .step(
                &format!("{}: get_latest_kv_snapshots of {name:?}", spec.name),
                admin.get_latest_kv_snapshots(&spec.path(), name),
            )
            .await;
        assert_eq!(
            snapshots.table_id,
            table.get_table_info().get_table_id(),
            "{}",
            spec.name
        );
        let expected: Vec<KvSnapshot> = (0..spec.buckets)
            .map(|b| KvSnapshot {
                bucket_id: b,
                snapshot_id: None,
                log_offset: None,
            })
            .collect();
        assert_eq!(
            snapshots.latest_snapshots, expected,
            "{}: KV snapshots of {name:?}",
            spec.name
        );
    }
}

/// Every check of a table: lookups, changelog, limit scans, row counts and
/// snapshots (and prefix lookups when `prefixes` is given).
#[allow(clippy::too_many_arguments)]
async fn check_table(
    server: &FjordServer,
    conn: &FlussConnection,
    table: &FlussTable<'_>,
    spec: &Spec,
    model: &Model,
    partitions: &[(String, i64)],
    absent: &[Vec<Val>],
    prefixes: Option<&[Vec<Val>]>,
    when: &str,
) {
    check_lookups(server, table, spec, model, absent, when).await;
    let changelog =
        read_changelog(server, table, spec, partitions, model.changelog.len(), None).await;
    let bucket_of = check_changelog(spec, model, &changelog);
    check_limit_scans(server, table, spec, model, partitions, &bucket_of).await;
    check_stats_and_snapshots(server, conn, table, spec, model, partitions, &bucket_of).await;
    if spec.partition_key.is_none() {
        // The last column, then the key columns in reverse order.
        let last = spec.columns.len() - 1;
        let projection: Vec<usize> = std::iter::once(last)
            .chain(spec.pk_pos().into_iter().rev())
            .collect();
        check_projected_changelog(server, table, spec, model, &bucket_of, &projection).await;
    }
    if let Some(prefixes) = prefixes {
        check_prefix_lookups(server, table, spec, model, prefixes).await;
    }
}

// ---------------------------------------------------------------------------
// The user_id / item_id tables.
// ---------------------------------------------------------------------------

const USERS: [i64; 10] = [
    0,
    1,
    -1,
    127,
    128,
    -129,
    16_384,
    1 << 40,
    i64::MAX,
    i64::MIN,
];
const ITEMS: [i64; 6] = [0, 1, 2, 3, -5, 300];
const BEHAVIORS: [&str; 5] = ["pv", "cart", "fav", "buy", ""];

fn orders_columns() -> Vec<(String, DataType)> {
    vec![
        ("user_id".into(), DataTypes::bigint().as_non_nullable()),
        ("item_id".into(), DataTypes::bigint().as_non_nullable()),
        ("behavior".into(), DataTypes::string()),
        ("qty".into(), DataTypes::int()),
        ("price".into(), DataTypes::decimal(12, 2)),
        ("ts".into(), DataTypes::timestamp_with_precision(3)),
        ("note".into(), DataTypes::bytes()),
    ]
}

/// `orders`: keyed by (user_id, item_id), bucketed by the whole key;
/// `orders_by_user`: the same columns, bucketed by user_id (a strict prefix
/// of the key), for prefix lookups.
fn orders_specs() -> [Spec; 2] {
    let base = Spec {
        name: "orders".into(),
        columns: orders_columns(),
        primary_key: vec!["user_id".into(), "item_id".into()],
        bucket_key: vec![],
        partition_key: None,
        buckets: 4,
        properties: vec![],
    };
    let by_user = Spec {
        name: "orders_by_user".into(),
        bucket_key: vec!["user_id".into()],
        buckets: 3,
        ..base.clone()
    };
    [base, by_user]
}

/// A row of the orders tables for (user, item), value columns drawn from
/// `rng` with nulls mixed in.
fn order_row(rng: &mut Rng, user: i64, item: i64) -> Vec<Val> {
    let maybe = |v: Val, rng: &mut Rng| if rng.below(6) == 0 { Val::Null } else { v };
    let behavior = Val::Str(BEHAVIORS[rng.below(BEHAVIORS.len() as u64) as usize].into());
    let qty = Val::I32(rng.below(1_000) as i32 - 100);
    let price = Val::Dec(rng.below(10_000_000_000) as i128 - 5_000_000_000);
    let ts = Val::Ts(1_700_000_000_000 + rng.below(1 << 40) as i64, 0);
    let note = Val::Bin((0..rng.below(6)).map(|i| i as u8 * 51).collect());
    vec![
        Val::I64(user),
        Val::I64(item),
        maybe(behavior, rng),
        maybe(qty, rng),
        maybe(price, rng),
        maybe(ts, rng),
        maybe(note, rng),
    ]
}

/// `n` writes over the (user, item) grid, a quarter of them deletes (some of
/// absent keys).
fn order_ops(rng: &mut Rng, n: usize, delete_one_in: u64) -> Vec<Op> {
    (0..n)
        .map(|_| {
            let user = USERS[rng.below(USERS.len() as u64) as usize];
            let item = ITEMS[rng.below(ITEMS.len() as u64) as usize];
            Op {
                delete: rng.below(delete_one_in) == 0,
                row: order_row(rng, user, item),
            }
        })
        .collect()
}

fn order_key(user: i64, item: i64) -> Vec<Val> {
    vec![Val::I64(user), Val::I64(item)]
}

/// Batches that change nothing (deletes of absent keys; key-only partial
/// upserts of present keys) are acknowledged, add no changelog record, and
/// still take changelog offsets (the header-only batch Fluss appends so the
/// writer's sequence stays in order), which later reads skip.
async fn writes_that_change_nothing(
    server: &FjordServer,
    conn: &FlussConnection,
    table: &FlussTable<'_>,
    spec: &Spec,
    model: &mut Model,
) {
    let admin = conn.get_admin().expect("admin");
    let buckets: Vec<i32> = (0..spec.buckets).collect();
    let path = spec.path();
    let latest = || admin.list_offsets(&path, &buckets, OffsetSpec::Latest);
    let before = server
        .step(&format!("{}: latest offsets", spec.name), latest())
        .await;
    let records_before = model.changelog.len();
    let mut rng = Rng(99);
    let absent: Vec<Op> = (0..30)
        .map(|i| Op {
            delete: true,
            row: order_row(&mut rng, 999 + (i % 3), ITEMS[(i % 6) as usize]),
        })
        .collect();
    write_phase(server, table, spec, model, &Targets::Full, &absent).await;
    let present: Vec<Op> = model
        .rows
        .keys()
        .map(|k| Op {
            delete: false,
            row: order_row(&mut rng, as_i64(&k[0]), as_i64(&k[1])),
        })
        .collect();
    write_phase(
        server,
        table,
        spec,
        model,
        &Targets::Names(vec!["user_id", "item_id"]),
        &present,
    )
    .await;
    assert_eq!(model.changelog.len(), records_before, "the model changed");
    let after = server
        .step(&format!("{}: latest offsets", spec.name), latest())
        .await;
    for b in &buckets {
        assert!(after[b] >= before[b], "{}: bucket {b} went back", spec.name);
    }
    assert!(
        after.values().sum::<i64>() > before.values().sum::<i64>(),
        "{}: batches without changes took no changelog offset: {before:?} -> {after:?}",
        spec.name
    );
}

fn as_i64(v: &Val) -> i64 {
    match v {
        Val::I64(x) => *x,
        other => panic!("not a BIGINT: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upserts_partial_updates_and_deletes_match_the_model_in_lookups_scans_and_changelog() {
    let dir = TempDir::new().expect("temp data dir");
    let mut server = FjordServer::start(dir.path());
    let specs = orders_specs();
    let mut models = [Model::new(&specs[0]), Model::new(&specs[1])];
    let absent: Vec<Vec<Val>> = vec![
        order_key(999, 0),
        order_key(0, 999),
        order_key(i64::MAX, i64::MIN),
        order_key(-2, 2),
    ];
    let prefixes: Vec<Vec<Val>> = USERS
        .iter()
        .chain(&[999, -2])
        .map(|&u| vec![Val::I64(u)])
        .collect();
    let phases: Vec<(Targets, usize, u64)> = vec![
        (Targets::Full, 400, 4),
        // qty only (index 3), by index.
        (Targets::Indexes(vec![0, 1, 3]), 150, 5),
        // behavior and price, by name.
        (
            Targets::Names(vec!["user_id", "item_id", "behavior", "price"]),
            150,
            5,
        ),
        // The key alone: no change for present keys, a row of nulls for new
        // ones; a partial delete of a row with values is an update.
        (Targets::Names(vec!["item_id", "user_id"]), 40, 3),
        (Targets::Full, 150, 4),
        // Every column as a target: a full write through the partial path.
        (Targets::Indexes((0..7).collect()), 60, 4),
    ];
    let mut rng = Rng(7);
    {
        let conn = connect(&server).await;
        let tables = [
            create_table(&server, &conn, &specs[0]).await,
            create_table(&server, &conn, &specs[1]).await,
        ];
        for (phase, (targets, n, delete_one_in)) in phases.iter().enumerate() {
            let ops = order_ops(&mut rng, *n, *delete_one_in);
            for t in 0..2 {
                write_phase(
                    &server,
                    &tables[t],
                    &specs[t],
                    &mut models[t],
                    targets,
                    &ops,
                )
                .await;
                check_lookups(
                    &server,
                    &tables[t],
                    &specs[t],
                    &models[t],
                    &absent,
                    &format!("after phase {phase} ({targets:?})"),
                )
                .await;
            }
            if phase == 3 {
                for t in 0..2 {
                    writes_that_change_nothing(
                        &server,
                        &conn,
                        &tables[t],
                        &specs[t],
                        &mut models[t],
                    )
                    .await;
                }
            }
        }
        assert_eq!(models[0].rows, models[1].rows, "same writes, same rows");
        for t in 0..2 {
            let prefixes = (t == 1).then_some(prefixes.as_slice());
            check_table(
                &server,
                &conn,
                &tables[t],
                &specs[t],
                &models[t],
                &[],
                &absent,
                prefixes,
                "after all phases",
            )
            .await;
        }
        drop(tables);
        server
            .step("close connection", conn.close(Duration::from_secs(5)))
            .await;
    }

    // A clean restart keeps rows, changelog and scans; writes continue.
    server.restart();
    let conn = connect(&server).await;
    let tables = [
        server
            .step("get orders after restart", conn.get_table(&specs[0].path()))
            .await,
        server
            .step(
                "get orders_by_user after restart",
                conn.get_table(&specs[1].path()),
            )
            .await,
    ];
    for t in 0..2 {
        let prefixes = (t == 1).then_some(prefixes.as_slice());
        check_table(
            &server,
            &conn,
            &tables[t],
            &specs[t],
            &models[t],
            &[],
            &absent,
            prefixes,
            "after a restart",
        )
        .await;
    }
    let ops = order_ops(&mut rng, 200, 4);
    for t in 0..2 {
        write_phase(
            &server,
            &tables[t],
            &specs[t],
            &mut models[t],
            &Targets::Full,
            &ops,
        )
        .await;
        let prefixes = (t == 1).then_some(prefixes.as_slice());
        check_table(
            &server,
            &conn,
            &tables[t],
            &specs[t],
            &models[t],
            &[],
            &absent,
            prefixes,
            "after writes following the restart",
        )
        .await;
    }
    drop(tables);
    server
        .step("close connection", conn.close(Duration::from_secs(5)))
        .await;
    server.stop();
}

/// Volume: tens of thousands of writes go out in large batches (many KV
/// batches per request, changelogs larger than one fetch) and still match the
/// model in every read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_writes_in_large_batches_match_the_model() {
    let dir = TempDir::new().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let conn = connect(&server).await;
    let spec = Spec {
        name: "volume".into(),
        columns: vec![
            ("id".into(), DataTypes::bigint().as_non_nullable()),
            ("payload".into(), DataTypes::string()),
            ("n".into(), DataTypes::bigint()),
        ],
        primary_key: vec!["id".into()],
        bucket_key: vec![],
        partition_key: None,
        buckets: 4,
        properties: vec![],
    };
    let table = create_table(&server, &conn, &spec).await;
    let mut model = Model::new(&spec);
    const KEYS: u64 = 5_000;
    let mut rng = Rng(2024);
    for round in 0..3u64 {
        let ops: Vec<Op> = (0..10_000)
            .map(|i| {
                let id = rng.below(KEYS) as i64;
                let len = rng.below(200) as usize;
                Op {
                    delete: rng.below(10) == 0,
                    row: vec![
                        Val::I64(id),
                        Val::Str(format!("{round}:{i}:{}", "p".repeat(len))),
                        Val::I64((round * 100_000 + i) as i64),
                    ],
                }
            })
            .collect();
        write_phase(&server, &table, &spec, &mut model, &Targets::Full, &ops).await;
    }
    eprintln!(
        "volume: {} keys written, {} rows, {} changelog records",
        model.written.len(),
        model.rows.len(),
        model.changelog.len()
    );
    let absent: Vec<Vec<Val>> = (0..4).map(|i| vec![Val::I64(-1 - i)]).collect();
    check_table(
        &server,
        &conn,
        &table,
        &spec,
        &model,
        &[],
        &absent,
        None,
        "at the end",
    )
    .await;
}

// ---------------------------------------------------------------------------
// Every scalar type, as key and as value.
// ---------------------------------------------------------------------------

/// One table per type family: `id INT` plus one NOT NULL key column per type
/// (all in the primary key), then one nullable value column per type.
fn family_specs() -> Vec<Spec> {
    let families: Vec<(&str, Vec<(&str, DataType)>)> = vec![
        (
            "fam_integers",
            vec![
                ("bool", DataTypes::boolean()),
                ("tiny", DataTypes::tinyint()),
                ("small", DataTypes::smallint()),
                ("int", DataTypes::int()),
                ("big", DataTypes::bigint()),
            ],
        ),
        (
            "fam_floats",
            vec![("f", DataTypes::float()), ("d", DataTypes::double())],
        ),
        (
            "fam_text",
            vec![("str", DataTypes::string()), ("chr", DataTypes::char(5))],
        ),
        (
            "fam_binary",
            vec![("bytes", DataTypes::bytes()), ("bin", DataTypes::binary(4))],
        ),
        (
            "fam_decimal",
            vec![
                ("dec10", DataTypes::decimal(10, 2)),
                ("dec18", DataTypes::decimal(18, 4)),
                ("dec19", DataTypes::decimal(19, 0)),
                ("dec38", DataTypes::decimal(38, 10)),
            ],
        ),
        (
            "fam_temporal",
            vec![
                ("date", DataTypes::date()),
                ("time0", DataTypes::time()),
                ("time3", DataTypes::time_with_precision(3)),
                ("ts3", DataTypes::timestamp_with_precision(3)),
                ("ts6", DataTypes::timestamp_with_precision(6)),
                ("ts9", DataTypes::timestamp_with_precision(9)),
                ("ltz3", DataTypes::timestamp_ltz_with_precision(3)),
                ("ltz6", DataTypes::timestamp_ltz_with_precision(6)),
                ("ltz9", DataTypes::timestamp_ltz_with_precision(9)),
            ],
        ),
    ];
    families
        .into_iter()
        .map(|(name, types)| {
            let mut columns = vec![("id".to_string(), DataTypes::int().as_non_nullable())];
            let mut primary_key = vec!["id".to_string()];
            for (t, ty) in &types {
                columns.push((format!("k_{t}"), ty.as_non_nullable()));
                primary_key.push(format!("k_{t}"));
            }
            for (t, ty) in &types {
                columns.push((format!("v_{t}"), ty.clone()));
            }
            Spec {
                name: name.into(),
                columns,
                primary_key,
                bucket_key: vec![],
                partition_key: None,
                buckets: 3,
                properties: vec![],
            }
        })
        .collect()
}

/// The row of key number `i` in write `round` of a family table: key columns
/// are a function of `i`, value columns of `(i, round)` with nulls mixed in.
fn family_row(spec: &Spec, i: u64, round: u64) -> Vec<Val> {
    spec.columns
        .iter()
        .enumerate()
        .map(|(c, (name, ty))| {
            if name == "id" {
                Val::I32(i as i32)
            } else if name.starts_with("k_") {
                sample(ty, i * 3 + c as u64)
            } else if (i + round + c as u64).is_multiple_of(5) {
                Val::Null
            } else {
                sample(ty, i * 7 + round * 13 + c as u64)
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scalar_type_round_trips_as_key_and_value() {
    let dir = TempDir::new().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let conn = connect(&server).await;
    const KEYS: u64 = 40;
    for spec in family_specs() {
        let table = create_table(&server, &conn, &spec).await;
        let mut model = Model::new(&spec);
        let full = |rows: Vec<(bool, Vec<Val>)>| -> Vec<Op> {
            rows.into_iter()
                .map(|(delete, row)| Op { delete, row })
                .collect()
        };
        // Inserts of every key; updates of half of them and new keys; deletes
        // of present and never-written keys; re-inserts after deletes.
        let rounds: Vec<Vec<Op>> = vec![
            full(
                (0..KEYS)
                    .map(|i| (false, family_row(&spec, i, 0)))
                    .collect(),
            ),
            full(
                (0..KEYS / 2)
                    .chain(KEYS..KEYS + 8)
                    .map(|i| (false, family_row(&spec, i, 1)))
                    .collect(),
            ),
            full(
                (0..KEYS / 4)
                    .chain(1_000..1_004)
                    .map(|i| (true, family_row(&spec, i, 2)))
                    .collect(),
            ),
            full((2..6).map(|i| (false, family_row(&spec, i, 3))).collect()),
        ];
        for ops in &rounds {
            write_phase(&server, &table, &spec, &mut model, &Targets::Full, ops).await;
        }
        // A partial update of the first value column of every other key.
        let first_value = spec.primary_key.len();
        let mut targets: Vec<usize> = spec.pk_pos();
        targets.push(first_value);
        let ops: Vec<Op> = (0..KEYS + 8)
            .step_by(2)
            .map(|i| Op {
                delete: false,
                row: family_row(&spec, i, 4),
            })
            .collect();
        write_phase(
            &server,
            &table,
            &spec,
            &mut model,
            &Targets::Indexes(targets),
            &ops,
        )
        .await;
        let absent: Vec<Vec<Val>> = (2_000..2_004)
            .map(|i| model.key(&family_row(&spec, i, 0)))
            .collect();
        check_table(
            &server,
            &conn,
            &table,
            &spec,
            &model,
            &[],
            &absent,
            None,
            "at the end",
        )
        .await;
    }
}

// ---------------------------------------------------------------------------
// A partitioned primary-key table.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_table_keeps_partitions_apart() {
    let dir = TempDir::new().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let conn = connect(&server).await;
    let admin = conn.get_admin().expect("admin");
    let spec = Spec {
        name: "orders_by_day".into(),
        columns: vec![
            ("dt".into(), DataTypes::string().as_non_nullable()),
            ("user_id".into(), DataTypes::bigint().as_non_nullable()),
            ("item_id".into(), DataTypes::bigint().as_non_nullable()),
            ("qty".into(), DataTypes::int()),
            ("behavior".into(), DataTypes::string()),
        ],
        primary_key: vec!["dt".into(), "user_id".into(), "item_id".into()],
        bucket_key: vec!["user_id".into()],
        partition_key: Some("dt".into()),
        buckets: 2,
        properties: vec![],
    };
    let table = create_table(&server, &conn, &spec).await;
    assert!(table.get_table_info().is_partitioned());
    let days = ["20240101", "20240102"];
    for day in days {
        server
            .step(
                &format!("create partition {day}"),
                admin.create_partition(
                    &spec.path(),
                    &PartitionSpec::new(HashMap::from([("dt", day)])),
                    false,
                ),
            )
            .await;
    }
    let infos = server
        .step("list partitions", admin.list_partition_infos(&spec.path()))
        .await;
    let mut partitions: Vec<(String, i64)> = infos
        .iter()
        .map(|p| (p.get_partition_name(), p.get_partition_id()))
        .collect();
    partitions.sort();
    assert_eq!(
        partitions
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        days
    );

    let mut model = Model::new(&spec);
    let mut rng = Rng(11);
    let ops = |n: usize, delete_one_in: u64, rng: &mut Rng| -> Vec<Op> {
        (0..n)
            .map(|_| {
                let day = days[rng.below(2) as usize];
                let user = USERS[rng.below(5) as usize];
                let item = ITEMS[rng.below(4) as usize];
                let qty = if rng.below(5) == 0 {
                    Val::Null
                } else {
                    Val::I32(rng.below(100) as i32)
                };
                Op {
                    delete: rng.below(delete_one_in) == 0,
                    row: vec![
                        Val::Str(day.into()),
                        Val::I64(user),
                        Val::I64(item),
                        qty,
                        Val::Str(BEHAVIORS[rng.below(4) as usize].into()),
                    ],
                }
            })
            .collect()
    };
    let first = ops(200, 4, &mut rng);
    write_phase(&server, &table, &spec, &mut model, &Targets::Full, &first).await;
    let partial = ops(80, 4, &mut rng);
    write_phase(
        &server,
        &table,
        &spec,
        &mut model,
        &Targets::Names(vec!["dt", "user_id", "item_id", "qty"]),
        &partial,
    )
    .await;
    let last = ops(100, 3, &mut rng);
    write_phase(&server, &table, &spec, &mut model, &Targets::Full, &last).await;

    // Both partitions got rows; the same (user, item) lives in each apart.
    for day in days {
        assert!(
            model.rows.keys().any(|k| k[0] == Val::Str(day.into())),
            "no rows in {day}"
        );
    }
    let missing_day = Val::Str("20991231".into());
    let absent = vec![
        vec![missing_day.clone(), Val::I64(0), Val::I64(0)],
        vec![Val::Str(days[0].into()), Val::I64(999), Val::I64(0)],
    ];
    let prefixes: Vec<Vec<Val>> = days
        .iter()
        .map(|d| Val::Str((*d).into()))
        .chain([missing_day])
        .flat_map(|d| {
            USERS[..5]
                .iter()
                .chain(&[999])
                .map(move |&u| vec![d.clone(), Val::I64(u)])
        })
        .collect();
    check_table(
        &server,
        &conn,
        &table,
        &spec,
        &model,
        &partitions,
        &absent,
        Some(&prefixes),
        "at the end",
    )
    .await;
}

// ---------------------------------------------------------------------------
// Bad input.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_the_error_surfaced() {
    let dir = TempDir::new().expect("temp data dir");
    let server = FjordServer::start(dir.path());
    let conn = connect(&server).await;
    let admin = conn.get_admin().expect("admin");
    let simple = |name: &str, properties: Vec<(&str, &str)>| Spec {
        name: name.into(),
        columns: vec![
            ("id".into(), DataTypes::bigint().as_non_nullable()),
            ("name".into(), DataTypes::string()),
            ("n".into(), DataTypes::int()),
        ],
        primary_key: vec!["id".into()],
        bucket_key: vec![],
        partition_key: None,
        buckets: 2,
        properties: properties
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
    };
    let row = |id: i64, name: &str, n: i32| vec![Val::I64(id), Val::Str(name.into()), Val::I32(n)];

    // Partial updates fluss-rs refuses before anything is sent.
    let spec = simple("plain", vec![]);
    let table = create_table(&server, &conn, &spec).await;
    let upsert = table.new_upsert().expect("new_upsert");
    let err = upsert
        .partial_update_with_column_names(&["name", "n"])
        .expect("partial_update_with_column_names takes existing columns")
        .create_writer()
        .err()
        .expect("a partial update without the key column is refused");
    assert!(
        err.to_string()
            .contains("must contain the primary key columns"),
        "{err}"
    );
    let err = upsert
        .partial_update(Some(vec![0, 7]))
        .err()
        .expect("a target column beyond the table is refused");
    assert!(err.to_string().contains("Invalid target column"), "{err}");
    let err = upsert
        .partial_update_with_column_names(&["id", "nope"])
        .err()
        .expect("an unknown target column is refused");
    assert!(err.to_string().contains("nope"), "{err}");

    // Upserts and lookups on a log table: refused by fluss-rs.
    let log_path = TablePath::new(DB, "log_table");
    let log_descriptor = TableDescriptor::builder()
        .schema(
            Schema::builder()
                .column("id", DataTypes::bigint())
                .column("name", DataTypes::string())
                .build()
                .expect("schema"),
        )
        .distributed_by(Some(2), vec![])
        .build()
        .expect("descriptor");
    server
        .step(
            "create log table",
            admin.create_table(&log_path, &log_descriptor, false),
        )
        .await;
    let log_table = server
        .step("get log table", conn.get_table(&log_path))
        .await;
    assert!(!log_table.has_primary_key());
    let err = log_table
        .new_upsert()
        .err()
        .expect("upsert to a log table is refused");
    assert!(
        matches!(err, fluss::error::Error::UnsupportedOperation { .. }),
        "{err:?}"
    );
    let err = log_table
        .new_lookup()
        .err()
        .expect("lookup on a log table is refused");
    assert!(
        matches!(err, fluss::error::Error::UnsupportedOperation { .. }),
        "{err:?}"
    );

    // Deletes on a table with deletes disabled: DELETION_DISABLED on the
    // delete's own result; the rows stay and the writer keeps working.
    let spec = simple("no_deletes", vec![("table.delete.behavior", "disable")]);
    let table = create_table(&server, &conn, &spec).await;
    let mut model = Model::new(&spec);
    let types = spec.types();
    let ops: Vec<Op> = (0..6)
        .map(|i| Op {
            delete: false,
            row: row(i, "kept", i as i32),
        })
        .collect();
    write_phase(&server, &table, &spec, &mut model, &Targets::Full, &ops).await;
    let writer = table
        .new_upsert()
        .expect("new_upsert")
        .create_writer()
        .expect("writer");
    let delete = writer
        .delete(&row_of(&row(1, "kept", 1), &types))
        .expect("fluss-rs queues the delete");
    server.step("flush the delete", writer.flush()).await;
    let err = server
        .step_err("the delete's result on a no-delete table", delete)
        .await;
    assert_eq!(
        err.api_error(),
        Some(FlussError::DeletionDisabledException),
        "{err:?}"
    );
    let ops: Vec<Op> = vec![Op {
        delete: false,
        row: row(1, "updated after the refused delete", 10),
    }];
    write_phase(&server, &table, &spec, &mut model, &Targets::Full, &ops).await;
    check_table(
        &server,
        &conn,
        &table,
        &spec,
        &model,
        &[],
        &[vec![Val::I64(77)]],
        None,
        "after a refused delete",
    )
    .await;

    // A partial update on a first_row table: refused by the server with
    // UNKNOWN_SERVER_ERROR, as Fluss answers (FirstRowRowMerger throws an
    // UnsupportedOperationException, which Errors maps to -1).
    let spec = simple("first_row", vec![("table.merge-engine", "first_row")]);
    let table = create_table(&server, &conn, &spec).await;
    let writer = table
        .new_upsert()
        .expect("new_upsert")
        .create_writer()
        .expect("writer");
    let first = writer
        .upsert(&row_of(&row(5, "first", 1), &types))
        .expect("queued");
    server.step("flush the first row", writer.flush()).await;
    server.step("the first row's result", first).await;
    let partial = table
        .new_upsert()
        .expect("new_upsert")
        .partial_update_with_column_names(&["id", "n"])
        .expect("targets")
        .create_writer()
        .expect("fluss-rs does not know the merge engine");
    let refused = partial
        .upsert(&row_of(&row(5, "ignored", 2), &types))
        .expect("queued");
    server
        .step("flush the partial update", partial.flush())
        .await;
    let err = server
        .step_err("the partial update's result on a first_row table", refused)
        .await;
    assert_eq!(
        err.api_error(),
        Some(FlussError::UnknownServerError),
        "{err:?}"
    );
    let second = writer
        .upsert(&row_of(&row(5, "second", 3), &types))
        .expect("queued");
    server.step("flush the second row", writer.flush()).await;
    server.step("the second row's result", second).await;
    let mut lookuper = table
        .new_lookup()
        .expect("lookup")
        .create_lookuper()
        .expect("lookuper");
    let result = server
        .step(
            "lookup of the first_row key",
            lookuper.lookup(&row_of(&[Val::I64(5)], &spec.pk_types())),
        )
        .await;
    let got = result
        .get_single_row()
        .expect("one row")
        .map(|r| read_row(&r, &types).expect("decodes"));
    assert_eq!(
        got,
        Some(row(5, "first", 1)),
        "first_row keeps the first row"
    );
    // The repeat changed nothing: the changelog holds the one insert, and the
    // bucket without the key scans empty.
    let mut model = Model::new(&spec);
    model.upsert(&row(5, "first", 1), None);
    check_table(
        &server,
        &conn,
        &table,
        &spec,
        &model,
        &[],
        &[vec![Val::I64(6)]],
        None,
        "after a refused partial update and a repeated key",
    )
    .await;
}
