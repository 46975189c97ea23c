//! `fjord partitions list|create|drop`: the partitions of a partitioned table,
//! through the native client's admin calls (ListPartitionInfos,
//! CreatePartition, DropPartition).
//!
//! The spec is checked against the table's partition keys before anything is
//! sent, so a typo names the keys the table has instead of coming back as a
//! bare server error. `list` prints a table (id, name, spec) on stdout;
//! `create` and `drop` print one confirmation line on stdout. Any failure is
//! an error message on stderr and a non-zero exit.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Context};
use fjord_client::admin::PartitionInfo;
use fjord_client::{Admin, FlussClient, TableInfo, TablePath};

/// How long one command may wait for the server, connect included. A server
/// that accepts the connection but never answers must not hang a shell
/// script; every partition call is a single small request.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the server is when `--bootstrap` is not given (Fluss's default port).
const DEFAULT_BOOTSTRAP: &str = "127.0.0.1:9123";

/// Arguments of `fjord partitions`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// List the partitions of a table: id, name and spec.
    List {
        #[command(flatten)]
        target: Target,
        /// Only partitions matching these values of some partition keys
        /// (`k=v[,k2=v2]`).
        #[arg(long)]
        spec: Option<String>,
    },
    /// Create a partition: `--spec` gives a value for every partition key.
    Create {
        #[command(flatten)]
        target: Target,
        /// The partition's key values, `k=v[,k2=v2]`, e.g. `dt=20261130`.
        #[arg(long)]
        spec: String,
        /// Succeed when the partition exists already.
        #[arg(long)]
        if_not_exists: bool,
    },
    /// Drop a partition and delete its data.
    Drop {
        #[command(flatten)]
        target: Target,
        /// The partition's key values, `k=v[,k2=v2]`.
        #[arg(long)]
        spec: String,
        /// Succeed when the partition does not exist.
        #[arg(long)]
        if_exists: bool,
    },
}

#[derive(clap::Args)]
struct Target {
    /// Server addresses `host:port[,host:port...]`, tried in turn.
    #[arg(long, default_value = DEFAULT_BOOTSTRAP)]
    bootstrap: String,
    /// The table, `database.table`.
    #[arg(long)]
    table: String,
}

/// Runs the subcommand; every failure comes back as an error naming what was
/// wrong (the binary prints it and exits non-zero).
pub fn run(args: Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        tokio::time::timeout(COMMAND_TIMEOUT, execute(args.command))
            .await
            .map_err(|_| anyhow::anyhow!("the server did not answer within {COMMAND_TIMEOUT:?}"))?
    })
}

async fn execute(command: Command) -> anyhow::Result<()> {
    match command {
        Command::List { target, spec } => {
            let partial = spec.as_deref().map(parse_spec).transpose()?;
            let (admin, table) = open(&target).await?;
            if let Some(partial) = &partial {
                check_keys(&table, partial, KeyCoverage::Subset)?;
            }
            let mut partitions = admin
                .list_partitions(&table.path, partial.as_deref())
                .await
                .with_context(|| format!("listing the partitions of {}", table.path))?;
            partitions.sort_by_key(|p| p.partition_id);
            print!("{}", render_table(&partitions));
        }
        Command::Create {
            target,
            spec,
            if_not_exists,
        } => {
            let spec = parse_spec(&spec)?;
            let (admin, table) = open(&target).await?;
            let spec = check_keys(&table, &spec, KeyCoverage::All)?;
            admin
                .create_partition(&table.path, &spec, if_not_exists)
                .await
                .with_context(|| {
                    format!("creating partition {} of {}", qualified(&spec), table.path)
                })?;
            let listed = admin
                .list_partitions(&table.path, Some(&spec))
                .await
                .with_context(|| format!("listing the partitions of {}", table.path))?;
            match listed.first() {
                Some(p) => println!(
                    "partition {} of {} exists (id {}, name {})",
                    qualified(&spec),
                    table.path,
                    p.partition_id,
                    p.name
                ),
                None => bail!(
                    "the server accepted partition {} of {} but does not list it",
                    qualified(&spec),
                    table.path
                ),
            }
        }
        Command::Drop {
            target,
            spec,
            if_exists,
        } => {
            let spec = parse_spec(&spec)?;
            let (admin, table) = open(&target).await?;
            let spec = check_keys(&table, &spec, KeyCoverage::All)?;
            admin
                .drop_partition(&table.path, &spec, if_exists)
                .await
                .with_context(|| {
                    format!("dropping partition {} of {}", qualified(&spec), table.path)
                })?;
            println!("partition {} of {} dropped", qualified(&spec), table.path);
        }
    }
    Ok(())
}

/// Connects to the first reachable bootstrap server and fetches the table,
/// refusing a table without partition keys.
async fn open(target: &Target) -> anyhow::Result<(Admin, TableInfo)> {
    let path = parse_table(&target.table)?;
    let bootstrap: Vec<String> = target
        .bootstrap
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    let admin = FlussClient::connect(&bootstrap).await?.admin();
    let table = admin
        .table_info(&path)
        .await
        .with_context(|| format!("looking up table {path}"))?;
    if !table.is_partitioned() {
        bail!("table {path} is not partitioned: it has no partition keys");
    }
    Ok((admin, table))
}

