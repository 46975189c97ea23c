//! Checks of `fjord_proto::chunks`, the partial-vectored-write
//! bookkeeping the client's (and the server's) socket writers share: driven
//! by a model socket that takes an arbitrary number of bytes per write,
//! whatever the chunk lengths (zero-length ones included, more chunks than
//! one write may cover), the bytes written are exactly the chunks' bytes,
//! in order, each once.

use std::io::IoSlice;

use bytes::Bytes;
use fjord_proto::chunks::{advance, next_slices, IOV_MAX_CHUNKS};
use proptest::prelude::*;

/// Writes `chunks` through a model socket that accepts at most the next
/// value of `accepts` (cycled, at least 1) bytes per vectored write; returns
/// the bytes it received and the largest slice count one write was given.
fn write_through(mut chunks: Vec<Bytes>, accepts: &[usize]) -> (Vec<u8>, usize) {
    let mut received = Vec::new();
    let mut most_slices = 0;
    let mut first = 0;
    for accept in accepts.iter().cycle() {
        let mut slices = [IoSlice::new(&[]); IOV_MAX_CHUNKS];
        let count = next_slices(&chunks, &mut first, &mut slices);
        if count == 0 {
            break;
        }
        most_slices = most_slices.max(count);
        // The first slice is never empty: a write of only empty slices
        // would return 0, which the writers treat as a dead socket.
        assert!(!slices[0].is_empty(), "a write starts at an empty chunk");
        let mut budget = (*accept).max(1);
        let mut written = 0;
        for slice in &slices[..count] {
            let take = slice.len().min(budget);
            received.extend_from_slice(&slice[..take]);
            written += take;
            budget -= take;
            if budget == 0 {
                break;
            }
        }
        advance(&mut chunks, &mut first, written);
    }
    (received, most_slices)
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
    ) {
        let expected: Vec<u8> = parts.concat();
        let chunks: Vec<Bytes> = parts.into_iter().map(Bytes::from).collect();
        let (received, most_slices) = write_through(chunks, &accepts);
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
