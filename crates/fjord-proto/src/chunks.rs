//! A frame written as a list of chunks (see [`crate::fetch_response`] and
//! [`crate::produce_request`]): what one vectored write of it covers,
//! how a partial write advances it, and which record payloads are small
//! enough to copy rather than pass through. The sockets stay with the
//! caller; this is the bookkeeping both the server's and the client's
//! writers share.

use std::io::{self, IoSlice};
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::wire::{put_key, put_varint, WIRE_TYPE_LEN};

/// Record payloads (a bucket's `records`) up to this size are copied into
/// the frame's scratch buffer instead of becoming a chunk of their own, in
/// FetchLog responses and ProduceLog requests alike. A payload passed
/// through costs a chunk for itself and, unless it ends the frame, cuts the
/// scaffolding after it into another: up to two more list entries and
/// `Bytes` handles to take and drop, two more iovecs for the kernel to walk,
/// and two of the [`IOV_MAX_CHUNKS`] slots of a vectored write. Copying a
/// few hundred bytes costs less than that; above this size the copy grows
/// with the payload while the chunk costs stay the same. The size is that
/// reasoning, not a measured break-even point.
pub const INLINE_RECORDS_MAX_BYTES: usize = 512;

/// Most chunks handed to one vectored write (well under Linux's `IOV_MAX`
/// of 1024; a frame with more takes more writes).
pub const IOV_MAX_CHUNKS: usize = 64;

/// Writes a `records` field (field number `tag`) whose payload is
/// `records`: the key and length into `scratch`, then the payload copied
/// after them when it is at most [`INLINE_RECORDS_MAX_BYTES`], else the
/// scaffolding so far split off into a chunk and `records` itself pushed as
/// the next one (passed through, not copied).
pub(crate) fn put_records(
    scratch: &mut BytesMut,
    chunks: &mut Vec<Bytes>,
    tag: u32,
    records: Bytes,
) {
    put_key(scratch, tag, WIRE_TYPE_LEN);
    put_varint(scratch, records.len() as u64);
    if records.len() <= INLINE_RECORDS_MAX_BYTES {
        scratch.put_slice(&records);
    } else {
        chunks.push(scratch.split().freeze());
        chunks.push(records);
    }
}

/// Skips the empty chunks from `*first` on, then points `slices` at the
/// next chunks (at most [`IOV_MAX_CHUNKS`]) and returns how many it filled;
/// 0 means every chunk is written.
pub fn next_slices<'a>(
    chunks: &'a [Bytes],
    first: &mut usize,
    slices: &mut [IoSlice<'a>; IOV_MAX_CHUNKS],
) -> usize {
    while chunks.get(*first).is_some_and(Bytes::is_empty) {
        *first += 1;
    }
    let mut count = 0;
    for (slot, chunk) in slices.iter_mut().zip(&chunks[*first..]) {
        *slot = IoSlice::new(chunk);
        count += 1;
    }
    count
}

/// Consumes `written` bytes from the chunks starting at `*first`: whole
/// chunks move `*first` past them, a partly written chunk keeps its rest.
pub fn advance(chunks: &mut [Bytes], first: &mut usize, mut written: usize) {
    while written > 0 && *first < chunks.len() {
        let len = chunks[*first].len();
        if written >= len {
            written -= len;
            *first += 1;
        } else {
            chunks[*first].advance(written);
            written = 0;
        }
    }
}

/// Writes every chunk, in order, through `poll_write_vectored` (the
/// caller's socket's, e.g. tokio's `AsyncWrite::poll_write_vectored`; this
/// crate does no I/O of its own), which is handed at most
/// [`IOV_MAX_CHUNKS`] slices a call and returns how many bytes it took.
/// Resumes inside a partly written chunk and skips empty ones; a write
/// that takes nothing is the socket refusing more (`WriteZero`), never a
/// loop. The client's request writer and the server's response writer
/// both go through it.
///
/// Takes the socket's poll function rather than an async closure: the
/// future of such a closure does not prove itself `Send` to today's
/// compiler (it borrows the slices for any lifetime), and both writers run
/// on spawned tasks.
pub async fn write_all_chunks(
    chunks: &mut [Bytes],
    mut poll_write_vectored: impl FnMut(&mut Context<'_>, &[IoSlice<'_>]) -> Poll<io::Result<usize>>,
) -> io::Result<()> {
    let mut first = 0;
    std::future::poll_fn(|cx| {
        poll_write_all_chunks(cx, chunks, &mut first, &mut poll_write_vectored)
    })
    .await
}

/// [`write_all_chunks`] as a poll function: `first` is the write's
/// progress, 0 to start, kept by the caller from poll to poll.
pub fn poll_write_all_chunks(
    cx: &mut Context<'_>,
    chunks: &mut [Bytes],
    first: &mut usize,
    mut poll_write_vectored: impl FnMut(&mut Context<'_>, &[IoSlice<'_>]) -> Poll<io::Result<usize>>,
) -> Poll<io::Result<()>> {
    loop {
        let mut slices = [IoSlice::new(&[]); IOV_MAX_CHUNKS];
        let count = next_slices(chunks, first, &mut slices);
        if count == 0 {
            return Poll::Ready(Ok(()));
        }
        let written = match poll_write_vectored(cx, &slices[..count]) {
            Poll::Ready(result) => result?,
            Poll::Pending => return Poll::Pending,
        };
        if written == 0 {
            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
        }
        advance(chunks, first, written);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static [u8]]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::from_static(p)).collect()
    }

    #[test]
    fn partial_writes_resume_inside_a_chunk_and_skip_empty_ones() {
        let mut c = chunks(&[b"", b"abc", b"", b"defg", b"h"]);
        let mut first = 0;
        let mut slices = [IoSlice::new(&[]); IOV_MAX_CHUNKS];
        assert_eq!(next_slices(&c, &mut first, &mut slices), 4);
        assert_eq!((first, &*slices[0]), (1, &b"abc"[..]));
        // 5 bytes written: "abc", the empty chunk, then "de".
        advance(&mut c, &mut first, 5);
        assert_eq!((first, &c[first][..]), (3, &b"fg"[..]));
        let mut slices = [IoSlice::new(&[]); IOV_MAX_CHUNKS];
        assert_eq!(next_slices(&c, &mut first, &mut slices), 2);
        assert_eq!(&*slices[0], b"fg");
        advance(&mut c, &mut first, 3);
        let mut slices = [IoSlice::new(&[]); IOV_MAX_CHUNKS];
        assert_eq!(next_slices(&c, &mut first, &mut slices), 0, "all written");
    }

    #[test]
    fn one_write_covers_at_most_iov_max_chunks() {
        let c: Vec<Bytes> = (0..IOV_MAX_CHUNKS + 5)
            .map(|_| Bytes::from_static(b"x"))
            .collect();
        let mut first = 0;
        let mut slices = [IoSlice::new(&[]); IOV_MAX_CHUNKS];
        assert_eq!(next_slices(&c, &mut first, &mut slices), IOV_MAX_CHUNKS);
        let mut c = c;
        advance(&mut c, &mut first, IOV_MAX_CHUNKS);
        let mut slices = [IoSlice::new(&[]); IOV_MAX_CHUNKS];
        assert_eq!(next_slices(&c, &mut first, &mut slices), 5);
    }
}
