//! Partitions on the write path: which partition a row belongs to, and
//! dynamic creation of the partitions that do not exist yet.
//!
//! A [`PartitionRouter`] is built once per partitioned table and shared by
//! that table's writers (`Arc`). Everything derivable from the table — the
//! partition key column positions, the name separator, the cache of known
//! partitions (Fluss partition name → partition id, loaded from
//! ListPartitionInfos) — is resolved when it is built. The per-record work of
//! [`PartitionRouter::lookup`] / [`PartitionView::lookup`] is: read the
//! partition key column(s) of the row, and one hash lookup by `&str`. Nothing
//! is allocated or formatted on that path: a single key is looked up by the
//! row's own string; several keys are joined into a reused buffer.
//!
//! The slow path, [`PartitionRouter::ensure`], runs once per missing
//! partition: concurrent callers for the same partition share one flight
//! (one CreatePartition request), then the cache is reloaded from the server
//! and published as a new immutable snapshot.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use fjord_format::types::TypeKind;
use fjord_proto::ErrorCode;
use tokio::sync::OnceCell;

use crate::admin::{Admin, TableInfo, TablePath, PARTITION_NAME_SEPARATOR};
use crate::client::FlussClient;
use crate::error::{ClientError, Result};
use crate::row::{Datum, InternalRow};

/// How many times [`PartitionRouter::ensure`] lists the partitions again when
/// a partition it just created (or found existing) is not listed yet. On one
/// node the listing sees the partition at once; the bound keeps a server that
/// never lists it from holding the writer forever.
pub const CREATED_PARTITION_LIST_ATTEMPTS: u32 = 20;

/// Pause between two of those listings.
pub const CREATED_PARTITION_LIST_INTERVAL: Duration = Duration::from_millis(50);

/// Longest time one flight of [`PartitionRouter::ensure`] (create, then list
/// until the partition shows) may take. Every caller waiting for that
/// partition waits on the flight, so a server that accepts the request but
/// never answers must not hold them forever; the callers get a
/// `REQUEST_TIME_OUT` error and the next call starts a new flight.
pub const PARTITION_FLIGHT_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the partition of a row stands in the router's cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionLookup {
    /// The partition exists, with this id.
    Known(i64),
    /// The cache has no such partition: call [`PartitionRouter::ensure`].
    Missing,
}

/// Known partitions: Fluss partition name → partition id. Immutable once
/// published; a refresh publishes a new one.
type PartitionMap = HashMap<Box<str>, i64, BuildHasherDefault<NameHasher>>;

/// The hash of the partition cache: a multiply-rotate over 8-byte words with
/// a final avalanche, a few multiplies per short name such as `20261130`
/// where std's SipHash runs its rounds (no bench in docs/BENCHMARKS.md
/// isolates the lookup yet). SipHash's flooding resistance buys nothing
/// here: the map only ever holds names the server listed (at most
/// `max.partition.num`), and a lookup of an arbitrary row value inserts
/// nothing.
#[derive(Clone, Copy, Debug, Default)]
struct NameHasher(u64);

impl NameHasher {
    /// Odd multiplier with well-mixed bits (the one rustc's FxHasher uses).
    const MULTIPLIER: u64 = 0x517c_c1b7_2722_0a95;

    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::MULTIPLIER);
    }
}

