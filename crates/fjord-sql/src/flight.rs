//! The Arrow Flight SQL front end (arrow-flight's `FlightSqlService` over
//! tonic): queries answer in Arrow, with no conversion on the way.
//!
//! A statement goes: `GetFlightInfo(CommandStatementQuery)` plans it and
//! answers its schema and one ticket; `DoGet(ticket)` runs it and streams
//! its batches. A query is run at `DoGet`, under the engine's limits (a
//! concurrency slot, the timeout, the memory pool). Statements that change
//! something (Fjord's DDL, `INSERT`) are run at `GetFlightInfo`, so they
//! take effect whether or not the client fetches their result; their small
//! result (a count, or SHOW's names) travels inside the ticket.
//! `DoPut(CommandStatementUpdate)` runs any statement and answers the rows
//! it touched. Both end at `sql.query.timeout` too, as a query does: they
//! wait on the Fjord server. Names are `db.table`, as on every endpoint.
//!
//! Authentication: with users configured, a `Handshake` with HTTP basic
//! credentials answers a bearer token (kept in a bounded table, the oldest
//! forgotten first), and every call must carry either the token or the
//! basic credentials; with none configured, any caller is let in — which
//! [`check_auth`] allows only on a loopback address.

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use arrow_array::{Int32Array, StringArray};
use arrow_array::{RecordBatch, UInt64Array};
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightServiceServer;
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetPrimaryKeys, CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables,
    CommandPreparedStatementQuery, CommandPreparedStatementUpdate, CommandStatementQuery,
    CommandStatementUpdate, DoPutPreparedStatementResult, ProstMessageExt, SqlInfo,
    TicketStatementQuery,
};
use arrow_flight::{
    Action, FlightDescriptor, FlightEndpoint, FlightInfo, HandshakeRequest, HandshakeResponse,
    IpcMessage, SchemaAsIpc, Ticket,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use base64::Engine as _;
use bytes::Bytes;
use datafusion::arrow::ipc::writer::IpcWriteOptions;
use datafusion::common::ScalarValue;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SQLOptions;
use futures::{Stream, TryStreamExt};
use prost::Message;
use tokio::net::TcpListener;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

pub use crate::auth::{check_auth, Users};
use crate::catalog::CATALOG_NAME;
use crate::ddl::{self, FjordStatement, Parsed};
use crate::engine::{bind_types, Output, SqlEngine, DEFAULT_DATABASE, OPT_TIMEOUT};
use crate::error::SqlError;
use crate::table::FjordTable;

/// Bearer tokens remembered at once; past this the oldest is forgotten
/// (its client signs in again). Bounds the table a stream of handshakes
/// could otherwise grow without end.
pub const TOKENS_MAX: usize = 4096;

/// Largest result carried inside a ticket (a statement run at
/// `GetFlightInfo`: a count, SHOW's names). Bounds the ticket a client
/// sends back; larger results are refused with a clear error.
pub const TICKET_RESULT_BYTES_MAX: usize = 4 << 20;

/// Base64 of basic credentials, padded or not (Go's Flight client sends
/// them unpadded).
const BASIC_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// Ticket prefix: the statement, to run at `DoGet`.
const TICKET_QUERY: u8 = b'Q';
/// Ticket prefix: the statement's result, already computed (Arrow IPC).
const TICKET_RESULT: u8 = b'R';
/// Prepared statement handle prefix: `u32` length (LE), the statement,
/// then its bound parameters (Arrow IPC of one row) if any. The handle
/// carries everything, so the server keeps no state per prepared statement
/// (closing one is a no-op) and binding answers a new handle.
const HANDLE_PREPARED: u8 = b'P';
/// The table type of the information_schema views; Fjord's are `TABLE`.
const INFORMATION_SCHEMA: &str = "information_schema";

/// Serves Flight SQL on `listener` until the task is dropped; refuses to
/// start without users off loopback.
pub async fn serve(
    engine: Arc<SqlEngine>,
    listener: TcpListener,
    users: Users,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    check_auth("the Flight SQL endpoint", &addr, &users).map_err(std::io::Error::other)?;
    let service = FjordFlightSql::new(engine, users);
    tonic::transport::Server::builder()
        .add_service(FlightServiceServer::new(service))
        .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true)))
        .await
        .map_err(std::io::Error::other)
}

/// The Flight SQL service over the engine.
pub struct FjordFlightSql {
    engine: Arc<SqlEngine>,
    users: Users,
    tokens: Mutex<Tokens>,
    sql_info: SqlInfoData,
}

/// Bearer tokens handed out by `Handshake`, oldest first.
#[derive(Default)]
struct Tokens {
    known: HashSet<String>,
    order: VecDeque<String>,
}

