//! One TCP connection to one server, multiplexing requests by request id.
//!
//! Write order: every request frame takes a *turn*, its place in the
//! connection's write queue, and is written once the frame before it is
//! done with the socket (written, failed, or given up). [`ServerConnection::send`]
//! takes its turn when first polled, so requests sent one after another by
//! one task reach the server in that order. [`ServerConnection::queue_produce_log`]
//! takes its turn when called and returns a future that writes later: the
//! writer's sender queues a leader's requests in sequence order without
//! awaiting the socket, so a leader that stops reading delays only the
//! frames queued to it, not the sender's other leaders. A turn is a
//! oneshot channel per request (never per record); the queue is a chain
//! of them, one link per frame waiting, as long as its callers' own bound
//! (the writer's in-flight batches).
//!
//! The frame is written under a lock on the write half (uncontended: only
//! the turn's holder takes it); a reader task cuts response frames out of
//! the socket and completes the waiting request by id. A server-failure
//! frame or a closed socket fails every request still waiting, so no caller
//! hangs on a dead connection.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use fjord_proto::chunks::write_all_chunks;
use fjord_proto::messages as pb;
use fjord_proto::{
    encode_produce_log_request_chunks, encode_request, ApiError, ApiKey, ErrorCode, FrameDecoder,
    RequestHeader, ResponseFrame,
};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::error::{ClientError, Result};

/// Largest response frame the client accepts. A FetchLog response carries at
/// most the request's `max_bytes` of records (16 MiB by default) plus
/// headers; the cap stops a corrupt length from causing a huge allocation.
pub const MAX_RESPONSE_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// Initial capacity of the read buffer; it grows to the largest frame seen.
const READ_BUFFER_BYTES: usize = 64 * 1024;

type Reply = std::result::Result<Bytes, ApiError>;

/// Requests waiting for their responses. `None` once the connection died:
/// a request registered after that fails at once instead of waiting forever.
type Pending = Option<HashMap<i32, oneshot::Sender<Reply>>>;

/// A connection to one Fluss-protocol server. Cheap to clone; all clones
/// share the socket.
#[derive(Clone)]
pub struct ServerConnection {
    inner: Arc<Inner>,
}

struct Inner {
    addr: String,
    writer: tokio::sync::Mutex<WriteSide>,
    pending: Mutex<Pending>,
    next_request_id: AtomicI32,
    /// The end of the write queue: the receiving side of the last turn
    /// taken, which resolves when that frame is done with the socket.
    last_turn: Mutex<Option<TurnEnd>>,
    /// The response reader task, stopped when the connection is abandoned
    /// (its socket then closes once the last handle is dropped).
    reader: Mutex<Option<tokio::task::AbortHandle>>,
}

struct WriteSide {
    socket: OwnedWriteHalf,
    /// Frame scaffolding (or whole small frames) being written.
    buf: BytesMut,
    /// The chunks of a ProduceLog frame being written (kept for its capacity).
    chunks: Vec<Bytes>,
}

