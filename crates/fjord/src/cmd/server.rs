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
    #[arg(long, default_value = "./fjord-data")]
    data_dir: PathBuf,
    /// Address to serve the Fluss protocol on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:9123")]
    listen: String,
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

/// Runs `fjord server` until SIGTERM or SIGINT, then shuts down cleanly.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut options = match &args.config {
        Some(path) => Options::load_yaml(path)?,
        None => Options::default(),
    };
    for assignment in &args.set {
        options.set(assignment)?;
    }
    let config = ServerConfig::from_options(args.data_dir.clone(), options)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("fjord-server")
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let server = Server::bind(config, &args.listen).await?;
        if let Some(addr) = &args.metrics_listen {
            let bound = fjord_server::metrics::serve(server.node(), addr).await?;
            info!("metrics: serving Prometheus text on http://{bound}/metrics");
        }
        info!(
            "fjord server ready: listening on {}, data dir {}",
            server.local_addr(),
            args.data_dir.display()
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
