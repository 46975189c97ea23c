//! The sender task: queues encoded batches per bucket, groups the ready
//! ones per leader into requests — ProduceLog for the append writer's log
//! batches, PutKv for the upsert writer's KV batches — (one batch per
//! bucket per request, up to `client.writer.request-max-size`), keeps at most
//! `client.writer.max-inflight-requests-per-bucket` batches of a bucket in
//! flight, and completes each batch from its bucket's answer: success,
//! retry with back-off (after refreshing metadata when the error calls for
//! it), or failure. Storage pressure from a PutKv answer (its `pressure`,
//! or STORAGE_BACKPRESSURE / KV_STORAGE_EXCEPTION) holds the bucket back
//! (`client.writer.kv-backpressure.max-throttle`) and never fails a batch.
//!
//! It is the only owner of the queues and routes, so none of them is locked.
//! Ordering: a bucket's batches are sent in sequence order; after a retry
//! the bucket sends one batch at a time until the retried ones are
//! acknowledged, so the server sees the sequences in order again.
//!
//! The sender never waits for a socket. It queues each request on its
//! leader's connection ([`ServerConnection::queue_produce_log`], which
//! takes the request's place in that connection's write order at once)
//! and spawns the rest — the write, then the wait for the answer — as one
//! task per request. So a bucket's requests reach the server in the order
//! the sender issued them, while a leader that stops reading its socket
//! (overloaded, paused, a half-dead network) holds up only the requests
//! queued to it: the other leaders' batches keep flowing. Frames queued
//! per connection need no bound of their own: each request carries at
//! least one in-flight batch, so they are at most the in-flight batches
//! (`max-inflight-requests-per-bucket` per bucket, and buffer memory). A
//! frame not written within the request timeout plus `ANSWER_GRACE`
//! abandons its connection and fails its batches as retriable, as does an
//! answer that does not come within the same time after the write.
//!
//! Route refreshes do not hold the sender either. A bucket whose
//! partition has no route (never had one, or a failure that calls for
//! fresh metadata dropped it), or whose own leader connection died, keeps
//! its batches in its queue (not in flight) while a spawned task asks the
//! coordinator for that partition's leaders (MetaData, then connecting to
//! any new leader), bounded by the request timeout plus `ANSWER_GRACE`.
//! The result comes back through the sender's loop like a produce answer:
//! a route is stored and the waiting buckets send; a failure is the error
//! of the head batch of every bucket of the partition that could send now
//! (the batches a round would take), which then retry with back-off or
//! fail like any other send error, so the batches behind them need another
//! refresh only if they are still there. So a slow or silent coordinator,
//! or a partition the writer has just started writing, delays only the
//! batches that need that route: other partitions and leaders keep
//! flowing, and answers keep freeing buffer memory.
//!
//! Why queued rather than taken out and parked: a batch that waits in its
//! bucket queue keeps its place in sequence order and is not counted in
//! flight, so nothing has to be put back in order when the route arrives,
//! and a refresh that fails is judged by the same `on_error` as a failed
//! send. At most one refresh per partition is in flight (one MetaData
//! request answers every bucket of it) and at most `ROUTE_REFRESHES_MAX` in
//! all, so a writer that starts many partitions at once does not flood the
//! coordinator; a partition beyond the bound waits for a free slot with its
//! batches queued. A route just refreshed carries one batch per bucket even
//! if its connection has died since, so a leader that keeps dying fails
//! batches (each an attempt) instead of being refreshed for ever.
//!
//! Why per-request tasks rather than a writer task per connection: the
//! write stays in the caller's future, so a timeout or a writer shut down
//! cancels it where it is ([`crate::connection`]'s partial-frame guard
//! abandons a torn connection), no task has to be started, stopped or
//! fed per connection, and the other users of a connection (metadata,
//! admin, scanner) share the same write order.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use fjord_format::log_batch::NO_BATCH_SEQUENCE;
use fjord_proto::messages as pb;
use fjord_proto::{ApiKey, ErrorCode};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::{self, JoinSet};

