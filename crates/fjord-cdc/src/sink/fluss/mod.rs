//! The `fluss` sink: change events into Fjord (Fluss) tables through the
//! native client, with the options and table mapping of Flink CDC's Fluss
//! pipeline connector and schema evolution past it.
//!
//! - Tables ([`table`]): a source table with a primary key becomes a
//!   primary-key table, one without a log table; databases and tables are
//!   created when a table's first event arrives; an existing table whose
//!   primary key, bucket keys or partition keys differ is an error naming
//!   both definitions.
//! - Rows ([`convert`]): insert and update upsert the after-image (an
//!   update that changes the primary key deletes the before-image's key
//!   first), delete deletes the key; on a log table insert and update
//!   append the after-image and a delete is an error (as Flink CDC's
//!   connector fails on it). Each row reaches the writer through a plan
//!   made once per (source schema version, sink table schema).
//! - Schema changes: `pipeline.schema.change.behavior` and the sink's
//!   `include.schema.changes` / `exclude.schema.changes`
//!   ([`options`]); see [`FlussSink`]'s `schema_change`.
//! - Exactly once ([`recovery`]): primary-key tables converge by upsert;
//!   log tables by the marks committed with each position.
//! - The server away: a retriable failure is [`SinkError::Unavailable`];
//!   the runtime then waits and resumes from the last commit, at most
//!   `client.writer.retries` times in a row ([`options::OPT_WRITER_RETRIES`]).
//!
//! Threads: the runtime's sink thread calls [`Sink::write_batch`], which
//! runs one `block_on` per batch on the sink's own tokio runtime; the
//! writers' sender and linger tasks run on its one worker thread.

pub mod convert;
pub mod options;
pub mod recovery;
pub mod table;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fjord_client::{
    AppendWriter, ClientError, FlussClient, KvBucket, OffsetSpec, TableChange, TableInfo,
    TablePath, UpsertWriter, WriterConfig,
};
use fjord_format::schema::DatabaseDescriptor;
use fjord_format::types::DataType as FlussType;

use crate::event::{ChangeEvent, Event, EventBatch, Op, SchemaChange, SchemaChangeEvent};
use crate::offsets::OffsetStore;
use crate::schema::{TableId, TableSchema};
use crate::sink::{Checkpoint, Sink, SinkError, SinkStats, TableStats};

use convert::RowPlan;
use options::{change_tag, FlussSinkOptions, SchemaChangeBehavior};
use recovery::{LogMark, ReplayMatcher, SinkState};

const SINK: &str = "fluss";

/// Bytes per KV scan batch when a primary-key table is truncated.
const TRUNCATE_SCAN_BYTES: i32 = 4 << 20;

/// The server cannot apply a schema change (no AlterTable yet, or not this
/// kind of change).
#[derive(Debug)]
struct Unsupported(String);

enum Writer {
    Upsert(UpsertWriter),
    Append(AppendWriter),
}

/// One sink table and what the sink keeps for it.
struct Target {
    id: TableId,
    path: TablePath,
    info: TableInfo,
    /// The sink table's columns (name, type), as the server has them.
    columns: Vec<(String, FlussType)>,
    primary_key: Vec<String>,
    writer: Writer,
    /// Plans by source schema version (the `Arc` is held, so pointer
    /// equality identifies the version).
    plans: Vec<(Arc<TableSchema>, RowPlan)>,
    /// Renames not applied to the sink table (try_evolve): source name →
    /// sink column name.
    alias: Vec<(String, String)>,
    /// Rows read back after a restart that replayed events may match.
    matcher: Option<ReplayMatcher>,
    stats: TableStats,
}

impl Target {
    fn is_log(&self) -> bool {
        self.primary_key.is_empty()
    }
}

fn client_error(table: &dyn std::fmt::Display, what: &str, e: ClientError) -> SinkError {
    let message = format!("{what} {table}: {e}");
    if e.is_retriable() {
        SinkError::Unavailable {
            sink: SINK,
            message,
        }
    } else {
        SinkError::Failed {
            sink: SINK,
            message,
        }
    }
}

fn failed(message: String) -> SinkError {
    SinkError::Failed {
        sink: SINK,
        message,
    }
}

