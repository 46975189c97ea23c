//! The heap tests' allocator: `System`, with the bytes of every live block
//! counted, and the highest count since a mark. A test binary that
//! declares `mod counting_heap;` gets it as its `#[global_allocator]`, so
//! only the binaries that measure the heap pay for the counting.
//!
//! Threads marked with [`uncounted_thread`] (an in-process server's) are
//! not counted: what they hold is the server's, not the writer's. The
//! count is process-wide otherwise; a binary with several tests runs them
//! one at a time ([`serial`]).

#![allow(dead_code)] // each binary uses the part it needs

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Mutex, MutexGuard};

thread_local! {
    /// Set on threads whose allocations are not counted. Const-initialised
    /// and without a destructor, so the allocator can read it at any point
    /// of a thread's life without allocating.
    static UNCOUNTED: Cell<bool> = const { Cell::new(false) };
}

/// Bytes allocated and not yet freed by counted threads.
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
/// Highest [`LIVE_BYTES`] since the last [`mark`].
static PEAK_BYTES: AtomicIsize = AtomicIsize::new(0);

fn counted() -> bool {
    !UNCOUNTED.try_with(Cell::get).unwrap_or(false)
}

fn grew(bytes: usize) {
    if counted() {
        let live = LIVE_BYTES.fetch_add(bytes as isize, Ordering::Relaxed) + bytes as isize;
        PEAK_BYTES.fetch_max(live, Ordering::Relaxed);
    }
}

fn shrank(bytes: usize) {
    if counted() {
        LIVE_BYTES.fetch_sub(bytes as isize, Ordering::Relaxed);
    }
}

/// `System`, counting every block's size while it lives.
pub struct CountingAllocator;

// SAFETY: every call goes to `System` with its arguments unchanged; only
// the counters are updated besides, and they never touch the blocks.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let block = System.alloc(layout);
        if !block.is_null() {
            grew(layout.size());
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let block = System.alloc_zeroed(layout);
        if !block.is_null() {
            grew(layout.size());
        }
        block
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = System.realloc(block, layout, new_size);
        if !moved.is_null() {
            // The new size first: a moving realloc holds both blocks while
            // it copies, so the peak may only err high.
            grew(new_size);
            shrank(layout.size());
        }
        moved
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        System.dealloc(block, layout);
        shrank(layout.size());
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// The live heap of counted threads now.
pub fn live() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// Starts a new peak from the live heap now; returns the live heap.
pub fn mark() -> isize {
    let live = live();
    PEAK_BYTES.store(live, Ordering::Relaxed);
    live
}

/// The highest live heap since the last [`mark`].
pub fn peak() -> isize {
    PEAK_BYTES.load(Ordering::Relaxed)
}

/// Stops counting this thread's allocations, for good (a server runtime's
/// `on_thread_start`).
pub fn uncounted_thread() {
    UNCOUNTED.with(|u| u.set(true));
}

/// Runs `f` on this thread without counting what it allocates.
pub fn uncounted<T>(f: impl FnOnce() -> T) -> T {
    UNCOUNTED.with(|u| u.set(true));
    let out = f();
    UNCOUNTED.with(|u| u.set(false));
    out
}

/// One test at a time: the count is process-wide.
pub fn serial() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}
