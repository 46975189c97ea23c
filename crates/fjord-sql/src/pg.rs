//! The Postgres front end: the wire protocol (pgwire) with
//! datafusion-postgres's query handlers and `pg_catalog`, over the engine.
//!
//! The database is [`CATALOG_NAME`] (`fjord`) and every Fjord database is
//! a schema, so `SELECT * FROM shop.orders` reads table `orders` of
//! database `shop`; psql's `\dt shop.*` and `\d shop.orders` read the
//! `pg_catalog` views. Fjord's own statements (Flink DDL, SHOW) are taken
//! out before datafusion-postgres parses a statement, in the simple and
//! the extended protocol alike; every other statement is its.
//!
//! Authentication: with users configured, SCRAM-SHA-256 against them (the
//! salted passwords are computed once, at start); with none, any user is
//! let in without a password — which [`check_auth`] allows only on a
//! loopback address.
//!
//! A query ends at `sql.query.timeout` (SQLSTATE 57014, naming the
//! option) or at the client's cancel request (psql's Ctrl-C, a driver's
//! cancel: SQLSTATE 57014, "canceling statement due to user request"),
//! while it is planned or while its rows are sent; either drops the
//! query, which stops its work (see [`crate::engine`]). Fjord's own
//! statements and the catalog refresh before each statement run under
//! the same two, so a server that stops answering holds a connection only
//! until one of them (a DDL request already sent may still take effect on
//! the server, as after a client's own request timeout). A client that
//! disconnects mid-query stops it too, as a cancel request would: pgwire
//! reads the next message only after the current one is answered, so each
//! connection's socket is also looked at every [`PEER_CHECK_INTERVAL`]
//! for the peer's end of stream (Postgres's
//! `client_connection_check_interval`).

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use datafusion::common::SchemaError;
use datafusion::error::DataFusionError;
use datafusion::prelude::SessionContext;
use datafusion_postgres::arrow_pg::datatypes::arrow_schema_to_pg_fields;
use datafusion_postgres::arrow_pg::datatypes::df::encode_dataframe;
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::context::EmptyContextProvider;
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::setup_pg_catalog;
use datafusion_postgres::pgwire;
use datafusion_postgres::{DfSessionService, Parser as DfParser};
use futures::channel::oneshot;
use futures::future::{FutureExt, Shared};
use futures::{Sink, Stream, StreamExt};
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramAuth};
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::cancel::CancelHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{FieldInfo, QueryResponse, Response, SendableRowStream, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::PgWireConnectionState;
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::data::DataRow;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use tokio::net::TcpListener;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

pub use crate::auth::{check_auth, Users};
use crate::catalog::CATALOG_NAME;
use crate::ddl::{self, FjordStatement, Parsed};
use crate::engine::{split_statements, Output, SqlEngine, DEFAULT_DATABASE, OPT_TIMEOUT};
use crate::error::SqlError;

/// SCRAM iterations (Postgres's default).
const SCRAM_ITERATIONS: usize = 4096;

/// How often a connection's socket is looked at for a client that went
/// away (its running query is then stopped).
pub const PEER_CHECK_INTERVAL: Duration = Duration::from_millis(200);

/// Serves the Postgres protocol on `listener` until the task is dropped.
pub async fn serve(
    engine: Arc<SqlEngine>,
    listener: TcpListener,
    users: Users,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    check_auth("the Postgres endpoint", &addr, &users).map_err(std::io::Error::other)?;
    let handlers = Arc::new(FjordPgHandlers::new(engine, users).map_err(std::io::Error::other)?);
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "Postgres endpoint: accept failed");
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        // A second handle on the socket, to see the client go away while
        // pgwire is busy answering (it reads nothing then).
        let (socket, watched) = match socket.into_std().and_then(|s| {
            let watched = s.try_clone()?;
            Ok((tokio::net::TcpStream::from_std(s)?, watched))
        }) {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "Postgres endpoint: cannot take the connection");
                continue;
            }
        };
        // SASL state lives in the startup handler: one per connection.
        let handlers = handlers.for_connection();
        let cancel = Arc::clone(&handlers.cancel);
        tokio::spawn(async move {
            let connection = pgwire::tokio::process_socket(socket, None, handlers);
            tokio::pin!(connection);
            let ended = tokio::select! {
                ended = &mut connection => ended,
                () = peer_gone(&watched) => {
                    tracing::debug!(%peer, "Postgres client went away; stopping its query");
                    cancel.hang_up();
                    connection.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "Postgres connection ended with an error");
            }
        });
    }
}

