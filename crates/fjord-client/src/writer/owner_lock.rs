//! A lock biased toward one owner: the writer's row path, which takes it
//! for every row, while anyone else (the linger task, a few times a second)
//! takes it rarely.
//!
//! An uncontended `parking_lot::Mutex` costs two locked instructions a row
//! (one to lock, one to unlock), and each waits for the stores before it to
//! drain: with this lock instead, the writer's caller thread went from 25.6
//! to 19.8 ns a typed row (docs/bench-notes/history.md, ninth session, "The
//! session's end against its start"). Here the owner's way in is a
//! plain store of "inside", a compiler fence and a plain load of "revoked";
//! its way out a plain store. What makes that safe is the asymmetric
//! Dekker pattern: everyone else first marks the lock revoked and then runs
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which makes every
//! running thread of the process execute a full memory barrier before it
//! returns. After it, either the owner's "inside" is visible (and the
//! other party waits for it to clear), or the owner's next look at
//! "revoked" sees it set (and it queues on the mutex like anyone else).
//! The same pairing (a compiler fence on the fast side, `membarrier` on
//! the slow side) is what userspace RCU and folly's asymmetric barriers use.
//!
//! Where `membarrier` is missing (not Linux, an old kernel, a seccomp
//! filter that refuses it), the owner takes the mutex too: correct, and as
//! costly as before.
//!
//! Only code holding the lock's one [`OwnerKey`] (by `&mut`) takes the
//! owner's way, so two owners can never be inside at once.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

/// Spins of a waiting non-owner before it yields its thread: the owner's
/// stay inside is one row (tens of nanoseconds) unless it was preempted.
const OWNER_WAIT_SPINS: u32 = 64;

/// A value behind a lock that one owner takes cheaply and others take at
/// the price of a process-wide memory barrier. Guarantees mutual exclusion
/// between every guard it hands out.
pub(crate) struct OwnerLock<T> {
    value: UnsafeCell<T>,
    /// Held by every non-owner, and by the owner when its own way is shut
    /// (revoked, or no barrier on this system).
    mutex: Mutex<()>,
    /// The owner is inside by its own way.
    owner_inside: AtomicBool,
    /// A non-owner holds the mutex, or is about to: the owner must take
    /// the mutex too.
    revoked: AtomicBool,
    /// Whether `membarrier` works here; without it the owner's way is shut.
    barrier: bool,
    /// Which lock this is, for [`OwnerKey`]'s check in debug builds.
    id: u64,
}

// SAFETY: the value is reached only through guards, and the protocol above
// lets one guard exist at a time; moving `T` between threads needs `Send`.
unsafe impl<T: Send> Sync for OwnerLock<T> {}
unsafe impl<T: Send> Send for OwnerLock<T> {}

/// The right to take an [`OwnerLock`] by the owner's way. One per lock,
/// neither `Clone` nor `Copy`: the owner's way is taken through `&mut`, so
/// the borrow checker keeps owners apart.
pub(crate) struct OwnerKey {
    /// The lock this key opens, checked in debug builds.
    lock: u64,
}

/// Numbers the locks, for [`OwnerKey`]'s check.
static NEXT_LOCK_ID: AtomicU64 = AtomicU64::new(0);

impl<T> OwnerLock<T> {
    /// The lock and its one owner key. Registers the process for
    /// `membarrier` (once per process; later calls are cheap).
    pub(crate) fn new(value: T) -> (Self, OwnerKey) {
        Self::with_barrier(value, process_barrier::available())
    }

    /// The lock as it is where `membarrier` is missing: the owner takes
    /// the mutex too.
    #[cfg(test)]
    fn without_barrier(value: T) -> (Self, OwnerKey) {
        Self::with_barrier(value, false)
    }

    fn with_barrier(value: T, barrier: bool) -> (Self, OwnerKey) {
        let id = NEXT_LOCK_ID.fetch_add(1, Ordering::Relaxed);
        let lock = Self {
            value: UnsafeCell::new(value),
            mutex: Mutex::new(()),
            owner_inside: AtomicBool::new(false),
            revoked: AtomicBool::new(false),
            barrier,
            id,
        };
        (lock, OwnerKey { lock: id })
    }

