//! An in-process Fjord server on an ephemeral loopback port and an engine
//! over it, for the SQL tests; helpers to run statements and read results.

#![allow(dead_code)]

pub mod silent;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use fjord_client::FlussClient;
use fjord_server::{Options, Server, ServerConfig};
use fjord_sql::{EngineOptions, SqlEngine, SqlError, SqlSession};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running server with its data dir.
pub struct TestServer {
    pub addr: String,
    pub node: Arc<fjord_server::node::Node>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// A server with extra server options (`key=value`).
    pub async fn start_with(settings: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut options = Options::default();
        // Durability is not under test here.
        options.set("log.flush.interval-ms=1000").expect("option");
        for setting in settings {
            options.set(setting).expect("option");
        }
        let config = ServerConfig::from_options(dir.path().to_owned(), options).expect("config");
        let server = Server::bind(config, "127.0.0.1:0")
            .await
            .expect("server starts");
        let addr = server.local_addr().to_string();
        let node = server.node();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        Self {
            addr,
            node,
            stop: Some(tx),
            task: Some(task),
            _dir: dir,
        }
    }

    pub async fn client(&self) -> FlussClient {
        FlussClient::connect(std::slice::from_ref(&self.addr))
            .await
            .expect("client connects")
    }

    pub async fn engine(&self) -> Arc<SqlEngine> {
        self.engine_with(EngineOptions::default()).await
    }

    pub async fn engine_with(&self, options: EngineOptions) -> Arc<SqlEngine> {
        SqlEngine::new(self.client().await, options)
            .await
            .expect("engine")
    }

    /// Bytes of record batches the server has served by FetchLog.
    pub fn fetched_bytes(&self) -> u64 {
        self.node
            .metrics
            .bytes_out
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// Runs `sql` and collects its rows.
pub async fn query(session: &mut SqlSession, sql: &str) -> Vec<RecordBatch> {
    session
        .execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Runs `sql`, expecting an error.
pub async fn query_err(session: &mut SqlSession, sql: &str) -> SqlError {
    match session.execute(sql).await {
        Err(e) => e,
        Ok(output) => match output.collect().await {
            Err(e) => e,
            Ok(rows) => panic!("{sql}: expected an error, got {}", pretty(&rows)),
        },
    }
}

/// Batches as the pretty table DataFusion prints.
pub fn pretty(batches: &[RecordBatch]) -> String {
    pretty_format_batches(batches).expect("formats").to_string()
}

/// Checks a query's rows against the expected pretty table (lines trimmed).
pub async fn check(session: &mut SqlSession, sql: &str, expected: &str) {
    let got = pretty(&query(session, sql).await);
    let norm = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty())
            .collect()
    };
    assert_eq!(norm(&got), norm(expected), "{sql}\n{got}");
}

/// Runs `test` on a runtime of two workers; fails if it has not ended
/// within `bound`. A hang bound, not a timing: a query stuck in one poll
/// holds the runtime's own timers too, so a thread outside it keeps the
/// bound.
pub fn within(bound: Duration, test: impl Future<Output = ()> + Send + 'static) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (done, ended) = std::sync::mpsc::channel();
    let task = runtime.spawn(test);
    runtime.spawn(async move {
        let _ = done.send(task.await);
    });
    let ended = ended.recv_timeout(bound);
    runtime.shutdown_timeout(Duration::from_secs(10));
    match ended {
        Ok(Ok(())) => {}
        Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Ok(Err(e)) => panic!("the test's task ended: {e}"),
        Err(_) => panic!("the test hung: not ended within {bound:?}"),
    }
}

/// Waits until the engine's queries hold no memory: every query's
/// streams, and the tasks that ran them, have ended.
pub async fn until_queries_end(engine: &SqlEngine) {
    while engine.memory_reserved() > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