impl Hasher for NameHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(word);
            self.add(u64::from_le_bytes(buf));
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let mut buf = [0u8; 8];
            buf[..tail.len()].copy_from_slice(tail);
            self.add(u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_u8(&mut self, byte: u8) {
        // `str` hashing ends with a 0xff marker byte.
        self.add(u64::from(byte));
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves the low bits depending only on the low bytes
        // (the first characters, e.g. the `2026` of every date); fold the
        // high bits down so the bucket index sees all of the name.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}

/// The partition key columns of one table and how a row's partition name is
/// built from them (Fluss's `PartitionGetter` + `ResolvedPartitionSpec`:
/// the values in key order joined by `$`).
#[derive(Debug)]
struct PartitionKeys {
    table: TablePath,
    columns: Box<[KeyColumn]>,
}

#[derive(Debug)]
struct KeyColumn {
    name: Box<str>,
    /// Position of the column in the table's rows.
    pos: usize,
}

impl PartitionKeys {
    /// Resolves the key columns of `table`; refuses a table without partition
    /// keys and keys that are not STRING/CHAR columns.
    fn new(table: &TableInfo) -> Result<Self> {
        let keys = table.partition_keys();
        if keys.is_empty() {
            return Err(ClientError::Invalid(format!(
                "table {} is not partitioned: it has no partition keys",
                table.path
            )));
        }
        let schema = table.descriptor.schema();
        let mut columns = Vec::with_capacity(keys.len());
        for key in keys {
            let pos = schema.column_index(key).ok_or_else(|| {
                ClientError::Invalid(format!(
                    "partition key `{key}` of table {} is not a column of its schema",
                    table.path
                ))
            })?;
            let data_type = &schema.columns()[pos].data_type;
            if !matches!(data_type.kind(), TypeKind::String | TypeKind::Char { .. }) {
                return Err(ClientError::Invalid(format!(
                    "partition key `{key}` of table {} has type {}; Fjord routes rows by STRING partition keys only",
                    table.path,
                    data_type.type_root()
                )));
            }
            columns.push(KeyColumn {
                name: key.as_str().into(),
                pos,
            });
        }
        Ok(Self {
            table: table.path.clone(),
            columns: columns.into_boxed_slice(),
        })
    }

    /// The partition name of `row`: the key value itself for one key (no
    /// copy), else the values joined by `$` in `buf` (cleared first).
    fn name<'a, R: InternalRow + ?Sized>(
        &self,
        row: &'a R,
        buf: &'a mut String,
    ) -> Result<&'a str> {
        if let [only] = &*self.columns {
            return self.value(row, only);
        }
        buf.clear();
        for (i, column) in self.columns.iter().enumerate() {
            if i > 0 {
                buf.push(PARTITION_NAME_SEPARATOR);
            }
            buf.push_str(self.value(row, column)?);
        }
        Ok(buf.as_str())
    }

    /// The partition spec of `row` (key → value, in key order); slow path.
    fn spec<R: InternalRow + ?Sized>(&self, row: &R) -> Result<Vec<(String, String)>> {
        self.columns
            .iter()
            .map(|c| Ok((c.name.to_string(), self.value(row, c)?.to_owned())))
            .collect()
    }

    fn value<'a, R: InternalRow + ?Sized>(
        &self,
        row: &'a R,
        column: &KeyColumn,
    ) -> Result<&'a str> {
        if column.pos >= row.field_count() {
            return Err(self.bad_row(column, row.field_count(), None));
        }
        match row.datum(column.pos) {
            Datum::String(value) => Ok(value),
            other => Err(self.bad_row(column, row.field_count(), Some(other.type_name()))),
        }
    }

    #[cold]
    fn bad_row(&self, column: &KeyColumn, field_count: usize, found: Option<&str>) -> ClientError {
        let name = &column.name;
        let table = &self.table;
        ClientError::Invalid(match found {
            None => format!(
                "row has {field_count} fields but partition key `{name}` of table {table} is field {}",
                column.pos
            ),
            Some("NULL") => format!(
                "partition key `{name}` of table {table} is NULL in this row; every row needs a value for each partition key"
            ),
            Some(found) => format!(
                "partition key `{name}` of table {table} must be a STRING value, the row has a {found}"
            ),
        })
    }
}

/// The published partition cache: the current snapshot and a generation
/// number bumped after every publish, so a [`PartitionView`] notices a new
/// snapshot with one atomic load and no lock.
#[derive(Debug, Default)]
struct PartitionCache {
    snapshot: RwLock<Arc<PartitionMap>>,
    generation: AtomicU64,
}

impl PartitionCache {
    fn current(&self) -> Arc<PartitionMap> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn get(&self, name: &str) -> Option<i64> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
    }

    fn publish(&self, map: PartitionMap) {
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(map);
        // After the store: a view that sees the new generation reads (at
        // least) this snapshot.
        self.generation.fetch_add(1, Ordering::Release);
    }
}

/// The outcome of one flight of [`PartitionRouter::ensure`], shared by every
/// caller that waited on it; each gets its own copy of an error
/// ([`ClientError::duplicate`]).
type Flight = Arc<OnceCell<Result<i64>>>;

/// Where the router's catalog calls go.
enum AdminSource {
    /// Always this connection (as given to [`PartitionRouter::new`]).
    Fixed(Admin),
    /// The client's live coordinator, reconnected when it died.
    Client(FlussClient),
}

