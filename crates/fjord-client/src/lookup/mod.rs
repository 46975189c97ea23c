//! The lookuper: point lookups (`lookup(&key_row)` → the row, or `None`)
//! and prefix lookups (`prefix_lookup(&prefix_row)` → every row under it)
//! of a primary-key table's committed rows.
//!
//! A [`Lookuper`] is cheap to clone and shared by any number of tasks.
//! Each call encodes its key where it is called (the compacted key of the
//! physical primary key, or of the bucket key for a prefix, and its bucket
//! and partition, exactly as the upsert writer routes the row) and hands
//! it to one batcher task per lookuper ([`batcher`]). The batcher groups
//! the keys of all callers per server into Lookup (or PrefixLookup)
//! requests, several keys per bucket and several buckets per request,
//! keeps a bounded number of requests in flight
//! ([`config::REQUESTS_PER_SERVER_MAX`] per server,
//! `client.lookup.max-inflight-requests` in all). Each request's task
//! answers its callers with their values' bytes as soon as the answer is
//! decoded (the batcher takes what failed); the caller decodes them into a
//! [`KvRow`]. A key
//! that is not there is `None` (an empty list for a prefix), not an
//! error; retriable errors (not leader, unknown table or bucket, KV storage
//! busy, a lost connection) refresh the leaders and resend the key, up to
//! `client.lookup.max-retries` times. A missing partition reads as empty,
//! as in Fluss's clients.
//!
//! Everything per table (key encoders, key column positions, partition
//! router, value decoder) is built once, when the lookuper is made.

mod batcher;
pub mod config;
mod key;
mod request;

use std::cell::RefCell;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::admin::{TableInfo, TablePath};
use crate::bucket::fluss_bucket_of_key;
use crate::bucket::key::KeyEncoder;
use crate::client::FlussClient;
use crate::error::{ClientError, Result};
use crate::kv::keys::{physical_primary_key, KeyColumns, KeyPlan};
use crate::kv::rows::{KvRow, KvRows, ValueDecoder};
use crate::partition::{PartitionLookup, PartitionRouter};
use crate::row::InternalRow;
use batcher::{Batcher, Inbox, Reply};
use key::KeyBytes;

pub use config::LookupConfig;

/// Point lookups of one primary-key table; see the module doc. Clones
/// share the batcher and everything built for the table.
#[derive(Clone)]
pub struct Lookuper {
    inner: Arc<Shared>,
}

/// What every clone of a lookuper (and its prefix lookupers) shares.
struct Shared {
    table: TableInfo,
    keys: KeyPlan,
    key_columns: KeyColumns,
    partitions: Option<Arc<PartitionRouter>>,
    decoder: ValueDecoder,
    inbox: Arc<Inbox>,
}

impl Drop for Shared {
    /// The last handle is gone: the batcher ends once it has answered
    /// every key.
    fn drop(&mut self) {
        self.inbox.close();
    }
}

impl Lookuper {
    pub(crate) async fn create(
        client: &FlussClient,
        table: TableInfo,
        config: LookupConfig,
    ) -> Result<Self> {
        let primary_key = table
            .descriptor
            .schema()
            .primary_key()
            .map(<[String]>::to_vec)
            .unwrap_or_default();
        let keys = KeyPlan::new(&table)?;
        let key_columns = KeyColumns::new(&table, &primary_key)?;
        let decoder = ValueDecoder::new(&table)?;
        let partitions = if table.is_partitioned() {
            Some(PartitionRouter::for_client(client, &table, false).await?)
        } else {
            None
        };
        let inbox = Arc::new(Inbox::new(&config));
        let batcher = Batcher::new(client.clone(), table.clone(), config, Arc::clone(&inbox));
        tokio::spawn(batcher.run());
        Ok(Self {
            inner: Arc::new(Shared {
                table,
                keys,
                key_columns,
                partitions,
                decoder,
                inbox,
            }),
        })
    }

    /// The table looked up.
    pub fn table(&self) -> &TableInfo {
        &self.inner.table
    }

    /// The Arrow schema rows convert to ([`KvRows::to_record_batch`]).
    pub fn arrow_schema(&self) -> &arrow_schema::SchemaRef {
        self.inner.decoder.arrow_schema()
    }

    /// The columns a key row holds, in order: the table's primary key
    /// (partition keys included).
    pub fn key_columns(&self) -> &[String] {
        self.inner.key_columns.names()
    }

    /// The row whose primary key `key_row` holds (one value per primary-key
    /// column, in [`Lookuper::key_columns`] order), or `None` when the
    /// table has no such row (or no such partition). Sees every write
    /// acknowledged before the call (acks=all). Errors: a key row that is
    /// not one (its width, a NULL or mistyped key value), a non-retriable
    /// server error, retries exhausted, a row the client cannot decode.
    pub async fn lookup<R: InternalRow + ?Sized>(&self, key_row: &R) -> Result<Option<KvRow>> {
        let shared = &*self.inner;
        let full = shared.key_columns.full_row(key_row)?;
        let (key, bucket) = encode_key(|out| shared.keys.key_into(&full, out))?;
        let Some(partition) = partition_of(shared.partitions.as_deref(), &full).await? else {
            return Ok(None);
        };
        let (tx, rx) = oneshot::channel();
        let reply = Reply::Point(tx);
        let value = submit(shared, partition, bucket, key, reply, rx).await?;
        value.map(|v| shared.decoder.row(v)).transpose()
    }

