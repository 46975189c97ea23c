//! Checks of [`ServerConnection::send_produce_log`] when the
//! caller gives up mid-write, as the writer's sender does when its
//! `tokio::time::timeout` (request timeout + grace) fires while a large
//! request is still going out to a server that reads slowly: the next
//! request on the connection must not be spliced into the torn frame.

mod support;

use support::one_bucket_produce_request as request;

use std::time::Duration;

use bytes::Bytes;
use fjord_client::ServerConnection;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// Records of the first request: far more than loopback socket buffers hold
/// (a few MiB), so its write stalls while the peer does not read.
const STALLED_RECORDS_BYTES: usize = 32 << 20;
/// Bound on reading the frames back, so a torn stream fails the test
/// instead of hanging it.
const STEP: Duration = Duration::from_secs(20);

/// Reads one request frame (4-byte length, then that many bytes) and
/// returns its request id.
async fn read_frame(socket: &mut TcpStream) -> std::io::Result<i32> {
    let length = socket.read_i32().await?;
    let mut frame = vec![0u8; usize::try_from(length).unwrap_or(0)];
    socket.read_exact(&mut frame).await?;
    // api key (2), api version (2), request id (4).
    Ok(i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_cancelled_mid_frame_does_not_splice_the_next_request_into_it() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let connection = ServerConnection::connect(&addr).await.expect("connect");
    let (mut peer, _) = listener.accept().await.expect("accept");

    // The peer reads nothing yet: the write stalls part-way and is cancelled,
    // as the sender's timeout does.
    let stalled = request(0, Bytes::from(vec![7u8; STALLED_RECORDS_BYTES]));
    let cancelled = tokio::time::timeout(
        Duration::from_millis(200),
        connection.send_produce_log(stalled),
    )
    .await;
    assert!(cancelled.is_err(), "the write must still be stalled");
    assert!(
        connection.is_closed(),
        "a connection left mid-frame must report itself closed, so the pool reconnects"
    );

    // The peer now reads, frame by frame, while the next request goes out.
    let reader = tokio::spawn(async move {
        let mut ids = Vec::new();
        while ids.len() < 2 {
            match read_frame(&mut peer).await {
                Ok(id) => ids.push(id),
                Err(_) => break,
            }
        }
        ids
    });
    let next = connection
        .send_produce_log(request(1, Bytes::from_static(b"next")))
        .await;
    match next {
        // Refusing the connection after a torn write is a correct outcome.
        Err(_) => {}
        // Otherwise the peer must see whole frames: the torn one cannot be
        // completed, so the next request has to start at a frame boundary.
        Ok(_) => {
            let ids = tokio::time::timeout(STEP, reader).await;
            let ids = match ids {
                Ok(Ok(ids)) => ids,
                _ => Vec::new(),
            };
            assert_eq!(
                ids.len(),
                2,
                "the peer could not read the next request as a whole frame: \
                 it was written into the middle of the cancelled one (frames read: {ids:?})"
            );
        }
    }
}
