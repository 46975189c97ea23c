//! The engine: one DataFusion runtime (its memory pool bounds what all
//! running queries hold together), the Fjord catalog, and the limits every
//! front end shares. A [`SqlSession`] is one user's connection: its
//! current database (`USE`) and its statements.
//!
//! A statement goes: names refreshed (ListDatabases/ListTables) → Fjord's
//! own statement ([`crate::ddl`]) run here, or the rest planned and run by
//! DataFusion over the catalog's table providers. A query holds one of
//! `sql.query.concurrent-max` slots from planning until its stream ends or
//! is dropped, and fails once it has run `sql.query.timeout`.
//!
//! What the timeout guarantees: at the deadline the query's stream answers
//! the timeout's error and drops the plan's streams, which aborts the
//! tasks DataFusion spawned for it; a task stops at its next yield to the
//! scheduler. Every operator of a plan yields (the [`YieldingOperators`]
//! rule wraps each one that would not in DataFusion's `CooperativeExec`,
//! which gives up the thread once the task's tokio budget, 128 batches,
//! is spent), so a CPU-bound query — a cross join under an aggregate,
//! whose work is one long loop of ready batches — stops within a few
//! batches of the deadline instead of holding its threads until it ends,
//! and the threads serve other queries meanwhile. What is not
//! interrupted is one batch's own work (one operator's computation on one
//! batch, a sort of what is held in memory): bounded by the batch size
//! and the memory pool. Dropping a query's stream early (a Flight client
//! going away, a Postgres cancel request) stops it the same way.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{DataType as ArrowType, Field, Schema, SchemaRef};
use datafusion::catalog::CatalogProvider;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::ScalarValue;
use datafusion::config::ConfigOptions;
use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{GreedyMemoryPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::SchedulingType;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{EmptyRecordBatchStream, ExecutionPlan, RecordBatchStream};
use datafusion::prelude::{SQLOptions, SessionConfig, SessionContext};
use fjord_client::{FlussClient, TablePath};
use fjord_format::schema::DatabaseDescriptor;
use futures::Stream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::catalog::{FjordCatalog, CATALOG_NAME};
use crate::ddl::{self, FjordStatement, ObjectName, Parsed};
use crate::error::{Result, SqlError};
use crate::table::{ScanStats, TableServices};

/// `sql.query.memory-max` default: the memory all running queries share
/// (DataFusion's memory pool). Protects the process: a query that needs
/// more fails with a query-limit error instead of growing without bound.
pub const QUERY_MEMORY_BYTES_DEFAULT: usize = 1 << 30;
/// `sql.query.timeout` default: how long one query may run.
pub const QUERY_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);
/// `sql.query.concurrent-max` default: queries running at once; one more
/// is refused at once (not queued), so a flood cannot pile up work.
pub const CONCURRENT_QUERIES_DEFAULT: usize = 16;
/// Database a session starts in (Fluss's default database).
pub const DEFAULT_DATABASE: &str = "fluss";

/// Option names, as in the server config and `--set`.
pub const OPT_MEMORY_MAX: &str = "sql.query.memory-max";
/// See [`QUERY_TIMEOUT_DEFAULT`].
pub const OPT_TIMEOUT: &str = "sql.query.timeout";
/// See [`CONCURRENT_QUERIES_DEFAULT`].
pub const OPT_CONCURRENT_MAX: &str = "sql.query.concurrent-max";

/// The engine's limits.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// See [`QUERY_MEMORY_BYTES_DEFAULT`].
    pub memory_bytes_max: usize,
    /// See [`QUERY_TIMEOUT_DEFAULT`].
    pub query_timeout: Duration,
    /// See [`CONCURRENT_QUERIES_DEFAULT`].
    pub concurrent_queries_max: usize,
    /// DataFusion partitions per scan (default: the cores).
    pub target_partitions: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            memory_bytes_max: QUERY_MEMORY_BYTES_DEFAULT,
            query_timeout: QUERY_TIMEOUT_DEFAULT,
            concurrent_queries_max: CONCURRENT_QUERIES_DEFAULT,
            target_partitions: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