use crate::admin::TableInfo;
use crate::client::FlussClient;
use crate::connection::{PendingResponse, ServerConnection};
use crate::error::{ClientError, Result};
use crate::metadata::TableRoute;
use crate::writer::accumulator::BucketKey;
use crate::writer::encode::EncodedBatch;
use crate::writer::idempotence::{
    earlier_batch_failed, judge, predecessor_pending, SequenceVerdict,
};
use crate::writer::ledger::Ledger;
use crate::writer::{BatchAck, WriterConfig};

/// First retry back-off; doubled per attempt up to [`RETRY_BACKOFF_MAX`].
pub(crate) const RETRY_BACKOFF_INITIAL: Duration = Duration::from_millis(50);
/// Longest back-off between two sends of a batch.
pub(crate) const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Client-side wait beyond the request's server-side timeout, once for a
/// produce request's frame to be written and again for its answer, so a
/// server that never reads or never answers fails the request (retriable)
/// instead of holding its batches forever.
pub(crate) const ANSWER_GRACE: Duration = Duration::from_secs(5);
/// Most route refreshes (MetaData requests to the coordinator) one sender
/// has in flight at once, each for a different partition: a writer that
/// starts writing many new partitions at once asks for their leaders a few
/// at a time instead of flooding the coordinator, and the set of pending
/// refreshes stays small enough to scan.
const ROUTE_REFRESHES_MAX: usize = 8;

/// The request a sender's batches travel in. One sender serves one
/// writer, so every request it sends carries batches with the same target
/// columns and aggregation mode, as PutKv requires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BatchRequest {
    /// Log batches in ProduceLog requests (the append writer).
    ProduceLog,
    /// KV batches in PutKv requests (the upsert writer).
    PutKv {
        /// Columns written, by position; empty for whole rows.
        target_columns: Vec<i32>,
        /// `None` (the merge engine) or Fluss's `agg_mode` number.
        agg_mode: Option<i32>,
    },
}

impl BatchRequest {
    fn api(&self) -> ApiKey {
        match self {
            BatchRequest::ProduceLog => ApiKey::ProduceLog,
            BatchRequest::PutKv { .. } => ApiKey::PutKv,
        }
    }
}

/// A request queued on its connection, to be written by its task (boxed:
/// one allocation per request, so either kind of request fits).
type QueuedWrite =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<PendingResponse>> + Send>>;

/// One bucket's part of an answer, whichever the request.
struct BucketAnswer {
    partition_id: Option<i64>,
    bucket_id: i32,
    error_code: Option<i32>,
    error_message: Option<String>,
    /// ProduceLog's `base_offset` (-1 when absent; PutKv has none).
    base_offset: i64,
    /// PutKv's `log_end_offset`.
    log_end_offset: Option<i64>,
    /// PutKv's `pressure`: the bucket's storage asks the writer to slow down.
    pressure: Option<f32>,
}

impl From<pb::PbProduceLogRespForBucket> for BucketAnswer {
    fn from(r: pb::PbProduceLogRespForBucket) -> Self {
        Self {
            partition_id: r.partition_id,
            bucket_id: r.bucket_id,
            error_code: r.error_code,
            error_message: r.error_message,
            base_offset: r.base_offset.unwrap_or(-1),
            log_end_offset: None,
            pressure: None,
        }
    }
}

impl From<pb::PbPutKvRespForBucket> for BucketAnswer {
    fn from(r: pb::PbPutKvRespForBucket) -> Self {
        Self {
            partition_id: r.partition_id,
            bucket_id: r.bucket_id,
            error_code: r.error_code,
            error_message: r.error_message,
            base_offset: -1,
            log_end_offset: r.log_end_offset,
            pressure: r.pressure,
        }
    }
}

/// One bucket's queue and in-flight state.
struct BucketQueue {
    /// Encoded batches not yet sent (or waiting to be resent), in sequence order.
    queue: VecDeque<EncodedBatch>,
    /// Batches of this bucket in flight.
    inflight: usize,
    /// Last acknowledged sequence (idempotence), `NO_BATCH_SEQUENCE` if none.
    last_acked: i32,
    /// Set after a retry: send one at a time until this sequence is acknowledged.
    recover_until: Option<i32>,
    /// Not before this instant (retry back-off).
    not_before: Option<Instant>,
    /// Set when a batch failed for good with idempotence: later sequences
    /// can never be accepted, so every later batch fails with this reason.
    broken: Option<String>,
    /// Set when the partition's route was just refreshed, cleared by the
    /// next send: while the route is there, that send goes out on it even
    /// if the leader's connection has died since (see the module doc).
    fresh_route: bool,
}