impl Tokens {
    fn insert(&mut self, token: String) {
        if self.order.len() >= TOKENS_MAX {
            if let Some(oldest) = self.order.pop_front() {
                self.known.remove(&oldest);
            }
        }
        self.known.insert(token.clone());
        self.order.push_back(token);
    }
}

/// What planning a statement at `GetFlightInfo` produced.
enum Planned {
    /// A query: its schema; it runs at `DoGet`.
    Query(SchemaRef),
    /// A statement already run: its whole result.
    Done(RecordBatch),
}

impl FjordFlightSql {
    /// The service over `engine`, authenticating against `users`.
    pub fn new(engine: Arc<SqlEngine>, users: Users) -> Self {
        let mut info = SqlInfoDataBuilder::new();
        info.append(SqlInfo::FlightSqlServerName, "Fjord");
        info.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
        // The Arrow format version of Schema.fbs.
        info.append(SqlInfo::FlightSqlServerArrowVersion, "1.3");
        info.append(SqlInfo::FlightSqlServerReadOnly, false);
        let sql_info = info
            .build()
            .unwrap_or_else(|e| unreachable!("static SQL info builds: {e}"));
        Self {
            engine,
            users,
            tokens: Mutex::new(Tokens::default()),
            sql_info,
        }
    }

    /// Whether the caller may run statements: always without users;
    /// otherwise a token from `Handshake` or valid basic credentials.
    #[allow(clippy::result_large_err)]
    fn authorize(&self, metadata: &MetadataMap) -> Result<(), Status> {
        if self.users.passwords.is_empty() {
            return Ok(());
        }
        let header = metadata
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if let Some(token) = header.strip_prefix("Bearer ") {
            let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
            if tokens.known.contains(token.trim()) {
                return Ok(());
            }
            return Err(Status::unauthenticated(
                "Flight SQL: the bearer token is not known (expired or from another server); sign in again with basic auth",
            ));
        }
        if header.starts_with("Basic ") {
            return self.check_basic(header).map(|_| ());
        }
        Err(Status::unauthenticated(
            "Flight SQL: sign in with basic auth (a user and password from sql.users)",
        ))
    }

    /// Checks `Basic base64(user:password)`; answers the user.
    #[allow(clippy::result_large_err)]
    fn check_basic(&self, header: &str) -> Result<String, Status> {
        check_basic_with(&self.users, header)
    }