impl EngineOptions {
    /// Defaults overridden by `sql.query.*` options (Fluss's size and
    /// duration syntax: `512mb`, `30s`); other keys are ignored, an
    /// unknown `sql.query.*` key or a bad value is an error naming it.
    pub fn from_options<'a>(opts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut o = Self::default();
        let bad = |k: &str, v: &str, what: &str| {
            SqlError::Invalid(format!("{k} = {v:?}: expected {what}"))
        };
        for (key, value) in opts {
            match key {
                OPT_MEMORY_MAX => {
                    o.memory_bytes_max =
                        parse_size(value).ok_or_else(|| bad(key, value, "a size such as 512mb"))?
                }
                OPT_TIMEOUT => {
                    o.query_timeout = parse_duration(value)
                        .ok_or_else(|| bad(key, value, "a duration such as 30s or 5min"))?
                }
                OPT_CONCURRENT_MAX => {
                    o.concurrent_queries_max = value
                        .trim()
                        .parse()
                        .ok()
                        .filter(|&n: &usize| n > 0)
                        .ok_or_else(|| bad(key, value, "a positive number"))?
                }
                _ if key.starts_with("sql.query.") => {
                    return Err(SqlError::Invalid(format!(
                        "unknown option {key} (known: {OPT_MEMORY_MAX}, {OPT_TIMEOUT}, {OPT_CONCURRENT_MAX})"
                    )))
                }
                _ => {}
            }
        }
        Ok(o)
    }
}

fn parse_size(text: &str) -> Option<usize> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: usize = n.parse().ok()?;
    let mult = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult).filter(|&b| b > 0)
}

fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().ok()?;
    let ms = match unit.trim() {
        "" | "ms" => 1,
        "s" | "sec" | "secs" | "seconds" => 1_000,
        "m" | "min" | "mins" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        _ => return None,
    };
    Some(Duration::from_millis(n.checked_mul(ms)?)).filter(|d| !d.is_zero())
}

/// The SQL engine over one Fjord cluster; shared by every session.
pub struct SqlEngine {
    runtime: Arc<RuntimeEnv>,
    catalog: Arc<FjordCatalog>,
    services: Arc<TableServices>,
    slots: Arc<Semaphore>,
    options: EngineOptions,
}

impl std::fmt::Debug for SqlEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlEngine")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// What one statement answered.
pub enum Output {
    /// Rows, streamed.
    Rows(SendableRecordBatchStream),
    /// A command's tag (`CREATE TABLE`, `INSERT`) and the rows it touched.
    Done {
        /// The command, as Postgres names it.
        tag: &'static str,
        /// Rows inserted (0 for DDL).
        rows: u64,
    },
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Rows(s) => write!(f, "Rows({:?})", s.schema()),
            Output::Done { tag, rows } => write!(f, "Done({tag}, {rows})"),
        }
    }
}

impl Output {
    /// Every row, collected (for tests and small results).
    pub async fn collect(self) -> Result<Vec<RecordBatch>> {
        use futures::TryStreamExt;
        match self {
            Output::Rows(s) => Ok(s.try_collect().await?),
            Output::Done { .. } => Ok(Vec::new()),
        }
    }
}