impl ServerConnection {
    /// Connects to `addr` (`host:port`) and starts the response reader.
    pub async fn connect(addr: &str) -> Result<ServerConnection> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| ClientError::Io {
                addr: addr.to_owned(),
                source,
            })?;
        // Requests are whole frames written at once; Nagle would only delay them.
        let _ = stream.set_nodelay(true);
        let (mut read_half, write_half) = stream.into_split();
        let inner = Arc::new(Inner {
            addr: addr.to_owned(),
            writer: tokio::sync::Mutex::new(WriteSide {
                socket: write_half,
                buf: BytesMut::new(),
                chunks: Vec::new(),
            }),
            pending: Mutex::new(Some(HashMap::new())),
            next_request_id: AtomicI32::new(0),
            last_turn: Mutex::new(None),
            reader: Mutex::new(None),
        });
        let reader_inner = Arc::clone(&inner);
        let reader = tokio::spawn(async move {
            let reason = read_responses(&mut read_half, &reader_inner).await;
            reader_inner.fail_all(reason);
        });
        *inner.reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(reader.abort_handle());
        Ok(ServerConnection { inner })
    }

    /// The address this connection was opened to.
    pub fn addr(&self) -> &str {
        &self.inner.addr
    }

    /// Whether the connection has died (socket closed, read failed or the
    /// server sent a failure frame); every request on it now fails at once,
    /// so callers reconnect instead.
    pub fn is_closed(&self) -> bool {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Sends `request` as API `api` at the highest version Fjord serves for
    /// it (0 where it serves none) and waits for the response.
    pub async fn request<Req, Resp>(&self, api: ApiKey, request: &Req) -> Result<Resp>
    where
        Req: Message,
        Resp: Message + Default,
    {
        let body = self.request_raw(api, request).await?;
        Resp::decode(body).map_err(|e| ClientError::Protocol {
            api: api.name(),
            message: e.to_string(),
        })
    }

    /// Like [`ServerConnection::request`], returning the undecoded body.
    pub async fn request_raw<Req: Message>(&self, api: ApiKey, request: &Req) -> Result<Bytes> {
        self.send(api, request).await?.wait_raw().await
    }

    /// Like [`ServerConnection::send`] for a ProduceLog request, whose
    /// batches go to the socket as they are (a vectored write of the frame's
    /// protobuf scaffolding and the encoded batches) instead of being copied
    /// into the frame buffer first: one copy of every batch saved.
    pub async fn send_produce_log(
        &self,
        request: pb::ProduceLogRequest,
    ) -> Result<PendingResponse> {
        let turn = self.take_turn(false);
        self.write_frame(turn, ApiKey::ProduceLog, produce_log_frame(request))
            .await
    }

    /// Queues a ProduceLog request (written as
    /// [`ServerConnection::send_produce_log`] writes it) without waiting
    /// for the socket: its place in the write order is taken now, so frames
    /// queued one after another reach the server in that order whenever
    /// their futures run. The returned future writes the frame once every
    /// frame queued before it is done, and must be driven (spawned) or
    /// dropped: until then it holds up the frames queued after it.
    ///
    /// A frame not written within `write_timeout` (waiting for its turn
    /// included) fails with a retriable [`ClientError::Io`] (`TimedOut`).
    /// A queued frame given up before it is wholly written — timed out, or
    /// its future dropped — abandons the connection before the next frame
    /// may go: every later frame then fails at once instead of overtaking
    /// it, every waiting request fails, and the pool reconnects.
    pub fn queue_produce_log(
        &self,
        request: pb::ProduceLogRequest,
        write_timeout: Duration,
    ) -> impl Future<Output = Result<PendingResponse>> + Send + 'static {
        self.queue_frame(
            ApiKey::ProduceLog,
            produce_log_frame(request),
            write_timeout,
        )
    }

    /// [`ServerConnection::queue_produce_log`] for any request (the upsert
    /// writer's PutKv): its place in the write order is taken now, the
    /// frame (encoded whole, `request` copied into the frame buffer) is
    /// written when the returned future runs, with the same timeout and
    /// the same abandonment of a connection whose queued frame was given up.
    pub fn queue_request<Req: Message + Send + 'static>(
        &self,
        api: ApiKey,
        request: Req,
        write_timeout: Duration,
    ) -> impl Future<Output = Result<PendingResponse>> + Send + 'static {
        let encode = move |buf: &mut BytesMut, header: RequestHeader, _: &mut Vec<Bytes>| {
            encode_request(buf, header, &request).map_err(|e| e.to_string())
        };
        self.queue_frame(api, encode, write_timeout)
    }

    /// Takes a strict turn now; the returned future writes the frame
    /// `encode` lays out once the turn comes, within `write_timeout`.
    fn queue_frame(
        &self,
        api: ApiKey,
        encode: impl FnOnce(&mut BytesMut, RequestHeader, &mut Vec<Bytes>) -> std::result::Result<(), String>
            + Send
            + 'static,
        write_timeout: Duration,
    ) -> impl Future<Output = Result<PendingResponse>> + Send + 'static {
        let turn = self.take_turn(true);
        let connection = self.clone();
        async move {
            let write = connection.write_frame(turn, api, encode);
            match tokio::time::timeout(write_timeout, write).await {
                Ok(written) => written,
                // Dropping the write (and its turn) abandoned the connection.
                Err(_) => Err(ClientError::Io {
                    addr: connection.inner.addr.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "the {} frame was not written within {} ms (the connection did not drain)",
                            api.name(),
                            write_timeout.as_millis()
                        ),
                    ),
                }),
            }
        }
    }

    /// Takes the next place in the connection's write order; `strict`:
    /// giving it up before the frame is written abandons the connection
    /// (see [`Turn`]).
    fn take_turn(&self, strict: bool) -> Turn {
        let (done, next) = oneshot::channel();
        let after = self
            .inner
            .last_turn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(next);
        Turn {
            after,
            done: Some(done),
            strict: strict.then(|| Arc::clone(&self.inner)),
        }
    }

    /// Takes the next request id and registers its answer's slot.
    fn register(&self, api: ApiKey) -> Result<(i32, oneshot::Receiver<Reply>)> {
        let request_id = self.inner.next_request_id.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let (tx, rx) = oneshot::channel();
        let mut pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
        match pending.as_mut() {
            Some(map) => {
                map.insert(request_id, tx);
                Ok((request_id, rx))
            }
            None => Err(self.closed(api)),
        }
    }

    /// Writes `request` to the socket (after the frames queued before it)
    /// and returns the handle its answer arrives on. Requests sent one after
    /// another by one task reach the server in that order.
    pub async fn send<Req: Message>(&self, api: ApiKey, request: &Req) -> Result<PendingResponse> {
        let turn = self.take_turn(false);
        self.write_frame(turn, api, |buf, header, _| {
            encode_request(buf, header, request).map_err(|e| e.to_string())
        })
        .await
    }

    /// Waits for `turn`, registers a request of `api`, has `encode` lay out
    /// its frame — whole in `buf`, or as `chunks` written in order
    /// (vectored) — and writes it under the connection's write lock, then
    /// releases the turn. A frame written only in part abandons the
    /// connection ([`PartialFrameGuard`]). Registering under the lock, once
    /// it is this frame's turn, leaves nothing behind when the caller gives
    /// up while waiting, and sees a connection a torn frame abandoned.
    async fn write_frame(
        &self,
        mut turn: Turn,
        api: ApiKey,
        encode: impl FnOnce(
            &mut BytesMut,
            RequestHeader,
            &mut Vec<Bytes>,
        ) -> std::result::Result<(), String>,
    ) -> Result<PendingResponse> {
        turn.wait().await;
        // A frame given up mid-write may still hold the lock of a connection
        // already abandoned: fail now rather than wait for it.
        if self.is_closed() {
            return Err(self.closed(api));
        }
        let rx = {
            let mut write = self.inner.writer.lock().await;
            let (request_id, rx) = self.register(api)?;
            let header = RequestHeader {
                api_key: api.id(),
                api_version: api.served_versions().map_or(0, |v| v.max),
                request_id,
            };
            let WriteSide {
                socket,
                buf,
                chunks,
            } = &mut *write;
            buf.clear();
            chunks.clear();
            if let Err(e) = encode(buf, header, chunks) {
                self.inner.forget(request_id);
                // Refused for good, nothing written: the next frame may go.
                turn.release();
                return Err(ClientError::Invalid(e));
            }
            let frame = PartialFrameGuard::arm(&self.inner);
            let written = if chunks.is_empty() {
                socket.write_all(buf).await
            } else {
                write_all_chunks(chunks, |cx, slices| {
                    Pin::new(&mut *socket).poll_write_vectored(cx, slices)
                })
                .await
            };
            chunks.clear();
            if let Err(source) = written {
                drop(frame);
                return Err(ClientError::Io {
                    addr: self.inner.addr.clone(),
                    source,
                });
            }
            frame.disarm();
            rx
        };
        // The next frame's turn begins once this one is on the socket.
        turn.release();
        Ok(PendingResponse {
            connection: self.clone(),
            api,
            rx,
        })
    }

    fn closed(&self, api: ApiKey) -> ClientError {
        ClientError::ConnectionClosed {
            addr: self.inner.addr.clone(),
            api: api.name(),
        }
    }
}

