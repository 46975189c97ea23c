//! [`AppendLane`]: the ProduceLog and PutKv requests of one connection
//! append in the order they arrived, whatever order their handlers finish
//! checking them in. The lane orders and runs jobs only (what a job appends
//! is `produce_log`'s or `put_kv`'s), so its ordering, skipping and
//! recovery from a panicking job are tested here with jobs of the tests'
//! own.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};

use tracing::error;

/// A connection's lane of appends: the ProduceLog requests of one
/// connection append in the order they arrived.
///
/// Requests of one connection run concurrently (a slow fsync or long-poll
/// must not hold up the next request), but a client pipelining several
/// batches of one bucket relies on them being appended in the order it sent
/// them: an idempotent writer's batch sequences are checked in that order,
/// and a reordering would be refused as out of order and retried. So the
/// reader takes an [`AppendTurn`] per ProduceLog as it arrives; each request
/// hands its appends (an `AppendJob`) to its turn once its headers are
/// checked, and one
/// blocking-pool job drains the lane in turn order, appending request after
/// request with no hand-off between them while work is queued. A turn
/// dropped without appends (an early error) is skipped, so it never stalls
/// the connection.
#[derive(Clone, Default)]
pub struct AppendLane {
    state: Arc<Mutex<LaneState>>,
}

#[derive(Default)]
struct LaneState {
    /// Turn number of `slots[0]`.
    head: u64,
    /// Turn number the next ticket gets.
    next: u64,
    /// Turns not yet drained, in arrival order.
    slots: VecDeque<Slot>,
    /// Whether a drain job is running (at most one per lane).
    draining: bool,
}

enum Slot {
    /// The request has not handed over its appends yet.
    Waiting,
    /// The request's job: its appends and the report of their outcomes.
    Ready(AppendJob),
    /// The request ended without appending.
    Skipped,
}

/// One request's appends, made and reported by running it: the lane only
/// orders the jobs and runs them. A ProduceLog's job appends its buckets
/// and sends their outcomes back to the request; a job that panics is
/// dropped, and what it owned (that reply channel) with it.
pub(crate) type AppendJob = Box<dyn FnOnce() + Send>;

impl AppendLane {
    /// The next turn, in arrival order. Must be taken by the connection's
    /// reader as the request arrives.
    pub fn turn(&self) -> AppendTurn {
        let mut state = lock_lane(&self.state);
        let seq = state.next;
        state.next += 1;
        state.slots.push_back(Slot::Waiting);
        AppendTurn {
            lane: self.clone(),
            seq,
            filled: false,
        }
    }

    /// Puts `slot` in turn `seq`'s place; starts a drain job if none runs
    /// and the first turn is ready.
    fn fill(&self, seq: u64, slot: Slot) {
        let start = {
            let mut state = lock_lane(&self.state);
            let Some(index) = seq
                .checked_sub(state.head)
                .and_then(|i| usize::try_from(i).ok())
            else {
                return;
            };
            if let Some(place) = state.slots.get_mut(index) {
                *place = slot;
            }
            let first_ready = !matches!(state.slots.front(), None | Some(Slot::Waiting));
            let start = first_ready && !state.draining;
            if start {
                state.draining = true;
            }
            start
        };
        if start {
            let lane = self.clone();
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn_blocking(move || lane.drain());
                }
                // No runtime (a turn dropped during shutdown): drain here.
                Err(_) => lane.drain(),
            }
        }
    }

    /// Appends turn after turn until the lane is empty or its first turn
    /// is still waiting for its request.
    fn drain(&self) {
        loop {
            let slot = {
                let mut state = lock_lane(&self.state);
                if matches!(state.slots.front(), None | Some(Slot::Waiting)) {
                    state.draining = false;
                    return;
                }
                state.head += 1;
                state.slots.pop_front()
            };
            if let Some(Slot::Ready(job)) = slot {
                // A panic must not end the drain with `draining` still set:
                // every later ProduceLog of the connection would wait
                // forever. The panicking job's reply is dropped with it, so
                // its request answers UnknownServerError; the lane goes on.
                if std::panic::catch_unwind(AssertUnwindSafe(job)).is_err() {
                    error!("an append panicked; its request fails, the lane goes on");
                }
            }
        }
    }
}

