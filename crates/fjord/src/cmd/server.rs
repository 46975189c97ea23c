//! `fjord server`: a single-node Fluss-protocol cluster (coordinator and
//! tablet server in one process) serving from one data dir, and, when
//! configured, the SQL endpoints (Postgres, Flight SQL): fjord-sql's engine
//! over an in-process native client, since fjord-server knows nothing of SQL.

use std::path::PathBuf;

use anyhow::Context;
use fjord_server::{Options, Server, ServerConfig};
use tracing::info;

/// Command-line arguments of `fjord server`.
#[derive(clap::Args)]
pub struct Args {
    /// Directory holding all metadata and log data (created if missing).
    /// Default: the `data.dir` option, else ./fjord-data.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Address to serve the Fluss protocol on; port 0 picks a free port.
    /// Default: the first address of the `bind.listeners` option
    /// (`FLUSS://host:port`), else 127.0.0.1:9123.
    #[arg(long)]
    listen: Option<String>,
    /// A Fluss-style server.yaml (flat `key: value` lines, Fluss option names).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Overrides one option, `key=value`; repeatable, applied after --config.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Serve Prometheus metrics on this address (off by default).
    #[arg(long)]
    metrics_listen: Option<String>,
    /// Serve SQL over the Postgres wire protocol on this address (off by
    /// default). Database `fjord`, one schema per Fjord database; users
    /// from `sql.users` (SCRAM), or without them loopback only.
    #[arg(long, value_name = "HOST:PORT")]
    pg_listen: Option<String>,
    /// Serve SQL over Arrow Flight SQL (gRPC) on this address (off by
    /// default). Users from `sql.users` (basic auth), or without them
    /// loopback only.
    #[arg(long, value_name = "HOST:PORT")]
    flight_sql_listen: Option<String>,
}

/// Data directory when neither `--data-dir` nor `data.dir` is given.
const DEFAULT_DATA_DIR: &str = "./fjord-data";
/// Listen address when neither `--listen` nor `bind.listeners` is given
/// (Fluss's default port).
const DEFAULT_LISTEN: &str = "127.0.0.1:9123";

/// The `host:port` of the first entry of Fluss's `bind.listeners`
/// (`NAME://host:port[,NAME://host:port...]`).
fn first_listener(listeners: &str) -> anyhow::Result<String> {
    let first = listeners.split(',').next().unwrap_or_default().trim();
    let address = first.split_once("://").map_or(first, |(_, a)| a);
    if address.rsplit_once(':').is_none() {
        anyhow::bail!("bind.listeners = {listeners:?}: expected NAME://host:port");
    }
    Ok(address.to_owned())
}

/// Runs `fjord server` until SIGTERM or SIGINT, then shuts down cleanly.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut options = match &args.config {
        Some(path) => Options::load_yaml(path)?,
        None => Options::default(),
    };
    for assignment in &args.set {
        options.set(assignment)?;
    }
    let data_dir = args
        .data_dir
        .clone()
        .or_else(|| options.get("data.dir").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
    let listen = match &args.listen {
        Some(listen) => listen.clone(),
        None => match options.get("bind.listeners") {
            Some(listeners) => first_listener(listeners)?,
            None => DEFAULT_LISTEN.to_owned(),
        },
    };
    let sql = SqlEndpoints::from_options(&args, &options)?;
    let config = ServerConfig::from_options(data_dir.clone(), options)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("fjord-server")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let server = Server::bind(config, &listen).await?;
        if let Some(addr) = &args.metrics_listen {
            let bound = fjord_server::metrics::serve(server.node(), addr).await?;
            info!("metrics: serving Prometheus text on http://{bound}/metrics");
        }
        let sql_endpoints = sql.start(&server).await?;
        info!(
            "fjord server ready: listening on {}, data dir {}{sql_endpoints}",
            server.local_addr(),
            data_dir.display()
        );
        server.run(shutdown_signal()).await;
        anyhow::Ok(())
    })
}