impl BucketQueue {
    fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            inflight: 0,
            last_acked: NO_BATCH_SEQUENCE,
            recover_until: None,
            not_before: None,
            broken: None,
            fresh_route: false,
        }
    }

    /// Whether the bucket may send its next batch now: it has one, is below
    /// its in-flight bound and not backing off (an elapsed back-off is
    /// cleared here).
    fn may_send(&mut self, idempotent: bool, max_inflight: usize, now: Instant) -> bool {
        if self.not_before.is_some_and(|t| t <= now) {
            self.not_before = None;
        }
        let limit = inflight_limit(idempotent, max_inflight, self);
        !self.queue.is_empty() && self.inflight < limit && self.not_before.is_none()
    }

    /// Puts a batch back in sequence order (retries go before newer batches).
    fn requeue(&mut self, batch: EncodedBatch) {
        let at = self
            .queue
            .iter()
            .position(|b| b.sequence > batch.sequence)
            .unwrap_or(self.queue.len());
        self.queue.insert(at, batch);
    }
}

/// What a finished request brings back: its batches and, in request
/// order, each bucket's answer.
struct Answer {
    batches: Vec<EncodedBatch>,
    result: Result<Vec<BucketAnswer>>,
}

/// The route refreshes in flight: at most one per partition, at most
/// [`ROUTE_REFRESHES_MAX`] in all.
struct Refreshes {
    client: FlussClient,
    table: Arc<TableInfo>,
    /// Bound of each refresh: the request timeout plus [`ANSWER_GRACE`].
    wait: Duration,
    tasks: JoinSet<Result<TableRoute>>,
    /// The partition each task refreshes (at most [`ROUTE_REFRESHES_MAX`]
    /// entries, so a scan beats a map).
    pending: Vec<(task::Id, Option<i64>)>,
}

impl Refreshes {
    /// Starts refreshing `partition`'s route, unless a refresh of it is in
    /// flight already or [`ROUTE_REFRESHES_MAX`] are (the caller's batches
    /// then wait in their queues; a finished refresh wakes the sender).
    fn start(&mut self, partition: Option<i64>) {
        if self.pending.len() >= ROUTE_REFRESHES_MAX
            || self.pending.iter().any(|&(_, p)| p == partition)
        {
            return;
        }
        let client = self.client.clone();
        let table = Arc::clone(&self.table);
        let wait = self.wait;
        let task = self.tasks.spawn(async move {
            match tokio::time::timeout(wait, client.refresh_route(&table, partition)).await {
                Ok(route) => route,
                Err(_) => Err(refresh_timed_out(&table, partition, wait)),
            }
        });
        self.pending.push((task.id(), partition));
    }

    /// The partition of the finished task `id`, no longer pending.
    fn finish(&mut self, id: task::Id) -> Option<Option<i64>> {
        let at = self.pending.iter().position(|&(t, _)| t == id)?;
        Some(self.pending.swap_remove(at).1)
    }
}

/// The sender's state; see the module doc.
pub(crate) struct Sender {
    table: Arc<TableInfo>,
    config: WriterConfig,
    idempotent: bool,
    request: BatchRequest,
    ledger: Arc<Ledger>,
    rx: UnboundedReceiver<EncodedBatch>,
    buckets: HashMap<BucketKey, BucketQueue>,
    routes: HashMap<Option<i64>, TableRoute>,
    refreshes: Refreshes,
    requests: JoinSet<Answer>,
}

