//! The network loop: accept bounded by a semaphore (`connections-max`), one
//! reader task per connection cutting frames with fjord-proto's decoder, one
//! task per request (bounded per connection by `in-flight-requests-max`), and
//! one writer task per connection writing answers as they complete. Fluss
//! clients match answers by request id, so a slow long-poll never holds up
//! a produce on the same connection. ProduceLog requests of one connection
//! append in arrival order (their durability waits still overlap), as a
//! pipelining idempotent writer needs.
//!
//! A malformed or oversized frame closes only its connection (the stream
//! position is lost); an unknown api key or version, or a body that does not
//! parse, is answered with the Fluss error code and the connection stays up.
//! On shutdown, readers stop reading, in-flight requests finish (long-polls
//! are woken), their answers are written, then connections close.
//!
//! FetchLog answers are written as chunks (fjord-proto's
//! `encode_fetch_log_response_chunks`), so record bytes read from segments
//! reach the socket without being copied into the frame buffer.
//!
//! Large frames (a writer's produce requests) are read into pooled buffers of
//! their own and the reader asks the kernel (`SO_RCVLOWAT`) to wake it once a
//! frame's missing bytes arrived, not once per segment.

use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use fjord_proto::{
    decode_request, encode_error_response, encode_fetch_log_response_chunks, ApiError, ApiKey,
    ErrorCode, FrameDecoder, RequestFrame, Response,
};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use fjord_proto::chunks::write_all_chunks;
use fjord_proto::frame::LENGTH_FIELD_BYTES;

use crate::api;
use crate::node::Node;

/// Initial read buffer per connection; grows to the size of the largest
/// frame seen (bounded by `frame-bytes-max`).
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Frames at least this large are gathered in a pooled buffer of their own
/// ([`FramePool`]) instead of the connection's shared read buffer.
const LARGE_FRAME_BYTES: usize = 64 * 1024;

/// Most spare large-frame buffers a connection keeps: enough for the
/// produce requests a pipelining writer has in flight at once.
const POOLED_BUFFERS_MAX: usize = 4;

/// Largest buffer a connection keeps for reuse; a bigger frame's buffer is
/// freed after use. Bounds the memory an idle connection holds to
/// `POOLED_BUFFERS_MAX` times this.
const POOLED_BUFFER_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Most bytes the reader asks the kernel to gather before waking it
/// (`SO_RCVLOWAT`): a large frame then costs a few wake-ups instead of one
/// per loopback segment (server context switches per `long` run ~4000–5600
/// → ~2400–3100, docs/bench-notes/long.md). Bounded because the kernel grows the socket's
/// receive buffer to hold the low-water mark.
const RCVLOWAT_BYTES_MAX: usize = 512 * 1024;

/// How long shutdown waits for connections to finish their in-flight
/// requests and write the answers. Bounds shutdown when a peer stops reading
/// (its writer would otherwise block forever).
const SHUTDOWN_GRACE_MS: u64 = 30_000;

/// An encoded answer (its frame as chunks to write in order) and the
/// in-flight slot it frees once written.
type Outgoing = (Vec<Bytes>, OwnedSemaphorePermit);

/// Accepts connections until `shutdown` turns true, then waits for every
/// connection to finish its in-flight requests.
pub async fn accept_loop(node: Arc<Node>, listener: TcpListener) {
    let slots = Arc::new(Semaphore::new(node.config.connections_max));
    let mut shutdown = node.shutdown.clone();
    let mut connections = JoinSet::new();
    loop {
        // The slot is taken before accept: at the limit, new clients wait in
        // the kernel's backlog instead of costing us a task and buffers.
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            _ = shutdown.wait_for(|s| *s) => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                debug!(%peer, "connection accepted");
                let node = Arc::clone(&node);
                connections.spawn(async move {
                    serve_connection(node, stream).await;
                    drop(slot);
                });
            }
            Err(e) => {
                // Transient (EMFILE, ECONNABORTED): log and keep serving.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
        // Reap finished connection tasks so the set stays small.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    info!(
        open = connections.len(),
        "stopped accepting; draining connections"
    );
    let drained = tokio::time::timeout(Duration::from_millis(SHUTDOWN_GRACE_MS), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            open = connections.len(),
            "connections still busy after {SHUTDOWN_GRACE_MS} ms (a peer not reading its answers?); closing them"
        );
        connections.shutdown().await;
    }
}