impl SqlEngine {
    /// An engine over `client` with `options`.
    pub async fn new(client: FlussClient, options: EngineOptions) -> Result<Arc<Self>> {
        let pool = TrackConsumersPool::new(
            GreedyMemoryPool::new(options.memory_bytes_max),
            std::num::NonZeroUsize::new(3).expect("3 is not zero"),
        );
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(pool))
            .build_arc()?;
        let services = Arc::new(TableServices::new(client));
        let catalog = Arc::new(FjordCatalog::new(Arc::clone(&services)));
        catalog.refresh().await?;
        Ok(Arc::new(Self {
            runtime,
            catalog,
            services,
            slots: Arc::new(Semaphore::new(options.concurrent_queries_max)),
            options,
        }))
    }

    /// The engine's limits.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The client the engine reads and writes with.
    pub fn client(&self) -> &FlussClient {
        &self.services.client
    }

    /// Counters of the reads queries made.
    pub fn scan_stats(&self) -> &ScanStats {
        &self.services.stats
    }

    /// The catalog (for front ends that plan themselves).
    pub fn catalog(&self) -> &Arc<FjordCatalog> {
        &self.catalog
    }

    /// Bytes the running queries hold in the memory pool (0 once every
    /// query's streams, and the tasks running them, have ended).
    pub fn memory_reserved(&self) -> usize {
        self.runtime.memory_pool.reserved()
    }

    /// A DataFusion context over the Fjord catalog with the engine's
    /// runtime, starting in `database`; its plans yield at every operator
    /// ([`YieldingOperators`]), so a query stops promptly when dropped.
    pub fn new_context(&self, database: &str) -> SessionContext {
        let config = SessionConfig::new()
            .with_default_catalog_and_schema(CATALOG_NAME, database)
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(true)
            .with_target_partitions(self.options.target_partitions);
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(Arc::clone(&self.runtime))
            .with_default_features()
            .with_physical_optimizer_rule(Arc::new(YieldingOperators))
            .build();
        let ctx = SessionContext::new_with_state(state);
        ctx.register_catalog(
            CATALOG_NAME,
            Arc::clone(&self.catalog) as Arc<dyn CatalogProvider>,
        );
        ctx
    }

    /// A new session, in [`DEFAULT_DATABASE`].
    pub fn session(self: &Arc<Self>) -> SqlSession {
        SqlSession {
            ctx: self.new_context(DEFAULT_DATABASE),
            engine: Arc::clone(self),
            database: DEFAULT_DATABASE.to_owned(),
        }
    }

    /// One of the concurrent-query slots, or the limit's error.
    pub fn query_slot(&self) -> Result<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).try_acquire_owned().map_err(|_| {
            SqlError::Limit(format!(
                "{} queries are running, the most {OPT_CONCURRENT_MAX} allows; try again when one ends",
                self.options.concurrent_queries_max
            ))
        })
    }

    /// `stream` bounded by the query timeout, holding `slot` until it ends;
    /// at the deadline it answers the timeout's error and drops `stream`
    /// (which stops the query's work: see the module doc).
    pub fn bounded(
        &self,
        stream: SendableRecordBatchStream,
        slot: OwnedSemaphorePermit,
    ) -> SendableRecordBatchStream {
        Box::pin(Bounded {
            inner: stream,
            deadline: Box::pin(tokio::time::sleep(self.options.query_timeout)),
            timeout: self.options.query_timeout,
            slot: Some(slot),
        })
    }

    /// Runs one of Fjord's own statements for a session in `database`;
    /// `USE` is the caller's to apply.
    pub async fn run_fjord(&self, statement: FjordStatement, database: &str) -> Result<Output> {
        let admin = self.client().coordinator().await?;
        let admin = fjord_client::Admin::new(admin);
        let path = |name: &ObjectName| {
            TablePath::new(name.database.as_deref().unwrap_or(database), &name.name)
        };
        let output = match statement {
            FjordStatement::CreateDatabase {
                name,
                if_not_exists,
                comment,
            } => {
                let descriptor = DatabaseDescriptor {
                    comment,
                    custom_properties: Default::default(),
                };
                admin
                    .create_database(&name, &descriptor, if_not_exists)
                    .await?;
                Output::Done {
                    tag: "CREATE DATABASE",
                    rows: 0,
                }
            }
            FjordStatement::DropDatabase {
                name,
                if_exists,
                cascade,
            } => {
                admin.drop_database(&name, if_exists, cascade).await?;
                Output::Done {
                    tag: "DROP DATABASE",
                    rows: 0,
                }
            }
            FjordStatement::CreateTable {
                name,
                if_not_exists,
                descriptor,
            } => {
                admin
                    .create_table(&path(&name), &descriptor, if_not_exists)
                    .await?;
                Output::Done {
                    tag: "CREATE TABLE",
                    rows: 0,
                }
            }
            FjordStatement::DropTable { name, if_exists } => {
                admin.drop_table(&path(&name), if_exists).await?;
                Output::Done {
                    tag: "DROP TABLE",
                    rows: 0,
                }
            }
            FjordStatement::ShowDatabases => {
                let names = admin.list_databases().await?;
                one_column("database name", names)
            }
            FjordStatement::ShowTables { database: db } => {
                let names = admin.list_tables(db.as_deref().unwrap_or(database)).await?;
                one_column("table name", names)
            }
            FjordStatement::ShowCreateTable { name } => {
                let p = path(&name);
                let info = self.client().refresh_table_info(&p).await?;
                let sql = ddl::show_create_table(&p.database, &p.table, &info.descriptor);
                one_column("create table", vec![sql])
            }
            FjordStatement::ShowPartitions { name } => {
                let partitions = admin.list_partitions(&path(&name), None).await?;
                let schema = Arc::new(Schema::new(vec![
                    Field::new("partition name", ArrowType::Utf8, false),
                    Field::new("partition id", ArrowType::UInt64, false),
                ]));
                let names: StringArray = partitions.iter().map(|p| Some(p.name.as_str())).collect();
                let ids: UInt64Array = partitions
                    .iter()
                    .map(|p| Some(p.partition_id as u64))
                    .collect();
                rows_output(schema, vec![Arc::new(names), Arc::new(ids)])?
            }
            FjordStatement::Use { database: db } => {
                return Err(SqlError::Invalid(format!(
                    "USE {db} must be run by a session"
                )));
            }
        };
        if matches!(output, Output::Done { .. }) {
            self.catalog.refresh().await?;
        }
        Ok(output)
    }
}