impl Sender {
    pub(crate) fn new(
        client: FlussClient,
        table: TableInfo,
        config: WriterConfig,
        request: BatchRequest,
        ledger: Arc<Ledger>,
        rx: UnboundedReceiver<EncodedBatch>,
        initial_route: TableRoute,
    ) -> Self {
        let mut routes = HashMap::new();
        routes.insert(initial_route.partition_id(), initial_route);
        let table = Arc::new(table);
        let refreshes = Refreshes {
            client,
            table: Arc::clone(&table),
            wait: config.request_timeout + ANSWER_GRACE,
            tasks: JoinSet::new(),
            pending: Vec::new(),
        };
        Self {
            idempotent: config.enable_idempotence,
            table,
            config,
            request,
            ledger,
            rx,
            buckets: HashMap::new(),
            routes,
            refreshes,
            requests: JoinSet::new(),
        }
    }

    /// Runs until the encoder has closed its channel and every batch is
    /// completed.
    pub(crate) async fn run(mut self) {
        let mut input_open = true;
        loop {
            self.dispatch();
            if !input_open
                && self.requests.is_empty()
                && self.buckets.values().all(|q| q.queue.is_empty())
            {
                break;
            }
            let wake = self.next_wake();
            tokio::select! {
                received = self.rx.recv(), if input_open => match received {
                    Some(batch) => {
                        self.enqueue(batch);
                        while let Ok(batch) = self.rx.try_recv() {
                            self.enqueue(batch);
                        }
                    }
                    None => input_open = false,
                },
                Some(joined) = self.requests.join_next(), if !self.requests.is_empty() => match joined {
                    Ok(answer) => self.on_answer(answer),
                    Err(e) => tracing::error!(error = %e, "produce request task failed"),
                },
                Some(joined) = self.refreshes.tasks.join_next_with_id(), if !self.refreshes.tasks.is_empty() => {
                    let (id, result) = match joined {
                        Ok((id, result)) => (id, result),
                        Err(e) => {
                            tracing::error!(error = %e, "route refresh task failed");
                            (e.id(), Err(ClientError::WriterClosed("a route refresh task stopped")))
                        }
                    };
                    if let Some(partition) = self.refreshes.finish(id) {
                        self.on_refresh(partition, result);
                    }
                }
                _ = sleep_until(wake), if wake.is_some() => {}
            }
        }
    }

    fn enqueue(&mut self, batch: EncodedBatch) {
        let queue = self
            .buckets
            .entry(batch.key)
            .or_insert_with(BucketQueue::new);
        if let Some(why) = &queue.broken {
            let error = earlier_batch_failed(batch.key, why);
            self.ledger
                .complete(Err(error), batch.completion, batch.reserved_bytes);
            return;
        }
        queue.queue.push_back(batch);
    }

    /// When a back-off ends for a bucket that could then send: waking for a
    /// bucket that is also at its in-flight bound would only spin (an
    /// answer wakes the loop anyway).
    fn next_wake(&self) -> Option<Instant> {
        self.buckets
            .values()
            .filter(|q| !q.queue.is_empty() && q.inflight < self.inflight_limit(q))
            .filter_map(|q| q.not_before)
            .min()
    }

    fn inflight_limit(&self, queue: &BucketQueue) -> usize {
        inflight_limit(self.idempotent, self.config.max_inflight_per_bucket, queue)
    }

    /// Sends every batch that may go now: rounds of one batch per eligible
    /// bucket, grouped per leader. A bucket that needs a route refresh
    /// starts one (see [`Refreshes::start`]) and keeps its batches queued.
    fn dispatch(&mut self) {
        loop {
            let now = Instant::now();
            let mut round: Vec<EncodedBatch> = Vec::new();
            let (idempotent, max_inflight) = (self.idempotent, self.config.max_inflight_per_bucket);
            for (key, queue) in self.buckets.iter_mut() {
                if !queue.may_send(idempotent, max_inflight, now) {
                    continue;
                }
                let routed = self
                    .routes
                    .get(&key.0)
                    .is_some_and(|route| queue.fresh_route || has_live_leader(route, key.1));
                if !routed {
                    self.refreshes.start(key.0);
                    continue;
                }
                if let Some(mut batch) = queue.queue.pop_front() {
                    batch.sent_before_predecessor_acked =
                        predecessor_pending(batch.sequence, queue.last_acked);
                    queue.inflight += 1;
                    queue.fresh_route = false;
                    round.push(batch);
                }
            }
            if round.is_empty() {
                return;
            }
            self.send_round(round);
        }
    }