/// The SQL endpoints a server process hosts: fjord-sql's engine over an
/// in-process native client to the server itself (the server crate knows
/// nothing of SQL; this binary wires the two). Both endpoints share one
/// engine, so the query limits (`sql.query.*`) bound them together.
struct SqlEndpoints {
    pg_listen: Option<String>,
    flight_sql_listen: Option<String>,
    users: fjord_sql::auth::Users,
    engine: fjord_sql::EngineOptions,
}

impl SqlEndpoints {
    fn from_options(args: &Args, options: &Options) -> anyhow::Result<Self> {
        let users = match options.get(fjord_sql::auth::OPT_USERS) {
            Some(text) => fjord_sql::auth::Users::parse(text)?,
            None => fjord_sql::auth::Users::default(),
        };
        Ok(Self {
            pg_listen: args.pg_listen.clone(),
            flight_sql_listen: args.flight_sql_listen.clone(),
            users,
            engine: fjord_sql::EngineOptions::from_options(options.iter())?,
        })
    }

    /// Binds every endpoint asked for, refusing to start one without users
    /// off loopback, and starts serving them once the server accepts (a
    /// client that connects earlier waits in the listen backlog). Answers
    /// the bound addresses for the ready line (`, postgres on A, flight sql
    /// on B`), so port 0 can be used.
    async fn start(self, server: &Server) -> anyhow::Result<String> {
        let pg = match &self.pg_listen {
            Some(addr) => {
                Some(bind("the Postgres endpoint (--pg-listen)", addr, &self.users).await?)
            }
            None => None,
        };
        let flight = match &self.flight_sql_listen {
            Some(addr) => Some(
                bind(
                    "the Flight SQL endpoint (--flight-sql-listen)",
                    addr,
                    &self.users,
                )
                .await?,
            ),
            None => None,
        };
        let mut bound = String::new();
        if let Some(listener) = &pg {
            bound.push_str(&format!(", postgres on {}", listener.local_addr()?));
        }
        if let Some(listener) = &flight {
            bound.push_str(&format!(", flight sql on {}", listener.local_addr()?));
        }
        if pg.is_none() && flight.is_none() {
            return Ok(bound);
        }
        let mut own = server.local_addr();
        if own.ip().is_unspecified() {
            own.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let users = self.users;
        let options = self.engine;
        tokio::spawn(async move {
            // The server accepts once it runs: connect then.
            let engine = match fjord_client::FlussClient::connect(&[own.to_string()]).await {
                Ok(client) => fjord_sql::SqlEngine::new(client, options).await,
                Err(e) => Err(e.into()),
            };
            let engine = match engine {
                Ok(engine) => engine,
                Err(e) => {
                    tracing::error!("sql: cannot start the SQL engine: {e}");
                    return;
                }
            };
            if let Some(listener) = pg {
                let (engine, users) = (engine.clone(), users.clone());
                tokio::spawn(async move {
                    if let Ok(bound) = listener.local_addr() {
                        info!("sql: serving the Postgres protocol on {bound} (database fjord)");
                    }
                    if let Err(e) = fjord_sql::pg::serve(engine, listener, users).await {
                        tracing::error!("sql: the Postgres endpoint stopped: {e}");
                    }
                });
            }
            if let Some(listener) = flight {
                if let Ok(bound) = listener.local_addr() {
                    info!("sql: serving Arrow Flight SQL on {bound}");
                }
                if let Err(e) = fjord_sql::flight::serve(engine, listener, users).await {
                    tracing::error!("sql: the Flight SQL endpoint stopped: {e}");
                }
            }
        });
        Ok(bound)
    }
}

/// Binds `addr` for `endpoint`; refuses an address others can reach when
/// no users are configured.
async fn bind(
    endpoint: &str,
    addr: &str,
    users: &fjord_sql::auth::Users,
) -> anyhow::Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("{endpoint}: cannot bind {addr}"))?;
    let bound = listener.local_addr()?;
    fjord_sql::auth::check_auth(endpoint, &bound, users)?;
    Ok(listener)
}

/// Completes on the first SIGTERM or SIGINT.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
