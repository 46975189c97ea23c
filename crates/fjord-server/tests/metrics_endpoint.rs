//! The Prometheus endpoint serves Fluss-named metrics that count produce
//! and fetch traffic.

mod support;

use std::sync::atomic::Ordering;

use fjord_proto::messages as pb;
use fjord_proto::Request;
use fjord_server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn metrics_endpoint_reports_fluss_metric_names() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::bind(
        ServerConfig::with_data_dir(dir.path().to_owned()),
        "127.0.0.1:0",
    )
    .await
    .unwrap();
    let node = server.node();
    let metrics_addr = fjord_server::metrics::serve(node.clone(), "127.0.0.1:0")
        .await
        .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    let mut c = support::Client::connect(addr).await;
    c.call(Request::ProduceLog(pb::ProduceLogRequest {
        acks: 1,
        table_id: 12345,
        timeout_ms: 1000,
        buckets_req: vec![],
    }))
    .await
    .unwrap();
    assert_eq!(node.metrics.produce_requests.load(Ordering::Relaxed), 1);

    let mut http = tokio::net::TcpStream::connect(metrics_addr).await.unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    http.read_to_string(&mut body).await.unwrap();
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    for name in [
        "fluss_tabletserver_messagesInPerSecond",
        "fluss_tabletserver_bytesInPerSecond",
        "fluss_tabletserver_bytesOutPerSecond",
        "fluss_tabletserver_totalProduceLogRequestsPerSecond",
        "fluss_tabletserver_failedProduceLogRequestsPerSecond",
        "fluss_tabletserver_totalFetchLogRequestsPerSecond",
    ] {
        assert!(body.contains(name), "{name} missing from\n{body}");
    }
    assert!(
        body.contains("fluss_tabletserver_totalProduceLogRequests_total 1"),
        "{body}"
    );
    let _ = stop.send(());
    task.await.unwrap();
}
