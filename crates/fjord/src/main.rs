//! The `fjord` binary: one clap dispatcher, one module per subcommand under
//! `cmd/`. Each module owns its `Args` and its `run`; this file only routes.

mod cmd;

use clap::{Parser, Subcommand};

/// Fjord: a Fluss-protocol streaming storage server with a built-in CDC pipeline.
#[derive(Parser)]
#[command(name = "fjord", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a single-node Fjord server (coordinator and tablet server in one process).
    Server(cmd::server::Args),
    /// Start a server on a temporary data dir, write and read back a table, report speed.
    Quickstart(cmd::quickstart::Args),
    /// Run a CDC pipeline defined in Flink CDC 3 pipeline YAML.
    Pipeline(cmd::pipeline::Args),
    /// Write CSV or JSON lines from stdin or a file into a table (upserts and deletes for a primary-key table).
    Produce(cmd::produce::Args),
    /// Read a table (a primary-key table's current rows or changelog) to stdout as a pretty table, CSV or JSON lines.
    Scan(cmd::scan::Args),
    /// Look rows of a primary-key table up by key or key prefix.
    Lookup(cmd::lookup::Args),
    /// List, create or drop the partitions of a partitioned table.
    Partitions(cmd::partitions::Args),
    /// SQL on live tables: one statement (-e), a script (-f) or an interactive shell.
    Sql(cmd::sql::Args),
    /// Measure the native writer and scanner (one JSON line of figures).
    Bench(cmd::bench::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::Server(args) => cmd::server::run(args),
        Command::Pipeline(args) => cmd::pipeline::run(args),
        Command::Quickstart(args) => cmd::quickstart::run(args),
        Command::Produce(args) => cmd::produce::run(args),
        Command::Scan(args) => cmd::scan::run(args),
        Command::Lookup(args) => cmd::lookup::run(args),
        Command::Partitions(args) => cmd::partitions::run(args),
        Command::Sql(args) => cmd::sql::run(args),
        Command::Bench(args) => cmd::bench::run(args),
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (default `info`), so that stdout
/// stays free for data (`fjord scan`, the pipeline's print sink).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
