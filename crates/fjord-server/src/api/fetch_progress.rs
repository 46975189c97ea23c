//! Stalled fetchers: a FetchLog client that is served records at an offset
//! and asks for the same offset again, over and over, has received data it
//! did not consume. Nothing fails on either side (the Fluss Java client
//! once failed to parse a FetchLog answer inside a callback that swallowed
//! the exception and re-sent the same fetch forever: the job stayed
//! RUNNING, nothing was delivered, no error anywhere), so the server says
//! it: after [`STALLED_FETCH_REPEATS`] answers with records at one offset of
//! a bucket, in a row, one `warn!` per stall; the count starts again when
//! the bucket is fetched at another offset.
//!
//! State is kept per bucket (per replica), only for buckets whose fetch
//! returned records, at most [`TRACKED_BUCKETS_MAX`] of them, in one map
//! locked once per fetch answer that carries records. The handler does not
//! know the connection a request came on (the request names no client
//! either), so the count is per bucket, not per client: several consumers
//! reading one bucket in step each move it on as they advance, and a
//! consumer stuck while another advances on the same bucket is not seen.
//! That errs on the side of silence; a warning means no fetch of the bucket
//! moved past the offset in [`STALLED_FETCH_REPEATS`] answers.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use fjord_proto::messages as pb;

use crate::replica::Replica;

/// Answers carrying records at one offset of a bucket, in a row, after
/// which the fetcher is reported as stalled. A well-behaved client asks for
/// an offset once and moves past it; a few repeats are a retry or a
/// restart, five in a row a client that is not consuming what it gets.
pub(super) const STALLED_FETCH_REPEATS: u32 = 5;

/// Buckets tracked at once. Bounds the map whatever the number of buckets
/// served: when it is full, entries of replicas that are gone are dropped,
/// and if none is, a newly served bucket is not tracked (and the next sweep
/// waits for as many answers as the map holds).
pub(super) const TRACKED_BUCKETS_MAX: usize = 4096;

/// One tracked bucket: the last offset served records, and how often.
#[derive(Debug)]
struct Entry<O> {
    /// The tracked thing itself (a `Weak` of the replica, so a key, the
    /// replica's address, cannot be reused while its entry exists).
    owner: O,
    offset: i64,
    served: u32,
    warned: bool,
}

/// Counts answers with records per (key, offset); keys are addresses of
/// the owners, checked for liveness only when the map is full.
#[derive(Debug)]
pub(super) struct StallTracker<O> {
    entries: HashMap<usize, Entry<O>>,
    capacity: usize,
    /// Answers of untracked buckets to turn away, while full, before the
    /// next sweep for dead entries: a sweep that freed nothing is not
    /// repeated on every answer (it walks the whole map under the lock),
    /// only once per `capacity` answers, so its cost per answer is O(1).
    skip_sweeps: usize,
}

impl<O> StallTracker<O> {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity,
            skip_sweeps: 0,
        }
    }

    /// Notes that the bucket `key` was answered with records at `offset`.
    /// Returns how many answers in a row that makes, exactly once per
    /// stall: when the count reaches [`STALLED_FETCH_REPEATS`].
    pub(super) fn served(
        &mut self,
        key: usize,
        offset: i64,
        owner: impl FnOnce() -> O,
        alive: impl Fn(&O) -> bool,
    ) -> Option<u32> {
        if let Some(entry) = self.entries.get_mut(&key) {
            if entry.offset == offset {
                entry.served = entry.served.saturating_add(1);
            } else {
                entry.offset = offset;
                entry.served = 1;
                entry.warned = false;
            }
            if entry.served >= STALLED_FETCH_REPEATS && !entry.warned {
                entry.warned = true;
                return Some(entry.served);
            }
            return None;
        }
        if self.entries.len() >= self.capacity {
            if self.skip_sweeps > 0 {
                self.skip_sweeps -= 1;
                return None;
            }
            self.entries.retain(|_, e| alive(&e.owner));
            if self.entries.len() >= self.capacity {
                self.skip_sweeps = self.capacity;
                return None;
            }
        }
        self.entries.insert(
            key,
            Entry {
                owner: owner(),
                offset,
                served: 1,
                warned: false,
            },
        );
        // A threshold of one would warn on the first answer.
        (STALLED_FETCH_REPEATS <= 1).then_some(1)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The process's tracker. Keyed by replica, so servers sharing a process
/// (tests) never mix their buckets.
static TRACKER: LazyLock<Mutex<StallTracker<Weak<Replica>>>> =
    LazyLock::new(|| Mutex::new(StallTracker::new(TRACKED_BUCKETS_MAX)));

/// One bucket of an answer: the replica it was read from, the offset asked
/// for, and the bucket's part of the answer.
pub(super) struct Served<'a> {
    pub table_id: i64,
    pub replica: &'a Arc<Replica>,
    pub fetch_offset: i64,
    pub response: &'a pb::PbFetchLogRespForBucket,
}

