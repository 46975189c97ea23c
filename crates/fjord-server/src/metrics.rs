//! Server metrics under Fluss's names, counted per request or batch (never
//! per record) with relaxed atomics, and a minimal Prometheus text endpoint
//! (`--metrics-listen`, off by default).
//!
//! Each Fluss meter `xPerSecond` is exposed as a gauge
//! `fluss_tabletserver_xPerSecond` (the rate since the previous scrape) and
//! its running total as `fluss_tabletserver_x_total`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::node::Node;

/// Largest HTTP request head read from a scraper; anything longer is cut off
/// (the path is all we look at).
const HTTP_HEAD_BYTES_MAX: usize = 8 * 1024;

/// Counters behind the Prometheus endpoint.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Records appended (from batch headers' record counts).
    pub messages_in: AtomicU64,
    /// Bytes of record batches appended.
    pub bytes_in: AtomicU64,
    /// Bytes of record batches served by FetchLog.
    pub bytes_out: AtomicU64,
    /// ProduceLog requests received.
    pub produce_requests: AtomicU64,
    /// ProduceLog requests with at least one failed bucket.
    pub produce_failed: AtomicU64,
    /// FetchLog requests received.
    pub fetch_requests: AtomicU64,
    /// FetchLog requests with at least one failed bucket.
    pub fetch_failed: AtomicU64,
    last_scrape: Mutex<Option<(Instant, [u64; 7])>>,
}

impl Metrics {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Renders the Prometheus text exposition.
    pub fn render(&self) -> String {
        let names = [
            "messagesIn",
            "bytesIn",
            "bytesOut",
            "totalProduceLogRequests",
            "failedProduceLogRequests",
            "totalFetchLogRequests",
            "failedFetchLogRequests",
        ];
        let now_values = [
            &self.messages_in,
            &self.bytes_in,
            &self.bytes_out,
            &self.produce_requests,
            &self.produce_failed,
            &self.fetch_requests,
            &self.fetch_failed,
        ]
        .map(|c| c.load(Ordering::Relaxed));
        let now = Instant::now();
        let previous = {
            let mut last = self.last_scrape.lock().unwrap_or_else(|p| p.into_inner());
            last.replace((now, now_values))
        };
        let mut out = String::new();
        for (i, name) in names.iter().enumerate() {
            let rate = match previous {
                Some((at, values)) => {
                    let secs = now.duration_since(at).as_secs_f64();
                    if secs > 0.0 {
                        now_values[i].saturating_sub(values[i]) as f64 / secs
                    } else {
                        0.0
                    }
                }
                None => 0.0,
            };
            out.push_str(&format!(
                "# TYPE fluss_tabletserver_{name}PerSecond gauge\nfluss_tabletserver_{name}PerSecond {rate}\n# TYPE fluss_tabletserver_{name}_total counter\nfluss_tabletserver_{name}_total {}\n",
                now_values[i]
            ));
        }
        out
    }
}

/// Binds `addr` and serves `GET /metrics` (any path) in the background until
/// the node shuts down; returns the bound address.
pub async fn serve(node: Arc<Node>, addr: &str) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let mut shutdown = node.shutdown.clone();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = shutdown.wait_for(|s| *s) => return,
            };
            let Ok((mut stream, _)) = accepted else {
                continue;
            };
            let metrics = Arc::clone(&node.metrics);
            tokio::spawn(async move {
                let mut head = vec![0u8; HTTP_HEAD_BYTES_MAX];
                // One read is enough for a scraper's small GET.
                if stream.read(&mut head).await.is_err() {
                    return;
                }
                let body = metrics.render();
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok(bound)
}