fn one_column(name: &str, values: Vec<String>) -> Output {
    let schema = Arc::new(Schema::new(vec![Field::new(name, ArrowType::Utf8, false)]));
    let column: ArrayRef = Arc::new(StringArray::from(values));
    rows_output(schema, vec![column]).unwrap_or_else(|e| unreachable!("one string column: {e}"))
}

fn rows_output(schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<Output> {
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(DataFusionError::from)?;
    let stream = futures::stream::iter([Ok(batch)]);
    Ok(Output::Rows(Box::pin(RecordBatchStreamAdapter::new(
        schema, stream,
    ))))
}

/// One user's session: a DataFusion context in the session's database.
pub struct SqlSession {
    engine: Arc<SqlEngine>,
    ctx: SessionContext,
    database: String,
}

impl SqlSession {
    /// The engine.
    pub fn engine(&self) -> &Arc<SqlEngine> {
        &self.engine
    }

    /// The session's current database.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// Runs every statement of `sql` (`;`-separated) in order; the rows of
    /// a query stream from the returned outputs, so run them in order:
    /// each statement is planned when it is reached.
    pub async fn execute(&mut self, sql: &str) -> Result<Output> {
        let statements = split_statements(sql);
        let Some((last, first)) = statements.split_last() else {
            return Err(SqlError::Invalid("no statement".to_owned()));
        };
        for statement in first {
            // Earlier statements run to their end.
            self.execute_one(statement).await?.collect().await?;
        }
        self.execute_one(last).await
    }

    /// Runs one statement.
    pub async fn execute_one(&mut self, sql: &str) -> Result<Output> {
        self.engine.catalog.refresh().await?;
        match ddl::parse(sql)? {
            Parsed::Fjord(FjordStatement::Use { database }) => {
                if !self.engine.catalog.has_database(&database) {
                    return Err(SqlError::Invalid(format!(
                        "database {database} does not exist"
                    )));
                }
                self.ctx = self.engine.new_context(&database);
                self.database = database;
                Ok(Output::Done {
                    tag: "USE",
                    rows: 0,
                })
            }
            Parsed::Fjord(statement) => self.engine.run_fjord(statement, &self.database).await,
            Parsed::Query => self.execute_query(sql, Vec::new()).await,
        }
    }

    /// Runs one statement with `params` bound to its placeholders (`$1`
    /// is the first), each cast to the type its placeholder takes where
    /// the plan knows it (a client binds an int64 to an INT column).
    /// Fjord's own statements take no parameters.
    pub async fn execute_with_params(
        &mut self,
        sql: &str,
        params: Vec<ScalarValue>,
    ) -> Result<Output> {
        if params.is_empty() {
            return self.execute_one(sql).await;
        }
        self.engine.catalog.refresh().await?;
        match ddl::parse(sql)? {
            Parsed::Fjord(_) => Err(SqlError::Unsupported(
                "parameters in Fjord's own statements (DDL, SHOW, USE)".to_owned(),
            )),
            Parsed::Query => self.execute_query(sql, params).await,
        }
    }

    /// Plans and starts a query (DataFusion's statements: SELECT, INSERT)
    /// under the engine's limits, `params` bound when there are any.
    async fn execute_query(&mut self, sql: &str, params: Vec<ScalarValue>) -> Result<Output> {
        let slot = self.engine.query_slot()?;
        let options = SQLOptions::new().with_allow_ddl(false);
        let timeout = self.engine.options.query_timeout;
        let planned = tokio::time::timeout(timeout, async {
            let mut df = self.ctx.sql_with_options(sql, options).await?;
            if !params.is_empty() {
                let bound = bind_types(df.logical_plan(), params)?;
                df = df.with_param_values(bound)?;
            }
            df.execute_stream().await
        })
        .await
        .map_err(|_| timeout_error(timeout))?;
        let stream = planned.map_err(refuse_ddl)?;
        Ok(Output::Rows(self.engine.bounded(stream, slot)))
    }
}

/// `params` cast to the types `plan`'s placeholders take (`$1`, `$2`...);
/// a placeholder of unknown type takes its value as it is.
pub(crate) fn bind_types(
    plan: &datafusion::logical_expr::LogicalPlan,
    params: Vec<ScalarValue>,
) -> datafusion::error::Result<Vec<ScalarValue>> {
    let types = plan.get_parameter_types()?;
    params
        .into_iter()
        .enumerate()
        .map(|(i, value)| match types.get(&format!("${}", i + 1)) {
            Some(Some(dt)) if value.data_type() != *dt => value.cast_to(dt),
            _ => Ok(value),
        })
        .collect()
}

/// DataFusion's refusal of DDL it would run in memory, in Fjord's words.
fn refuse_ddl(e: DataFusionError) -> SqlError {
    match e.find_root() {
        DataFusionError::Plan(m) if m.contains("DDL not supported") => SqlError::Unsupported(
            "this DDL statement is not supported by Fjord SQL (supported: CREATE/DROP DATABASE, CREATE/DROP TABLE, SHOW ...)"
                .to_owned(),
        ),
        _ => SqlError::from(e),
    }
}

fn timeout_error(timeout: Duration) -> SqlError {
    SqlError::Limit(format!(
        "the query ran longer than {OPT_TIMEOUT} ({} s) and was stopped",
        timeout.as_secs_f64()
    ))
}

/// Physical optimizer rule (run after DataFusion's own): every operator
/// whose stream would not yield to the scheduler is wrapped in
/// `CooperativeExec`, which spends one unit of the task's tokio budget per
/// batch and yields when it is spent.
///
/// DataFusion's own `EnsureCooperative` wraps only the leaves (scans), so
/// an operator that makes many batches from one input batch — a cross
/// join or nested loop join emits one per build row, an unnest many —
/// feeds the aggregate above it ready batches for as long as it runs: the
/// task never yields, so neither a deadline checked between polls nor the
/// abort of a dropped query's task can take effect. Wrapped at every
/// operator, such a loop yields every 128 batches at most. The cost is a
/// budget check per batch per operator, and `CooperativeExec` lines in
/// `EXPLAIN`.
#[derive(Debug)]
pub struct YieldingOperators;

impl PhysicalOptimizerRule for YieldingOperators {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            if node.properties().scheduling_type == SchedulingType::Cooperative {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(
                Arc::new(CooperativeExec::new(node)) as Arc<dyn ExecutionPlan>
            ))
        })
        .data()
    }

    fn name(&self) -> &str {
        "YieldingOperators"
    }

    fn schema_check(&self) -> bool {
        // A wrapper passes its input's batches through unchanged.
        true
    }
}