/// Ready once the client has closed its end of `socket` (or it failed):
/// looked at every [`PEER_CHECK_INTERVAL`] without taking any bytes, so
/// pgwire still reads every message the client sent before it closed.
async fn peer_gone(socket: &std::net::TcpStream) {
    let mut byte = [0u8; 1];
    loop {
        tokio::time::sleep(PEER_CHECK_INTERVAL).await;
        // Non-blocking, as tokio set the socket.
        match socket.peek(&mut byte) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// What every connection's handlers share: the query service, the users'
/// SCRAM secrets and the connections a cancel request can name.
pub struct FjordPgHandlers {
    service: Arc<FjordPgService>,
    users: Option<Arc<ScramUsers>>,
    connections: Arc<Connections>,
}

impl FjordPgHandlers {
    /// Handlers over `engine`, authenticating against `users`.
    pub fn new(engine: Arc<SqlEngine>, users: Users) -> Result<Self, SqlError> {
        let ctx = engine.new_context(DEFAULT_DATABASE);
        setup_pg_catalog(&ctx, CATALOG_NAME, EmptyContextProvider)
            .map_err(|e| SqlError::Engine(*e))?;
        let ctx = Arc::new(ctx);
        let inner = Arc::new(DfSessionService::new(Arc::clone(&ctx)));
        let parser = Arc::new(FjordParser {
            engine: Arc::clone(&engine),
            inner: inner.query_parser(),
        });
        let service = Arc::new(FjordPgService {
            engine,
            ctx,
            inner,
            parser,
        });
        let users = (!users.passwords.is_empty()).then(|| Arc::new(ScramUsers::new(&users)));
        Ok(Self {
            service,
            users,
            connections: Arc::new(Connections::default()),
        })
    }

    /// The handlers of one connection (its own SASL state); its startup
    /// registers it for cancel requests (the key it answers in
    /// BackendKeyData).
    pub fn for_connection(&self) -> Arc<ConnectionHandlers> {
        let auth = match &self.users {
            None => Auth::Trust(TrustStartup),
            Some(users) => {
                let mut scram = ScramAuth::new(Arc::clone(users) as Arc<dyn AuthSource>);
                scram.set_iterations(SCRAM_ITERATIONS);
                let params = Arc::new(DefaultServerParameterProvider::default());
                Auth::Scram(SASLAuthStartupHandler::new(params).with_scram(scram))
            }
        };
        let cancel = Arc::new(QueryCancel::default());
        Arc::new(ConnectionHandlers {
            service: Arc::clone(&self.service),
            startup: Arc::new(Startup {
                auth,
                connections: Arc::clone(&self.connections),
                cancel: Arc::clone(&cancel),
            }),
            connections: Arc::clone(&self.connections),
            cancel,
        })
    }
}

/// One connection's handlers.
pub struct ConnectionHandlers {
    service: Arc<FjordPgService>,
    startup: Arc<Startup>,
    connections: Arc<Connections>,
    /// The connection's cancel slot (cancel requests and a client that
    /// goes away fire it).
    cancel: Arc<QueryCancel>,
}

impl PgWireServerHandlers for ConnectionHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::clone(&self.service)
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::clone(&self.service)
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::clone(&self.startup)
    }

    /// A cancel request (on a connection of its own) fires the cancel
    /// signal of the connection it names.
    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        Arc::clone(&self.connections)
    }
}

/// No authentication (loopback endpoints without users).
pub struct TrustStartup;

#[async_trait]
impl NoopStartupHandler for TrustStartup {}

/// How a connection starts: trusted, or SCRAM; once started, it is
/// registered for cancel requests under the key it was sent
/// (BackendKeyData).
pub struct Startup {
    auth: Auth,
    connections: Arc<Connections>,
    cancel: Arc<QueryCancel>,
}

/// How a connection authenticates.
enum Auth {
    Trust(TrustStartup),
    Scram(SASLAuthStartupHandler<DefaultServerParameterProvider>),
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match &self.auth {
            Auth::Trust(h) => h.on_startup(client, message).await?,
            Auth::Scram(h) => h.on_startup(client, message).await?,
        }
        let started = matches!(client.state(), PgWireConnectionState::ReadyForQuery);
        if started && client.session_extensions().get::<Registered>().is_none() {
            let (pid, key) = client.pid_and_secret_key();
            let key = (pid, key.to_bytes().to_vec());
            self.connections
                .register(key.clone(), Arc::clone(&self.cancel));
            client.session_extensions().insert(Arc::clone(&self.cancel));
            client.session_extensions().insert(Registered {
                key,
                connections: Arc::clone(&self.connections),
            });
        }
        Ok(())
    }
}