/// The `fluss` sink (see the module doc).
pub struct FlussSink {
    rt: tokio::runtime::Runtime,
    inner: Inner,
}

struct Inner {
    options: FlussSinkOptions,
    behavior: SchemaChangeBehavior,
    writer_config: WriterConfig,
    client: Option<FlussClient>,
    targets: Vec<Target>,
    by_id: HashMap<TableId, usize>,
    /// The last event's schema version and where it went: (schema, target, plan).
    last: Option<(Arc<TableSchema>, usize, usize)>,
    store: Option<Arc<OffsetStore>>,
    /// The marks as of the last committed position.
    committed: SinkState,
    /// Matchers read back at restore, until their table is opened.
    pending_matchers: HashMap<(String, String), ReplayMatcher>,
    stats: SinkStats,
    /// Tables dropped from the target list (their counts stay in the stats).
    retired: Vec<TableStats>,
}

impl FlussSink {
    /// A sink writing to the servers of `options` under `behavior`. Checks
    /// the client options; connects on the first use.
    pub fn new(
        options: FlussSinkOptions,
        behavior: SchemaChangeBehavior,
    ) -> Result<FlussSink, SinkError> {
        let writer_config = WriterConfig::from_options(
            options
                .client_options
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .map_err(|e| failed(format!("properties.client.*: {e}")))?;
        // A server away longer than a brief restart is waited for by the
        // runtime (resuming from the last commit, each attempt logged,
        // `client.writer.retries` of them), not inside a writer that would
        // hold the pipeline without a word.
        let writer_config = WriterConfig {
            retries: writer_config
                .retries
                .min(options::WRITER_RETRIES_PER_ATTEMPT),
            ..writer_config
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("fluss-sink-io")
            .enable_all()
            .build()
            .map_err(|e| SinkError::Io {
                sink: SINK,
                source: e,
            })?;
        Ok(FlussSink {
            rt,
            inner: Inner {
                options,
                behavior,
                writer_config,
                client: None,
                targets: Vec::new(),
                by_id: HashMap::new(),
                last: None,
                store: None,
                committed: SinkState::default(),
                pending_matchers: HashMap::new(),
                stats: SinkStats::default(),
                retired: Vec::new(),
            },
        })
    }
}

impl Sink for FlussSink {
    fn restore(
        &mut self,
        state: Option<&str>,
        store: Option<Arc<OffsetStore>>,
    ) -> Result<(), SinkError> {
        self.inner.store = store;
        let Some(state) = state else {
            return Ok(());
        };
        let state = SinkState::decode(state).map_err(failed)?;
        self.rt.block_on(self.inner.restore(state))
    }

    fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError> {
        let inner = &mut self.inner;
        self.rt.block_on(inner.write_batch(batch))
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        let inner = &mut self.inner;
        self.rt.block_on(inner.flush())
    }

    fn checkpoint(&mut self) -> Result<Checkpoint, SinkError> {
        if self.inner.targets.iter().any(|t| t.matcher.is_some())
            || !self.inner.pending_matchers.is_empty()
        {
            return Ok(Checkpoint::Hold);
        }
        let inner = &mut self.inner;
        self.rt
            .block_on(inner.checkpoint())
            .map(|s| Checkpoint::Commit(Some(s)))
    }

    fn stats(&self) -> SinkStats {
        let mut stats = self.inner.stats.clone();
        stats.tables = self
            .inner
            .retired
            .iter()
            .cloned()
            .chain(self.inner.targets.iter().map(|t| t.stats.clone()))
            .collect();
        stats
    }
}

impl Drop for FlussSink {
    fn drop(&mut self) {
        // Writers hand their buffered rows to their tasks on drop; the
        // runtime must outlive them, so drop them inside it.
        let targets = std::mem::take(&mut self.inner.targets);
        let _guard = self.rt.enter();
        drop(targets);
    }
}

impl Inner {
    async fn client(&mut self) -> Result<FlussClient, SinkError> {
        if let Some(client) = &self.client {
            return Ok(client.clone());
        }
        let client = FlussClient::connect(&self.options.bootstrap_servers)
            .await
            .map_err(|e| {
                client_error(
                    &self.options.bootstrap_servers.join(","),
                    "connecting to",
                    e,
                )
            })?;
        self.client = Some(client.clone());
        Ok(client)
    }

    async fn restore(&mut self, state: SinkState) -> Result<(), SinkError> {
        let client = self.client().await?;
        for ((database, table), mark) in &state.logs {
            let path = &TablePath::new(database.as_str(), table.as_str());
            let info = match table_if_exists(&client, path).await? {
                Some(info) => info,
                None => continue,
            };
            let matcher = recovery::read_back(&client, &info, Some(mark))
                .await
                .map_err(|e| SinkError::Unavailable {
                    sink: SINK,
                    message: e,
                })?;
            if !matcher.is_empty() {
                tracing::info!(
                    table = %path,
                    rows = matcher.left(),
                    "log table holds rows written after the last committed position; replayed events with the same rows will not be written again"
                );
                self.pending_matchers
                    .insert(recovery::state_key(path), matcher);
            }
        }
        self.committed = state;
        Ok(())
    }

    async fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError> {
        for event in batch.events() {
            match event {
                Event::Change(change) => self.write_change(change).await?,
                Event::Schema(change) => self.schema_change(change).await?,
            }
        }
        Ok(())
    }

    /// The target and plan of an event's schema version: the last event's
    /// (one pointer compare), else resolved and remembered.
    #[inline]
    async fn route(&mut self, schema: &Arc<TableSchema>) -> Result<(usize, usize), SinkError> {
        if let Some((last, t, p)) = &self.last {
            if Arc::ptr_eq(last, schema) {
                return Ok((*t, *p));
            }
        }
        self.resolve(schema).await
    }

    #[inline(never)]
    async fn resolve(&mut self, schema: &Arc<TableSchema>) -> Result<(usize, usize), SinkError> {
        let t = self.ensure_target(schema).await?;
        let target = &mut self.targets[t];
        let p = match target
            .plans
            .iter()
            .position(|(s, _)| Arc::ptr_eq(s, schema))
        {
            Some(p) => p,
            None => {
                let plan =
                    RowPlan::new(schema, &target.columns, &target.primary_key, &target.alias)
                        .map_err(|e| failed(format!("sink table {}: {}", target.id, e.0)))?;
                target.plans.push((Arc::clone(schema), plan));
                target.plans.len() - 1
            }
        };
        self.last = Some((Arc::clone(schema), t, p));
        Ok((t, p))
    }

    async fn write_change(&mut self, change: ChangeEvent<'_>) -> Result<(), SinkError> {
        let (t, p) = self.route(change.table).await?;
        let target = &mut self.targets[t];
        let Target {
            writer,
            plans,
            matcher,
            stats,
            id,
            ..
        } = target;
        let plan = &plans[p].1;
        let id = &*id;
        let refused = |e: String| failed(format!("sink table {id}: {e}"));
        match writer {
            Writer::Upsert(w) => match change.op {
                Op::Insert | Op::Update => {
                    let after = change.after.ok_or_else(|| refused("a change without its after-image".into()))?;
                    plan.check(&after).map_err(refused)?;
                    if let (Op::Update, Some(before)) = (change.op, change.before) {
                        if plan.key_changed(&before, &after) {
                            w.delete(&plan.row(before))
                                .await
                                .map_err(|e| client_error(id, "deleting from", e))?;
                            stats.deletes += 1;
                        }
                    }
                    w.upsert(&plan.row(after))
                        .await
                        .map_err(|e| client_error(id, "upserting into", e))?;
                    stats.rows += 1;
                }
                Op::Delete => {
                    let before = change.before.ok_or_else(|| refused("a delete without its before-image".into()))?;
                    w.delete(&plan.row(before))
                        .await
                        .map_err(|e| client_error(id, "deleting from", e))?;
                    stats.deletes += 1;
                }
            },
            Writer::Append(w) => match change.op {
                Op::Insert | Op::Update => {
                    let after = change.after.ok_or_else(|| refused("a change without its after-image".into()))?;
                    plan.check(&after).map_err(refused)?;
                    let row = plan.row(after);
                    if let Some(m) = matcher {
                        let taken = m.take(recovery::fingerprint_cdc(&row));
                        if m.is_empty() {
                            tracing::info!(table = %id, "every row written before the restart was matched by its replayed event");
                            *matcher = None;
                        } else if m.gave_up() {
                            tracing::warn!(
                                table = %id,
                                rows = m.left(),
                                "rows written before the restart were not matched by the replay; the table holds them (was it written by someone else, or a table without a primary key snapshotted again after it changed?)"
                            );
                            *matcher = None;
                        }
                        if taken {
                            self.stats.skipped_replays += 1;
                            return Ok(());
                        }
                    }
                    w.append(&row)
                        .await
                        .map_err(|e| client_error(id, "appending to", e))?;
                    stats.rows += 1;
                }
                Op::Delete => {
                    return Err(failed(format!(
                        "sink table {id} is a log table (its source table has no primary key), which cannot \
                         take a DELETE (Flink CDC's Fluss connector fails the same way): give the source table a \
                         primary key, or exclude the table"
                    )))
                }
            },
        }
        Ok(())
    }

    /// The target of `schema`'s sink table: known, or opened (database and
    /// table created if missing, an existing table checked).
    async fn ensure_target(&mut self, schema: &Arc<TableSchema>) -> Result<usize, SinkError> {
        if let Some(&t) = self.by_id.get(schema.id()) {
            return Ok(t);
        }
        let client = self.client().await?;
        let id = schema.id().clone();
        let path = TablePath::new(id.database(), id.table());
        let wanted = table::wanted(&id, schema, &self.options)
            .map_err(|e| failed(format!("sink table {id}: {e}")))?;
        let admin = client.admin();
        admin
            .create_database(id.database(), &DatabaseDescriptor::default(), true)
            .await
            .map_err(|e| client_error(&id.database(), "creating database", e))?;
        let mut existed = false;
        let info = match table_if_exists(&client, &path).await? {
            Some(info) => {
                table::check_existing(&id, &info.descriptor, &wanted).map_err(failed)?;
                existed = true;
                info
            }
            None => {
                admin
                    .create_table(&path, &wanted.descriptor, true)
                    .await
                    .map_err(|e| client_error(&id, "creating table", e))?;
                self.stats.schema_changes += 1;
                tracing::info!(table = %id, primary_key = ?wanted.primary_key, "created sink table");
                let info = client
                    .refresh_table_info(&path)
                    .await
                    .map_err(|e| client_error(&id, "reading the info of", e))?;
                table::check_existing(&id, &info.descriptor, &wanted).map_err(failed)?;
                info
            }
        };
        let target = self.open_target(&client, id.clone(), path, info).await?;
        self.targets.push(target);
        let t = self.targets.len() - 1;
        self.by_id.insert(id, t);
        if existed {
            self.add_missing_columns(t, schema).await?;
        }
        Ok(t)
    }

    /// Brings an existing sink table up to its source table's columns.
    /// A table can lack source columns when the source added them while
    /// no pipeline ran, or when the pipeline was killed between reading a
    /// schema and applying its ADD COLUMN (a snapshot read again after a
    /// restart sees the source's current columns, with no event for the
    /// change): the missing columns are added as an ADD COLUMN event
    /// would add them, so no source column's values are silently dropped.
    async fn add_missing_columns(
        &mut self,
        t: usize,
        schema: &Arc<TableSchema>,
    ) -> Result<(), SinkError> {
        let missing: Vec<_> = schema
            .columns()
            .iter()
            .filter(|c| !self.targets[t].columns.iter().any(|(n, _)| *n == *c.name))
            .cloned()
            .collect();
        if missing.is_empty() || self.behavior == SchemaChangeBehavior::Ignore {
            return Ok(());
        }
        let id = self.targets[t].id.clone();
        let names: Vec<&str> = missing.iter().map(|c| &*c.name).collect();
        if self.behavior == SchemaChangeBehavior::Exception
            || !self.options.applies(self.behavior, "add.column")
        {
            return Err(failed(format!(
                "sink table {id} exists without the source table's columns {names:?}, and                  schema.change.behavior {} (with the include/exclude lists) does not add columns:                  add them to the sink table, or let the pipeline add them (lenient, try_evolve or evolve)",
                self.behavior.as_str()
            )));
        }
        for column in &missing {
            let ty = table::fluss_type(column.data_type).map_err(failed)?;
            match self.add_column(t, &column.name, ty).await {
                Ok(()) => {}
                Err(Unsupported(why)) if self.behavior == SchemaChangeBehavior::TryEvolve => {
                    tracing::warn!(table = %id, column = %column.name, "{why}; its values are not written (try_evolve)");
                }
                Err(Unsupported(why)) => {
                    return Err(failed(format!(
                        "sink table {id} lacks source column `{}`: {why}",
                        column.name
                    )))
                }
            }
        }
        Ok(())
    }

    async fn open_target(
        &mut self,
        client: &FlussClient,
        id: TableId,
        path: TablePath,
        info: TableInfo,
    ) -> Result<Target, SinkError> {
        let schema = info.descriptor.schema();
        let columns = columns_of(&info);
        let primary_key = schema
            .primary_key()
            .map(<[String]>::to_vec)
            .unwrap_or_default();
        let writer = if primary_key.is_empty() {
            // A log table the committed state has no mark for: commit its
            // mark before writing, so a restart knows where our rows begin.
            if let Some(store) = &self.store {
                let key = recovery::state_key(&path);
                let current = self
                    .committed
                    .logs
                    .get(&key)
                    .is_some_and(|m| m.table_id == info.table_id);
                if !current {
                    let mark = log_mark(client, &info).await?;
                    self.committed.logs.insert(key, mark);
                    store
                        .commit_sink_state(&self.committed.encode())
                        .map_err(|e| {
                            failed(format!("committing the mark of log table {id}: {e}"))
                        })?;
                }
            }
            Writer::Append(
                client
                    .append_writer(&path, self.writer_config.clone())
                    .await
                    .map_err(|e| client_error(&id, "opening a writer of", e))?,
            )
        } else {
            Writer::Upsert(
                client
                    .upsert_writer(&path, self.writer_config.clone())
                    .await
                    .map_err(|e| client_error(&id, "opening a writer of", e))?,
            )
        };
        let matcher = self.pending_matchers.remove(&recovery::state_key(&path));
        Ok(Target {
            stats: TableStats {
                table: id.to_string(),
                ..TableStats::default()
            },
            id,
            path,
            info,
            columns,
            primary_key,
            writer,
            plans: Vec::new(),
            alias: Vec::new(),
            matcher,
        })
    }

    /// Flushes one target's writer. A failure the writer reports as final
    /// may hide an outage: a batch refused because an earlier batch of its
    /// bucket failed (after the writer's own retries) is what a flush
    /// reports first, whatever made that earlier batch fail. So a final
    /// failure is checked against the server: if it does not answer now,
    /// the failure is [`SinkError::Unavailable`] (the runtime resumes from
    /// the last commit), else it is the writer's error.
    async fn flush_target(&mut self, t: usize) -> Result<(), SinkError> {
        let Err(e) = write_flush(&mut self.targets[t]).await else {
            return Ok(());
        };
        let id = &self.targets[t].id;
        if e.is_retriable() {
            return Err(client_error(id, "flushing writes to", e));
        }
        let probe = match &self.client {
            Some(client) => client.admin().list_databases().await.err(),
            None => None,
        };
        Err(match probe {
            Some(down) if down.is_retriable() => SinkError::Unavailable {
                sink: SINK,
                message: format!(
                    "flushing writes to {id}: {e} (the server does not answer: {down})"
                ),
            },
            _ => failed(format!("flushing writes to {id}: {e}")),
        })
    }

    async fn flush(&mut self) -> Result<(), SinkError> {
        let started = Instant::now();
        for t in 0..self.targets.len() {
            self.flush_target(t).await?;
        }
        self.stats.flushes += 1;
        self.stats.flush_wait += started.elapsed();
        Ok(())
    }

    /// After a flush: the marks of the log tables written, as of now.
    async fn checkpoint(&mut self) -> Result<String, SinkError> {
        if self.targets.iter().any(Target::is_log) {
            let client = self.client().await?;
            for target in self.targets.iter().filter(|t| t.is_log()) {
                let mark = log_mark(&client, &target.info).await?;
                self.committed
                    .logs
                    .insert(recovery::state_key(&target.path), mark);
            }
        }
        Ok(self.committed.encode())
    }

    /// Applies one schema change per `schema.change.behavior` and the
    /// include / exclude lists:
    /// - create table: always (the table is created, or an existing one checked);
    /// - `exception`: any other change fails; `ignore`: none is applied;
    /// - add column: added (nullable, last) if the server can alter
    ///   tables; where it cannot, `try_evolve` goes on without it, the
    ///   others fail;
    /// - drop column: `lenient` and `try_evolve` keep the column (NULL from
    ///   then on); `evolve` fails (the server drops no columns);
    /// - rename column: `lenient` adds the new name (the old column stays,
    ///   NULL from then on); `try_evolve` keeps writing the values into the
    ///   old column; `evolve` fails (the server renames no columns);
    /// - alter column type: nothing to do if the sink type already holds
    ///   the new type; else `try_evolve` keeps the column and checks each
    ///   value, the others fail (the server changes no types);
    /// - truncate table: a primary-key table's rows are deleted; a log
    ///   table cannot be truncated (`try_evolve` goes on, others fail);
    /// - drop table: the sink table is dropped.
    ///
    /// The affected table's writes are flushed first; after a change the
    /// table's writer and plans are made again.
    async fn schema_change(&mut self, change: &SchemaChangeEvent) -> Result<(), SinkError> {
        let kind = change_tag(&change.change);
        if let (SchemaChange::CreateTable, Some(schema)) = (&change.change, &change.schema) {
            self.ensure_target(schema).await?;
            return Ok(());
        }
        match self.behavior {
            SchemaChangeBehavior::Exception => {
                return Err(failed(format!(
                    "{} of {} ({:?}) under `schema.change.behavior: exception`; set the pipeline's \
                     schema.change.behavior to lenient, try_evolve, evolve or ignore to let the pipeline go on",
                    kind, change.table, change.change
                )))
            }
            SchemaChangeBehavior::Ignore => return Ok(()),
            _ => {}
        }
        if !self.options.applies(self.behavior, kind) {
            tracing::info!(table = %change.table, change = kind, "schema change not applied (include/exclude.schema.changes)");
            return Ok(());
        }
        let behavior = self.behavior;
        let evolve = behavior == SchemaChangeBehavior::Evolve;
        let try_evolve = behavior == SchemaChangeBehavior::TryEvolve;
        let table = change.table.clone();
        let refuse = |what: String| {
            failed(format!(
                "{what} ({kind} of {table} under schema.change.behavior: {}); schema.change.behavior: try_evolve \
                 goes on with the table as it is",
                behavior.as_str()
            ))
        };
        if let SchemaChange::DropTable = change.change {
            if let Some(t) = self.by_id.get(&table).copied() {
                self.flush_target(t).await?;
                self.retire(t);
            }
            let client = self.client().await?;
            let path = TablePath::new(table.database(), table.table());
            client
                .admin()
                .drop_table(&path, true)
                .await
                .map_err(|e| client_error(&table, "dropping", e))?;
            self.committed.logs.remove(&recovery::state_key(&path));
            self.stats.schema_changes += 1;
            tracing::info!(table = %table, "dropped sink table");
            return Ok(());
        }
        let Some(schema) = &change.schema else {
            return Ok(());
        };
        let t = self.ensure_target(schema).await?;
        self.flush_target(t).await?;
        let column_type = |t: &Target, name: &str| {
            t.columns
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, ty)| ty.clone())
        };
        match &change.change {
            SchemaChange::CreateTable | SchemaChange::DropTable => {}
            SchemaChange::AddColumn { column, .. } => {
                if column_type(&self.targets[t], &column.name).is_none() {
                    let ty = table::fluss_type(column.data_type).map_err(failed)?;
                    match self.add_column(t, &column.name, ty).await {
                        Ok(()) => {}
                        Err(Unsupported(why)) if try_evolve => {
                            tracing::warn!(table = %table, column = %column.name, "{why}; its values are not written (try_evolve)");
                        }
                        Err(Unsupported(why)) => return Err(refuse(why)),
                    }
                }
            }
            SchemaChange::DropColumn { name } => {
                if evolve && column_type(&self.targets[t], name).is_some() {
                    return Err(refuse(format!(
                        "the Fjord server cannot drop column `{name}` (AlterTable adds columns only)"
                    )));
                }
            }
            SchemaChange::RenameColumn { from, to } => {
                if column_type(&self.targets[t], to).is_none() {
                    if evolve {
                        return Err(refuse(format!(
                            "the Fjord server cannot rename column `{from}` to `{to}` (AlterTable adds columns only)"
                        )));
                    } else if try_evolve {
                        // The sink column keeps its name and takes the renamed values.
                        let target = &mut self.targets[t];
                        let sink_name = target
                            .alias
                            .iter()
                            .rev()
                            .find(|(src, _)| src.as_str() == &**from)
                            .map(|(_, sink)| sink.clone())
                            .unwrap_or_else(|| from.to_string());
                        target.alias.push((to.to_string(), sink_name));
                        target.plans.clear();
                        self.last = None;
                    } else {
                        let ty = schema
                            .column_index(to)
                            .map(|i| schema.columns()[i].data_type)
                            .ok_or_else(|| {
                                failed(format!(
                                    "{table}: renamed column `{to}` is not in the new schema"
                                ))
                            })
                            .and_then(|dt| table::fluss_type(dt).map_err(failed))?;
                        self.add_column(t, to, ty)
                            .await
                            .map_err(|Unsupported(why)| refuse(why))?;
                    }
                }
            }
            SchemaChange::AlterColumnType { name, data_type } => {
                let wanted = table::fluss_type(*data_type).map_err(failed)?;
                if let Some(existing) = column_type(&self.targets[t], name) {
                    if !table::holds(&existing, &wanted) && !try_evolve {
                        return Err(refuse(format!(
                            "the Fjord server cannot change column `{name}` from {} to {} (AlterTable adds columns only)",
                            existing.type_root(),
                            wanted.type_root()
                        )));
                    }
                }
            }
            SchemaChange::TruncateTable => {
                if self.targets[t].is_log() {
                    if !try_evolve {
                        return Err(refuse(format!(
                            "{table} is a log table, whose events cannot be removed"
                        )));
                    }
                    tracing::warn!(table = %table, "log table not truncated (try_evolve)");
                } else {
                    self.truncate(t).await?;
                }
            }
        }
        Ok(())
    }