    /// Groups one round (at most one batch per bucket, each with a route)
    /// per leader and sends requests of at most `request-max-size` bytes.
    fn send_round(&mut self, round: Vec<EncodedBatch>) {
        let mut per_leader: Vec<(ServerConnection, Vec<EncodedBatch>)> = Vec::new();
        for batch in round {
            let leader = match self.leader(batch.key) {
                Ok(leader) => leader,
                Err(e) => {
                    // Counted in flight by `dispatch`, but never sent.
                    self.finish_inflight(batch.key);
                    self.on_error(batch, e);
                    continue;
                }
            };
            match per_leader
                .iter_mut()
                .find(|(c, _)| c.addr() == leader.addr())
            {
                Some((_, batches)) => batches.push(batch),
                None => per_leader.push((leader, vec![batch])),
            }
        }
        for (connection, batches) in per_leader {
            let mut request_batches = Vec::new();
            let mut request_bytes = 0usize;
            for batch in batches {
                if !request_batches.is_empty()
                    && request_bytes + batch.bytes.len() > self.config.request_max_size_bytes
                {
                    self.send_request(connection.clone(), std::mem::take(&mut request_batches));
                    request_bytes = 0;
                }
                request_bytes += batch.bytes.len();
                request_batches.push(batch);
            }
            if !request_batches.is_empty() {
                self.send_request(connection, request_batches);
            }
        }
    }

    /// A refresh of `partition`'s route finished. A route is stored and
    /// the next send of each of the partition's waiting buckets goes out
    /// on it. A
    /// failure is the error of the head batch of each of the partition's
    /// buckets that could send now — the batches one round would have
    /// sent — which `on_error` retries with back-off or fails; later
    /// batches stay queued and start another refresh when their turn comes.
    fn on_refresh(&mut self, partition: Option<i64>, result: Result<TableRoute>) {
        match result {
            Ok(route) => {
                self.routes.insert(partition, route);
                // Only the buckets waiting now: a later batch checks the
                // connection as usual.
                for (key, queue) in self.buckets.iter_mut() {
                    if key.0 == partition && !queue.queue.is_empty() {
                        queue.fresh_route = true;
                    }
                }
            }
            Err(error) => {
                let now = Instant::now();
                let (idempotent, max_inflight) =
                    (self.idempotent, self.config.max_inflight_per_bucket);
                // Allocated only when a refresh fails.
                let held: Vec<EncodedBatch> = self
                    .buckets
                    .iter_mut()
                    .filter(|(key, _)| key.0 == partition)
                    .filter_map(|(_, queue)| {
                        if queue.may_send(idempotent, max_inflight, now) {
                            queue.queue.pop_front()
                        } else {
                            None
                        }
                    })
                    .collect();
                for batch in held {
                    self.on_error(batch, error.duplicate());
                }
            }
        }
    }

    /// The leader of `key`'s bucket on the route `dispatch` found.
    fn leader(&self, key: BucketKey) -> Result<ServerConnection> {
        let Some(route) = self.routes.get(&key.0) else {
            return Err(ClientError::Invalid(format!(
                "no route for {} (partition {:?})",
                self.table.path, key.0
            )));
        };
        if key.1 < 0 || key.1 >= route.bucket_count() {
            return Err(ClientError::Invalid(format!(
                "bucket {} out of range: {} has {} buckets",
                key.1,
                self.table.path,
                route.bucket_count()
            )));
        }
        Ok(route.leader(key.1).clone())
    }