/// A request already written to its connection, waiting for its answer.
pub struct PendingResponse {
    connection: ServerConnection,
    api: ApiKey,
    rx: oneshot::Receiver<Reply>,
}

impl PendingResponse {
    /// Waits for the answer's undecoded body, the server's error, or the
    /// connection's death.
    pub async fn wait_raw(self) -> Result<Bytes> {
        match self.rx.await {
            Ok(Ok(body)) => Ok(body),
            Ok(Err(error)) => Err(ClientError::server(self.api, error)),
            Err(_) => Err(self.connection.closed(self.api)),
        }
    }

    /// Waits for the answer and decodes it as `Resp`.
    pub async fn wait<Resp: Message + Default>(self) -> Result<Resp> {
        let api = self.api;
        let body = self.wait_raw().await?;
        Resp::decode(body).map_err(|e| ClientError::Protocol {
            api: api.name(),
            message: e.to_string(),
        })
    }
}

/// The client's connections, one per server address, reopened when one has
/// died. Looked up per request batch or metadata refresh, never per record.
#[derive(Default)]
pub(crate) struct ConnectionPool {
    connections: Mutex<HashMap<String, ServerConnection>>,
}

impl ConnectionPool {
    /// Adds an open connection (e.g. the bootstrap one) to the pool.
    pub(crate) fn insert(&self, connection: ServerConnection) {
        let mut map = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(connection.addr().to_owned(), connection);
    }