/// The started connections a cancel request can name, by their
/// (process id, secret key). pgwire's own `ConnectionManager` is not used:
/// its cancel signal covers a statement only until its response is
/// returned, not while its rows are sent.
#[derive(Default)]
pub struct Connections {
    by_key: std::sync::Mutex<HashMap<CancelKey, Arc<QueryCancel>>>,
}

/// A connection's process id and secret key (its bytes).
type CancelKey = (i32, Vec<u8>);

impl Connections {
    fn register(&self, key: CancelKey, cancel: Arc<QueryCancel>) {
        self.by_key
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, cancel);
    }
}

#[async_trait]
impl CancelHandler for Connections {
    async fn on_cancel_request(&self, request: CancelRequest) {
        let key = (request.pid, request.secret_key.to_bytes().to_vec());
        let cancel = self
            .by_key
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        if let Some(cancel) = cancel {
            cancel.fire();
        }
    }
}

/// A connection's registration (in its session extensions); dropped with
/// the connection, it unregisters it.
struct Registered {
    key: CancelKey,
    connections: Arc<Connections>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.connections
            .by_key
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

/// A connection's cancel slot: the signal of its current query message.
#[derive(Default)]
struct QueryCancel {
    current: std::sync::Mutex<Option<oneshot::Sender<()>>>,
    /// The client went away: every query message from now on is stopped.
    hung_up: std::sync::atomic::AtomicBool,
}

impl QueryCancel {
    /// A new signal for the query message starting now; the previous
    /// message's can no longer fire, so a late cancel request cannot stop
    /// the next query. Fired already once the client has gone.
    fn start(&self) -> CancelSignal {
        let (fire, fired) = oneshot::channel();
        // The flag is read under the lock `hang_up`'s fire takes after
        // setting it, so a hang-up cannot fall between the two.
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if self.hung_up.load(std::sync::atomic::Ordering::Acquire) {
            let _ = fire.send(());
        } else {
            *current = Some(fire);
        }
        CancelSignal(Some(fired.shared()))
    }

    /// The client went away: stops the running query and every later one
    /// (messages it sent before closing, which pgwire may still read).
    fn hang_up(&self) {
        self.hung_up
            .store(true, std::sync::atomic::Ordering::Release);
        self.fire();
    }

    fn fire(&self) {
        if let Some(fire) = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = fire.send(());
        }
    }
}

/// The configured users' SCRAM secrets.
#[derive(Debug)]
struct ScramUsers {
    salted: HashMap<String, (Vec<u8>, Vec<u8>)>,
}

impl ScramUsers {
    fn new(users: &Users) -> Self {
        let salted = users
            .passwords
            .iter()
            .map(|(user, password)| {
                // A per-user salt; stable for the process's life.
                let salt: Vec<u8> = format!("fjord:{user}").into_bytes();
                let secret = gen_salted_password(password, &salt, SCRAM_ITERATIONS);
                (user.clone(), (salt, secret))
            })
            .collect();
        Self { salted }
    }
}

#[async_trait]
impl AuthSource for ScramUsers {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let user = login.user().unwrap_or_default();
        match self.salted.get(user) {
            Some((salt, secret)) => Ok(Password::new(Some(salt.clone()), secret.clone())),
            None => Err(user_error(
                "FATAL",
                "28P01",
                format!("password authentication failed for user \"{user}\""),
            )),
        }
    }
}

fn user_error(severity: &str, code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        severity.to_owned(),
        code.to_owned(),
        message,
    )))
}