/// Notes every bucket of a FetchLog answer that carries records, and warns
/// once per stall (see the module doc). `served` yields the answer's
/// buckets; the tracker is locked only if one of them has records.
pub(super) fn note<'a>(follower_server_id: i32, served: impl Iterator<Item = Served<'a>>) {
    let mut tracker = None;
    for s in served {
        if s.response.records.as_ref().is_none_or(|r| r.is_empty()) {
            continue;
        }
        let tracker =
            tracker.get_or_insert_with(|| TRACKER.lock().unwrap_or_else(|p| p.into_inner()));
        let key = Arc::as_ptr(s.replica) as usize;
        let stalled = tracker.served(
            key,
            s.fetch_offset,
            || Arc::downgrade(s.replica),
            |w| w.strong_count() > 0,
        );
        if let Some(times) = stalled {
            tracing::warn!(
                table_id = s.table_id,
                partition_id = ?s.response.partition_id,
                bucket = s.response.bucket_id,
                fetch_offset = s.fetch_offset,
                times,
                follower_server_id,
                "fetcher not advancing: bucket (table id {}, partition id {:?}, bucket {}) was fetched at offset {} and answered with records {} times in a row; the client received records at this offset {} times without advancing; it may be failing to decode the response",
                s.table_id,
                s.response.partition_id,
                s.response.bucket_id,
                s.fetch_offset,
                times,
                times,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `(key, offset)` answers to a tracker of `capacity` and returns
    /// the index and count of each warning.
    fn check(capacity: usize, answers: &[(usize, i64)], expected: &[(usize, u32)]) {
        let mut t = StallTracker::new(capacity);
        let warned: Vec<(usize, u32)> = answers
            .iter()
            .enumerate()
            .filter_map(|(i, &(key, offset))| {
                t.served(key, offset, || true, |alive| *alive)
                    .map(|n| (i, n))
            })
            .collect();
        assert_eq!(warned, expected);
    }

    #[test]
    fn warns_once_when_the_same_offset_is_served_the_threshold_times() {
        let n = STALLED_FETCH_REPEATS as usize;
        let stuck = vec![(1, 7); n + 10];
        check(8, &stuck, &[(n - 1, STALLED_FETCH_REPEATS)]);
    }

    #[test]
    fn advancing_fetcher_never_warns() {
        let advancing: Vec<(usize, i64)> = (0..100).map(|o| (1, o * 10)).collect();
        check(8, &advancing, &[]);
    }

    #[test]
    fn moving_offset_resets_the_count_and_a_new_stall_warns_again() {
        let n = STALLED_FETCH_REPEATS as usize;
        let mut answers = vec![(1, 0); n - 1];
        answers.push((1, 5));
        answers.extend(vec![(1, 0); n - 1]);
        check(8, &answers, &[]);
        // Stuck at 0, then moves on, then stuck at 5: two warnings.
        let mut answers = vec![(1, 0); n];
        answers.extend(vec![(1, 5); n]);
        check(
            8,
            &answers,
            &[
                (n - 1, STALLED_FETCH_REPEATS),
                (2 * n - 1, STALLED_FETCH_REPEATS),
            ],
        );
    }

    #[test]
    fn buckets_are_counted_apart() {
        let n = STALLED_FETCH_REPEATS as usize;
        let answers: Vec<(usize, i64)> = (0..n).flat_map(|_| [(1, 3), (2, 3)]).collect();
        check(
            8,
            &answers,
            &[
                (2 * n - 2, STALLED_FETCH_REPEATS),
                (2 * n - 1, STALLED_FETCH_REPEATS),
            ],
        );
    }

    #[test]
    fn a_full_tracker_drops_dead_entries_and_else_tracks_nothing_new() {
        let mut t = StallTracker::new(2);
        t.served(1, 0, || false, |alive| *alive);
        t.served(2, 0, || true, |alive| *alive);
        // Full: the dead entry (key 1) makes room for key 3.
        t.served(3, 0, || true, |alive| *alive);
        assert_eq!(t.len(), 2);
        // Full of live entries: key 4 is not tracked, never warns.
        for _ in 0..2 * STALLED_FETCH_REPEATS {
            assert_eq!(t.served(4, 0, || true, |alive| *alive), None);
        }
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_fruitless_sweep_is_not_repeated_before_capacity_answers() {
        use std::cell::Cell;
        use std::rc::Rc;
        let live = Rc::new(Cell::new(true));
        let mut t = StallTracker::new(2);
        let alive = |o: &Rc<Cell<bool>>| o.get();
        t.served(1, 0, || Rc::clone(&live), alive);
        t.served(2, 0, || Rc::new(Cell::new(true)), alive);
        // Full of live entries: the sweep frees nothing.
        t.served(3, 0, || Rc::new(Cell::new(true)), alive);
        live.set(false);
        // The next `capacity` answers do not sweep, so key 1 stays...
        for key in [4, 5] {
            t.served(key, 0, || Rc::new(Cell::new(true)), alive);
        }
        assert_eq!(t.len(), 2);
        assert!(t.entries.contains_key(&1));
        // ...and the one after sweeps it out and tracks the new bucket.
        t.served(6, 0, || Rc::new(Cell::new(true)), alive);
        assert!(!t.entries.contains_key(&1));
        assert!(t.entries.contains_key(&6));
    }
}
