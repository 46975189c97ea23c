//! Review finding: a `send`/`send_produce_log` future dropped while it waits
//! for its turn releases the frame queued after it at once, even though the
//! frame queued before it has not been written: the later frame overtakes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use bytes::Bytes;
use fjord_client::ServerConnection;
use fjord_proto::messages::{PbProduceLogReqForBucket, ProduceLogRequest};
use prost::Message;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// Outer bound of every wait: turns a hang into a failure, asserts no timing.
const HANG: Duration = Duration::from_secs(60);

fn request(bucket_id: i32) -> ProduceLogRequest {
    ProduceLogRequest {
        acks: -1,
        table_id: 1,
        timeout_ms: 30_000,
        buckets_req: vec![PbProduceLogReqForBucket {
            partition_id: None,
            bucket_id,
            records: Bytes::from_static(b"x"),
            original_partition_name: None,
            routing_bucket_count: None,
        }],
    }
}

async fn read_bucket(socket: &mut TcpStream) -> std::io::Result<i32> {
    let length = socket.read_u32().await?;
    let mut frame = vec![0u8; length as usize];
    socket.read_exact(&mut frame).await?;
    let body = ProduceLogRequest::decode(&frame[8..]).map_err(std::io::Error::other)?;
    Ok(body.buckets_req[0].bucket_id)
}

fn is_pending<F: Future>(future: Pin<&mut F>) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    future.poll(&mut cx).is_pending()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "bug: a send dropped while waiting for its turn lets the next frame overtake the one before it"]
async fn a_send_dropped_while_waiting_its_turn_does_not_let_a_later_frame_overtake_an_earlier_one()
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let connection = ServerConnection::connect(&addr).await.expect("connect");
    let (mut peer, _) = listener.accept().await.expect("accept");

    // Queued first, not yet driven: holds the head of the write order.
    let first = connection.queue_produce_log(request(0), HANG);
    // A plain send takes its turn behind `first` and is given up (e.g. the
    // caller's timeout) while it waits.
    {
        let mut cancelled = Box::pin(connection.send_produce_log(request(1)));
        assert!(
            is_pending(cancelled.as_mut()),
            "waits behind the first frame"
        );
    }
    // Queued after the cancelled send: must still wait for `first`.
    let mut third = Box::pin(connection.queue_produce_log(request(2), HANG));
    let third_waited = is_pending(third.as_mut());
    let mut tasks = vec![tokio::spawn(first)];
    if third_waited {
        tasks.push(tokio::spawn(third));
    }
    for task in tasks {
        tokio::time::timeout(HANG, task)
            .await
            .expect("written")
            .expect("task")
            .expect("the frame is written");
    }
    let mut order = Vec::new();
    for _ in 0..2 {
        order.push(
            tokio::time::timeout(HANG, read_bucket(&mut peer))
                .await
                .expect("frame arrives")
                .expect("whole frame"),
        );
    }
    assert_eq!(order, [0, 2], "frames in the order they were queued");
    assert!(third_waited, "the third frame was written before the first");
}