    /// The owner's way in: true when it is open (the owner is then inside
    /// and leaves by clearing `owner_inside`), false when it is shut
    /// (revoked, or no barrier here) and the owner must take the mutex.
    #[inline(always)]
    fn enter_owner_way(&self, key: &OwnerKey) -> bool {
        debug_assert_eq!(key.lock, self.id, "a key of another lock");
        if !self.barrier {
            return false;
        }
        self.owner_inside.store(true, Ordering::Relaxed);
        // The store above stays before the load below in the program; the
        // hardware may still reorder them, which the other side's
        // membarrier makes harmless (module docs).
        compiler_fence(Ordering::SeqCst);
        if !self.revoked.load(Ordering::Acquire) {
            return true;
        }
        self.owner_inside.store(false, Ordering::Release);
        false
    }

    /// The lock for the owner: a few plain loads and stores when no one
    /// else holds or wants it, otherwise the mutex.
    #[inline(always)]
    pub(crate) fn lock_owner<'a>(&'a self, key: &'a mut OwnerKey) -> OwnerGuard<'a, T> {
        if self.enter_owner_way(key) {
            return OwnerGuard {
                lock: self,
                held: Held::OwnerWay,
            };
        }
        self.owner_by_mutex()
    }

    /// `f` on the value, for the owner: [`OwnerLock::lock_owner`] without
    /// a guard to carry around, for the row path, where leaving is one
    /// store.
    #[inline(always)]
    pub(crate) fn with_owner<R>(&self, key: &mut OwnerKey, f: impl FnOnce(&mut T) -> R) -> R {
        if self.enter_owner_way(key) {
            let _leave = LeaveOnDrop(&self.owner_inside);
            // SAFETY: inside by the owner's way (module docs); `key`'s
            // `&mut` keeps every other owner access out.
            return f(unsafe { &mut *self.value.get() });
        }
        f(&mut self.owner_by_mutex())
    }

    #[cold]
    #[inline(never)]
    fn owner_by_mutex(&self) -> OwnerGuard<'_, T> {
        OwnerGuard {
            lock: self,
            held: Held::Mutex(self.mutex.lock()),
        }
    }

    /// The lock for anyone but the owner: the mutex, then, while the owner
    /// may be inside by its own way, a process-wide barrier and a wait for
    /// it to leave. Blocks the thread (briefly: one row of the owner's).
    pub(crate) fn lock_other(&self) -> OwnerGuard<'_, T> {
        let mutex = self.mutex.lock();
        if self.barrier {
            self.revoked.store(true, Ordering::Relaxed);
            process_barrier::run();
            let mut spins = 0;
            while self.owner_inside.load(Ordering::Acquire) {
                if spins < OWNER_WAIT_SPINS {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        OwnerGuard {
            lock: self,
            held: Held::Revoked(mutex),
        }
    }
}

/// Clears the owner's "inside" when dropped, also while a panic unwinds.
struct LeaveOnDrop<'a>(&'a AtomicBool);

impl Drop for LeaveOnDrop<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// How a guard holds its [`OwnerLock`].
enum Held<'a> {
    /// The owner, by its own way: leaving clears `owner_inside`.
    OwnerWay,
    /// The owner, by the mutex (its way was shut).
    #[allow(dead_code)] // held for its drop
    Mutex(MutexGuard<'a, ()>),
    /// A non-owner: leaving reopens the owner's way, then the mutex.
    #[allow(dead_code)] // held for its drop
    Revoked(MutexGuard<'a, ()>),
}

/// Exclusive access to an [`OwnerLock`]'s value until dropped.
pub(crate) struct OwnerGuard<'a, T> {
    lock: &'a OwnerLock<T>,
    held: Held<'a>,
}