    /// Queues one request on `connection` (its place in the write order is
    /// taken here, on the sender task) and spawns its write and the wait
    /// for its answer; never waits itself.
    fn send_request(&mut self, connection: ServerConnection, batches: Vec<EncodedBatch>) {
        let timeout_ms = i32::try_from(self.config.request_timeout.as_millis()).unwrap_or(i32::MAX);
        let (acks, table_id) = (self.config.acks, self.table.table_id);
        let wait = self.config.request_timeout + ANSWER_GRACE;
        let api = self.request.api();
        // Queued now, in the order the sender issues requests, so a
        // bucket's requests reach the server in sequence order; written by
        // the task, so a stalled socket holds up only this connection.
        let write = match &self.request {
            BatchRequest::ProduceLog => {
                let buckets_req = batches
                    .iter()
                    .map(|b| pb::PbProduceLogReqForBucket {
                        partition_id: b.key.0,
                        bucket_id: b.key.1,
                        records: Bytes::clone(&b.bytes),
                        original_partition_name: None,
                        routing_bucket_count: None,
                    })
                    .collect();
                let request = pb::ProduceLogRequest {
                    acks,
                    table_id,
                    timeout_ms,
                    buckets_req,
                };
                Box::pin(connection.queue_produce_log(request, wait)) as QueuedWrite
            }
            BatchRequest::PutKv {
                target_columns,
                agg_mode,
            } => {
                let buckets_req = batches
                    .iter()
                    .map(|b| pb::PbPutKvReqForBucket {
                        partition_id: b.key.0,
                        bucket_id: b.key.1,
                        records: Bytes::clone(&b.bytes),
                        original_partition_name: None,
                        routing_bucket_count: None,
                    })
                    .collect();
                let request = pb::PutKvRequest {
                    acks,
                    table_id,
                    timeout_ms,
                    target_columns: target_columns.clone(),
                    buckets_req,
                    agg_mode: *agg_mode,
                };
                Box::pin(connection.queue_request(ApiKey::PutKv, request, wait))
            }
        };
        self.requests.spawn(async move {
            let result = match write.await {
                Err(e) => Err(e),
                Ok(pending) => match tokio::time::timeout(wait, answers(api, pending)).await {
                    Ok(result) => result,
                    Err(_) => Err(no_answer(api, &connection, wait)),
                },
            };
            Answer { batches, result }
        });
    }

    fn on_answer(&mut self, answer: Answer) {
        let Answer { batches, result } = answer;
        match result {
            Err(e) => {
                for batch in batches {
                    self.finish_inflight(batch.key);
                    self.on_error(batch, e.duplicate());
                }
            }
            Ok(mut answers) => {
                for (i, batch) in batches.into_iter().enumerate() {
                    self.finish_inflight(batch.key);
                    // Answers come in request order: try the same position
                    // first, so a request of many buckets is not matched in
                    // quadratic time; search only if the server reordered.
                    let matches = |r: &BucketAnswer| {
                        r.bucket_id == batch.key.1 && r.partition_id == batch.key.0
                    };
                    let at = if answers.get(i).is_some_and(matches) {
                        Some(i)
                    } else {
                        answers.iter().position(matches)
                    };
                    let Some(at) = at else {
                        let error = ClientError::Protocol {
                            api: self.request.api().name(),
                            message: format!(
                                "no answer for bucket {} (partition {:?})",
                                batch.key.1, batch.key.0
                            ),
                        };
                        self.on_error(batch, error);
                        continue;
                    };
                    let answer = &mut answers[at];
                    if let Some(pressure) = answer.pressure {
                        self.throttle(batch.key, pressure);
                    }
                    match answer.error_code.filter(|&c| c != 0) {
                        None => {
                            let (base_offset, log_end_offset) =
                                (answer.base_offset, answer.log_end_offset);
                            self.on_success(batch, base_offset, log_end_offset);
                        }
                        Some(code) => {
                            let error = ErrorCode::from_code(code)
                                .unwrap_or(ErrorCode::UnknownServerError)
                                .with_message(answer.error_message.take().unwrap_or_default());
                            let api = self.request.api();
                            self.on_error(batch, ClientError::server(api, error));
                        }
                    }
                }
            }
        }
    }