    /// The live connection to `addr`, connecting (again) when there is none.
    pub(crate) async fn get(&self, addr: &str) -> Result<ServerConnection> {
        {
            let map = self.connections.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = map.get(addr).filter(|c| !c.is_closed()) {
                return Ok(c.clone());
            }
        }
        let fresh = ServerConnection::connect(addr).await?;
        let mut map = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        // Another caller may have reconnected meanwhile: keep one connection.
        match map.get(addr).filter(|c| !c.is_closed()) {
            Some(existing) => Ok(existing.clone()),
            None => {
                map.insert(addr.to_owned(), fresh.clone());
                Ok(fresh)
            }
        }
    }
}

impl Inner {
    fn forget(&self, request_id: i32) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(map) = pending.as_mut() {
            map.remove(&request_id);
        }
    }

    fn complete(&self, request_id: i32, reply: Reply) {
        let sender = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.as_mut().and_then(|map| map.remove(&request_id))
        };
        match sender {
            // The caller may have given up (dropped its future); nothing to do.
            Some(sender) => {
                let _ = sender.send(reply);
            }
            None => tracing::warn!(
                addr = %self.addr,
                request_id,
                "response for a request that is not waiting"
            ),
        }
    }

    /// Gives the connection up: fails every waiting request, refuses new
    /// ones (so the pool reconnects) and stops the response reader.
    fn abandon(&self, reason: ApiError) {
        self.fail_all(reason);
        if let Some(reader) = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take() {
            reader.abort();
        }
    }

    /// Fails every waiting request with `reason` and refuses new ones.
    fn fail_all(&self, reason: ApiError) {
        let map = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.take()
        };
        for (_, sender) in map.into_iter().flatten() {
            let _ = sender.send(Err(reason.clone()));
        }
    }
}

/// Lays out a ProduceLog request's frame with its batches as chunks.
fn produce_log_frame(
    request: pb::ProduceLogRequest,
) -> impl FnOnce(&mut BytesMut, RequestHeader, &mut Vec<Bytes>) -> std::result::Result<(), String>
       + Send
       + 'static {
    move |buf, header, chunks| {
        encode_produce_log_request_chunks(buf, header, request, chunks).map_err(|e| e.to_string())
    }
}

/// The end of one turn, as the next frame waits for it: it resolves with
/// `Err` (the sender dropped) when that frame is done with the socket, or
/// with the end of an earlier turn to wait for instead, handed over by a
/// turn given up while it was still waiting.
type TurnEnd = oneshot::Receiver<TurnEndHandover>;

/// What a turn given up while waiting passes to the next frame: the end
/// it was itself waiting for.
struct TurnEndHandover(TurnEnd);

