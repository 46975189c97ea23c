//! The write order of [`ServerConnection::queue_produce_log`]: frames reach
//! the server in the order they were queued, whenever their futures run,
//! and a frame that could not be written in time abandons the connection
//! rather than let a frame queued after it overtake it; a plain `send`
//! given up while it waits hands its place on, so the frame behind it
//! still waits for the frame in front.

mod support;

use support::one_bucket_produce_request as request;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use bytes::Bytes;
use fjord_client::connection::PendingResponse;
use fjord_client::{ClientError, ServerConnection};
use fjord_proto::messages::ProduceLogRequest;
use prost::Message;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Records of a request far larger than loopback socket buffers hold (a few
/// MiB), so its write stalls while the peer does not read.
const STALLED_RECORDS_BYTES: usize = 32 << 20;
/// Write timeout of a frame the test expects to time out: it can never be
/// written, so the value only sets how long the test takes.
const SHORT_WRITE_TIMEOUT: Duration = Duration::from_millis(300);
/// Outer bound of every wait: turns a hang into a failure, asserts no timing.
const HANG: Duration = Duration::from_secs(60);

/// Reads one ProduceLog request frame and returns its bucket id.
async fn read_bucket(socket: &mut TcpStream) -> std::io::Result<i32> {
    let length = socket.read_u32().await?;
    let mut frame = vec![0u8; length as usize];
    socket.read_exact(&mut frame).await?;
    // api key (2), api version (2), request id (4), then the body.
    let body = ProduceLogRequest::decode(&frame[8..]).map_err(std::io::Error::other)?;
    Ok(body.buckets_req[0].bucket_id)
}

/// Waits until every task's frame is written, then reads as many frames
/// from `peer`: the buckets they carry, in the order they arrived.
async fn written_then_read<T, const N: usize>(
    peer: &mut TcpStream,
    tasks: [tokio::task::JoinHandle<fjord_client::Result<T>>; N],
) -> Vec<i32> {
    for task in tasks {
        tokio::time::timeout(HANG, task)
            .await
            .expect("written")
            .expect("task")
            .expect("the frame is written");
    }
    let mut order = Vec::with_capacity(N);
    for _ in 0..N {
        order.push(
            tokio::time::timeout(HANG, read_bucket(peer))
                .await
                .expect("frame arrives")
                .expect("whole frame"),
        );
    }
    order
}

/// Whether `future` is still pending (polled once, without waiting).
fn is_pending<F: Future>(future: Pin<&mut F>) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    future.poll(&mut cx).is_pending()
}

/// Asserts `given_up` failed with a retriable I/O timeout and `behind`, queued
/// after it, failed on the closed connection instead of being written (or
/// waiting for ever); the connection is closed so the pool reconnects.
async fn assert_gave_up_and_closed(
    connection: &ServerConnection,
    given_up: JoinHandle<fjord_client::Result<PendingResponse>>,
    behind: JoinHandle<fjord_client::Result<PendingResponse>>,
) {
    let given_up = tokio::time::timeout(HANG, given_up)
        .await
        .expect("the frame gives up")
        .expect("task");
    match given_up {
        Err(e @ ClientError::Io { .. }) => assert!(e.is_retriable(), "{e}"),
        Err(e) => panic!("expected a retriable I/O timeout, got {e:?}"),
        Ok(_) => panic!("the frame was written although nothing drained"),
    }
    let behind = tokio::time::timeout(HANG, behind)
        .await
        .expect("the frame queued behind fails instead of waiting")
        .expect("task");
    assert!(
        matches!(behind, Err(ClientError::ConnectionClosed { .. })),
        "a frame queued behind a given-up one must not be written: {:?}",
        behind.err()
    );
    assert!(connection.is_closed(), "the pool must reconnect");
}