    /// Holds `key`'s bucket back as the server's storage `pressure` asks
    /// (Fluss's `RecordAccumulator.updateThrottle`): for
    /// `max-throttle * p^2` when p is in (0, 1), the whole `max-throttle`
    /// for p >= 1 (what a STORAGE_BACKPRESSURE refusal counts as); no
    /// longer than an earlier hold already is.
    fn throttle(&mut self, key: BucketKey, pressure: f32) {
        if pressure.is_nan() || pressure <= 0.0 {
            return;
        }
        let max = self.config.kv_backpressure_max_throttle;
        let hold = if pressure >= 1.0 {
            max
        } else {
            max.mul_f64(f64::from(pressure) * f64::from(pressure))
        };
        if hold.is_zero() {
            return;
        }
        self.ledger.stats.throttles.fetch_add(1, Ordering::Relaxed);
        let until = Instant::now() + hold;
        let queue = self.buckets.entry(key).or_insert_with(BucketQueue::new);
        queue.not_before = Some(queue.not_before.map_or(until, |t| t.max(until)));
    }

    fn finish_inflight(&mut self, key: BucketKey) {
        if let Some(q) = self.buckets.get_mut(&key) {
            q.inflight = q.inflight.saturating_sub(1);
        }
    }

    fn on_success(&mut self, batch: EncodedBatch, base_offset: i64, log_end_offset: Option<i64>) {
        let queue = self
            .buckets
            .entry(batch.key)
            .or_insert_with(BucketQueue::new);
        if batch.sequence != NO_BATCH_SEQUENCE {
            if queue.last_acked == NO_BATCH_SEQUENCE || batch.sequence > queue.last_acked {
                queue.last_acked = batch.sequence;
            }
            if queue
                .recover_until
                .is_some_and(|until| queue.last_acked >= until)
            {
                queue.recover_until = None;
            }
        } else if queue.inflight == 0 {
            queue.recover_until = None;
        }
        let ack = BatchAck {
            partition_id: batch.key.0,
            bucket: batch.key.1,
            base_offset,
            records: batch.records,
            log_end_offset,
        };
        self.ledger.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.ledger
            .stats
            .bytes
            .fetch_add(batch.bytes.len() as u64, Ordering::Relaxed);
        self.ledger
            .complete(Ok(ack), batch.completion, batch.reserved_bytes);
        self.ledger.outputs.give(batch.bytes);
    }

    fn on_error(&mut self, mut batch: EncodedBatch, error: ClientError) {
        let code = error.error_code();
        let queue = self
            .buckets
            .entry(batch.key)
            .or_insert_with(BucketQueue::new);
        let mut retry_now = false;
        if let Some(
            code @ (ErrorCode::DuplicateSequenceException | ErrorCode::OutOfOrderSequenceException),
        ) = code
        {
            if self.idempotent {
                match judge(
                    code,
                    batch.sequence,
                    queue.last_acked,
                    batch.sent_before_predecessor_acked,
                ) {
                    SequenceVerdict::AlreadyWritten => {
                        self.on_success(batch, -1, None);
                        return;
                    }
                    SequenceVerdict::RetryAfterEarlier => retry_now = true,
                    SequenceVerdict::Fatal => {}
                }
            }
        }
        if error.needs_metadata_refresh() {
            // The partition's leaders may have moved: its buckets send
            // again only after a refresh, whether or not this batch is
            // retried (a dead connection of one bucket is noticed by the
            // others' next sends only through this).
            self.routes.remove(&batch.key.0);
        }
        // Storage under pressure is a reason to wait, never to give up a
        // batch: neither counts against `client.writer.retries` (Fluss's
        // Sender retries STORAGE_BACKPRESSURE after holding the bucket for
        // the whole max throttle, and KV_STORAGE_EXCEPTION is retriable).
        let backpressure = code == Some(ErrorCode::StorageBackpressureException);
        let storage_busy = backpressure || code == Some(ErrorCode::KvStorageException);
        let retriable = retry_now || error.is_retriable();
        let budget_left = storage_busy || batch.attempts < self.config.retries;
        if retriable && budget_left && queue.broken.is_none() {
            batch.attempts = batch.attempts.saturating_add(1);
            self.ledger.stats.retries.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                table = %self.table.path,
                bucket = batch.key.1,
                partition = ?batch.key.0,
                sequence = batch.sequence,
                attempt = batch.attempts,
                error = %error,
                "write failed; retrying"
            );
            let backoff = if retry_now {
                Duration::ZERO
            } else if backpressure {
                self.ledger.stats.throttles.fetch_add(1, Ordering::Relaxed);
                backoff(batch.attempts).max(self.config.kv_backpressure_max_throttle)
            } else {
                backoff(batch.attempts)
            };
            let until = queue
                .recover_until
                .map_or(batch.sequence, |u| u.max(batch.sequence));
            queue.recover_until = Some(until);
            let at = Instant::now() + backoff;
            queue.not_before = Some(queue.not_before.map_or(at, |t| t.max(at)));
            queue.requeue(batch);
            return;
        }
        if self.idempotent && queue.broken.is_none() {
            // Every later sequence of this bucket would be refused.
            queue.broken = Some(error.to_string());
            let drained: Vec<EncodedBatch> = queue.queue.drain(..).collect();
            let why = error.to_string();
            for later in drained {
                let e = earlier_batch_failed(later.key, &why);
                self.ledger
                    .complete(Err(e), later.completion, later.reserved_bytes);
            }
        }
        tracing::error!(table = %self.table.path, bucket = batch.key.1, error = %error, "write failed");
        self.ledger
            .complete(Err(error), batch.completion, batch.reserved_bytes);
    }
}