fn lock_lane(state: &Mutex<LaneState>) -> MutexGuard<'_, LaneState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// A ProduceLog request's place in its connection's [`AppendLane`].
pub struct AppendTurn {
    lane: AppendLane,
    seq: u64,
    filled: bool,
}

impl AppendTurn {
    /// Hands this request's job to the lane: it runs once every earlier
    /// turn has run or been skipped.
    pub(crate) fn submit(mut self, job: AppendJob) {
        self.filled = true;
        self.lane.fill(self.seq, Slot::Ready(job));
    }
}

impl Drop for AppendTurn {
    fn drop(&mut self) {
        if !self.filled {
            self.lane.fill(self.seq, Slot::Skipped);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// How long a test waits for a job that should run: far beyond a
    /// blocking-pool hand-off, so only a stalled lane reaches it.
    const RUN_WAIT: Duration = Duration::from_secs(10);

    /// A job that reports `id` on `ran`.
    fn reporting(id: u32, ran: &mpsc::Sender<u32>) -> AppendJob {
        let ran = ran.clone();
        Box::new(move || ran.send(id).unwrap())
    }

    fn ran_in_order(ran: &mpsc::Receiver<u32>, count: usize) -> Vec<u32> {
        (0..count)
            .map(|_| ran.recv_timeout(RUN_WAIT).expect("the lane stalled"))
            .collect()
    }

    #[tokio::test]
    async fn jobs_run_in_turn_order_whatever_order_they_are_handed_in() {
        let lane = AppendLane::default();
        let (ran, runs) = mpsc::channel();
        let turns: Vec<AppendTurn> = (0..4).map(|_| lane.turn()).collect();
        let mut turns = turns.into_iter().enumerate().collect::<Vec<_>>();
        // Handed in last to first: nothing may run before turn 0.
        turns.reverse();
        for (id, turn) in turns {
            turn.submit(reporting(id as u32, &ran));
        }
        assert_eq!(ran_in_order(&runs, 4), vec![0, 1, 2, 3]);
    }

    #[tokio::test]
    async fn a_turn_dropped_without_a_job_is_skipped_not_waited_for() {
        use std::sync::atomic::{AtomicBool, Ordering};

        let lane = AppendLane::default();
        let (ran, runs) = mpsc::channel();
        let first = lane.turn();
        let dropped = lane.turn();
        let third = lane.turn();
        // The third job reports whether the turn before it was gone when
        // it ran: 3 if so, 0 if it jumped the queue.
        let skipped = Arc::new(AtomicBool::new(false));
        let seen = skipped.clone();
        let report = ran.clone();
        third.submit(Box::new(move || {
            let id = if seen.load(Ordering::SeqCst) { 3 } else { 0 };
            report.send(id).unwrap();
        }));
        first.submit(reporting(1, &ran));
        assert_eq!(ran_in_order(&runs, 1), vec![1]);
        skipped.store(true, Ordering::SeqCst);
        drop(dropped);
        assert_eq!(ran_in_order(&runs, 1), vec![3]);
    }

    #[tokio::test]
    async fn a_job_that_panics_drops_what_it_owns_and_the_lane_goes_on() {
        let lane = AppendLane::default();
        let (ran, runs) = mpsc::channel();
        let (reply, replied) = tokio::sync::oneshot::channel::<u32>();
        let panicking = lane.turn();
        let after = lane.turn();
        panicking.submit(Box::new(move || {
            let _owned = reply;
            panic!("an append panicked (test)");
        }));
        after.submit(reporting(2, &ran));
        // The panicking job's reply channel was dropped, not left open.
        assert!(replied.await.is_err());
        assert_eq!(ran_in_order(&runs, 1), vec![2]);
        // And the lane still takes new turns.
        lane.turn().submit(reporting(3, &ran));
        assert_eq!(ran_in_order(&runs, 1), vec![3]);
    }

    #[test]
    fn without_a_runtime_the_submitting_thread_drains_the_lane() {
        let lane = AppendLane::default();
        let (ran, runs) = mpsc::channel();
        let first = lane.turn();
        let second = lane.turn();
        second.submit(reporting(2, &ran));
        first.submit(reporting(1, &ran));
        // No runtime: `fill` drained here, before returning.
        assert_eq!(runs.try_iter().collect::<Vec<_>>(), vec![1, 2]);
    }
}