/// Serves one connection until the peer closes it, it sends a bad frame, or
/// the server shuts down.
async fn serve_connection(node: Arc<Node>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().ok();
    let (mut reader, writer) = stream.into_split();
    let in_flight_max = node.config.in_flight_per_connection_max;
    let in_flight = Arc::new(Semaphore::new(in_flight_max));
    // Every queued answer holds an in-flight permit, so the queue never
    // holds more than `in_flight_max` entries.
    let (tx, rx) = mpsc::channel::<Outgoing>(in_flight_max);
    let writer_task = tokio::spawn(write_loop(writer, rx));
    let node_shutdown: watch::Receiver<bool> = node.shutdown.clone();
    let decoder = FrameDecoder::new(node.config.frame_bytes_max);
    let mut buf = BytesMut::with_capacity(READ_BUFFER_BYTES);
    let mut low_water = LowWater::default();
    let pool = FramePool::default();
    // Whether the last frame was a large one (see the read below).
    let mut after_large = false;
    let mut conn = Dispatcher {
        node,
        in_flight,
        shutdown: node_shutdown,
        appends: api::AppendLane::default(),
        tx,
    };

    'conn: loop {
        loop {
            match decoder.decode_request(&mut buf) {
                Ok(Some(frame)) => {
                    after_large = false;
                    if !conn.dispatch(frame).await {
                        break 'conn;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    warn!(?peer, error = %e, "bad frame; closing the connection");
                    break 'conn;
                }
            }
        }
        // The pending frame's size is known once its prefix arrived (it
        // passed the checks in decode_request).
        let pending = decoder.peek_frame_bytes(&buf, 0).ok().flatten();
        if let Some(frame_bytes) = pending.filter(|&n| n >= LARGE_FRAME_BYTES) {
            // A large frame is gathered in a buffer of its own, reused from
            // the connection's pool once the request is done with it: no
            // fresh (page-faulting) allocation per frame, and the frame never
            // shares memory with the frames around it.
            let mut whole = pool.take(frame_bytes);
            whole.extend_from_slice(&buf);
            buf.clear();
            while whole.len() < frame_bytes {
                let missing = frame_bytes - whole.len();
                // Wake only once the rest (up to RCVLOWAT_BYTES_MAX) is
                // readable instead of once per arriving segment.
                low_water.set(&reader, missing);
                let mut rest = (&mut whole).limit(missing);
                tokio::select! {
                    read = reader.read_buf(&mut rest) => match read {
                        Ok(0) => break 'conn,
                        Ok(_) => {}
                        Err(e) => {
                            debug!(?peer, error = %e, "read failed");
                            break 'conn;
                        }
                    },
                    _ = conn.shutdown.wait_for(|s| *s) => break 'conn,
                }
            }
            let whole = Bytes::from_owner(PooledFrame {
                bytes: whole,
                pool: pool.clone(),
            });
            match decoder.decode_whole_request(whole) {
                Ok(frame) => {
                    if !conn.dispatch(frame).await {
                        break 'conn;
                    }
                }
                Err(e) => {
                    warn!(?peer, error = %e, "bad frame; closing the connection");
                    break 'conn;
                }
            }
            after_large = true;
            continue;
        }
        // A small frame (or an unknown length): read into the shared buffer,
        // reserving room for the whole pending frame at once when its length
        // is known.
        if let Some(frame_bytes) = pending {
            buf.reserve(frame_bytes.saturating_sub(buf.len()).max(1));
        } else if buf.capacity() == buf.len() {
            buf.reserve(READ_BUFFER_BYTES);
        }
        // Wake on any byte: a small frame arriving in pieces gains little
        // from waiting for its rest, and raising the mark for it would cost
        // a system call to raise and another to lower it again. This lowers
        // the mark a large frame raised (a no-op otherwise).
        low_water.set(&reader, 1);
        // After a large frame the next is likely large too: read only its
        // length prefix here, so its body goes straight into a pooled
        // buffer instead of being read here and copied there.
        let limit = match pending {
            None if after_large => LENGTH_FIELD_BYTES.saturating_sub(buf.len()).max(1),
            _ => usize::MAX,
        };
        let mut into = (&mut buf).limit(limit);
        tokio::select! {
            read = reader.read_buf(&mut into) => match read {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    debug!(?peer, error = %e, "read failed");
                    break;
                }
            },
            _ = conn.shutdown.wait_for(|s| *s) => break,
        }
    }
    let Dispatcher { tx, .. } = conn;
    // In-flight requests keep their own senders; the writer ends after the
    // last of them is written.
    drop(tx);
    let _ = writer_task.await;
    debug!(?peer, "connection closed");
}