    /// Adds a nullable column at the end of a sink table through the
    /// server's AlterTable (the table's writes are flushed first), then
    /// opens the table's writer again on the new schema: the official
    /// clients see the column, and rows written before read it as NULL.
    async fn add_column(&mut self, t: usize, name: &str, ty: FlussType) -> Result<(), Unsupported> {
        let client = self
            .client()
            .await
            .map_err(|e| Unsupported(e.to_string()))?;
        let target = &mut self.targets[t];
        flush_writer(target)
            .await
            .map_err(|e| Unsupported(e.to_string()))?;
        let change = TableChange::AddColumnLast {
            name: name.to_string(),
            data_type: ty.with_nullable(true),
            comment: None,
        };
        client
            .admin()
            .alter_table(&target.path, &[change], false)
            .await
            .map_err(|e| {
                Unsupported(format!(
                    "the Fjord server did not add column `{name}` to {}: {e}",
                    target.id
                ))
            })?;
        let info = client
            .refresh_table_info(&target.path)
            .await
            .map_err(|e| Unsupported(format!("reading the info of {}: {e}", target.id)))?;
        target.writer = match target.writer {
            Writer::Upsert(_) => Writer::Upsert(
                client
                    .upsert_writer(&target.path, self.writer_config.clone())
                    .await
                    .map_err(|e| Unsupported(format!("opening a writer of {}: {e}", target.id)))?,
            ),
            Writer::Append(_) => Writer::Append(
                client
                    .append_writer(&target.path, self.writer_config.clone())
                    .await
                    .map_err(|e| Unsupported(format!("opening a writer of {}: {e}", target.id)))?,
            ),
        };
        target.columns = columns_of(&info);
        target.info = info;
        target.plans.clear();
        self.last = None;
        self.stats.schema_changes += 1;
        tracing::info!(table = %target.id, column = name, "added column to sink table");
        Ok(())
    }