/// A Fjord error as Postgres's, with the SQLSTATE a driver can act on:
/// 0A000 unsupported, 42000 a bad statement, 57014 the timeout, 53200 the
/// memory limit, 53000 the concurrency limit, 58000 the cluster.
fn pg_error(e: SqlError) -> PgWireError {
    fn limit_code(message: &str) -> &'static str {
        if message.contains("timeout") {
            "57014"
        } else {
            "53000"
        }
    }
    let code = match &e {
        SqlError::Unsupported(_) => "0A000",
        SqlError::Invalid(_) => "42000",
        SqlError::Limit(m) => limit_code(m),
        SqlError::Client(_) => "58000",
        SqlError::Engine(_) if e.is_unsupported() => "0A000",
        SqlError::Engine(inner) => match inner.find_root() {
            DataFusionError::ResourcesExhausted(_) => "53200",
            DataFusionError::External(ext) => match ext.downcast_ref::<SqlError>() {
                Some(SqlError::Limit(m)) => limit_code(m),
                Some(SqlError::Client(_)) => "58000",
                Some(SqlError::Invalid(_)) => "42000",
                _ => "XX000",
            },
            // What Postgres answers, so a driver can tell a missing table
            // or column (JDBC's SQLState, psycopg's UndefinedTable) from
            // other mistakes.
            DataFusionError::Plan(m) if is_table_not_found(m) => "42P01",
            DataFusionError::SchemaError(e, _)
                if matches!(**e, SchemaError::FieldNotFound { .. }) =>
            {
                "42703"
            }
            DataFusionError::Plan(_)
            | DataFusionError::SQL(..)
            | DataFusionError::SchemaError(..) => "42000",
            _ => "XX000",
        },
    };
    user_error("ERROR", code, e.to_string())
}

/// Whether a planning error is DataFusion's "table 'x' not found".
fn is_table_not_found(message: &str) -> bool {
    message.starts_with("table '") && message.ends_with("' not found")
}

/// An engine error from datafusion-postgres (planning or a row stream)
/// with Fjord's message and SQLSTATE: a memory limit names its option.
fn clear_error(e: PgWireError) -> PgWireError {
    match e {
        PgWireError::ApiError(inner) => match inner.downcast::<DataFusionError>() {
            Ok(df) => pg_error(SqlError::from(*df)),
            Err(inner) => PgWireError::ApiError(inner),
        },
        other => other,
    }
}

/// The query service: Fjord's statements here, the rest to datafusion-postgres.
pub struct FjordPgService {
    engine: Arc<SqlEngine>,
    ctx: Arc<SessionContext>,
    inner: Arc<DfSessionService>,
    parser: Arc<FjordParser>,
}

impl FjordPgService {
    /// A concurrency slot, the deadline of a statement starting now and
    /// `cancel`, the client's cancel signal.
    fn limits(&self, cancel: &CancelSignal) -> Result<StatementLimits, SqlError> {
        StatementLimits::start(&self.engine, cancel)
    }

    /// Refreshes the catalog, then parses `statement` (both under `limits`:
    /// the refresh asks the server).
    async fn refresh_and_parse(
        &self,
        limits: &StatementLimits,
        statement: &str,
    ) -> PgWireResult<Parsed> {
        refresh_catalog(&self.engine, limits).await?;
        ddl::parse(statement).map_err(pg_error)
    }