/// A query's stream under its deadline, holding its concurrency slot.
struct Bounded {
    inner: SendableRecordBatchStream,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
    slot: Option<OwnedSemaphorePermit>,
}

impl Stream for Bounded {
    type Item = datafusion::error::Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.slot.is_none() {
            return Poll::Ready(None);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            // Dropped now, not when the consumer drops this stream: the
            // plan's tasks are aborted and the query's memory given back.
            let schema = self.inner.schema();
            self.inner = Box::pin(EmptyRecordBatchStream::new(schema));
            self.slot = None;
            return Poll::Ready(Some(Err(timeout_error(self.timeout).into_datafusion())));
        }
        let next = self.inner.as_mut().poll_next(cx);
        if let Poll::Ready(None) = next {
            self.slot = None;
        }
        next
    }
}

impl RecordBatchStream for Bounded {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }
}

use std::future::Future;

/// Splits a script into statements at `;` outside quotes and comments;
/// empty statements are dropped.
pub fn split_statements(sql: &str) -> Vec<&str> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < bytes.len() {
                    if bytes[i] == q {
                        // A doubled quote is an escaped one.
                        if bytes.get(i + 1) == Some(&q) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
            }
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b';' => {
                out.push(&sql[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&sql[start.min(sql.len())..]);
    out.into_iter()
        .filter(|s| {
            // Only whitespace and comments: nothing to run.
            let mut t = *s;
            loop {
                t = t.trim_start();
                if let Some(rest) = t.strip_prefix("--") {
                    t = rest.split_once('\n').map_or("", |(_, r)| r);
                } else if let Some(rest) = t.strip_prefix("/*") {
                    t = rest.split_once("*/").map_or("", |(_, r)| r);
                } else {
                    break;
                }
            }
            !t.is_empty()
        })
        .map(str::trim)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_split_at_semicolons_outside_quotes_and_comments() {
        let script = "SELECT 'a;b'; -- c;d\nSELECT \"x;\" /* ; */ FROM t;\n\n; -- only\n";
        assert_eq!(
            split_statements(script),
            vec!["SELECT 'a;b'", "-- c;d\nSELECT \"x;\" /* ; */ FROM t"]
        );
        assert_eq!(split_statements("SELECT 1"), vec!["SELECT 1"]);
        assert!(split_statements(" ; -- x").is_empty());
    }

    #[test]
    fn limits_parse_from_named_options() {
        let o = EngineOptions::from_options([
            (OPT_MEMORY_MAX, "64mb"),
            (OPT_TIMEOUT, "30s"),
            (OPT_CONCURRENT_MAX, "3"),
            ("other", "x"),
        ])
        .unwrap();
        assert_eq!(o.memory_bytes_max, 64 << 20);
        assert_eq!(o.query_timeout, Duration::from_secs(30));
        assert_eq!(o.concurrent_queries_max, 3);
        for (k, v) in [
            (OPT_MEMORY_MAX, "lots"),
            (OPT_TIMEOUT, "0s"),
            (OPT_CONCURRENT_MAX, "0"),
            ("sql.query.x", "1"),
        ] {
            let e = EngineOptions::from_options([(k, v)])
                .unwrap_err()
                .to_string();
            assert!(e.contains(k), "{k}: {e}");
        }
    }
}