impl AdminSource {
    async fn admin(&self) -> Result<Admin> {
        match self {
            AdminSource::Fixed(admin) => Ok(admin.clone()),
            AdminSource::Client(client) => Ok(Admin::new(client.coordinator().await?)),
        }
    }
}

/// Routes rows of one partitioned table to partition ids, and creates the
/// partitions that do not exist yet (`client.writer.dynamic-create-partition.enabled`).
///
/// Guarantees: lookups never block on the network and allocate nothing when
/// the partition is known; [`PartitionRouter::ensure`] sends at most one
/// CreatePartition per missing partition at a time, however many callers
/// ask for it concurrently.
pub struct PartitionRouter {
    admin: AdminSource,
    keys: PartitionKeys,
    dynamic_create: bool,
    cache: PartitionCache,
    /// Missing partitions being created or looked up, by name.
    flights: Mutex<HashMap<Box<str>, Flight>>,
    /// Serialises reloads, so an older listing never replaces a newer one.
    reload: tokio::sync::Mutex<()>,
    create_requests: AtomicU64,
}

impl std::fmt::Debug for PartitionRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionRouter")
            .field("keys", &self.keys)
            .field("dynamic_create", &self.dynamic_create)
            .field("known_partitions", &self.known_partitions())
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// Name buffer of [`PartitionRouter::lookup`] for tables with several
    /// partition keys: one per thread, reused, so the shared lookup
    /// allocates nothing once it has grown to the longest name.
    static NAME_BUFFER: RefCell<String> = const { RefCell::new(String::new()) };
}

impl PartitionRouter {
    /// A router for `table`, with the partitions the server lists now.
    /// `dynamic_create` is the writer's
    /// `client.writer.dynamic-create-partition.enabled`. Fails for a table
    /// without partition keys or with a non-STRING partition key.
    ///
    /// Every later catalog call goes over `admin`'s connection; if it can
    /// die under a long-lived writer, prefer [`PartitionRouter::for_client`].
    pub async fn new(admin: Admin, table: &TableInfo, dynamic_create: bool) -> Result<Arc<Self>> {
        Self::build(AdminSource::Fixed(admin), table, dynamic_create).await
    }

    /// Like [`PartitionRouter::new`], reaching the catalog through
    /// `client`'s coordinator connection as it is at each call, so creations
    /// and refreshes survive a reconnect.
    pub async fn for_client(
        client: &FlussClient,
        table: &TableInfo,
        dynamic_create: bool,
    ) -> Result<Arc<Self>> {
        Self::build(AdminSource::Client(client.clone()), table, dynamic_create).await
    }

    async fn build(
        admin: AdminSource,
        table: &TableInfo,
        dynamic_create: bool,
    ) -> Result<Arc<Self>> {
        let keys = PartitionKeys::new(table)?;
        let router = Arc::new(Self {
            admin,
            keys,
            dynamic_create,
            cache: PartitionCache::default(),
            flights: Mutex::new(HashMap::new()),
            reload: tokio::sync::Mutex::new(()),
            create_requests: AtomicU64::new(0),
        });
        router.refresh().await?;
        Ok(router)
    }

    /// The partition of `row` in the cache. Takes a read lock on the cache
    /// per call; a writer that owns its rows should prefer a
    /// [`PartitionView`], which takes none. Errors when a partition key of
    /// the row is NULL, not a string, or beyond the row's fields.
    pub fn lookup<R: InternalRow + ?Sized>(&self, row: &R) -> Result<PartitionLookup> {
        NAME_BUFFER.with(|buf| match buf.try_borrow_mut() {
            Ok(mut buf) => self.lookup_with(row, &mut buf),
            // Only reachable if a row's accessor itself routes a row.
            Err(_) => self.lookup_with(row, &mut String::new()),
        })
    }

    fn lookup_with<R: InternalRow + ?Sized>(
        &self,
        row: &R,
        buf: &mut String,
    ) -> Result<PartitionLookup> {
        let name = self.keys.name(row, buf)?;
        Ok(match self.cache.get(name) {
            Some(id) => PartitionLookup::Known(id),
            None => PartitionLookup::Missing,
        })
    }

