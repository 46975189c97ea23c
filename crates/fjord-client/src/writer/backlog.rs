//! The encoder backlog: sealed batches handed to the encoder thread and not
//! yet encoded, and the wait that keeps their number bounded.
//!
//! Why a bound beyond buffer memory: with ZSTD the caller fills batches
//! about three times faster than one thread compresses them, so without it
//! the caller runs ahead until `client.writer.buffer.memory-size` is full of
//! uncompressed batches. Every one of those needs its own set of column
//! buffers; the recycled sets run out and the rest are fresh allocations
//! whose pages fault in — measured at ~150 MB of buffer growth per 6 M
//! `user_behavior` rows (docs/bench-notes/client.md, "fourth pass"). With
//! the backlog bounded, a few buffer sets circulate and are reused for the
//! whole run, and the caller waits for the encoder instead of for memory:
//! the same throughput, since the encoder is the bottleneck either way.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::error::{ClientError, Result};

/// Most sealed batches handed to the encoder and not yet encoded (the one
/// being encoded included) before an append that seals another waits:
/// enough that the encoder always has the next batch ready, few enough
/// that the column buffers of that many batches are all the writer
/// circulates.
pub(crate) const ENCODE_BACKLOG_MAX: u64 = 2;

/// Counts of batches sent to and finished by the encoder thread. Written
/// once per batch on each side; read once per sealed batch by the caller.
#[derive(Default)]
pub(crate) struct EncodeBacklog {
    sent: AtomicU64,
    encoded: AtomicU64,
    encoded_notify: Notify,
    stopped: AtomicBool,
}

impl EncodeBacklog {
    /// One batch handed to the encoder.
    pub(crate) fn on_sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// One batch done by the encoder (encoded or failed).
    pub(crate) fn on_encoded(&self) {
        self.encoded.fetch_add(1, Ordering::Release);
        self.encoded_notify.notify_waiters();
    }

    /// The encoder thread ended: nothing will drain the backlog any more.
    pub(crate) fn on_stopped(&self) {
        self.stopped.store(true, Ordering::Release);
        self.encoded_notify.notify_waiters();
    }

    /// Whether more than [`ENCODE_BACKLOG_MAX`] batches wait for the encoder.
    pub(crate) fn is_full(&self) -> bool {
        let encoded = self.encoded.load(Ordering::Acquire);
        self.sent.load(Ordering::Relaxed).saturating_sub(encoded) > ENCODE_BACKLOG_MAX
    }

    /// Returns once the backlog is within [`ENCODE_BACKLOG_MAX`]; an error
    /// if it is full and the encoder thread has stopped (it would never
    /// drain). Cancel-safe: it only waits.
    pub(crate) async fn wait_until_not_full(&self) -> Result<()> {
        loop {
            let notified = self.encoded_notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so an `on_encoded` between the
            // check and the await still wakes this waiter.
            notified.as_mut().enable();
            if !self.is_full() {
                return Ok(());
            }
            if self.stopped.load(Ordering::Acquire) {
                return Err(ClientError::WriterClosed("the encoder thread stopped"));
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn filled(n: u64) -> Arc<EncodeBacklog> {
        let backlog = Arc::new(EncodeBacklog::default());
        (0..n).for_each(|_| backlog.on_sent());
        backlog
    }

    #[test]
    fn backlog_is_full_only_beyond_its_bound() {
        let backlog = filled(ENCODE_BACKLOG_MAX);
        assert!(!backlog.is_full());
        backlog.on_sent();
        assert!(backlog.is_full());
        backlog.on_encoded();
        assert!(!backlog.is_full());
    }

    #[tokio::test]
    async fn a_waiter_resumes_when_the_encoder_finishes_a_batch() {
        let backlog = filled(ENCODE_BACKLOG_MAX + 1);
        let waiter = tokio::spawn({
            let backlog = Arc::clone(&backlog);
            async move { backlog.wait_until_not_full().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "the backlog is full: it must wait");
        backlog.on_encoded();
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken by on_encoded")
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn a_full_backlog_whose_encoder_stopped_is_an_error_not_a_hang() {
        let backlog = filled(ENCODE_BACKLOG_MAX + 1);
        let waiter = tokio::spawn({
            let backlog = Arc::clone(&backlog);
            async move { backlog.wait_until_not_full().await }
        });
        tokio::task::yield_now().await;
        backlog.on_stopped();
        let result = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken by on_stopped")
            .unwrap();
        assert!(matches!(result, Err(ClientError::WriterClosed(_))));
    }
}