    /// Runs one of Fjord's statements; rows come back as a query response.
    async fn run_fjord(
        &self,
        statement: FjordStatement,
        format: &Format,
    ) -> PgWireResult<Response> {
        if let FjordStatement::Use { database } = statement {
            return Err(pg_error(SqlError::Unsupported(format!(
                "USE {database}: on the Postgres endpoint every Fjord database is a schema: write {database}.table"
            ))));
        }
        match self
            .engine
            .run_fjord(statement, DEFAULT_DATABASE)
            .await
            .map_err(pg_error)?
        {
            Output::Done { tag, rows } => {
                Ok(Response::Execution(Tag::new(tag).with_rows(rows as usize)))
            }
            Output::Rows(stream) => {
                let schema = stream.schema();
                let batches: Vec<_> = stream
                    .collect::<Vec<_>>()
                    .await
                    .into_iter()
                    .collect::<Result<_, _>>()
                    .map_err(|e| pg_error(SqlError::from(e)))?;
                let df = self
                    .ctx
                    .read_batches(batches)
                    .map_err(|e| pg_error(SqlError::from(e)))?;
                let _ = schema;
                Ok(Response::Query(encode_dataframe(df, format, None).await?))
            }
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for FjordPgService {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut responses = Vec::new();
        let statements = split_statements(query);
        if statements.is_empty() {
            return Ok(vec![Response::EmptyQuery]);
        }
        let cancel = CancelSignal::start(client);
        for statement in statements {
            let limits = self.limits(&cancel).map_err(pg_error)?;
            match self.refresh_and_parse(&limits, statement).await? {
                Parsed::Fjord(s) => {
                    responses.push(limits.run(self.run_fjord(s, &Format::UnifiedText)).await?)
                }
                Parsed::Query => {
                    let answered = limits
                        .run(SimpleQueryHandler::do_query(
                            self.inner.as_ref(),
                            client,
                            statement,
                        ))
                        .await?;
                    let mut limits = Some(limits);
                    for response in answered {
                        responses.push(match response {
                            Response::Query(query) => match limits.take() {
                                Some(limits) => Response::Query(limits.bound(query)),
                                None => Response::Query(query),
                            },
                            other => other,
                        });
                    }
                }
            }
        }
        Ok(responses)
    }
}

/// The statement type datafusion-postgres uses; a Fjord statement is one
/// with no plan.
type DfStatement = (
    String,
    Option<(
        datafusion::sql::sqlparser::ast::Statement,
        datafusion::logical_expr::LogicalPlan,
    )>,
);

/// Parses Fjord's statements itself and hands the rest to datafusion-postgres.
pub struct FjordParser {
    engine: Arc<SqlEngine>,
    inner: Arc<DfParser>,
}

#[async_trait]
impl QueryParser for FjordParser {
    type Statement = DfStatement;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        // The refresh asks the server: under the limits of a statement, as
        // every other wait on the server is.
        let limits =
            StatementLimits::start(&self.engine, &CancelSignal::start(client)).map_err(pg_error)?;
        refresh_catalog(&self.engine, &limits).await?;
        drop(limits);
        match ddl::parse(sql).map_err(pg_error)? {
            Parsed::Fjord(_) => Ok(Some((sql.to_owned(), None))),
            // A planning error (an unknown table) is reported at Parse in
            // the extended protocol: with its SQLSTATE, not XX000.
            Parsed::Query => self
                .inner
                .parse_sql(client, sql, types)
                .await
                .map_err(clear_error),
        }
    }

    fn get_parameter_types(&self, stmt: &Self::Statement) -> PgWireResult<Vec<Type>> {
        self.inner.get_parameter_types(stmt)
    }

    fn get_result_schema(
        &self,
        stmt: &Self::Statement,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        if stmt.1.is_none() {
            return fjord_result_schema(&stmt.0, column_format);
        }
        self.inner.get_result_schema(stmt, column_format)
    }
}

/// The columns a Fjord statement answers with (SHOW), none for DDL.
fn fjord_result_schema(sql: &str, format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
    use arrow_schema::{DataType, Field, Schema};
    let column = |name: &str| Schema::new(vec![Field::new(name, DataType::Utf8, false)]);
    let schema = match ddl::parse(sql) {
        Ok(Parsed::Fjord(FjordStatement::ShowDatabases)) => column("database name"),
        Ok(Parsed::Fjord(FjordStatement::ShowTables { .. })) => column("table name"),
        Ok(Parsed::Fjord(FjordStatement::ShowCreateTable { .. })) => column("create table"),
        Ok(Parsed::Fjord(FjordStatement::ShowPartitions { .. })) => Schema::new(vec![
            Field::new("partition name", DataType::Utf8, false),
            Field::new("partition id", DataType::UInt64, false),
        ]),
        _ => return Ok(Vec::new()),
    };
    arrow_schema_to_pg_fields(&schema, format.unwrap_or(&Format::UnifiedText), None)
}

#[async_trait]
impl ExtendedQueryHandler for FjordPgService {
    type Statement = DfStatement;
    type QueryParser = FjordParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::clone(&self.parser)
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let (sql, plan) = &portal.statement.statement;
        let cancel = CancelSignal::start(client);
        let limits = self.limits(&cancel).map_err(pg_error)?;
        if plan.is_none() && !sql.trim().is_empty() {
            if let Parsed::Fjord(s) = ddl::parse(sql).map_err(pg_error)? {
                return limits
                    .run(self.run_fjord(s, &portal.result_column_format))
                    .await;
            }
        }
        let response = limits
            .run(ExtendedQueryHandler::do_query(
                self.inner.as_ref(),
                client,
                portal,
                max_rows,
            ))
            .await?;
        Ok(match response {
            Response::Query(query) => Response::Query(limits.bound(query)),
            other => other,
        })
    }
}

/// The client's cancel request for the statements of one query message
/// (see [`QueryCancel`]); never fires on a connection not registered.
#[derive(Clone)]
struct CancelSignal(Option<Shared<oneshot::Receiver<()>>>);

impl CancelSignal {
    /// The signal of the query message `client` sends now.
    fn start<C: ClientInfo>(client: &C) -> Self {
        match client.session_extensions().get::<Arc<QueryCancel>>() {
            Some(cancel) => cancel.start(),
            None => Self(None),
        }
    }