/// What a connection's reader needs to hand a frame to its own task.
struct Dispatcher {
    node: Arc<Node>,
    /// Free in-flight slots of this connection.
    in_flight: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
    /// ProduceLog requests append in arrival order (see api::AppendLane).
    appends: api::AppendLane,
    /// Answers to the connection's writer task.
    tx: mpsc::Sender<Outgoing>,
}

impl Dispatcher {
    /// Waits for an in-flight slot and starts answering `frame` in a task of
    /// its own. `false` when the connection must close (shutdown).
    async fn dispatch(&mut self, frame: RequestFrame) -> bool {
        let permit = tokio::select! {
            p = Arc::clone(&self.in_flight).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return false,
            },
            _ = self.shutdown.wait_for(|s| *s) => return false,
        };
        let turn = (frame.header.api_key == ApiKey::ProduceLog as i16
            || frame.header.api_key == ApiKey::PutKv as i16)
            .then(|| self.appends.turn());
        let node = Arc::clone(&self.node);
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let out = answer(&node, frame, turn).await;
            // The writer is gone only if the connection died.
            let _ = tx.send((out, permit)).await;
        });
        true
    }
}

/// A connection's spare buffers for large frames. A buffer returns here when
/// the last slice of its frame (the request's records) is dropped, so a
/// steady stream of large produce requests reuses a few buffers instead of
/// allocating (and page-faulting) one per frame (page faults under `recv`
/// 11.5 % → 2.7 % of the server's samples, docs/bench-notes/long.md).
#[derive(Clone, Default)]
struct FramePool {
    spare: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl FramePool {
    /// An empty buffer with room for `bytes`: a spare one when there is
    /// one (grown if too small), else a new one.
    fn take(&self, bytes: usize) -> Vec<u8> {
        let reused = {
            let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
            let fits = spare.iter().position(|b| b.capacity() >= bytes);
            match fits {
                Some(i) => Some(spare.swap_remove(i)),
                None => spare.pop(),
            }
        };
        let mut buf = reused.unwrap_or_default();
        buf.clear();
        buf.reserve(bytes);
        buf
    }

    /// Keeps `buf` for a later frame, within [`POOLED_BUFFERS_MAX`] and
    /// [`POOLED_BUFFER_BYTES_MAX`]; otherwise frees it.
    fn give_back(&self, buf: Vec<u8>) {
        if buf.capacity() > POOLED_BUFFER_BYTES_MAX {
            return;
        }
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if spare.len() < POOLED_BUFFERS_MAX {
            spare.push(buf);
        }
    }
}

/// A large frame's bytes, owned by the `Bytes` its request slices; returns
/// the buffer to its pool when the last slice is dropped.
struct PooledFrame {
    bytes: Vec<u8>,
    pool: FramePool,
}

impl AsRef<[u8]> for PooledFrame {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for PooledFrame {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.bytes));
    }
}

/// The socket's receive low-water mark (`SO_RCVLOWAT`), changed only when
/// it differs from what was last set: raised for a large frame's missing
/// bytes (once per read step) and lowered back to 1 after it; never touched
/// while small frames stream in, whole or in pieces.
struct LowWater {
    current: usize,
    /// Set after a failed call: the socket keeps the default (wake on any
    /// byte), which is only slower.
    unsupported: bool,
}

impl Default for LowWater {
    fn default() -> Self {
        Self {
            current: 1,
            unsupported: false,
        }
    }
}