    /// Deletes every row of a primary-key table (after a flush): a KV scan
    /// of each bucket, each row deleted through the table's writer.
    async fn truncate(&mut self, t: usize) -> Result<(), SinkError> {
        let client = self.client().await?;
        let target = &mut self.targets[t];
        let Writer::Upsert(writer) = &mut target.writer else {
            return Ok(());
        };
        let mut deleted = 0u64;
        for bucket in 0..target.info.bucket_count() {
            let mut scanner = client
                .kv_scanner(&target.info, KvBucket::new(bucket), TRUNCATE_SCAN_BYTES)
                .await
                .map_err(|e| client_error(&target.id, "scanning", e))?;
            while let Some(rows) = scanner
                .next_batch()
                .await
                .map_err(|e| client_error(&target.id, "scanning", e))?
            {
                for row in rows.iter() {
                    writer
                        .delete(&row)
                        .await
                        .map_err(|e| client_error(&target.id, "deleting from", e))?;
                    deleted += 1;
                }
            }
        }
        writer
            .flush()
            .await
            .map_err(|e| client_error(&target.id, "flushing", e))?;
        target.stats.deletes += deleted;
        self.stats.schema_changes += 1;
        tracing::info!(table = %target.id, rows = deleted, "truncated sink table");
        Ok(())
    }