    /// Ready when the client asked to cancel; pending forever once the
    /// signal can no longer fire (its sender replaced or dropped).
    fn poll_fired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(receiver) = self.0.as_mut() else {
            return Poll::Pending;
        };
        match receiver.poll_unpin(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(()),
            Poll::Ready(Err(_)) => {
                self.0 = None;
                Poll::Pending
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// One statement's share of the engine's limits: a concurrency slot held
/// until its rows are sent (or dropped), its deadline and the client's
/// cancel signal.
struct StatementLimits {
    /// Held, never read: dropping it gives the slot back.
    _slot: OwnedSemaphorePermit,
    deadline: Instant,
    timeout: Duration,
    cancel: CancelSignal,
}

/// Refreshes `engine`'s catalog under `limits`: the refresh asks the
/// server, so it ends at the timeout or the cancel as a statement does.
async fn refresh_catalog(engine: &SqlEngine, limits: &StatementLimits) -> PgWireResult<()> {
    limits
        .run(async {
            engine
                .catalog()
                .refresh()
                .await
                .map_err(|e| pg_error(e.into()))
        })
        .await
}

impl StatementLimits {
    /// A concurrency slot of `engine`, the deadline of a statement starting
    /// now and `cancel`, the client's cancel signal.
    fn start(engine: &SqlEngine, cancel: &CancelSignal) -> Result<Self, SqlError> {
        let timeout = engine.options().query_timeout;
        Ok(Self {
            _slot: engine.query_slot()?,
            deadline: Instant::now() + timeout,
            timeout,
            cancel: cancel.clone(),
        })
    }

    fn timeout_error(&self) -> PgWireError {
        pg_error(SqlError::Limit(format!(
            "statement timeout: the query ran longer than {OPT_TIMEOUT} ({} s) and was stopped",
            self.timeout.as_secs_f64()
        )))
    }

    /// What Postgres answers a canceled statement (57014).
    fn cancel_error() -> PgWireError {
        user_error(
            "ERROR",
            "57014",
            "canceling statement due to user request".to_owned(),
        )
    }

    /// `work` (planning and starting a statement) under these limits: at
    /// the deadline or the client's cancel it is dropped and answers the
    /// error; its own errors are made clear.
    async fn run<T>(&self, work: impl Future<Output = PgWireResult<T>>) -> PgWireResult<T> {
        let mut cancel = self.cancel.clone();
        let canceled = std::future::poll_fn(|cx| cancel.poll_fired(cx));
        tokio::select! {
            biased;
            () = canceled => Err(Self::cancel_error()),
            answered = tokio::time::timeout_at(self.deadline, work) => {
                answered.map_err(|_| self.timeout_error())?.map_err(clear_error)
            }
        }
    }

    /// The response's rows under these limits: they end with the timeout's
    /// error at the deadline or the cancel's at the client's cancel
    /// request (the query dropped then, which stops its work), errors are
    /// made clear, and the slot is given back when the rows end or the
    /// response is dropped.
    fn bound(self, mut query: QueryResponse) -> QueryResponse {
        let rows = std::mem::replace(query.data_rows(), Box::pin(futures::stream::empty()));
        let bounded = BoundedRows {
            inner: rows,
            sleep: Box::pin(tokio::time::sleep_until(self.deadline)),
            limits: Some(self),
        };
        let mut bounded_query = QueryResponse::new(query.row_schema(), bounded);
        bounded_query.set_command_tag(query.command_tag());
        bounded_query
    }
}

/// A query's rows under its [`StatementLimits`].
struct BoundedRows {
    inner: SendableRowStream,
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// `None` once the rows ended (the slot given back).
    limits: Option<StatementLimits>,
}

impl Stream for BoundedRows {
    type Item = PgWireResult<DataRow>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(limits) = self.limits.as_mut() else {
            return Poll::Ready(None);
        };
        let stopped = if limits.cancel.poll_fired(cx).is_ready() {
            Some(StatementLimits::cancel_error())
        } else if self.sleep.as_mut().poll(cx).is_ready() {
            self.limits.as_ref().map(StatementLimits::timeout_error)
        } else {
            None
        };
        if let Some(e) = stopped {
            // The query dropped now: its tasks are aborted.
            self.inner = Box::pin(futures::stream::empty());
            self.limits = None;
            return Poll::Ready(Some(Err(e)));
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(None) => {
                self.limits = None;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                self.limits = None;
                Poll::Ready(Some(Err(clear_error(e))))
            }
            other => other,
        }
    }
}