/// Back-off before attempt `attempt` (1-based): doubling from
/// [`RETRY_BACKOFF_INITIAL`], at most [`RETRY_BACKOFF_MAX`].
pub(crate) fn backoff(attempt: i32) -> Duration {
    let shift = attempt.saturating_sub(1).clamp(0, 16) as u32;
    RETRY_BACKOFF_INITIAL
        .saturating_mul(1u32 << shift)
        .min(RETRY_BACKOFF_MAX)
}

/// Whether `route` can carry `bucket`'s next batch: the bucket's leader
/// connection is alive. A bucket the route does not have counts as
/// routable: sending it fails it as invalid, as a refresh would not help.
fn has_live_leader(route: &TableRoute, bucket: i32) -> bool {
    !(0..route.bucket_count()).contains(&bucket) || !route.leader(bucket).is_closed()
}

/// The error of a route refresh that got no answer within `wait`.
fn refresh_timed_out(table: &TableInfo, partition: Option<i64>, wait: Duration) -> ClientError {
    ClientError::Server {
        api: ApiKey::MetaData.name(),
        error: ErrorCode::RequestTimeOut.with_message(format!(
            "no leaders for {} (partition {partition:?}) within {} ms",
            table.path,
            wait.as_millis()
        )),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// The error of a request of `api` that got no answer within `wait`.
fn no_answer(api: ApiKey, connection: &ServerConnection, wait: Duration) -> ClientError {
    ClientError::Server {
        api: api.name(),
        error: ErrorCode::RequestTimeOut.with_message(format!(
            "no answer from {} within {} ms",
            connection.addr(),
            wait.as_millis()
        )),
    }
}

/// Waits for the answer of a request of `api` and reads each bucket's part.
async fn answers(api: ApiKey, pending: PendingResponse) -> Result<Vec<BucketAnswer>> {
    Ok(match api {
        ApiKey::PutKv => pending
            .wait::<pb::PutKvResponse>()
            .await?
            .buckets_resp
            .into_iter()
            .map(BucketAnswer::from)
            .collect(),
        _ => pending
            .wait::<pb::ProduceLogResponse>()
            .await?
            .buckets_resp
            .into_iter()
            .map(BucketAnswer::from)
            .collect(),
    })
}

/// Batches `queue`'s bucket may have in flight: one while it recovers from
/// a sequence error, else `client.writer.max-inflight-requests-per-bucket`.
/// A free function so `dispatch` can walk the queues mutably without
/// collecting them first.
fn inflight_limit(idempotent: bool, max_inflight: usize, queue: &BucketQueue) -> usize {
    if queue.recover_until.is_some() {
        1
    } else if idempotent {
        max_inflight
    } else {
        // Without idempotence order is not guarded by sequences; Fluss
        // still bounds in-flight batches per bucket by the same option.
        max_inflight.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(1), RETRY_BACKOFF_INITIAL);
        assert_eq!(backoff(2), RETRY_BACKOFF_INITIAL * 2);
        assert_eq!(backoff(30), RETRY_BACKOFF_MAX);
    }
}