    /// `work`, a statement run at `GetFlightInfo` or `DoPut` (it waits on
    /// the Fjord server), ended at `sql.query.timeout` as a query's `DoGet`
    /// is. (A client that cancels the call drops it too.)
    async fn bounded<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, SqlError>>,
    ) -> Result<T, SqlError> {
        let timeout = self.engine.options().query_timeout;
        tokio::time::timeout(timeout, work).await.unwrap_or_else(|_| {
            Err(SqlError::Limit(format!(
                "statement timeout: the statement ran longer than {OPT_TIMEOUT} ({} s) and was stopped",
                timeout.as_secs_f64()
            )))
        })
    }

    /// Plans `sql`; runs it now when it changes something (see the module
    /// doc), or answers its schema when it is a query.
    async fn plan(&self, sql: &str) -> Result<Planned, SqlError> {
        self.bounded(self.plan_unbounded(sql)).await
    }

    async fn plan_unbounded(&self, sql: &str) -> Result<Planned, SqlError> {
        self.engine.catalog().refresh().await?;
        match ddl::parse(sql)? {
            Parsed::Fjord(FjordStatement::Use { database }) => Err(SqlError::Unsupported(format!(
                "USE {database}: on Flight SQL name tables as {database}.table"
            ))),
            Parsed::Fjord(statement) => {
                let output = self.engine.run_fjord(statement, DEFAULT_DATABASE).await?;
                Ok(Planned::Done(result_batch(output).await?))
            }
            Parsed::Query => {
                let ctx = self.engine.new_context(DEFAULT_DATABASE);
                let options = SQLOptions::new().with_allow_ddl(false);
                let df = ctx.sql_with_options(sql, options).await?;
                if matches!(df.logical_plan(), LogicalPlan::Dml(_)) {
                    let output = self.engine.session().execute_one(sql).await?;
                    return Ok(Planned::Done(result_batch(output).await?));
                }
                Ok(Planned::Query(Arc::new(df.schema().as_arrow().clone())))
            }
        }
    }

    /// Runs `sql` to its end; answers the rows it touched (or returned).
    async fn update(&self, sql: &str) -> Result<i64, SqlError> {
        self.bounded(self.update_unbounded(sql)).await
    }

    async fn update_unbounded(&self, sql: &str) -> Result<i64, SqlError> {
        if let Parsed::Fjord(FjordStatement::Use { database }) = ddl::parse(sql)? {
            return Err(SqlError::Unsupported(format!(
                "USE {database}: on Flight SQL name tables as {database}.table"
            )));
        }
        let mut session = self.engine.session();
        match session.execute_one(sql).await? {
            Output::Done { rows, .. } => Ok(rows as i64),
            rows @ Output::Rows(_) => {
                let batch = result_batch(rows).await?;
                Ok(inserted_rows(&batch).unwrap_or(batch.num_rows() as u64) as i64)
            }
        }
    }
    /// The FlightInfo of a statement (see the module doc): a query's
    /// schema and a ticket that runs it, or a statement run now and its
    /// result inside the ticket.
    async fn statement_info(
        &self,
        sql: &str,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let (schema, handle) = match self.plan(sql).await.map_err(status)? {
            Planned::Query(schema) => {
                let mut handle = Vec::with_capacity(1 + sql.len());
                handle.push(TICKET_QUERY);
                handle.extend_from_slice(sql.as_bytes());
                (schema, handle)
            }
            Planned::Done(batch) => {
                let mut handle = vec![TICKET_RESULT];
                handle.extend(to_ipc(&batch).map_err(status)?);
                if handle.len() > TICKET_RESULT_BYTES_MAX {
                    return Err(Status::resource_exhausted(format!(
                        "Flight SQL: the statement's result is {} bytes, more than a ticket carries ({TICKET_RESULT_BYTES_MAX}); run it as a query",
                        handle.len()
                    )));
                }
                (batch.schema(), handle)
            }
        };
        let ticket = TicketStatementQuery {
            statement_handle: handle.into(),
        };
        let endpoint =
            FlightEndpoint::new().with_ticket(Ticket::new(ticket.as_any().encode_to_vec()));
        let info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(|e| Status::internal(e.to_string()))?
            .with_endpoint(endpoint)
            .with_descriptor(descriptor);
        Ok(Response::new(info))
    }

    /// Every table of catalog `fjord` (each Fjord database a schema, and
    /// the information_schema views), sorted, for the metadata commands.
    async fn list_tables(&self) -> Result<Vec<Listed>, SqlError> {
        self.engine.catalog().refresh().await?;
        let ctx = self.engine.new_context(DEFAULT_DATABASE);
        let Some(catalog) = ctx.catalog(CATALOG_NAME) else {
            return Ok(Vec::new());
        };
        let mut schemas = catalog.schema_names();
        schemas.sort();
        let mut listed = Vec::new();
        for schema_name in schemas {
            let Some(schema) = catalog.schema(&schema_name) else {
                continue;
            };
            let mut tables = schema.table_names();
            tables.sort();
            for table in tables {
                let Some(provider) = schema.table(&table).await? else {
                    continue;
                };
                let primary_key = provider
                    .downcast_ref::<FjordTable>()
                    .and_then(|t| {
                        t.info()
                            .descriptor
                            .schema()
                            .primary_key()
                            .map(<[_]>::to_vec)
                    })
                    .unwrap_or_default();
                let kind = if schema_name == INFORMATION_SCHEMA {
                    "VIEW"
                } else {
                    "TABLE"
                };
                listed.push(Listed {
                    schema: schema_name.clone(),
                    table,
                    kind,
                    arrow: provider.schema(),
                    primary_key,
                });
            }
        }
        Ok(listed)
    }

    /// Plans a statement to prepare: its result's schema and its
    /// parameters' (`$1`, `$2`... in order; `Null` where the plan does not
    /// tell a type). Fjord's own statements have neither.
    async fn prepare(&self, sql: &str) -> Result<(Schema, Schema), SqlError> {
        self.engine.catalog().refresh().await?;
        if let Parsed::Fjord(_) = ddl::parse(sql)? {
            return Ok((Schema::empty(), Schema::empty()));
        }
        let ctx = self.engine.new_context(DEFAULT_DATABASE);
        let options = SQLOptions::new().with_allow_ddl(false);
        let df = ctx.sql_with_options(sql, options).await?;
        let types = df.logical_plan().get_parameter_types()?;
        let mut params: Vec<(usize, Option<DataType>)> = types
            .into_iter()
            .filter_map(|(name, dt)| Some((name.strip_prefix('$')?.parse().ok()?, dt)))
            .collect();
        params.sort_by_key(|(n, _)| *n);
        let fields: Vec<Field> = params
            .into_iter()
            .map(|(n, dt)| Field::new(format!("${n}"), dt.unwrap_or(DataType::Null), true))
            .collect();
        Ok((df.schema().as_arrow().clone(), Schema::new(fields)))
    }

    /// The FlightInfo of a prepared statement: as a statement's when it
    /// has no parameters bound; otherwise planned with them (a query runs
    /// at `DoGet`, an INSERT runs now).
    async fn prepared_info(
        &self,
        handle: &[u8],
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let (sql, params) = decode_prepared(handle)?;
        if params.is_empty() {
            return self.statement_info(&sql, descriptor).await;
        }
        self.engine
            .catalog()
            .refresh()
            .await
            .map_err(|e| status(e.into()))?;
        if let Parsed::Fjord(_) = ddl::parse(&sql).map_err(status)? {
            return Err(status(SqlError::Unsupported(
                "parameters in Fjord's own statements (DDL, SHOW, USE)".to_owned(),
            )));
        }
        let ctx = self.engine.new_context(DEFAULT_DATABASE);
        let options = SQLOptions::new().with_allow_ddl(false);
        let planned: Result<_, DataFusionError> = async {
            let df = ctx.sql_with_options(&sql, options).await?;
            let bound = bind_types(df.logical_plan(), params.clone())?;
            df.with_param_values(bound)
        }
        .await;
        let df = planned.map_err(|e| status(e.into()))?;
        let (schema, ticket) = if matches!(df.logical_plan(), LogicalPlan::Dml(_)) {
            let mut session = self.engine.session();
            let output = session
                .execute_with_params(&sql, params)
                .await
                .map_err(status)?;
            let batch = result_batch(output).await.map_err(status)?;
            let mut result = vec![TICKET_RESULT];
            result.extend(to_ipc(&batch).map_err(status)?);
            let ticket = TicketStatementQuery {
                statement_handle: result.into(),
            };
            (batch.schema(), ticket.as_any().encode_to_vec())
        } else {
            let command = CommandPreparedStatementQuery {
                prepared_statement_handle: Bytes::copy_from_slice(handle),
            };
            (
                Arc::new(df.schema().as_arrow().clone()),
                command.as_any().encode_to_vec(),
            )
        };
        let info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(|e| Status::internal(e.to_string()))?
            .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new(ticket)))
            .with_descriptor(descriptor);
        Ok(Response::new(info))
    }
}