    /// A per-writer handle whose lookups take no lock (see [`PartitionView`]).
    pub fn view(self: &Arc<Self>) -> PartitionView {
        let generation = self.cache.generation.load(Ordering::Acquire);
        PartitionView {
            router: Arc::clone(self),
            map: self.cache.current(),
            generation,
            name: String::new(),
            last: None,
            last_name: String::new(),
            single_key_pos: match &*self.keys.columns {
                [only] => Some(only.pos),
                _ => None,
            },
            last_values: Vec::new(),
        }
    }

    /// The id of the partition of `row`, creating the partition first if the
    /// server does not have it. Concurrent callers for the same partition
    /// share one flight: one CreatePartition (ignore-if-exists), then the
    /// cache is reloaded and the partition's id returned to all of them.
    ///
    /// Errors: with dynamic creation disabled, `PARTITION_NOT_EXISTS` naming
    /// the partition; otherwise the server's refusal with its Fluss error code
    /// (e.g. `PARTITION_MAX_NUM_EXCEPTION` beyond `max.partition.num`). A
    /// failed flight is not remembered: the next call tries again.
    pub async fn ensure<R: InternalRow + ?Sized>(&self, row: &R) -> Result<i64> {
        let mut buf = String::new();
        let name = self.keys.name(row, &mut buf)?;
        if let Some(id) = self.cache.get(name) {
            return Ok(id);
        }
        let name: Box<str> = name.into();
        let spec = self.keys.spec(row)?;
        let flight = Arc::clone(
            self.flights
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(name.clone())
                .or_default(),
        );
        let outcome = flight
            .get_or_init(|| async {
                match tokio::time::timeout(PARTITION_FLIGHT_TIMEOUT, self.fly(&name, &spec)).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(self.flight_timed_out(&name)),
                }
            })
            .await;
        {
            // The first caller back retires the flight; a later miss (the
            // partition was dropped, or this flight failed) starts a new one.
            let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
            if flights.get(&name).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
                flights.remove(&name);
            }
        }
        outcome.as_ref().copied().map_err(ClientError::duplicate)
    }

    /// One flight for the missing partition `name`.
    async fn fly(&self, name: &str, spec: &[(String, String)]) -> Result<i64> {
        // A flight that started after an earlier one published the partition
        // (its caller missed the cache just before) has nothing to do.
        if let Some(id) = self.cache.get(name) {
            return Ok(id);
        }
        if self.dynamic_create {
            self.create_requests.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(table = %self.keys.table, partition = name, "creating partition");
            self.admin
                .admin()
                .await?
                .create_partition(&self.keys.table, spec, true)
                .await?;
        }
        for attempt in 0..CREATED_PARTITION_LIST_ATTEMPTS {
            self.refresh().await?;
            if let Some(id) = self.cache.get(name) {
                return Ok(id);
            }
            // Without dynamic creation one fresh listing is the answer.
            if !self.dynamic_create {
                break;
            }
            if attempt + 1 < CREATED_PARTITION_LIST_ATTEMPTS {
                tokio::time::sleep(CREATED_PARTITION_LIST_INTERVAL).await;
            }
        }
        let table = &self.keys.table;
        let message = if self.dynamic_create {
            format!(
                "partition `{name}` of table {table} was created but the server did not list it after {CREATED_PARTITION_LIST_ATTEMPTS} attempts"
            )
        } else {
            format!(
                "partition `{name}` of table {table} does not exist and client.writer.dynamic-create-partition.enabled is false; create it first (fjord partitions create) or enable dynamic creation"
            )
        };
        Err(ClientError::Server {
            api: "partition routing",
            error: ErrorCode::PartitionNotExists.with_message(message),
        })
    }

    #[cold]
    fn flight_timed_out(&self, name: &str) -> ClientError {
        ClientError::Server {
            api: "partition routing",
            error: ErrorCode::RequestTimeOut.with_message(format!(
                "partition `{name}` of table {} was not confirmed by the server within {PARTITION_FLIGHT_TIMEOUT:?}",
                self.keys.table
            )),
        }
    }

    /// Reloads the cache from the server's partition listing; call it when
    /// the server says a cached partition no longer exists (dropped).
    pub async fn refresh(&self) -> Result<()> {
        let _serial = self.reload.lock().await;
        let partitions = self
            .admin
            .admin()
            .await?
            .list_partitions(&self.keys.table, None)
            .await?;
        let map: PartitionMap = partitions
            .into_iter()
            .map(|p| (p.name.into_boxed_str(), p.partition_id))
            .collect();
        self.cache.publish(map);
        Ok(())
    }

    /// The table this router serves.
    pub fn table_path(&self) -> &TablePath {
        &self.keys.table
    }

    /// The id of the partition named `name` (Fluss name: values joined by
    /// `$`) if the cache knows it.
    pub fn partition_id(&self, name: &str) -> Option<i64> {
        self.cache.get(name)
    }

    /// Number of partitions in the cache.
    pub fn known_partitions(&self) -> usize {
        self.cache
            .snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// How many CreatePartition requests this router has sent.
    pub fn create_requests_sent(&self) -> u64 {
        self.create_requests.load(Ordering::Relaxed)
    }
}

