//! Fluss sink harness: an in-process Fjord server on a loopback port (its
//! own tokio runtime and data dir), a scripted source whose batches and
//! positions replay exactly from any position, and readers of what the
//! sink tables hold (KV scans of primary-key tables, every row of log
//! tables) as sorted text rows.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fjord_cdc::event::{EventBatch, SchemaChange, SchemaChangeEvent};
use fjord_cdc::position::SourcePosition;
use fjord_cdc::row::RowWriter;
use fjord_cdc::schema::{Column, TableId, TableSchema};
use fjord_cdc::source::{Poll, Source, SourceError};
use fjord_cdc::types::DataType;
use fjord_client::row::{Datum, InternalRow};
use fjord_client::{FlussClient, KvBucket, LogScanner, ScannerConfig, TableInfo, TablePath};
use fjord_server::{Options, Server, ServerConfig};

/// Outer bound of a test's waits: turns a hang into a failure.
pub const HANG: Duration = Duration::from_secs(120);

/// A running in-process server; stopped on drop.
pub struct Fjord {
    pub rt: tokio::runtime::Runtime,
    pub addr: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Fjord {
    pub fn start() -> Fjord {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("temp dir");
        let mut options = Options::default();
        options.set("log.flush.interval-ms=1000").expect("option");
        let config = ServerConfig::from_options(dir.path().to_owned(), options).expect("config");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let addr = rt.block_on(async {
            let server = Server::bind(config, "127.0.0.1:0")
                .await
                .expect("server starts");
            let addr = server.local_addr().to_string();
            tokio::spawn(server.run(async {
                let _ = rx.await;
            }));
            addr
        });
        Fjord {
            rt,
            addr,
            stop: Some(tx),
            _dir: dir,
        }
    }

    pub fn client(&self) -> FlussClient {
        self.rt
            .block_on(FlussClient::connect(std::slice::from_ref(&self.addr)))
            .expect("client connects")
    }

    pub fn info(&self, db: &str, table: &str) -> TableInfo {
        let client = self.client();
        self.rt
            .block_on(client.refresh_table_info(&TablePath::new(db, table)))
            .expect("table info")
    }

    pub fn table_exists(&self, db: &str, table: &str) -> bool {
        let client = self.client();
        self.rt.block_on(async {
            let admin = client.admin();
            let dbs = admin.list_databases().await.expect("databases");
            if !dbs.iter().any(|d| d == db) {
                return false;
            }
            admin
                .list_tables(db)
                .await
                .expect("tables")
                .iter()
                .any(|t| t == table)
        })
    }

    /// Every row of a primary-key table (KV scan of every bucket), as sorted text.
    pub fn pk_rows(&self, db: &str, table: &str) -> Vec<String> {
        let client = self.client();
        let info = self.info(db, table);
        let mut out: Vec<String> = self
            .rt
            .block_on(scan_pk(&client, &info))
            .iter()
            .map(|r| text_owned(r))
            .collect();
        out.sort();
        out
    }

    /// Every row of a log table, as sorted text.
    pub fn log_rows(&self, db: &str, table: &str) -> Vec<String> {
        let client = self.client();
        let info = self.info(db, table);
        let mut out: Vec<String> = self
            .rt
            .block_on(scan_log(&client, &info))
            .iter()
            .map(|r| text_owned(r))
            .collect();
        out.sort();
        out
    }
}

/// One value read back from a Fjord table, owned (rows outlive their batch).
#[derive(Clone, Debug, PartialEq)]
pub enum Owned {
    Null,
    Bool(bool),
    /// Every integer width.
    Int(i64),
    Float(f32),
    Double(f64),
    /// A DECIMAL's unscaled value.
    Decimal(i128),
    Str(String),
    Bytes(Vec<u8>),
    /// DATE: days since 1970-01-01.
    Date(i32),
    /// TIME: milliseconds of the day.
    Time(i32),
    /// TIMESTAMP / TIMESTAMP_LTZ: microseconds since 1970 (nanos beyond dropped).
    Micros(i64),
}

/// A row's values, owned.
pub fn owned_row(row: &impl InternalRow) -> Vec<Owned> {
    (0..row.field_count())
        .map(|i| match row.datum(i) {
            Datum::Null => Owned::Null,
            Datum::Boolean(v) => Owned::Bool(v),
            Datum::TinyInt(v) => Owned::Int(i64::from(v)),
            Datum::SmallInt(v) => Owned::Int(i64::from(v)),
            Datum::Int(v) => Owned::Int(i64::from(v)),
            Datum::BigInt(v) => Owned::Int(v),
            Datum::Float(v) => Owned::Float(v),
            Datum::Double(v) => Owned::Double(v),
            Datum::Decimal(v) => Owned::Decimal(v),
            Datum::String(v) => Owned::Str(v.to_string()),
            Datum::Binary(v) => Owned::Bytes(v.to_vec()),
            Datum::Date(v) => Owned::Date(v),
            Datum::Time(v) => Owned::Time(v),
            Datum::Timestamp(t) | Datum::TimestampLtz(t) => {
                Owned::Micros(t.millis() * 1000 + i64::from(t.nanos_of_milli()) / 1000)
            }
            // No CDC source writes nested values; kept as their Fluss bytes.
            Datum::Array(v) | Datum::Map(v) | Datum::Row(v) => Owned::Bytes(v.to_vec()),
        })
        .collect()
}

/// `v1|v2|...` of an owned row (the scripted tests' form: `BigInt(7)`-like
/// debug forms for numbers, strings bare, `NULL`).
pub fn text_owned(row: &[Owned]) -> String {
    row.iter()
        .map(|v| match v {
            Owned::Null => "NULL".to_string(),
            Owned::Str(s) => s.clone(),
            other => format!("{other:?}"),
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// Every row of a primary-key table: a KV scan of every bucket.
pub async fn scan_pk(client: &FlussClient, info: &TableInfo) -> Vec<Vec<Owned>> {
    let mut out = Vec::new();
    for bucket in 0..info.bucket_count() {
        let mut scanner = client
            .kv_scanner(info, KvBucket::new(bucket), 1 << 20)
            .await
            .expect("kv scanner");
        while let Some(rows) = tokio::time::timeout(HANG, scanner.next_batch())
            .await
            .expect("scan in time")
            .expect("scan")
        {
            for row in rows.iter() {
                out.push(owned_row(&row));
            }
        }
    }
    out
}

/// Every row of a log table, from offset 0 to each bucket's end.
pub async fn scan_log(client: &FlussClient, info: &TableInfo) -> Vec<Vec<Owned>> {
    let mut out = Vec::new();
    let buckets: Vec<i32> = (0..info.bucket_count()).collect();
    let ends = client
        .admin()
        .list_offsets(info, &buckets, fjord_client::OffsetSpec::Latest)
        .await
        .expect("offsets");
    let route = client.table_route(info).await.expect("route");
    let mut scanner = LogScanner::new(info.clone(), route, ScannerConfig::default())
        .expect("scanner")
        .with_client(client.clone());
    let mut left = 0;
    for (b, end) in ends.iter().enumerate() {
        if *end > 0 {
            scanner.subscribe(b as i32, 0).expect("subscribe");
            left += end;
        }
    }
    while left > 0 {
        let batches = tokio::time::timeout(HANG, scanner.poll())
            .await
            .expect("poll in time")
            .expect("poll");
        for batch in batches {
            for row in batch.rows().expect("rows").iter() {
                out.push(owned_row(&row));
                left -= 1;
            }
        }
    }
    out
}

impl Drop for Fjord {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// One value of a scripted row.
#[derive(Clone, Debug)]
pub enum V {
    Null,
    I(i64),
    S(&'static str),
}

/// One scripted event.
#[derive(Clone, Debug)]
pub enum Ev {
    Insert(Arc<TableSchema>, Vec<V>),
    Update(Arc<TableSchema>, Vec<V>, Vec<V>),
    Delete(Arc<TableSchema>, Vec<V>),
    Schema(SchemaChangeEvent),
}

fn write_row(w: &mut RowWriter<'_>, values: &[V]) {
    for (i, v) in values.iter().enumerate() {
        match v {
            V::Null => {}
            V::I(x) => w.set_i64(i, *x),
            V::S(s) => w.set_str(i, s),
        }
    }
}

/// A source that emits scripted batches; the position after batch `k` is
/// `InputOffset { bytes: k + 1 }`, and a resumed script skips that many.
pub struct Script {
    batches: Vec<Vec<Ev>>,
    next: usize,
}

impl Script {
    pub fn new(batches: Vec<Vec<Ev>>, resume: Option<&SourcePosition>) -> Script {
        let next = match resume {
            Some(SourcePosition::InputOffset { bytes }) => *bytes as usize,
            None => 0,
            Some(other) => panic!("not a script position: {other:?}"),
        };
        Script { batches, next }
    }
}

impl Source for Script {
    fn next_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
        let Some(events) = self.batches.get(self.next) else {
            return Ok(Poll::End);
        };
        for ev in events {
            match ev {
                Ev::Insert(s, v) => {
                    let slot = batch.table_slot(s);
                    let mut w = batch.row_writer(slot);
                    write_row(&mut w, v);
                    let h = w.finish().expect("row");
                    batch.push_insert(slot, h);
                }
                Ev::Update(s, b, a) => {
                    let slot = batch.table_slot(s);
                    let mut w = batch.row_writer(slot);
                    write_row(&mut w, b);
                    let hb = w.finish().expect("row");
                    let mut w = batch.row_writer(slot);
                    write_row(&mut w, a);
                    let ha = w.finish().expect("row");
                    batch.push_update(slot, hb, ha);
                }
                Ev::Delete(s, v) => {
                    let slot = batch.table_slot(s);
                    let mut w = batch.row_writer(slot);
                    write_row(&mut w, v);
                    let h = w.finish().expect("row");
                    batch.push_delete(slot, h);
                }
                Ev::Schema(e) => batch.push_schema_change(e.clone()),
            }
        }
        self.next += 1;
        batch.set_position(SourcePosition::InputOffset {
            bytes: self.next as u64,
        });
        Ok(if self.next == self.batches.len() {
            Poll::End
        } else {
            Poll::Ready
        })
    }
}

/// A schema of `db.table`: `(name, type, nullable)` columns and a key.
pub fn schema(
    db: &str,
    table: &str,
    version: u32,
    columns: &[(&str, DataType)],
    key: &[&str],
) -> Arc<TableSchema> {
    Arc::new(
        TableSchema::new(
            TableId::new(db, table),
            version,
            columns
                .iter()
                .map(|(n, t)| Column::new(n, *t, !key.contains(n)))
                .collect(),
            key,
        )
        .expect("schema"),
    )
}

/// A schema change event.
pub fn change(schema: &Arc<TableSchema>, change: SchemaChange) -> Ev {
    Ev::Schema(SchemaChangeEvent {
        table: schema.id().clone(),
        change,
        schema: Some(Arc::clone(schema)),
    })
}

/// Sorted multiset helper for comparing rows.
pub fn counts(rows: &[String]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in rows {
        *m.entry(r.clone()).or_insert(0) += 1;
    }
    m
}
