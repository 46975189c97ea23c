//! The writer's buffer memory bound (`client.writer.buffer.memory-size`):
//! bytes of rows in open batches plus sealed batches not yet acknowledged.
//!
//! Memory is reserved in chunks (per batch growth step, never per row) from
//! a counting semaphore; a writer that cannot reserve waits
//! (back-pressure) until acknowledged batches give memory back. Reserved
//! bytes never exceed the bound, by construction: every reservation is taken
//! from the semaphore, which holds exactly the bound.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Semaphore;

use crate::error::{ClientError, Result};
use crate::writer::config::OPT_BUFFER_MEMORY_SIZE;

/// The writer's pool of buffer bytes.
pub(crate) struct MemoryPool {
    total_bytes: usize,
    available: Semaphore,
    used_bytes: AtomicUsize,
    max_used_bytes: AtomicUsize,
    waits: AtomicU64,
}

impl MemoryPool {
    /// A pool of `total_bytes` (at most `u32::MAX` per reservation).
    pub(crate) fn new(total_bytes: usize) -> Self {
        let total_bytes = total_bytes.min(Semaphore::MAX_PERMITS);
        Self {
            total_bytes,
            available: Semaphore::new(total_bytes),
            used_bytes: AtomicUsize::new(0),
            max_used_bytes: AtomicUsize::new(0),
            waits: AtomicU64::new(0),
        }
    }

    /// The bound.
    pub(crate) fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// An error when `bytes` could never be reserved (more than the whole
    /// bound), so a caller can refuse work before starting any of it.
    pub(crate) fn check_fits(&self, bytes: usize) -> Result<u32> {
        u32::try_from(bytes)
            .ok()
            .filter(|_| bytes <= self.total_bytes)
            .ok_or_else(|| {
                ClientError::Invalid(format!(
                    "{bytes} bytes of rows cannot be buffered: {OPT_BUFFER_MEMORY_SIZE} is {} bytes; raise it or write smaller batches",
                    self.total_bytes
                ))
            })
    }

    /// The refusal of rows that would bring one batch to `bytes`, more than
    /// this pool can ever hold (with one reservation step).
    #[cold]
    pub(crate) fn too_large(&self, bytes: usize) -> ClientError {
        ClientError::Invalid(format!(
            "a row bringing its batch to {bytes} bytes cannot be buffered: {OPT_BUFFER_MEMORY_SIZE} is {} bytes; raise it or write smaller rows",
            self.total_bytes
        ))
    }

    /// Reserves `bytes` if they are free now.
    pub(crate) fn try_reserve(&self, bytes: usize) -> bool {
        let Ok(n) = u32::try_from(bytes) else {
            return false;
        };
        match self.available.try_acquire_many(n) {
            Ok(permit) => {
                permit.forget();
                self.note_reserved(bytes);
                true
            }
            Err(_) => false,
        }
    }

    /// Reserves `bytes`, waiting until acknowledged batches free them.
    /// Fails at once when `bytes` exceeds the whole bound (it could never
    /// be satisfied).
    pub(crate) async fn reserve(&self, bytes: usize) -> Result<()> {
        let n = self.check_fits(bytes)?;
        if self.try_reserve(bytes) {
            return Ok(());
        }
        self.waits.fetch_add(1, Ordering::Relaxed);
        let permit = self
            .available
            .acquire_many(n)
            .await
            .map_err(|_| ClientError::WriterClosed("buffer memory pool closed"))?;
        permit.forget();
        self.note_reserved(bytes);
        Ok(())
    }

    /// Gives `bytes` back.
    pub(crate) fn release(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        self.used_bytes.fetch_sub(bytes, Ordering::Relaxed);
        self.available.add_permits(bytes);
    }

    fn note_reserved(&self, bytes: usize) {
        let now = self.used_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.max_used_bytes.fetch_max(now, Ordering::Relaxed);
    }

    /// Bytes reserved now.
    pub(crate) fn used_bytes(&self) -> usize {
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// Most bytes ever reserved at once.
    pub(crate) fn max_used_bytes(&self) -> usize {
        self.max_used_bytes.load(Ordering::Relaxed)
    }

    /// How many times a reservation had to wait (back-pressure events).
    pub(crate) fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reservations_never_exceed_the_bound_and_wait_for_release() {
        let pool = std::sync::Arc::new(MemoryPool::new(100));
        assert!(pool.try_reserve(60));
        assert!(!pool.try_reserve(50));
        let waiter = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.reserve(50).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        pool.release(60);
        waiter.await.unwrap().unwrap();
        assert_eq!(pool.used_bytes(), 50);
        assert_eq!(pool.max_used_bytes(), 60);
    }

    #[tokio::test]
    async fn a_reservation_larger_than_the_bound_fails_instead_of_hanging() {
        let pool = MemoryPool::new(100);
        let e = pool.reserve(101).await.unwrap_err();
        assert!(e.to_string().contains(OPT_BUFFER_MEMORY_SIZE), "{e}");
    }
}
