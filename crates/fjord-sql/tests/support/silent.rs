//! A Fjord server behind a proxy that can stop answering (its connections
//! left open), and an engine over the proxy: for the tests of statements
//! waiting on a silent server.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fjord_client::FlussClient;
use fjord_proto::ApiKey;
use fjord_sql::{EngineOptions, SqlEngine};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::TestServer;

/// What the proxy holds back.
const HOLD_NONE: i32 = -1;
const HOLD_ALL: i32 = -2;

/// A proxy that forwards both ways, holding the requests it is told to
/// (every one, or those of one API) until told otherwise.
pub struct FreezingProxy {
    /// [`HOLD_NONE`], [`HOLD_ALL`] or the API key whose requests wait.
    hold: Arc<AtomicI32>,
    /// Requests held so far.
    pub held: Arc<AtomicUsize>,
}

impl FreezingProxy {
    /// Listens on `listen` and forwards each connection to `upstream`.
    pub async fn start(listen: &str, upstream: String) -> Self {
        let listener = TcpListener::bind(listen).await.expect("proxy binds");
        let hold = Arc::new(AtomicI32::new(HOLD_NONE));
        let held = Arc::new(AtomicUsize::new(0));
        let (hold2, held2) = (Arc::clone(&hold), Arc::clone(&held));
        tokio::spawn(async move {
            while let Ok((downstream, _)) = listener.accept().await {
                let upstream = TcpStream::connect(&upstream).await.expect("upstream");
                let (mut dr, dw) = downstream.into_split();
                let (mut ur, mut uw) = upstream.into_split();
                let (hold, held) = (Arc::clone(&hold2), Arc::clone(&held2));
                tokio::spawn(async move {
                    while let Some(frame) = read_frame(&mut dr).await {
                        let api_key = i16::from_be_bytes([frame[4], frame[5]]);
                        if holds(&hold, api_key) {
                            held.fetch_add(1, Ordering::SeqCst);
                            while holds(&hold, api_key) {
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                        }
                        if uw.write_all(&frame).await.is_err() {
                            return;
                        }
                    }
                });
                tokio::spawn(async move {
                    let mut dw = dw;
                    let _ = tokio::io::copy(&mut ur, &mut dw).await;
                });
            }
        });
        Self { hold, held }
    }

    /// Holds every request from now on.
    pub fn freeze(&self) {
        self.held.store(0, Ordering::SeqCst);
        self.hold.store(HOLD_ALL, Ordering::SeqCst);
    }

    /// Holds the requests of `api` from now on.
    pub fn freeze_api(&self, api: ApiKey) {
        self.held.store(0, Ordering::SeqCst);
        self.hold.store(i32::from(api as i16), Ordering::SeqCst);
    }

    /// Forwards everything again, held requests first.
    pub fn thaw(&self) {
        self.hold.store(HOLD_NONE, Ordering::SeqCst);
    }

    /// Waits until a request was held: a statement is waiting on the
    /// server.
    pub async fn until_held(&self) {
        while self.held.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn holds(hold: &AtomicI32, api_key: i16) -> bool {
    match hold.load(Ordering::SeqCst) {
        HOLD_NONE => false,
        HOLD_ALL => true,
        api => api == i32::from(api_key),
    }
}

/// One request frame (`length | api_key | api_version | request_id | body`,
/// the length included), or `None` at the end of the stream.
async fn read_frame(from: &mut tokio::net::tcp::OwnedReadHalf) -> Option<Vec<u8>> {
    let mut length = [0u8; 4];
    from.read_exact(&mut length).await.ok()?;
    let n = u32::from_be_bytes(length) as usize;
    let mut frame = vec![0u8; 4 + n];
    frame[..4].copy_from_slice(&length);
    from.read_exact(&mut frame[4..]).await.ok()?;
    (n >= 2).then_some(frame)
}

/// A server that advertises 127.0.0.2, a [`FreezingProxy`] on 127.0.0.2
/// in front of it (so every connection the engine learns from metadata
/// goes through the proxy too) and an engine over the proxy with
/// `query_timeout`.
pub async fn engine_behind_proxy(
    query_timeout: Duration,
) -> (TestServer, FreezingProxy, Arc<SqlEngine>) {
    let server = TestServer::start_with(&["fjord.server.advertised-host=127.0.0.2"]).await;
    let port = server.addr.rsplit(':').next().expect("port");
    let listen = format!("127.0.0.2:{port}");
    let proxy = FreezingProxy::start(&listen, server.addr.clone()).await;
    let client = FlussClient::connect(std::slice::from_ref(&listen))
        .await
        .expect("client connects through the proxy");
    let engine = SqlEngine::new(
        client,
        EngineOptions {
            query_timeout,
            ..EngineOptions::default()
        },
    )
    .await
    .expect("engine");
    (server, proxy, engine)
}