/// One table the metadata commands list.
struct Listed {
    schema: String,
    table: String,
    kind: &'static str,
    arrow: SchemaRef,
    primary_key: Vec<String>,
}

/// A prepared statement's handle: `sql` and, if bound, its parameters.
fn encode_prepared(sql: &str, params: Option<&RecordBatch>) -> Result<Bytes, SqlError> {
    let mut handle = vec![HANDLE_PREPARED];
    handle.extend_from_slice(&(sql.len() as u32).to_le_bytes());
    handle.extend_from_slice(sql.as_bytes());
    if let Some(params) = params {
        handle.extend(to_ipc(params)?);
    }
    Ok(handle.into())
}

/// The statement and bound parameters (one value each) of a handle.
#[allow(clippy::result_large_err)]
fn decode_prepared(handle: &[u8]) -> Result<(String, Vec<ScalarValue>), Status> {
    let bad = || Status::invalid_argument("Flight SQL: bad prepared statement handle");
    let rest = handle.strip_prefix(&[HANDLE_PREPARED]).ok_or_else(bad)?;
    let len_bytes: [u8; 4] = rest
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(bad)?;
    let len = u32::from_le_bytes(len_bytes) as usize;
    let sql = rest.get(4..4 + len).ok_or_else(bad)?;
    let sql = std::str::from_utf8(sql).map_err(|_| bad())?.to_owned();
    let params_ipc = &rest[4 + len..];
    if params_ipc.is_empty() {
        return Ok((sql, Vec::new()));
    }
    let batches = from_ipc(params_ipc)?;
    let batch = batches.first().ok_or_else(bad)?;
    let params = batch
        .columns()
        .iter()
        .map(|column| ScalarValue::try_from_array(column, 0))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Status::invalid_argument(format!("Flight SQL: bad parameter: {e}")))?;
    Ok((sql, params))
}

/// A schema as the IPC message Flight SQL carries in its results.
#[allow(clippy::result_large_err)]
fn schema_ipc(schema: &Schema) -> Result<Bytes, Status> {
    let IpcMessage(bytes) = SchemaAsIpc::new(schema, &IpcWriteOptions::default())
        .try_into()
        .map_err(|e: datafusion::arrow::error::ArrowError| Status::internal(e.to_string()))?;
    Ok(bytes)
}