impl LowWater {
    /// Wakes the reader once `missing` bytes (capped at
    /// [`RCVLOWAT_BYTES_MAX`]) are readable; 1 means on any byte. The peer
    /// owes us at least `missing` bytes of the frame it started, so waiting
    /// for them cannot stall a well-behaved peer; end of stream and errors
    /// wake the reader regardless.
    fn set(&mut self, reader: &OwnedReadHalf, missing: usize) {
        let wanted = missing.clamp(1, RCVLOWAT_BYTES_MAX);
        if self.unsupported || wanted == self.current {
            return;
        }
        let value = libc::c_int::try_from(wanted).unwrap_or(1);
        let fd = reader.as_ref().as_raw_fd();
        // SAFETY: `fd` is the connection's open socket (borrowed from
        // `reader` for the call) and `value` outlives the call; the option
        // value is a C int, as SO_RCVLOWAT expects.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                std::ptr::from_ref(&value).cast::<libc::c_void>(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            self.current = wanted;
        } else {
            debug!(error = %std::io::Error::last_os_error(), "cannot set SO_RCVLOWAT; reading as bytes arrive");
            self.unsupported = true;
        }
    }
}

/// Decodes, handles and encodes one request. Never fails: every problem
/// becomes an error frame answering the request id. FetchLog answers hand
/// the record bytes read from segments through as their own chunks (no copy
/// into the frame).
async fn answer(
    node: &Arc<Node>,
    frame: RequestFrame,
    turn: Option<api::AppendTurn>,
) -> Vec<Bytes> {
    let header = frame.header;
    let result = match decode_request(header.api_key, header.api_version, frame.body) {
        Ok(request) => api::dispatch_in_turn(node, request, header.api_version, turn).await,
        Err(e) => Err(e.to_api_error()),
    };
    let mut out = BytesMut::new();
    let mut chunks = Vec::with_capacity(1);
    let encoded = match result {
        Ok(Response::FetchLog(fetch)) => {
            encode_fetch_log_response_chunks(&mut out, header.request_id, fetch, &mut chunks)
        }
        Ok(response) => response.encode_frame(&mut out, header.request_id),
        Err(error) => encode_error_response(&mut out, header.request_id, &error),
    };
    if let Err(e) = encoded {
        out.clear();
        chunks.clear();
        let error = ApiError::new(
            ErrorCode::UnknownServerError,
            format!("cannot encode the response: {e}"),
        );
        // A bare error response is a few bytes; it always encodes.
        let _ = encode_error_response(&mut out, header.request_id, &error);
    }
    if !out.is_empty() {
        chunks.push(out.freeze());
    }
    chunks
}

/// Writes answers in completion order; whatever is queued goes out in one
/// vectored write.
async fn write_loop(mut writer: OwnedWriteHalf, mut rx: mpsc::Receiver<Outgoing>) {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut permits: Vec<OwnedSemaphorePermit> = Vec::new();
    while let Some((first, permit)) = rx.recv().await {
        chunks.extend(first);
        permits.push(permit);
        while let Ok((more, permit)) = rx.try_recv() {
            chunks.extend(more);
            permits.push(permit);
        }
        let written = write_all_chunks(&mut chunks, |cx, slices| {
            Pin::new(&mut writer).poll_write_vectored(cx, slices)
        })
        .await;
        if written.is_err() {
            return;
        }
        chunks.clear();
        permits.clear();
    }
    let _ = writer.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pooled_buffer_comes_back_empty_with_room_for_the_next_frame() {
        let pool = FramePool::default();
        let mut first = pool.take(100);
        first.extend_from_slice(&[7; 100]);
        let address = first.as_ptr();
        drop(Bytes::from_owner(PooledFrame {
            bytes: first,
            pool: pool.clone(),
        }));
        let again = pool.take(80);
        assert!(again.is_empty(), "no bytes of the previous frame");
        assert_eq!(again.as_ptr(), address, "the same allocation, reused");
        let bigger = {
            drop(Bytes::from_owner(PooledFrame {
                bytes: again,
                pool: pool.clone(),
            }));
            pool.take(1000)
        };
        assert!(bigger.is_empty() && bigger.capacity() >= 1000);
    }

    #[test]
    fn the_pool_keeps_a_bounded_number_of_bounded_buffers() {
        let pool = FramePool::default();
        for _ in 0..POOLED_BUFFERS_MAX + 3 {
            pool.give_back(Vec::with_capacity(16));
        }
        pool.give_back(Vec::with_capacity(POOLED_BUFFER_BYTES_MAX + 1));
        let spare = pool.spare.lock().unwrap();
        assert_eq!(spare.len(), POOLED_BUFFERS_MAX);
        assert!(spare
            .iter()
            .all(|b| b.capacity() <= POOLED_BUFFER_BYTES_MAX));
    }
}