fn parse_table(table: &str) -> anyhow::Result<TablePath> {
    match table.split_once('.') {
        Some((database, name))
            if !database.is_empty() && !name.is_empty() && !name.contains('.') =>
        {
            Ok(TablePath::new(database, name))
        }
        _ => bail!("--table {table:?}: expected database.table"),
    }
}

/// Parses `k=v[,k2=v2...]`; refuses empty keys, entries without `=` and a
/// key given twice.
fn parse_spec(spec: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for entry in spec.split(',').map(str::trim) {
        let Some((key, value)) = entry.split_once('=') else {
            bail!("--spec {spec:?}: entry {entry:?} is not key=value");
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            bail!("--spec {spec:?}: entry {entry:?} has an empty key");
        }
        if pairs.iter().any(|(k, _)| k == key) {
            bail!("--spec {spec:?}: key `{key}` is given twice");
        }
        pairs.push((key.to_owned(), value.to_owned()));
    }
    Ok(pairs)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyCoverage {
    /// Every partition key exactly once (create, drop).
    All,
    /// Some partition keys (list's partial spec).
    Subset,
}

/// Checks `spec` names partition keys of `table` (all of them for
/// [`KeyCoverage::All`]) and returns it in the table's key order.
fn check_keys(
    table: &TableInfo,
    spec: &[(String, String)],
    coverage: KeyCoverage,
) -> anyhow::Result<Vec<(String, String)>> {
    let keys = table.partition_keys();
    if let Some((unknown, _)) = spec.iter().find(|(k, _)| !keys.contains(k)) {
        bail!(
            "`{unknown}` is not a partition key of {}; its partition keys are {}",
            table.path,
            keys.join(", ")
        );
    }
    if coverage == KeyCoverage::All {
        if let Some(missing) = keys.iter().find(|k| !spec.iter().any(|(s, _)| s == *k)) {
            bail!(
                "--spec needs a value for every partition key of {} ({}); `{missing}` is missing",
                table.path,
                keys.join(", ")
            );
        }
    }
    let mut ordered = Vec::with_capacity(spec.len());
    for key in keys {
        if let Some(pair) = spec.iter().find(|(k, _)| k == key) {
            ordered.push(pair.clone());
        }
    }
    Ok(ordered)
}

/// `k=v/k2=v2`, Fluss's qualified partition name, for messages.
fn qualified(spec: &[(String, String)]) -> String {
    let mut out = String::new();
    for (i, (key, value)) in spec.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        let _ = write!(out, "{key}={value}");
    }
    out
}

/// The `list` output: a header and one aligned row per partition.
fn render_table(partitions: &[PartitionInfo]) -> String {
    const HEADERS: [&str; 3] = ["PARTITION_ID", "NAME", "SPEC"];
    let rows: Vec<[String; 3]> = partitions
        .iter()
        .map(|p| {
            [
                p.partition_id.to_string(),
                p.name.clone(),
                qualified(&p.spec),
            ]
        })
        .collect();
    let mut widths = HEADERS.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: [&str; 3]| {
        let _ = writeln!(
            out,
            "{:<w0$}  {:<w1$}  {}",
            cells[0],
            cells[1],
            cells[2],
            w0 = widths[0],
            w1 = widths[1]
        );
    };
    line(HEADERS);
    for row in &rows {
        line([&row[0], &row[1], &row[2]]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn spec_parses_pairs_in_order() {
        assert_eq!(
            parse_spec("dt=20261130, region=eu").expect("spec"),
            pairs(&[("dt", "20261130"), ("region", "eu")])
        );
    }

    #[test]
    fn spec_without_equals_or_key_or_with_a_repeat_is_refused() {
        for bad in ["dt", "=x", "dt=1,dt=2", ""] {
            assert!(parse_spec(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn table_needs_database_and_name() {
        assert_eq!(
            parse_table("db.t").expect("path"),
            TablePath::new("db", "t")
        );
        for bad in ["t", ".t", "db.", "a.b.c"] {
            assert!(parse_table(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn list_output_aligns_columns() {
        let partitions = vec![
            PartitionInfo {
                partition_id: 3,
                name: "20261130$eu".to_owned(),
                spec: pairs(&[("dt", "20261130"), ("region", "eu")]),
            },
            PartitionInfo {
                partition_id: 12,
                name: "20261201$us".to_owned(),
                spec: pairs(&[("dt", "20261201"), ("region", "us")]),
            },
        ];
        assert_eq!(
            render_table(&partitions),
            "PARTITION_ID  NAME         SPEC\n\
             3             20261130$eu  dt=20261130/region=eu\n\
             12            20261201$us  dt=20261201/region=us\n"
        );
    }
}