/// The FlightInfo of a metadata command: its result's schema and a ticket
/// that is the command itself (answered at `DoGet`).
#[allow(clippy::result_large_err)]
fn command_info(
    schema: &Schema,
    command: impl ProstMessageExt,
    descriptor: FlightDescriptor,
) -> Result<Response<FlightInfo>, Status> {
    let endpoint = FlightEndpoint::new().with_ticket(Ticket::new(command.as_any().encode_to_vec()));
    let info = FlightInfo::new()
        .try_with_schema(schema)
        .map_err(|e| Status::internal(e.to_string()))?
        .with_endpoint(endpoint)
        .with_descriptor(descriptor);
    Ok(Response::new(info))
}

/// One batch as a `DoGet` stream.
fn one_batch(batch: RecordBatch) -> Response<FlightStream> {
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(batch.schema())
        .build(futures::stream::iter([Ok(batch)]))
        .map_err(Status::from);
    Response::new(Box::pin(stream))
}

/// The schema of `CommandGetPrimaryKeys`'s answer (Flight SQL's).
fn primary_keys_schema() -> Schema {
    Schema::new(vec![
        Field::new("catalog_name", DataType::Utf8, true),
        Field::new("db_schema_name", DataType::Utf8, true),
        Field::new("table_name", DataType::Utf8, false),
        Field::new("column_name", DataType::Utf8, false),
        Field::new("key_name", DataType::Utf8, true),
        Field::new("key_sequence", DataType::Int32, false),
    ])
}

/// Checks `Basic base64(user:password)` against `users`; answers the user.
#[allow(clippy::result_large_err)]
fn check_basic_with(users: &Users, header: &str) -> Result<String, Status> {
    let malformed = || Status::invalid_argument("Flight SQL: malformed basic authorization");
    let encoded = header.strip_prefix("Basic ").ok_or_else(malformed)?;
    let decoded = BASIC_BASE64
        .decode(encoded.trim())
        .map_err(|_| malformed())?;
    let text = String::from_utf8(decoded).map_err(|_| malformed())?;
    let (user, password) = text.split_once(':').ok_or_else(malformed)?;
    if users.allows(user, password) {
        Ok(user.to_owned())
    } else {
        Err(Status::unauthenticated(format!(
            "Flight SQL: authentication failed for user \"{user}\" (wrong user or password)"
        )))
    }
}

/// The one batch of a statement's result: its rows, or `count` for a
/// command (as DataFusion answers an INSERT).
async fn result_batch(output: Output) -> Result<RecordBatch, SqlError> {
    match output {
        Output::Done { rows, .. } => {
            let schema = Arc::new(Schema::new(vec![Field::new(
                "count",
                DataType::UInt64,
                false,
            )]));
            let count = Arc::new(UInt64Array::from(vec![rows]));
            Ok(RecordBatch::try_new(schema, vec![count]).map_err(DataFusionError::from)?)
        }
        Output::Rows(stream) => {
            let schema = stream.schema();
            let batches: Vec<RecordBatch> = stream.try_collect().await?;
            Ok(concat(&schema, &batches)?)
        }
    }
}

fn concat(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch, SqlError> {
    datafusion::arrow::compute::concat_batches(schema, batches)
        .map_err(|e| SqlError::Engine(e.into()))
}

/// The rows an INSERT wrote, from its `count` result.
fn inserted_rows(batch: &RecordBatch) -> Option<u64> {
    if batch.num_rows() != 1
        || batch.num_columns() != 1
        || batch.schema().field(0).name() != "count"
    {
        return None;
    }
    batch
        .column(0)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .map(|a| a.value(0))
}

/// Arrow IPC stream bytes of one batch.
fn to_ipc(batch: &RecordBatch) -> Result<Vec<u8>, SqlError> {
    let mut out = Vec::new();
    {
        let mut writer =
            datafusion::arrow::ipc::writer::StreamWriter::try_new(&mut out, &batch.schema())
                .map_err(|e| SqlError::Engine(e.into()))?;
        writer
            .write(batch)
            .map_err(|e| SqlError::Engine(e.into()))?;
        writer.finish().map_err(|e| SqlError::Engine(e.into()))?;
    }
    Ok(out)
}

/// The batches of Arrow IPC stream bytes.
#[allow(clippy::result_large_err)]
fn from_ipc(bytes: &[u8]) -> Result<Vec<RecordBatch>, Status> {
    let reader = datafusion::arrow::ipc::reader::StreamReader::try_new(bytes, None)
        .map_err(|e| Status::invalid_argument(format!("Flight SQL: bad ticket: {e}")))?;
    reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Status::invalid_argument(format!("Flight SQL: bad ticket: {e}")))
}