    /// A lookuper of the rows under a prefix of the primary key: the
    /// `columns` are the partition keys (if any) and the bucket key, which
    /// must be a strict prefix of the physical primary key (Fluss's rules,
    /// `PrefixKeyLookuper.validatePrefixLookup`). It shares this
    /// lookuper's batcher.
    pub fn prefix<S: AsRef<str>>(&self, columns: &[S]) -> Result<PrefixLookuper> {
        let table = &self.inner.table;
        let names: Vec<String> = columns.iter().map(|c| c.as_ref().to_owned()).collect();
        let physical = physical_primary_key(table)?;
        let bucket_keys = table.descriptor.bucket_keys();
        let partition_keys = table.partition_keys();
        let refuse = |why: String| {
            Err(ClientError::Invalid(format!(
                "cannot look up {} by the prefix ({}): {why}",
                table.path,
                names.join(", ")
            )))
        };
        if bucket_keys.is_empty() || !physical.starts_with(bucket_keys) {
            return refuse(format!(
                "its bucket key ({}) is not a prefix of its physical primary key ({})",
                bucket_keys.join(", "),
                physical.join(", ")
            ));
        }
        if bucket_keys == physical.as_slice() {
            return refuse(format!(
                "its bucket key is its whole physical primary key ({}): use a point lookup",
                physical.join(", ")
            ));
        }
        if let Some(missing) = partition_keys.iter().find(|k| !names.contains(k)) {
            return refuse(format!("the partition key `{missing}` is missing"));
        }
        let physical_names: Vec<&String> = names
            .iter()
            .filter(|n| !partition_keys.contains(n))
            .collect();
        if !physical_names.iter().copied().eq(bucket_keys.iter()) {
            return refuse(format!(
                "the columns besides the partition keys must be the bucket key ({}), in order",
                bucket_keys.join(", ")
            ));
        }
        Ok(PrefixLookuper {
            columns: Arc::new(KeyColumns::new(table, &names)?),
            prefix: Arc::new(KeyEncoder::primary_key(
                table.descriptor.schema(),
                bucket_keys,
            )?),
            lookuper: self.clone(),
        })
    }
}

/// Prefix lookups of one primary-key table ([`Lookuper::prefix`]).
#[derive(Clone)]
pub struct PrefixLookuper {
    lookuper: Lookuper,
    columns: Arc<KeyColumns>,
    /// The compacted key of the bucket key: the prefix, and what is hashed.
    prefix: Arc<KeyEncoder>,
}

impl PrefixLookuper {
    /// The columns a prefix row holds, in order.
    pub fn prefix_columns(&self) -> &[String] {
        self.columns.names()
    }

    /// Every row whose primary key starts with the prefix `prefix_row`
    /// holds (one value per [`PrefixLookuper::prefix_columns`] column), in
    /// key order; empty when there is none (or no such partition). Errors
    /// as [`Lookuper::lookup`].
    pub async fn prefix_lookup<R: InternalRow + ?Sized>(&self, prefix_row: &R) -> Result<KvRows> {
        let shared = &*self.lookuper.inner;
        let full = self.columns.full_row(prefix_row)?;
        let (key, bucket) = encode_key(|out| {
            self.prefix.encode_row_into(&full, out)?;
            Ok(fluss_bucket_of_key(out, shared.keys.bucket_count()))
        })?;
        let Some(partition) = partition_of(shared.partitions.as_deref(), &full).await? else {
            return shared.decoder.rows(Vec::new());
        };
        let (tx, rx) = oneshot::channel();
        let reply = Reply::Prefix(tx);
        let values = submit(shared, partition, bucket, key, reply, rx).await?;
        shared.decoder.rows(values)
    }
}

thread_local! {
    /// Where this thread encodes the keys it looks up, so a lookup
    /// allocates nothing for its key (see [`key`]).
    static KEY_SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The key `encode` writes (into an empty buffer) and the bucket it
/// returns.
fn encode_key(encode: impl FnOnce(&mut Vec<u8>) -> Result<i32>) -> Result<(KeyBytes, i32)> {
    KEY_SCRATCH.with(|scratch| {
        // Taken out rather than borrowed: no borrow is held while the
        // encoder runs.
        let mut out = scratch.take();
        out.clear();
        let encoded = encode(&mut out).map(|bucket| (KeyBytes::new(&out), bucket));
        scratch.replace(out);
        encoded
    })
}

/// Hands a key to the batcher and waits for its answer.
async fn submit<T>(
    shared: &Shared,
    partition: Option<i64>,
    bucket: i32,
    key: KeyBytes,
    reply: Reply,
    rx: oneshot::Receiver<Result<T>>,
) -> Result<T> {
    shared.inbox.submit(partition, bucket, key, reply).await;
    rx.await
        .map_err(|_| ClientError::WriterClosed("the lookuper's batcher stopped"))?
}

/// The partition of `full` (`Some(None)` for a table without partitions),
/// `None` when the table has no such partition, even after asking the
/// server again.
async fn partition_of<R: InternalRow + ?Sized>(
    partitions: Option<&PartitionRouter>,
    full: &R,
) -> Result<Option<Option<i64>>> {
    let Some(router) = partitions else {
        return Ok(Some(None));
    };
    if let PartitionLookup::Known(id) = router.lookup(full)? {
        return Ok(Some(Some(id)));
    }
    // Created since the router's last listing, perhaps.
    router.refresh().await?;
    Ok(match router.lookup(full)? {
        PartitionLookup::Known(id) => Some(Some(id)),
        PartitionLookup::Missing => None,
    })
}

impl FlussClient {
    /// A lookuper of the primary-key table at `path`, with `config`. Builds
    /// everything per table once and starts its batcher on the current
    /// tokio runtime; the batcher ends when every clone is dropped.
    pub async fn lookuper(&self, path: &TablePath, config: LookupConfig) -> Result<Lookuper> {
        let table = self.table_info(path).await?;
        Lookuper::create(self, table, config).await
    }
}