/// One frame's place in its connection's write order. Released when the
/// frame is written ([`Turn::release`]) or the turn is dropped (the frame
/// failed or was given up), which lets the next frame go. A turn dropped
/// before its own turn came hands what it was waiting for on to the next
/// frame, so a cancelled `send` never lets the frame behind it overtake
/// the one in front.
///
/// A strict turn (a queued frame's) dropped unreleased abandons the
/// connection first, so a frame queued after one that was given up is
/// never written after the frames before it: queued frames keep their
/// order or fail.
struct Turn {
    /// The previous frame's turn: resolves (its sender dropped) when that
    /// frame is done with the socket. `None` for the first frame.
    after: Option<TurnEnd>,
    /// Held until this frame is done; dropping it releases the next frame.
    done: Option<oneshot::Sender<TurnEndHandover>>,
    /// For a strict turn, the connection to abandon if it is dropped
    /// unreleased.
    strict: Option<Arc<Inner>>,
}

impl Turn {
    /// Waits until every frame queued before this one is done.
    async fn wait(&mut self) {
        // Awaited in place, not taken: a turn dropped mid-wait still holds
        // what it waits for and hands it over (see `Drop`).
        while let Some(previous) = self.after.as_mut() {
            match previous.await {
                Ok(TurnEndHandover(earlier)) => self.after = Some(earlier),
                Err(_) => self.after = None,
            }
        }
    }

    /// This frame is done with the socket: the next one may go.
    fn release(&mut self) {
        self.done = None;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Runs before the fields drop, so the abandonment happens before
        // `done` releases the next frame.
        if let (Some(_), Some(inner)) = (&self.done, &self.strict) {
            inner.abandon(ErrorCode::NetworkException.with_message(format!(
                "a queued request frame to {} was given up before it was written; \
                 the connection is closed so that no later frame overtakes it",
                inner.addr
            )));
            // The next frames fail on the closed connection at once.
            return;
        }
        // A plain turn given up before its turn came: the next frame waits
        // for what this one waited for. (Fails only if the next frame is
        // gone too.)
        if let (Some(done), Some(after)) = (self.done.take(), self.after.take()) {
            let _ = done.send(TurnEndHandover(after));
        }
    }
}

/// Abandons the connection when dropped while armed: a request frame
/// written only in part — the write failed, or the caller gave up on it
/// (a timeout dropped the future) — leaves the stream mid-frame, and any
/// later request would be read by the server as the rest of that frame.
struct PartialFrameGuard<'a> {
    inner: &'a Inner,
    armed: bool,
}

impl<'a> PartialFrameGuard<'a> {
    /// Armed before the first byte of a frame is written.
    fn arm(inner: &'a Inner) -> Self {
        Self { inner, armed: true }
    }

    /// The whole frame is on the socket.
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for PartialFrameGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.inner
                .abandon(ErrorCode::NetworkException.with_message(format!(
                    "a request frame to {} was only partly written; the connection is closed",
                    self.inner.addr
                )));
        }
    }
}

/// Reads response frames until the socket closes or a frame is malformed;
/// returns why the connection ended.
async fn read_responses(socket: &mut tokio::net::tcp::OwnedReadHalf, inner: &Inner) -> ApiError {
    let decoder = FrameDecoder::new(MAX_RESPONSE_FRAME_BYTES);
    let mut buf = BytesMut::with_capacity(READ_BUFFER_BYTES);
    loop {
        loop {
            match decoder.decode_response(&mut buf) {
                Ok(Some(ResponseFrame::Success { request_id, body })) => {
                    inner.complete(request_id, Ok(body))
                }
                Ok(Some(ResponseFrame::Error { request_id, error })) => {
                    inner.complete(request_id, Err(error))
                }
                Ok(Some(ResponseFrame::ServerFailure { error })) => return error,
                Ok(None) => break,
                Err(e) => {
                    return ErrorCode::NetworkException
                        .with_message(format!("malformed response frame from {}: {e}", inner.addr))
                }
            }
        }
        match socket.read_buf(&mut buf).await {
            Ok(0) => {
                return ErrorCode::NetworkException
                    .with_message(format!("connection to {} closed by the server", inner.addr))
            }
            Ok(_) => {}
            Err(e) => {
                return ErrorCode::NetworkException
                    .with_message(format!("reading from {} failed: {e}", inner.addr))
            }
        }
    }
}
