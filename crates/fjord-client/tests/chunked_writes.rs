//! Checks of `fjord_proto::chunks`, the partial-vectored-write
//! bookkeeping the client's (and the server's) socket writers share
//! (`poll_write_all_chunks`): driven by a model socket that takes an
//! arbitrary number of bytes per write and is sometimes not ready, whatever
//! the chunk lengths (zero-length ones included, more chunks than one write
//! may cover), the bytes written are exactly the chunks' bytes, in order,
//! each once.

use std::io::{ErrorKind, IoSlice};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use fjord_proto::chunks::{
    advance, next_slices, poll_write_all_chunks, write_all_chunks, IOV_MAX_CHUNKS,
};
use proptest::prelude::*;

/// Writes `chunks` through a model socket that accepts at most the next
/// value of `accepts` (cycled, at least 1) bytes per vectored write, and
/// is not ready (`Pending`) on every `pending_every`-th call, polling
/// again until the write completes; returns the bytes it received and the
/// largest slice count one write was given.
fn write_through(
    mut chunks: Vec<Bytes>,
    accepts: &[usize],
    pending_every: usize,
) -> (Vec<u8>, usize) {
    let mut received = Vec::new();
    let mut most_slices = 0;
    let mut first = 0;
    let mut accepts = accepts.iter().cycle();
    let mut calls = 0;
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        let poll = poll_write_all_chunks(&mut cx, &mut chunks, &mut first, |_, slices| {
            calls += 1;
            if calls % pending_every == 0 {
                return Poll::Pending;
            }
            most_slices = most_slices.max(slices.len());
            // The first slice is never empty: a write of only empty slices
            // would return 0, which the writers treat as a dead socket.
            assert!(!slices[0].is_empty(), "a write starts at an empty chunk");
            let mut budget = (*accepts.next().unwrap()).max(1);
            let mut written = 0;
            for slice in slices {
                let take = slice.len().min(budget);
                received.extend_from_slice(&slice[..take]);
                written += take;
                budget -= take;
                if budget == 0 {
                    break;
                }
            }
            Poll::Ready(Ok(written))
        });
        match poll {
            Poll::Ready(result) => {
                result.unwrap();
                return (received, most_slices);
            }
            Poll::Pending => continue,
        }
    }
}

fn chunk_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // Many short and empty chunks so writes cross chunk boundaries, and
    // lists longer than IOV_MAX_CHUNKS.
    proptest::collection::vec(
        prop_oneof![
            3 => proptest::collection::vec(any::<u8>(), 0..1),
            6 => proptest::collection::vec(any::<u8>(), 1..8),
            1 => proptest::collection::vec(any::<u8>(), 8..300),
        ],
        0..(2 * IOV_MAX_CHUNKS + 10),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn partial_writes_deliver_every_chunk_byte_once_in_order(
        parts in chunk_strategy(),
        accepts in proptest::collection::vec(1usize..40, 1..8),
        pending_every in 2usize..6,
    ) {
        let expected: Vec<u8> = parts.concat();
        let chunks: Vec<Bytes> = parts.into_iter().map(Bytes::from).collect();
        let (received, most_slices) = write_through(chunks, &accepts, pending_every);
        prop_assert_eq!(received, expected);
        prop_assert!(most_slices <= IOV_MAX_CHUNKS);
    }
}

#[test]
fn only_empty_chunks_need_no_write() {
    let chunks = vec![Bytes::new(); IOV_MAX_CHUNKS * 3];
    let mut first = 0;
    let mut slices = [IoSlice::new(&[]); IOV_MAX_CHUNKS];
    assert_eq!(next_slices(&chunks, &mut first, &mut slices), 0);
    assert_eq!(first, chunks.len());
}

#[test]
fn a_write_ending_on_a_chunk_boundary_resumes_at_the_next_non_empty_chunk() {
    let mut chunks = vec![
        Bytes::from_static(b"ab"),
        Bytes::new(),
        Bytes::new(),
        Bytes::from_static(b"cd"),
    ];
    let mut first = 0;
    advance(&mut chunks, &mut first, 2);
    let mut slices = [IoSlice::new(&[]); IOV_MAX_CHUNKS];
    assert_eq!(next_slices(&chunks, &mut first, &mut slices), 1);
    assert_eq!(&*slices[0], b"cd");
}

#[test]
fn a_socket_that_takes_nothing_is_an_error_not_an_endless_loop() {
    let mut chunks = vec![Bytes::from_static(b"abc")];
    let mut first = 0;
    let mut calls = 0;
    let mut cx = Context::from_waker(Waker::noop());
    let poll = poll_write_all_chunks(&mut cx, &mut chunks, &mut first, |_, _| {
        calls += 1;
        Poll::Ready(Ok(0))
    });
    match poll {
        Poll::Ready(Err(e)) => assert_eq!(e.kind(), ErrorKind::WriteZero),
        other => panic!("expected WriteZero, got {other:?}"),
    }
    assert_eq!(calls, 1);
}

#[test]
fn a_failed_write_is_returned_as_it_is() {
    let mut chunks = vec![Bytes::from_static(b"abc"), Bytes::from_static(b"def")];
    let mut first = 0;
    let mut cx = Context::from_waker(Waker::noop());
    let poll = poll_write_all_chunks(&mut cx, &mut chunks, &mut first, |_, _| {
        Poll::Ready(Err(ErrorKind::BrokenPipe.into()))
    });
    match poll {
        Poll::Ready(Err(e)) => assert_eq!(e.kind(), ErrorKind::BrokenPipe),
        other => panic!("expected BrokenPipe, got {other:?}"),
    }
}

/// The async form keeps its progress across the polls a socket that is
/// not always ready causes (it wakes the task itself, as a socket would).
#[tokio::test]
async fn the_async_form_resumes_where_a_pending_write_left_off() {
    let parts: [&[u8]; 4] = [b"abc", b"", b"defgh", b"ij"];
    let mut chunks: Vec<Bytes> = parts.iter().map(|p| Bytes::from_static(p)).collect();
    let mut received = Vec::new();
    let mut calls = 0;
    write_all_chunks(&mut chunks, |cx, slices| {
        calls += 1;
        if calls % 2 == 1 {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        // Two bytes a write: every write ends inside or at a chunk's end.
        let mut budget = 2;
        let mut written = 0;
        for slice in slices {
            let take = slice.len().min(budget);
            received.extend_from_slice(&slice[..take]);
            written += take;
            budget -= take;
            if budget == 0 {
                break;
            }
        }
        Poll::Ready(Ok(written))
    })
    .await
    .unwrap();
    assert_eq!(received, b"abcdefghij");
    assert_eq!(calls, 10, "five writes of two bytes, each after a Pending");
}