/// One writer's handle on a [`PartitionRouter`]: its own snapshot of the
/// cache and its own name buffer, so [`PartitionView::lookup`] takes no lock
/// and touches no shared cache line other than one atomic load of the
/// cache's generation (a plain load on x86). Not shared: one per writer.
#[derive(Debug)]
pub struct PartitionView {
    router: Arc<PartitionRouter>,
    map: Arc<PartitionMap>,
    generation: u64,
    name: String,
    /// The partition the previous lookup found and its name: rows usually
    /// come in long runs of one partition (time-ordered data), so a row
    /// whose name equals it skips the hash. Cleared with each new snapshot.
    last: Option<i64>,
    last_name: String,
    /// The row position of the only partition key; `None` with several.
    single_key_pos: Option<usize>,
    /// With several keys: each key's value in the previous partition, so a
    /// row of the same partition is recognised key by key, without joining
    /// its values into a name.
    last_values: Vec<String>,
}

impl PartitionView {
    /// The previous row's partition if `row` belongs to it too — the
    /// common case, checked with no `Result` and no call: the single key's
    /// value compared with the previous row's. `None` means "ask
    /// [`PartitionView::lookup`]": another partition, a newer cache
    /// snapshot, several keys, or a key that is not a STRING (which
    /// `lookup` reports).
    #[inline(always)]
    pub(crate) fn same_as_last<R: InternalRow + ?Sized>(&self, row: &R) -> Option<i64> {
        let id = self.last?;
        let current =
            |view: &Self| view.router.cache.generation.load(Ordering::Acquire) == view.generation;
        let Some(pos) = self.single_key_pos else {
            return (current(self) && self.same_values_as_last(row)).then_some(id);
        };
        if !current(self) || pos >= row.field_count() {
            return None;
        }
        match row.datum(pos) {
            Datum::String(value) if same_name(value.as_bytes(), self.last_name.as_bytes()) => {
                Some(id)
            }
            _ => None,
        }
    }

    /// Whether every key of `row` holds the previous partition's value
    /// (several keys; `last_values` is empty until a partition is found).
    fn same_values_as_last<R: InternalRow + ?Sized>(&self, row: &R) -> bool {
        let columns = &self.router.keys.columns;
        self.last_values.len() == columns.len()
            && columns.iter().zip(&self.last_values).all(|(column, last)| {
                column.pos < row.field_count()
                    && matches!(row.datum(column.pos),
                        Datum::String(value) if same_name(value.as_bytes(), last.as_bytes()))
            })
    }

    /// The partition of `row`, from the newest published snapshot of the
    /// cache. Same errors as [`PartitionRouter::lookup`].
    #[inline]
    pub fn lookup<R: InternalRow + ?Sized>(&mut self, row: &R) -> Result<PartitionLookup> {
        let generation = self.router.cache.generation.load(Ordering::Acquire);
        if generation != self.generation {
            self.resync(generation);
        }
        let name = self.router.keys.name(row, &mut self.name)?;
        if let Some(id) = self.last {
            if same_name(name.as_bytes(), self.last_name.as_bytes()) {
                return Ok(PartitionLookup::Known(id));
            }
        }
        Ok(match self.map.get(name) {
            Some(&id) => {
                // Once per run of rows of one partition.
                self.last = Some(id);
                self.last_name.clear();
                self.last_name.push_str(name);
                self.remember_values(row);
                PartitionLookup::Known(id)
            }
            None => PartitionLookup::Missing,
        })
    }

    #[cold]
    fn resync(&mut self, generation: u64) {
        self.map = self.router.cache.current();
        self.generation = generation;
        // The new snapshot may have dropped (or re-created) that partition.
        self.last = None;
    }