async fn connected_pair() -> (ServerConnection, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let connection = ServerConnection::connect(&addr).await.expect("connect");
    let (peer, _) = listener.accept().await.expect("accept");
    (connection, peer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_frames_reach_the_server_in_queue_order_whichever_future_runs_first() {
    let (connection, mut peer) = connected_pair().await;
    let first = connection.queue_produce_log(request(0, Bytes::from_static(b"a")), HANG);
    let second = connection.queue_produce_log(request(1, Bytes::from_static(b"b")), HANG);
    let mut third =
        Box::pin(connection.queue_produce_log(request(2, Bytes::from_static(b"c")), HANG));
    // The last frame queued runs first: it must wait for the two before it.
    assert!(
        is_pending(third.as_mut()),
        "the third frame was written before the two queued ahead of it"
    );
    let third = tokio::spawn(third);
    let second = tokio::spawn(second);
    let first = tokio::spawn(first);
    let order = written_then_read(&mut peer, [third, second, first]).await;
    assert_eq!(order, [0, 1, 2], "frames in the order they were queued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_not_written_in_time_abandons_the_connection_and_nothing_queued_after_it_is_written(
) {
    let (connection, mut peer) = connected_pair().await;
    // The peer reads nothing: the first frame's write stalls.
    let stalled = connection.queue_produce_log(
        request(0, Bytes::from(vec![7u8; STALLED_RECORDS_BYTES])),
        SHORT_WRITE_TIMEOUT,
    );
    let marker: &'static [u8] = b"must-not-overtake";
    let queued_after = connection.queue_produce_log(request(1, Bytes::from_static(marker)), HANG);
    let stalled = tokio::spawn(stalled);
    let queued_after = tokio::spawn(queued_after);

    assert_gave_up_and_closed(&connection, stalled, queued_after).await;

    // Everything the peer ever got: part of the stalled frame, never the
    // later one.
    drop(connection);
    let mut received = Vec::new();
    tokio::time::timeout(HANG, peer.read_to_end(&mut received))
        .await
        .expect("the abandoned connection closes")
        .expect("read");
    assert!(
        received.len() < 4 + STALLED_RECORDS_BYTES,
        "the stalled frame was cut"
    );
    assert!(
        !received.windows(marker.len()).any(|w| w == marker),
        "a frame queued after the stalled one reached the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_that_times_out_waiting_for_its_turn_abandons_the_connection() {
    let (connection, mut peer) = connected_pair().await;
    // A caller without a timeout holds the write: the peer reads nothing.
    let holder = connection.clone();
    let holding = tokio::spawn(async move {
        holder
            .send_produce_log(request(0, Bytes::from(vec![7u8; STALLED_RECORDS_BYTES])))
            .await
    });
    // Its frame has begun: it holds the turn (the peer reads no more).
    let mut length = [0u8; 4];
    tokio::time::timeout(HANG, peer.read_exact(&mut length))
        .await
        .expect("the holder's frame begins")
        .expect("read");
    let waiting_marker: &'static [u8] = b"gave-up-waiting";
    let later_marker: &'static [u8] = b"must-not-overtake";
    let waiting = connection.queue_produce_log(
        request(1, Bytes::from_static(waiting_marker)),
        SHORT_WRITE_TIMEOUT,
    );
    let later = connection.queue_produce_log(request(2, Bytes::from_static(later_marker)), HANG);
    let waiting = tokio::spawn(waiting);
    let later = tokio::spawn(later);

    // Were the connection kept, `later` would follow the frame ahead of the
    // timed-out one, overtaking it (or wait for ever behind it).
    assert_gave_up_and_closed(&connection, waiting, later).await;

    holding.abort();
    let _ = holding.await;
    drop(connection);
    let mut received = Vec::new();
    tokio::time::timeout(HANG, peer.read_to_end(&mut received))
        .await
        .expect("the abandoned connection closes")
        .expect("read");
    for marker in [waiting_marker, later_marker] {
        assert!(
            !received.windows(marker.len()).any(|w| w == marker),
            "a frame behind the stalled one reached the server"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_given_up_while_waiting_its_turn_lets_no_later_frame_overtake_an_earlier_one() {
    let (connection, mut peer) = connected_pair().await;
    // Queued first, not yet driven: holds the head of the write order.
    let first = connection.queue_produce_log(request(0, Bytes::from_static(b"a")), HANG);
    // A plain send (e.g. a metadata request) takes its turn behind it and is
    // given up by its caller's timeout while it waits.
    {
        let mut given_up =
            Box::pin(connection.send_produce_log(request(1, Bytes::from_static(b"b"))));
        assert!(
            is_pending(given_up.as_mut()),
            "waits behind the first frame"
        );
    }
    // Queued after the given-up send: must still wait for `first`.
    let mut third =
        Box::pin(connection.queue_produce_log(request(2, Bytes::from_static(b"c")), HANG));
    assert!(
        is_pending(third.as_mut()),
        "the third frame was written before the first"
    );
    let order = written_then_read(&mut peer, [tokio::spawn(third), tokio::spawn(first)]).await;
    assert_eq!(order, [0, 2], "frames in the order they were queued");
    assert!(
        !connection.is_closed(),
        "a plain send given up closes nothing"
    );
}