/// A Fjord error as a gRPC status a client can act on, with Fjord's message.
pub fn status(e: SqlError) -> Status {
    let message = e.to_string();
    match &e {
        SqlError::Unsupported(_) => Status::unimplemented(message),
        _ if e.is_unsupported() => Status::unimplemented(message),
        SqlError::Invalid(_) => Status::invalid_argument(message),
        SqlError::Limit(m) if m.contains("timeout") => Status::deadline_exceeded(message),
        SqlError::Limit(_) => Status::resource_exhausted(message),
        SqlError::Client(_) => Status::unavailable(message),
        SqlError::Engine(inner) => match inner.find_root() {
            DataFusionError::ResourcesExhausted(_) => Status::resource_exhausted(message),
            DataFusionError::External(ext) => match ext.downcast_ref::<SqlError>() {
                Some(SqlError::Limit(m)) if m.contains("timeout") => {
                    Status::deadline_exceeded(message)
                }
                Some(SqlError::Limit(_)) => Status::resource_exhausted(message),
                Some(SqlError::Client(_)) => Status::unavailable(message),
                _ => Status::internal(message),
            },
            DataFusionError::Plan(_)
            | DataFusionError::SQL(..)
            | DataFusionError::SchemaError(..) => Status::invalid_argument(message),
            _ => Status::internal(message),
        },
    }
}

type FlightStream = Pin<Box<dyn Stream<Item = Result<arrow_flight::FlightData, Status>> + Send>>;

#[tonic::async_trait]
impl FlightSqlService for FjordFlightSql {
    type FlightService = FjordFlightSql;

    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let header = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let token = if self.users.passwords.is_empty() {
            // Nothing to check: any caller is in.
            String::new()
        } else {
            self.check_basic(&header)?;
            let token = new_token().map_err(|e| Status::internal(e.to_string()))?;
            let mut tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
            tokens.insert(token.clone());
            token
        };
        let reply = HandshakeResponse {
            protocol_version: 0,
            payload: Bytes::from(token.clone().into_bytes()),
        };
        let mut response: Response<Pin<Box<dyn Stream<Item = _> + Send>>> =
            Response::new(Box::pin(futures::stream::iter([Ok(reply)])));
        if !token.is_empty() {
            let value = MetadataValue::try_from(format!("Bearer {token}"))
                .map_err(|e| Status::internal(e.to_string()))?;
            response.metadata_mut().insert("authorization", value);
        }
        Ok(response)
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.authorize(request.metadata())?;
        self.statement_info(&query.query, request.into_inner())
            .await
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<FlightStream>, Status> {
        self.authorize(request.metadata())?;
        let handle = &ticket.statement_handle;
        match handle.first() {
            Some(&TICKET_QUERY) => {
                let sql = std::str::from_utf8(&handle[1..])
                    .map_err(|_| Status::invalid_argument("Flight SQL: bad ticket"))?;
                let mut session = self.engine.session();
                let Output::Rows(rows) = session.execute_one(sql).await.map_err(status)? else {
                    return Err(Status::invalid_argument(
                        "Flight SQL: the ticket's statement is not a query",
                    ));
                };
                let schema = rows.schema();
                let batches =
                    rows.map_err(|e| FlightError::Tonic(Box::new(status(SqlError::Engine(e)))));
                let stream = FlightDataEncoderBuilder::new()
                    .with_schema(schema)
                    .build(batches)
                    .map_err(Status::from);
                Ok(Response::new(Box::pin(stream)))
            }
            Some(&TICKET_RESULT) => {
                let batches = from_ipc(&handle[1..])?;
                let schema = batches
                    .first()
                    .map(RecordBatch::schema)
                    .ok_or_else(|| Status::invalid_argument("Flight SQL: bad ticket"))?;
                let stream = FlightDataEncoderBuilder::new()
                    .with_schema(schema)
                    .build(futures::stream::iter(batches.into_iter().map(Ok)))
                    .map_err(Status::from);
                Ok(Response::new(Box::pin(stream)))
            }
            _ => Err(Status::invalid_argument("Flight SQL: bad ticket")),
        }
    }

