//! `fjord server`: a single-node Fluss-protocol cluster (coordinator and
//! tablet server in one process) serving from one data dir.

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
        info!(
            "fjord server ready: listening on {}, data dir {}",
            server.local_addr(),
            data_dir.display()
        );
        server.run(shutdown_signal()).await;
        anyhow::Ok(())
    })
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
