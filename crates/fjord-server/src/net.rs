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

use std::io::IoSlice;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use fjord_proto::{
    decode_request, encode_error_response, encode_fetch_log_response_chunks, ApiError, ApiKey,
    ErrorCode, FrameDecoder, RequestFrame, Response,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::api;
use crate::node::Node;

/// Initial read buffer per connection; grows to the size of the largest
/// frame seen (bounded by `frame-bytes-max`).
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// How long shutdown waits for connections to finish their in-flight
/// requests and write the answers. Bounds shutdown when a peer stops reading
/// (its writer would otherwise block forever).
const SHUTDOWN_GRACE_MS: u64 = 30_000;

/// Most buffers handed to one vectored write.
const IOV_MAX_CHUNKS: usize = 64;

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
    let decoder = FrameDecoder::new(node.config.frame_bytes_max);
    let mut shutdown: watch::Receiver<bool> = node.shutdown.clone();
    let mut buf = BytesMut::with_capacity(READ_BUFFER_BYTES);
    // The previous ProduceLog's "appended" signal: produce requests append in
    // arrival order (see api::AppendTurn).
    let mut last_append: Option<oneshot::Receiver<()>> = None;

    'conn: loop {
        loop {
            match decoder.decode_request(&mut buf) {
                Ok(Some(frame)) => {
                    let permit = tokio::select! {
                        p = Arc::clone(&in_flight).acquire_owned() => match p {
                            Ok(p) => p,
                            Err(_) => break 'conn,
                        },
                        _ = shutdown.wait_for(|s| *s) => break 'conn,
                    };
                    let turn = (frame.header.api_key == ApiKey::ProduceLog as i16).then(|| {
                        let (turn, next) = api::AppendTurn::after(last_append.take());
                        last_append = Some(next);
                        turn
                    });
                    let node = Arc::clone(&node);
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        let out = answer(&node, frame, turn).await;
                        // The writer is gone only if the connection died.
                        let _ = tx.send((out, permit)).await;
                    });
                }
                Ok(None) => break,
                Err(e) => {
                    warn!(?peer, error = %e, "bad frame; closing the connection");
                    break 'conn;
                }
            }
        }
        // Reserve room for the whole pending frame at once when its length
        // is known (it passed the size check in decode_request).
        if let Ok(Some(frame_bytes)) = decoder.peek_frame_bytes(&buf, 0) {
            buf.reserve(frame_bytes.saturating_sub(buf.len()));
        } else if buf.capacity() == buf.len() {
            buf.reserve(READ_BUFFER_BYTES);
        }
        tokio::select! {
            read = reader.read_buf(&mut buf) => match read {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    debug!(?peer, error = %e, "read failed");
                    break;
                }
            },
            _ = shutdown.wait_for(|s| *s) => break,
        }
    }
    // In-flight requests keep their own senders; the writer ends after the
    // last of them is written.
    drop(tx);
    let _ = writer_task.await;
    debug!(?peer, "connection closed");
}

/// Decodes, handles and encodes one request. Never fails: every problem
/// becomes an error frame answering the request id. FetchLog answers hand
/// the record bytes read from segments through as their own chunks (no copy
/// into the frame).
async fn answer(node: &Node, frame: RequestFrame, turn: Option<api::AppendTurn>) -> Vec<Bytes> {
    let header = frame.header;
    let result = match decode_request(header.api_key, header.api_version, frame.body) {
        Ok(request) => api::dispatch_in_turn(node, request, turn).await,
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
        if write_all_chunks(&mut writer, &mut chunks).await.is_err() {
            return;
        }
        chunks.clear();
        permits.clear();
    }
    let _ = writer.shutdown().await;
}

/// Writes every chunk, in order, with vectored writes.
async fn write_all_chunks(
    writer: &mut OwnedWriteHalf,
    chunks: &mut [Bytes],
) -> std::io::Result<()> {
    let mut first = 0;
    while first < chunks.len() {
        if chunks[first].is_empty() {
            first += 1;
            continue;
        }
        let slices: Vec<IoSlice<'_>> = chunks[first..]
            .iter()
            .take(IOV_MAX_CHUNKS)
            .map(|c| IoSlice::new(c))
            .collect();
        let mut written = writer.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let len = chunks[first].len();
            if written >= len {
                written -= len;
                first += 1;
            } else {
                chunks[first].advance(written);
                written = 0;
            }
        }
    }
    Ok(())
}
