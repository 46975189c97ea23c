//! `fjord sql`: SQL on live tables from the command line — one statement
//! or script (`-e`, `-f`), or an interactive shell with history.
//!
//! Statements run in fjord-sql's engine in this process, reading and
//! writing through the native client; results print as `fjord scan`
//! prints rows (a bordered table, CSV or JSON lines), streamed batch by
//! batch. In the shell a statement ends at a `;` that ends a line; an
//! error is printed and the shell goes on, while `-e` and `-f` stop at the
//! first error with a non-zero exit.

use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use fjord_sql::{EngineOptions, Output, SqlEngine, SqlSession};
use futures::StreamExt;

use arrow_array::RecordBatch;

use super::scan::{connect, OutputFormat, DEFAULT_BOOTSTRAP};

/// Rows the `table` format lays out together (column widths per group),
/// so memory stays bounded however large the result.
const TABLE_GROUP_ROWS: usize = 1_000;

/// Lines of shell history kept in `~/.fjord_sql_history`.
const HISTORY_LINES_MAX: usize = 1_000;

/// Arguments of `fjord sql`.
#[derive(clap::Args)]
pub struct Args {
    /// Server(s) to bootstrap from, `host:port[,host:port...]`.
    #[arg(long, default_value = DEFAULT_BOOTSTRAP)]
    bootstrap: String,
    /// Run these statements (`;`-separated) and exit.
    #[arg(short = 'e', long = "execute", conflicts_with = "file")]
    execute: Option<String>,
    /// Run the statements of this file and exit.
    #[arg(short = 'f', long = "file")]
    file: Option<PathBuf>,
    /// Output format of query results.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
    /// Start in this database (default: fluss).
    #[arg(long, short = 'd')]
    database: Option<String>,
    /// An engine option, `key=value` (`sql.query.memory-max=512mb`,
    /// `sql.query.timeout=30s`, `sql.query.concurrent-max=4`); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

/// Runs `fjord sql`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let options = EngineOptions::from_options(
            args.set
                .iter()
                .map(|kv| kv.split_once('=').unwrap_or((kv.as_str(), ""))),
        )?;
        let client = connect(&args.bootstrap).await?;
        let engine = SqlEngine::new(client, options).await?;
        let mut session = engine.session();
        if let Some(db) = &args.database {
            run_script(&mut session, &format!("USE `{db}`"), args.format).await?;
        }
        if let Some(sql) = &args.execute {
            return run_script(&mut session, sql, args.format).await;
        }
        if let Some(file) = &args.file {
            let sql = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            return run_script(&mut session, &sql, args.format).await;
        }
        shell(session, args.format).await
    })
}

/// Runs each statement of `sql` in turn, printing what it answers.
async fn run_script(
    session: &mut SqlSession,
    sql: &str,
    format: OutputFormat,
) -> anyhow::Result<()> {
    for statement in fjord_sql::engine::split_statements(sql) {
        // The engine's message says it all: no cause chain, no backtrace.
        let output = session
            .execute_one(statement)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        print_output(output, format)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(())
}

/// Prints one statement's answer: rows in `format`, a command's tag on stderr.
async fn print_output(output: Output, format: OutputFormat) -> anyhow::Result<()> {
    match output {
        Output::Done { tag, rows } => {
            if rows > 0 {
                eprintln!("{tag} {rows}");
            } else {
                eprintln!("{tag}");
            }
        }
        Output::Rows(mut stream) => {
            let out = BufWriter::new(std::io::stdout().lock());
            match format {
                OutputFormat::Csv => {
                    let mut w = arrow_csv::WriterBuilder::new().with_header(true).build(out);
                    while let Some(batch) = stream.next().await {
                        w.write(&batch.map_err(fjord_sql::SqlError::from)?)?;
                    }
                    w.into_inner().flush()?;
                }
                OutputFormat::Json => {
                    let mut w = arrow_json::LineDelimitedWriter::new(out);
                    while let Some(batch) = stream.next().await {
                        w.write(&batch.map_err(fjord_sql::SqlError::from)?)?;
                    }
                    w.finish()?;
                    w.into_inner().flush()?;
                }
                OutputFormat::Table => {
                    let mut out = out;
                    let mut group: Vec<RecordBatch> = Vec::new();
                    let mut group_rows = 0;
                    let mut any = false;
                    while let Some(batch) = stream.next().await {
                        let batch = batch.map_err(fjord_sql::SqlError::from)?;
                        any = true;
                        group_rows += batch.num_rows();
                        group.push(batch);
                        if group_rows >= TABLE_GROUP_ROWS {
                            print_table(&mut out, &group)?;
                            group.clear();
                            group_rows = 0;
                        }
                    }
                    if !group.is_empty() {
                        print_table(&mut out, &group)?;
                    } else if !any {
                        writeln!(out, "(no rows)")?;
                    }
                    out.flush()?;
                }
            }
        }
    }
    Ok(())
}

/// A group of rows as a bordered table.
fn print_table(out: &mut impl Write, batches: &[RecordBatch]) -> anyhow::Result<()> {
    let table = fjord_sql::datafusion::arrow::util::pretty::pretty_format_batches(batches)?;
    writeln!(out, "{table}")?;
    Ok(())
}

/// The interactive shell: a statement ends at a line ending in `;`.
async fn shell(mut session: SqlSession, format: OutputFormat) -> anyhow::Result<()> {
    let interactive = std::io::stdin().is_terminal();
    let mut editor = rustyline::DefaultEditor::with_config(
        rustyline::Config::builder()
            .max_history_size(HISTORY_LINES_MAX)?
            .auto_add_history(false)
            .build(),
    )?;
    let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".fjord_sql_history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    if interactive {
        eprintln!("fjord sql: statements end with `;`, `quit` or Ctrl-D leaves.");
    }
    let mut pending = String::new();
    loop {
        let prompt = if pending.is_empty() {
            format!("{}> ", session.database())
        } else {
            "   -> ".to_owned()
        };
        let line = match editor.readline(&prompt) {
            Ok(line) => line,
            Err(rustyline::error::ReadlineError::Interrupted) => {
                pending.clear();
                continue;
            }
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        if pending.is_empty() && matches!(line.trim(), "quit" | "exit" | "\\q") {
            break;
        }
        pending.push_str(&line);
        pending.push('\n');
        if !line.trim_end().ends_with(';') {
            continue;
        }
        let sql = std::mem::take(&mut pending);
        let _ = editor.add_history_entry(sql.trim());
        let started = std::time::Instant::now();
        for statement in fjord_sql::engine::split_statements(&sql) {
            let result = match session.execute_one(statement).await {
                Ok(output) => print_output(output, format).await,
                Err(e) => Err(e.into()),
            };
            if let Err(e) = result {
                eprintln!("error: {e:#}");
                break;
            }
        }
        if interactive {
            eprintln!("({:.3} s)", started.elapsed().as_secs_f64());
        }
        let _ = std::io::stdout().flush();
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(())
}