    /// Forgets a target (its table was dropped); its counts stay.
    fn retire(&mut self, t: usize) {
        let target = self.targets.remove(t);
        self.retired.push(target.stats.clone());
        self.by_id.clear();
        for (i, target) in self.targets.iter().enumerate() {
            self.by_id.insert(target.id.clone(), i);
        }
        self.last = None;
        drop(target);
    }
}

/// A table's columns (name, type) as the server has them.
fn columns_of(info: &TableInfo) -> Vec<(String, FlussType)> {
    info.descriptor
        .schema()
        .columns()
        .iter()
        .map(|c| (c.name.clone(), c.data_type.clone()))
        .collect()
}

async fn flush_writer(target: &mut Target) -> Result<(), SinkError> {
    write_flush(target)
        .await
        .map_err(|e| client_error(&target.id, "flushing writes to", e))
}

async fn write_flush(target: &mut Target) -> Result<(), ClientError> {
    match &mut target.writer {
        Writer::Upsert(w) => w.flush().await,
        Writer::Append(w) => w.flush().await,
    }
}

/// A table's info, or `None` when it does not exist (its database may not either).
async fn table_if_exists(
    client: &FlussClient,
    path: &TablePath,
) -> Result<Option<TableInfo>, SinkError> {
    let admin = client.admin();
    let databases = admin
        .list_databases()
        .await
        .map_err(|e| client_error(&path.database, "listing databases, looking for", e))?;
    if !databases.iter().any(|d| d == &path.database) {
        return Ok(None);
    }
    let tables = admin
        .list_tables(&path.database)
        .await
        .map_err(|e| client_error(&path.database, "listing the tables of", e))?;
    if !tables.iter().any(|t| t == &path.table) {
        return Ok(None);
    }
    client
        .refresh_table_info(path)
        .await
        .map(Some)
        .map_err(|e| client_error(path, "reading the info of", e))
}

/// Where a log table's buckets end now.
async fn log_mark(client: &FlussClient, info: &TableInfo) -> Result<LogMark, SinkError> {
    let buckets: Vec<i32> = (0..info.bucket_count()).collect();
    let ends = client
        .admin()
        .list_offsets(info, &buckets, OffsetSpec::Latest)
        .await
        .map_err(|e| client_error(&info.path, "reading the end offsets of", e))?;
    Ok(LogMark {
        table_id: info.table_id,
        ends,
    })
}

/// How long the runtime waits before resuming after the sink's server
/// became unavailable (doubling up to [`UNAVAILABLE_BACKOFF_MAX`]).
pub const UNAVAILABLE_BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Longest wait between two resumptions.
pub const UNAVAILABLE_BACKOFF_MAX: Duration = Duration::from_secs(10);