    /// Keeps each key's value of `row` (several keys only; the name built
    /// by `lookup` was just checked, so every key is a STRING).
    fn remember_values<R: InternalRow + ?Sized>(&mut self, row: &R) {
        if self.single_key_pos.is_some() {
            return;
        }
        // The strings are reused: this runs once per run of rows.
        let columns = &self.router.keys.columns;
        self.last_values.resize_with(columns.len(), String::new);
        for (column, last) in columns.iter().zip(&mut self.last_values) {
            last.clear();
            if let Datum::String(value) = row.datum(column.pos) {
                last.push_str(value);
            }
        }
    }

    /// The shared router, for [`PartitionRouter::ensure`] on a miss.
    pub fn router(&self) -> &Arc<PartitionRouter> {
        &self.router
    }
}

/// Whether two partition names are equal, compared a word at a time in
/// line: names are short (`20261130`, `2026113012`), and the `memcmp` call
/// `==` makes was 1.7 % of a partitioned writer's profile, once per row
/// (docs/bench-notes/partitions.md).
#[inline(always)]
fn same_name(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a_words, mut b_words) = (a.chunks_exact(8), b.chunks_exact(8));
    for (x, y) in (&mut a_words).zip(&mut b_words) {
        let word = |w: &[u8]| u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]));
        if word(x) != word(y) {
            return false;
        }
    }
    a_words
        .remainder()
        .iter()
        .zip(b_words.remainder())
        .all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use fjord_format::schema::{Schema, TableDescriptor};
    use fjord_format::types::DataType;

    use super::*;

    fn table(columns: &[(&str, DataType)], partition_keys: &[&str]) -> TableInfo {
        let mut builder = Schema::builder();
        for (name, data_type) in columns {
            builder = builder.column(*name, data_type.clone());
        }
        let schema = builder.build().expect("schema");
        let descriptor = TableDescriptor::new(
            schema,
            None,
            partition_keys.iter().map(|k| (*k).to_owned()).collect(),
            None,
            Default::default(),
            Default::default(),
        )
        .expect("descriptor");
        TableInfo {
            path: TablePath::new("db", "t"),
            table_id: 1,
            schema_id: 1,
            descriptor,
            earlier_schemas: Vec::new(),
        }
    }

    fn keys(partition_keys: &[&str]) -> PartitionKeys {
        PartitionKeys::new(&table(
            &[
                ("id", DataType::bigint()),
                ("dt", DataType::string()),
                ("region", DataType::string()),
            ],
            partition_keys,
        ))
        .expect("keys")
    }

    fn name_of(keys: &PartitionKeys, row: &[Datum<'_>]) -> Result<String> {
        let mut buf = String::new();
        keys.name(row, &mut buf).map(str::to_owned)
    }

    #[test]
    fn one_key_names_the_partition_by_the_value_itself() {
        let keys = keys(&["dt"]);
        let row = [
            Datum::BigInt(1),
            Datum::String("20261130"),
            Datum::String("eu"),
        ];
        let mut buf = String::new();
        let name = keys.name(&row[..], &mut buf).expect("name");
        assert_eq!(name, "20261130");
        // Borrowed from the row: the buffer was not used.
        assert!(buf.is_empty());
    }

    #[test]
    fn several_keys_join_values_with_dollar_in_key_order() {
        let keys = keys(&["region", "dt"]);
        let row = [
            Datum::BigInt(1),
            Datum::String("20261130"),
            Datum::String("eu"),
        ];
        assert_eq!(name_of(&keys, &row).expect("name"), "eu$20261130");
        assert_eq!(
            keys.spec(&row[..]).expect("spec"),
            vec![
                ("region".to_owned(), "eu".to_owned()),
                ("dt".to_owned(), "20261130".to_owned())
            ]
        );
    }

    #[test]
    fn name_buffer_is_reused_across_rows() {
        let keys = keys(&["dt", "region"]);
        let mut buf = String::new();
        let long = [
            Datum::BigInt(1),
            Datum::String("20261130"),
            Datum::String("europe"),
        ];
        let short = [Datum::BigInt(1), Datum::String("2026"), Datum::String("us")];
        assert_eq!(
            keys.name(&long[..], &mut buf).expect("name"),
            "20261130$europe"
        );
        let capacity = buf.capacity();
        assert_eq!(keys.name(&short[..], &mut buf).expect("name"), "2026$us");
        assert_eq!(buf.capacity(), capacity);
    }

    #[test]
    fn null_partition_value_is_refused_naming_the_key() {
        let keys = keys(&["dt"]);
        let row = [Datum::BigInt(1), Datum::Null, Datum::String("eu")];
        let error = name_of(&keys, &row).expect_err("null refused").to_string();
        assert!(error.contains("`dt`") && error.contains("NULL"), "{error}");
    }

    #[test]
    fn non_string_partition_value_is_refused_naming_the_type() {
        let keys = keys(&["dt"]);
        let row = [Datum::BigInt(1), Datum::Int(20261130), Datum::String("eu")];
        let error = name_of(&keys, &row).expect_err("int refused").to_string();
        assert!(error.contains("`dt`") && error.contains("INT"), "{error}");
    }

    #[test]
    fn short_row_is_refused_instead_of_indexing_past_it() {
        let keys = keys(&["region"]);
        let row = [Datum::BigInt(1)];
        let error = name_of(&keys, &row).expect_err("short row").to_string();
        assert!(error.contains("row has 1 fields"), "{error}");
    }

    #[test]
    fn table_without_partition_keys_has_no_router() {
        let info = table(&[("id", DataType::bigint())], &[]);
        let error = PartitionKeys::new(&info)
            .expect_err("not partitioned")
            .to_string();
        assert!(error.contains("not partitioned"), "{error}");
    }

    #[test]
    fn non_string_partition_key_column_is_refused_up_front() {
        let info = table(
            &[("id", DataType::bigint()), ("day", DataType::int())],
            &["day"],
        );
        let error = PartitionKeys::new(&info).expect_err("int key").to_string();
        assert!(
            error.contains("`day`") && error.contains("INTEGER"),
            "{error}"
        );
    }

    fn map(entries: &[(&str, i64)]) -> PartitionMap {
        entries.iter().map(|&(n, id)| (n.into(), id)).collect()
    }

    #[test]
    fn name_hash_tells_apart_names_sharing_their_first_word() {
        use std::hash::BuildHasher;
        let hasher = BuildHasherDefault::<NameHasher>::default();
        let days: std::collections::HashSet<u64> = (1..=31)
            .map(|d| hasher.hash_one(format!("202612{d:02}").as_str()))
            .collect();
        assert_eq!(days.len(), 31);
        // The bucket index of a small table (low bits) differs too.
        let low: std::collections::HashSet<u64> = (1..=31)
            .map(|d| hasher.hash_one(format!("202612{d:02}").as_str()) & 0x3f)
            .collect();
        assert!(low.len() > 16, "low bits spread: {}", low.len());
        // Lengths around the 8-byte word boundary stay distinct.
        let names = ["2026120", "20261201", "202612010", "2026120$", "2026120$eu"];
        let hashes: std::collections::HashSet<u64> =
            names.iter().map(|n| hasher.hash_one(*n)).collect();
        assert_eq!(hashes.len(), names.len());
        let cache = map(&[("20261201", 1), ("20261202", 2), ("2026120", 3)]);
        assert_eq!(cache.get("20261202"), Some(&2));
        assert_eq!(cache.get("2026120"), Some(&3));
        assert_eq!(cache.get("20261203"), None);
    }

    #[test]
    fn same_name_is_byte_equality() {
        let names = [
            "",
            "2",
            "20",
            "2026113",
            "20261130",
            "20261131",
            "2026113012",
            "2026113013",
            "2026113$eu",
            "2026113$ey",
            "20261130$eu-west",
            "20261130$eu-wesT",
        ];
        for a in names {
            for b in names {
                assert_eq!(same_name(a.as_bytes(), b.as_bytes()), a == b, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn cache_publish_replaces_snapshot_and_bumps_generation() {
        let cache = PartitionCache::default();
        assert_eq!(cache.get("a"), None);
        let before = cache.generation.load(Ordering::Acquire);
        cache.publish(map(&[("a", 7)]));
        assert_eq!(cache.get("a"), Some(7));
        assert_eq!(cache.generation.load(Ordering::Acquire), before + 1);
        let old = cache.current();
        cache.publish(map(&[("b", 8)]));
        // A snapshot already taken is immutable; the cache moved on.
        assert_eq!(old.get("a"), Some(&7));
        assert_eq!(cache.get("a"), None);
        assert_eq!(cache.get("b"), Some(8));
    }
}