impl<T> Deref for OwnerGuard<'_, T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (the lock's protocol).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for OwnerGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` keeps this access unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for OwnerGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        match self.held {
            Held::OwnerWay => self.lock.owner_inside.store(false, Ordering::Release),
            Held::Mutex(_) => {}
            // Reopened before the mutex (dropped after this body) lets the
            // next non-owner in: it revokes again before it looks.
            Held::Revoked(_) => self.lock.revoked.store(false, Ordering::Release),
        }
    }
}

/// `membarrier(2)`'s private expedited command: every running thread of
/// this process executes a full memory barrier before the call returns.
#[cfg(target_os = "linux")]
mod process_barrier {
    use std::sync::OnceLock;

    // From <linux/membarrier.h>.
    const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn membarrier(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier takes no pointers; an unknown or refused
        // command returns -1 with errno set.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_uint,
                0 as libc::c_int,
            )
        }
    }

    /// Whether the barrier works here: the kernel offers the private
    /// expedited command, the process registered for it, and one call
    /// succeeded. Decided once per process.
    pub(super) fn available() -> bool {
        static AVAILABLE: OnceLock<bool> = OnceLock::new();
        *AVAILABLE.get_or_init(|| {
            let commands = membarrier(MEMBARRIER_CMD_QUERY);
            commands >= 0
                && commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0
                && commands & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED != 0
                && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
                && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0
        })
    }

    /// Runs the barrier. Only called where [`available`] said yes.
    pub(super) fn run() {
        // Registered and already run once: the kernel documents no other
        // failure. Were it to fail anyway, going on could let two guards
        // in at once, so this stops instead.
        if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 {
            panic!(
                "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after it worked: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// No `membarrier` off Linux: the owner takes the mutex like everyone else.
#[cfg(not(target_os = "linux"))]
mod process_barrier {
    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn run() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// One holder's stay: checks that no one left the pair half written,
    /// then writes its halves apart, with time between them for an
    /// intruder to see or clobber. True when it found the pair torn.
    fn stay(pair: &mut [u64; 2]) -> bool {
        const DWELL_SPINS: u32 = 100;
        let torn = pair[0] != pair[1];
        let next = pair[0] + 1;
        pair[0] = next;
        for _ in 0..DWELL_SPINS {
            std::hint::spin_loop();
        }
        std::hint::black_box(&mut *pair);
        pair[1] = next;
        torn
    }

    /// Owner and others at once from several threads: no holder finds the pair
    /// half written by another and no increment is lost, which two guards
    /// inside together would break.
    #[test]
    fn owner_and_others_exclude_each_other() {
        exclusion(OwnerLock::new([0u64; 2]));
    }

    /// The same where the owner takes the mutex (no `membarrier`).
    #[test]
    fn owner_and_others_exclude_each_other_without_the_barrier() {
        exclusion(OwnerLock::without_barrier([0u64; 2]));
    }

    fn exclusion((lock, mut key): (OwnerLock<[u64; 2]>, OwnerKey)) {
        const OTHER_ROUNDS: u64 = 3_000;
        const OTHERS: u64 = 2;
        let lock = Arc::new(lock);
        let running = Arc::new(AtomicU64::new(OTHERS));
        let others: Vec<_> = (0..OTHERS)
            .map(|_| {
                let lock = Arc::clone(&lock);
                let running = Arc::clone(&running);
                std::thread::spawn(move || {
                    let torn = (0..OTHER_ROUNDS)
                        .filter(|_| stay(&mut lock.lock_other()))
                        .count();
                    running.fetch_sub(1, Ordering::Release);
                    torn
                })
            })
            .collect();
        // The owner keeps going for as long as the others do.
        let mut owner_rounds = 0u64;
        let mut torn = 0;
        while running.load(Ordering::Acquire) > 0 {
            // Both of the owner's ways: the guard and the closure.
            torn += usize::from(if owner_rounds.is_multiple_of(2) {
                stay(&mut lock.lock_owner(&mut key))
            } else {
                lock.with_owner(&mut key, stay)
            });
            owner_rounds += 1;
        }
        for t in others {
            torn += t.join().unwrap();
        }
        let g = lock.lock_owner(&mut key);
        assert_eq!(torn, 0, "a holder found the pair half written");
        assert_eq!(g[0], owner_rounds + OTHERS * OTHER_ROUNDS);
        assert_eq!(g[1], g[0]);
    }

    /// An owner that panics inside leaves the lock usable by everyone.
    #[test]
    fn a_panic_inside_releases_the_lock() {
        let (lock, mut key) = OwnerLock::new(0u32);
        let lock = Arc::new(lock);
        let by_guard = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut g = lock.lock_owner(&mut key);
            *g += 1;
            panic!("a row type panicked");
        }));
        let by_closure = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lock.with_owner(&mut key, |v| {
                *v += 1;
                panic!("a row type panicked");
            })
        }));
        assert!(by_guard.is_err() && by_closure.is_err());
        let other = Arc::clone(&lock);
        let seen = std::thread::spawn(move || *other.lock_other())
            .join()
            .unwrap();
        assert_eq!(seen, 2);
        assert_eq!(*lock.lock_owner(&mut key), 2);
    }

    /// This machine (Linux, the kernel the CI runs on) has the barrier, so
    /// the owner's cheap way is what the tests above exercised.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_barrier_is_available_on_linux() {
        assert!(process_barrier::available());
    }
}