    async fn do_put_statement_update(
        &self,
        command: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        self.authorize(request.metadata())?;
        self.engine
            .catalog()
            .refresh()
            .await
            .map_err(|e| status(e.into()))?;
        self.update(&command.query).await.map_err(status)
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.authorize(request.metadata())?;
        let schema = query.clone().into_builder(&self.sql_info).schema();
        let endpoint =
            FlightEndpoint::new().with_ticket(Ticket::new(query.as_any().encode_to_vec()));
        let info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(|e| Status::internal(e.to_string()))?
            .with_endpoint(endpoint)
            .with_descriptor(request.into_inner());
        Ok(Response::new(info))
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<Ticket>,
    ) -> Result<Response<FlightStream>, Status> {
        self.authorize(request.metadata())?;
        let builder = query.into_builder(&self.sql_info);
        let schema = builder.schema();
        let batch = builder.build();
        let stream = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(futures::stream::once(async { batch }))
            .map_err(Status::from);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.authorize(request.metadata())?;
        let schema = query.into_builder().schema();
        command_info(&schema, query, request.into_inner())
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> Result<Response<FlightStream>, Status> {
        self.authorize(request.metadata())?;
        let mut builder = query.into_builder();
        builder.append(CATALOG_NAME);
        let batch = builder
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(one_batch(batch))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.authorize(request.metadata())?;
        let schema = query.clone().into_builder().schema();
        command_info(&schema, query, request.into_inner())
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> Result<Response<FlightStream>, Status> {
        self.authorize(request.metadata())?;
        self.engine
            .catalog()
            .refresh()
            .await
            .map_err(|e| status(e.into()))?;
        let ctx = self.engine.new_context(DEFAULT_DATABASE);
        let mut schemas = ctx
            .catalog(CATALOG_NAME)
            .map(|c| c.schema_names())
            .unwrap_or_default();
        schemas.sort();
        // The builder applies the catalog and schema-pattern filters.
        let mut builder = query.into_builder();
        for schema in schemas {
            builder.append(CATALOG_NAME, schema);
        }
        let batch = builder
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(one_batch(batch))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.authorize(request.metadata())?;
        let schema = query.clone().into_builder().schema();
        command_info(&schema, query, request.into_inner())
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> Result<Response<FlightStream>, Status> {
        self.authorize(request.metadata())?;
        let listed = self.list_tables().await.map_err(status)?;
        // The builder applies the filters (catalog, schema and table
        // patterns, table types) and adds each schema if asked.
        let mut builder = query.into_builder();
        for t in &listed {
            builder
                .append(CATALOG_NAME, &t.schema, &t.table, t.kind, &t.arrow)
                .map_err(|e| Status::internal(e.to_string()))?;
        }
        let batch = builder
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(one_batch(batch))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.authorize(request.metadata())?;
        let schema = query.into_builder().schema();
        command_info(&schema, query, request.into_inner())
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<Ticket>,
    ) -> Result<Response<FlightStream>, Status> {
        self.authorize(request.metadata())?;
        let mut builder = query.into_builder();
        builder.append("TABLE");
        builder.append("VIEW");
        let batch = builder
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(one_batch(batch))
    }

    async fn get_flight_info_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.authorize(request.metadata())?;
        command_info(&primary_keys_schema(), query, request.into_inner())
    }

    async fn do_get_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<Ticket>,
    ) -> Result<Response<FlightStream>, Status> {
        self.authorize(request.metadata())?;
        let listed = self.list_tables().await.map_err(status)?;
        let (mut schemas, mut tables, mut columns, mut sequence) = (vec![], vec![], vec![], vec![]);
        let wanted = |t: &Listed| {
            t.table == query.table
                && query.catalog.as_deref().is_none_or(|c| c == CATALOG_NAME)
                && query.db_schema.as_deref().is_none_or(|s| s == t.schema)
        };
        for t in listed.iter().filter(|t| wanted(t)) {
            for (i, column) in t.primary_key.iter().enumerate() {
                schemas.push(t.schema.clone());
                tables.push(t.table.clone());
                columns.push(column.clone());
                sequence.push(i as i32 + 1);
            }
        }
        let n = columns.len();
        let batch = RecordBatch::try_new(
            Arc::new(primary_keys_schema()),
            vec![
                Arc::new(StringArray::from(vec![Some(CATALOG_NAME); n])),
                Arc::new(StringArray::from(schemas)),
                Arc::new(StringArray::from(tables)),
                Arc::new(StringArray::from(columns)),
                Arc::new(StringArray::from(vec![None::<&str>; n])),
                Arc::new(Int32Array::from(sequence)),
            ],
        )
        .map_err(|e| Status::internal(e.to_string()))?;
        Ok(one_batch(batch))
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        self.authorize(request.metadata())?;
        let (dataset, parameters) = self.prepare(&query.query).await.map_err(status)?;
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: encode_prepared(&query.query, None).map_err(status)?,
            dataset_schema: schema_ipc(&dataset)?,
            parameter_schema: schema_ipc(&parameters)?,
        })
    }

    async fn do_action_close_prepared_statement(
        &self,
        _query: ActionClosePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<(), Status> {
        // The handle holds everything: nothing to free.
        self.authorize(request.metadata())
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        self.authorize(request.metadata())?;
        let (sql, _) = decode_prepared(&query.prepared_statement_handle)?;
        let stream = request
            .into_inner()
            .map_err(|s| FlightError::Tonic(Box::new(s)));
        let batches: Vec<RecordBatch> = FlightRecordBatchStream::new_from_flight_data(stream)
            .try_collect()
            .await
            .map_err(|e| Status::invalid_argument(format!("Flight SQL: bad parameters: {e}")))?;
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let params = match rows {
            0 => None,
            1 => batches.iter().find(|b| b.num_rows() == 1),
            n => {
                return Err(Status::unimplemented(format!(
                    "Flight SQL: {n} rows of parameters bound to one statement; bind one row (run the statement once per row)"
                )))
            }
        };
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(encode_prepared(&sql, params).map_err(status)?),
        })
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.authorize(request.metadata())?;
        let handle = query.prepared_statement_handle.clone();
        self.prepared_info(&handle, request.into_inner()).await
    }

    async fn do_get_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<FlightStream>, Status> {
        self.authorize(request.metadata())?;
        let (sql, params) = decode_prepared(&query.prepared_statement_handle)?;
        let mut session = self.engine.session();
        let Output::Rows(rows) = session
            .execute_with_params(&sql, params)
            .await
            .map_err(status)?
        else {
            return Err(Status::invalid_argument(
                "Flight SQL: the prepared statement is not a query",
            ));
        };
        let schema = rows.schema();
        let batches = rows.map_err(|e| FlightError::Tonic(Box::new(status(SqlError::Engine(e)))));
        let stream = FlightDataEncoderBuilder::new()
            .with_schema(schema)
            .build(batches)
            .map_err(Status::from);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        self.authorize(request.metadata())?;
        let (sql, params) = decode_prepared(&query.prepared_statement_handle)?;
        let mut session = self.engine.session();
        match session
            .execute_with_params(&sql, params)
            .await
            .map_err(status)?
        {
            Output::Done { rows, .. } => Ok(rows as i64),
            rows @ Output::Rows(_) => {
                let batch = result_batch(rows).await.map_err(status)?;
                Ok(inserted_rows(&batch).unwrap_or(batch.num_rows() as u64) as i64)
            }
        }
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

/// A fresh bearer token: 32 random bytes, hex.
fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_bounded_and_forget_the_oldest() {
        let mut tokens = Tokens::default();
        for i in 0..TOKENS_MAX + 2 {
            tokens.insert(format!("t{i}"));
        }
        assert_eq!(tokens.known.len(), TOKENS_MAX);
        assert!(!tokens.known.contains("t0") && !tokens.known.contains("t1"));
        assert!(tokens.known.contains(&format!("t{}", TOKENS_MAX + 1)));
    }

    #[test]
    fn basic_credentials_are_checked_padded_or_not() {
        let users = Users::parse("alice:s3cret,bob:pw").unwrap();
        let check = |header: &str| check_basic_with(&users, header);
        // "bob:pw" padded, and unpadded as Go's client sends it.
        assert_eq!(check("Basic Ym9iOnB3").unwrap(), "bob");
        assert_eq!(check("Basic YWxpY2U6czNjcmV0").unwrap(), "alice");
        // "alice:wrong", unpadded.
        let e = check("Basic YWxpY2U6d3Jvbmc").unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert!(e
            .message()
            .contains("authentication failed for user \"alice\""));
        assert_eq!(
            check("Basic !!").unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }

    #[test]
    fn results_survive_the_ticket() {
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "count",
                DataType::UInt64,
                false,
            )])),
            vec![Arc::new(UInt64Array::from(vec![7u64]))],
        )
        .unwrap();
        let back = from_ipc(&to_ipc(&batch).unwrap()).unwrap();
        assert_eq!(back, vec![batch.clone()]);
        assert_eq!(inserted_rows(&batch), Some(7));
    }

    #[test]
    fn errors_map_to_statuses_a_client_can_act_on() {
        let code = |e: SqlError| status(e).code();
        assert_eq!(
            code(SqlError::Unsupported("x".into())),
            tonic::Code::Unimplemented
        );
        assert_eq!(
            code(SqlError::Invalid("x".into())),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            code(SqlError::Limit("statement timeout".into())),
            tonic::Code::DeadlineExceeded
        );
        assert_eq!(
            code(SqlError::Limit("busy".into())),
            tonic::Code::ResourceExhausted
        );
        assert_eq!(
            code(SqlError::Engine(DataFusionError::ResourcesExhausted(
                "m".into()
            ))),
            tonic::Code::ResourceExhausted
        );
    }
}
