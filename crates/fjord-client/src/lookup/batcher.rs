//! The lookuper's batcher task: the keys of every caller, queued per
//! server (the leader of each key's bucket) and sent in Lookup or
//! PrefixLookup requests of up to `client.lookup.max-batch-size` keys,
//! with at most [`REQUESTS_PER_SERVER_MAX`] requests in flight per server
//! and `client.lookup.max-inflight-requests` in all.
//!
//! A request leaves once its server's queue holds a share of the keys
//! outstanding at that server (queued or in flight) that spreads them
//! over the [`REQUESTS_PER_SERVER_MAX`] request slots ([`request_target`]),
//! at most a full request; or at once when the server has nothing out.
//! So 256 callers keep two requests of 128 keys in flight: the client
//! answers one while the server works on the other, and a few callers
//! still share requests. Two slots beat four (and one, and eight) on
//! lookups/s and on client and server CPU per lookup once the server's
//! lookup cost fell: most of a request's client cost is the loopback
//! send that wakes the server (docs/bench-notes/kv.md).
//!
//! It owns the routes, the queues and the count of requests in flight, so
//! none of them is locked. Requests run as spawned tasks. A request's task
//! answers the callers of every bucket that answered cleanly itself, as
//! soon as the answer is decoded (on two tokio workers, waiting for the
//! batcher to be woken first put one more wake-up between each answer and
//! the callers' next keys: ~20 % of lookups/s, docs/bench-notes/kv.md);
//! the rest of the answer (errors, retries, the freed slot) comes back
//! through the batcher's loop, as do route refreshes (at most one per
//! partition at a time), started when a key's partition has no
//! route or an error said the route is stale. A key whose bucket answered
//! with a retriable error goes back into its queue after a back-off (the
//! writer's), counted against `client.lookup.max-retries`.
//!
//! Callers hand keys over through an [`Inbox`]: a locked list they push
//! to, which wakes the batcher only when the push makes a request ready to
//! leave (as many keys wait as the batcher last said a request needs, or
//! no request is in flight): under load a key costs a push under an
//! uncontended lock, not a wake-up of the batcher. Everything else is per
//! request.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use fjord_proto::messages as pb;
use fjord_proto::{ApiKey, ErrorCode};
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinSet;

use super::config::{LookupConfig, REQUESTS_PER_SERVER_MAX};
use super::key::KeyBytes;
use super::request::{BucketKey, KeyOf, KeysRequest};
use crate::admin::TableInfo;
use crate::client::FlussClient;
use crate::connection::ServerConnection;
use crate::error::{ClientError, Result};
use crate::metadata::TableRoute;
use crate::writer::sender::{backoff, ANSWER_GRACE};

/// Where a key's answer goes.
pub(crate) enum Reply {
    /// A point lookup: the stored value, or `None` for no such key.
    Point(oneshot::Sender<Result<Option<Bytes>>>),
    /// A prefix lookup: every stored value under the prefix.
    Prefix(oneshot::Sender<Result<Vec<Bytes>>>),
}

impl Reply {
    fn fail(self, error: ClientError) {
        // A caller that gave up (dropped its future) is no one's concern.
        let _ = match self {
            Reply::Point(tx) => tx.send(Err(error)).map_err(drop),
            Reply::Prefix(tx) => tx.send(Err(error)).map_err(drop),
        };
    }
}

/// One key to look up. It holds one of the inbox's
/// `client.lookup.queue-size` places, which the batcher gives back once it
/// has answered the key, with a value or an error (its `answered` count).
pub(crate) struct Job {
    partition: Option<i64>,
    bucket: i32,
    key: KeyBytes,
    reply: Reply,
    /// Resends so far.
    attempts: u32,
}

/// `client.lookup.queue-size` places for keys not yet answered. It lives
/// under the inbox's lock, which a caller takes anyway to leave its key:
/// taking a place there costs no atomic of its own (an uncontended atomic
/// add was ~1.5 % of a lookup's client CPU, `docs/bench-notes/kv.md`).
/// The batcher and the request tasks give back all the places of the keys
/// they answered at once, a lock per answer, not per key.
struct Room {
    taken: usize,
    limit: usize,
}

impl Room {
    fn new(limit: usize) -> Self {
        Self {
            taken: 0,
            limit: limit.max(1),
        }
    }

    /// Takes a place if one is free.
    fn try_take(&mut self) -> bool {
        let free = self.taken < self.limit;
        self.taken += usize::from(free);
        free
    }

    /// Gives back `places`; whether every place was taken before, so
    /// callers may be waiting for one.
    fn give_back(&mut self, places: usize) -> bool {
        debug_assert!(
            places <= self.taken,
            "{places} places given back, {} taken",
            self.taken
        );
        let was_full = self.taken >= self.limit;
        self.taken -= places.min(self.taken);
        was_full
    }
}

/// What the inbox's lock guards.
struct Queue {
    jobs: Vec<Job>,
    room: Room,
}

/// Where callers leave keys for the batcher; see the module doc.
pub(crate) struct Inbox {
    queue: Mutex<Queue>,
    notify: Notify,
    /// Wakes the callers waiting for a place in the room.
    freed: Notify,
    /// Requests in flight, all servers together (kept by the batcher).
    inflight: AtomicUsize,
    /// Keys waiting here that make a request ready to leave (set by the
    /// batcher after each dispatch; at most a full request).
    ready_at: AtomicUsize,
    /// Every lookuper handle is gone.
    closed: AtomicBool,
}

impl Inbox {
    pub(crate) fn new(config: &LookupConfig) -> Self {
        Self {
            queue: Mutex::new(Queue {
                jobs: Vec::new(),
                room: Room::new(config.queue_size),
            }),
            notify: Notify::new(),
            freed: Notify::new(),
            inflight: AtomicUsize::new(0),
            ready_at: AtomicUsize::new(config.max_batch_size),
            closed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands one key to the batcher, after waiting for room among
    /// `client.lookup.queue-size` keys; wakes the batcher when a request
    /// is ready to leave. The place is taken and the key left under one
    /// lock, so a caller that gives up (drops this future) holds no place.
    pub(crate) async fn submit(
        &self,
        partition: Option<i64>,
        bucket: i32,
        key: KeyBytes,
        reply: Reply,
    ) {
        let mut job = Job {
            partition,
            bucket,
            key,
            reply,
            attempts: 0,
        };
        let waiting = loop {
            job = match self.try_push(job) {
                Ok(waiting) => break waiting,
                Err(job) => job,
            };
            // Registered before trying again, so a place given back after
            // the try wakes this caller.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            job = match self.try_push(job) {
                Ok(waiting) => break waiting,
                Err(job) => job,
            };
            freed.await;
        };
        if waiting >= self.ready_at.load(Ordering::Relaxed)
            || self.inflight.load(Ordering::Acquire) == 0
        {
            self.notify.notify_one();
        }
    }

    /// Leaves `job` if the room has a place: the keys now waiting; the job
    /// back when the room is full.
    fn try_push(&self, job: Job) -> std::result::Result<usize, Job> {
        let mut queue = self.lock();
        if !queue.room.try_take() {
            return Err(job);
        }
        queue.jobs.push(job);
        Ok(queue.jobs.len())
    }

    /// Gives back the places of `places` answered keys, waking the callers
    /// waiting for one.
    pub(crate) fn give_back(&self, places: usize) {
        if places == 0 {
            return;
        }
        if self.lock().room.give_back(places) {
            self.freed.notify_waiters();
        }
    }

    /// Places taken now.
    #[cfg(test)]
    fn taken(&self) -> usize {
        self.lock().room.taken
    }

    /// The handles are gone: the batcher ends once every key is answered.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.notify.notify_one();
    }

    /// Takes every key left so far into `into` (emptied by the caller).
    fn drain(&self, into: &mut Vec<Job>) {
        std::mem::swap(&mut self.lock().jobs, into);
    }
}

impl Job {
    fn is_prefix(&self) -> bool {
        matches!(self.reply, Reply::Prefix(_))
    }
}

/// One server's queues.
struct Server {
    connection: ServerConnection,
    point: VecDeque<Job>,
    prefix: VecDeque<Job>,
    inflight: usize,
    /// Keys in the requests in flight.
    inflight_keys: usize,
    /// Which queue the next request takes first, so neither starves.
    prefix_next: bool,
}

/// Per partition, the index in `Batcher::servers` of each bucket's
/// leader. A table without partitions has its own field, so routing its
/// keys hashes nothing (SipHash of the partition was ~0.7 % of the
/// native client's profile on one worker, `docs/bench-notes/kv.md`).
#[derive(Default)]
struct Routes {
    unpartitioned: Option<Vec<usize>>,
    partitions: HashMap<i64, Vec<usize>>,
}

impl Routes {
    fn get(&self, partition: Option<i64>) -> Option<&Vec<usize>> {
        match partition {
            None => self.unpartitioned.as_ref(),
            Some(id) => self.partitions.get(&id),
        }
    }

    fn insert(&mut self, partition: Option<i64>, leaders: Vec<usize>) {
        match partition {
            None => self.unpartitioned = Some(leaders),
            Some(id) => {
                self.partitions.insert(id, leaders);
            }
        }
    }

    fn remove(&mut self, partition: Option<i64>) {
        match partition {
            None => self.unpartitioned = None,
            Some(id) => {
                self.partitions.remove(&id);
            }
        }
    }
}

/// One request's keys, grouped per bucket in request order.
struct Request {
    server: usize,
    prefix: bool,
    /// Keys in all groups.
    keys: usize,
    groups: Vec<(BucketKey, Vec<Job>)>,
}

/// One bucket's part of an answer.
struct BucketAnswer {
    partition_id: Option<i64>,
    bucket_id: i32,
    error: Option<(i32, Option<String>)>,
    values: Values,
}

enum Values {
    Point(Vec<Option<Bytes>>),
    Prefix(Vec<Vec<Bytes>>),
}

impl Values {
    fn len(&self) -> usize {
        match self {
            Values::Point(v) => v.len(),
            Values::Prefix(v) => v.len(),
        }
    }
}

/// A finished request.
struct Answer {
    request: Request,
    result: Result<Vec<BucketAnswer>>,
}

/// The batcher; see the module doc.
pub(crate) struct Batcher {
    client: FlussClient,
    table: Arc<TableInfo>,
    config: LookupConfig,
    inbox: Arc<Inbox>,
    /// The inbox's last contents, kept for its capacity.
    arrived: Vec<Job>,
    servers: Vec<Server>,
    /// Per partition, the index in `servers` of each bucket's leader.
    routes: Routes,
    /// Keys whose partition waits for a route.
    unrouted: HashMap<Option<i64>, Vec<Job>>,
    refreshes: JoinSet<(Option<i64>, Result<TableRoute>)>,
    /// Keys to resend, with when.
    delayed: Vec<(Instant, Job)>,
    requests: JoinSet<Answer>,
    inflight: usize,
    /// Keys answered (or failed) since their places were last given back
    /// to the inbox's room.
    answered: usize,
}

impl Batcher {
    pub(crate) fn new(
        client: FlussClient,
        table: TableInfo,
        config: LookupConfig,
        inbox: Arc<Inbox>,
    ) -> Self {
        Self {
            client,
            table: Arc::new(table),
            config,
            inbox,
            arrived: Vec::new(),
            servers: Vec::new(),
            routes: Routes::default(),
            unrouted: HashMap::new(),
            refreshes: JoinSet::new(),
            delayed: Vec::new(),
            requests: JoinSet::new(),
            inflight: 0,
            answered: 0,
        }
    }

    /// Runs until every lookuper handle is gone and every key is answered.
    pub(crate) async fn run(mut self) {
        loop {
            self.give_back_places();
            self.take_arrived();
            self.dispatch();
            if self.inbox.closed.load(Ordering::Acquire) && self.is_idle() {
                return;
            }
            let wake = self.delayed.iter().map(|(at, _)| *at).min();
            tokio::select! {
                _ = self.inbox.notify.notified() => {}
                Some(done) = self.requests.join_next(), if !self.requests.is_empty() => {
                    match done {
                        Ok(answer) => self.on_answer(answer),
                        Err(e) => tracing::error!(error = %e, "lookup request task failed"),
                    }
                    self.give_back_places();
                    // The callers just answered run first and leave their
                    // next keys, which then join the next request.
                    tokio::task::yield_now().await;
                }
                Some(done) = self.refreshes.join_next(), if !self.refreshes.is_empty() => match done {
                    Ok((partition, route)) => self.on_refresh(partition, route),
                    Err(e) => tracing::error!(error = %e, "lookup route refresh task failed"),
                },
                _ = sleep_until(wake), if wake.is_some() => self.release_due(),
            }
        }
    }

    /// Gives back the places of the keys answered since the last call.
    fn give_back_places(&mut self) {
        self.inbox.give_back(std::mem::take(&mut self.answered));
    }

    /// Routes every key callers left since the last look.
    fn take_arrived(&mut self) {
        let mut arrived = std::mem::take(&mut self.arrived);
        self.inbox.drain(&mut arrived);
        for job in arrived.drain(..) {
            self.route(job);
        }
        self.arrived = arrived;
    }

    fn is_idle(&self) -> bool {
        self.requests.is_empty()
            && self.refreshes.is_empty()
            && self.delayed.is_empty()
            && self.unrouted.values().all(Vec::is_empty)
            && self
                .servers
                .iter()
                .all(|s| s.point.is_empty() && s.prefix.is_empty())
    }

    /// Queues `job` on its bucket's leader, or with its partition's keys
    /// waiting for a route (starting a refresh).
    fn route(&mut self, job: Job) {
        let server = self
            .routes
            .get(job.partition)
            .and_then(|leaders| leaders.get(usize::try_from(job.bucket).ok()?))
            .copied();
        match server {
            Some(server) => {
                let server = &mut self.servers[server];
                if job.is_prefix() {
                    server.prefix.push_back(job);
                } else {
                    server.point.push_back(job);
                }
            }
            None if self.routes.get(job.partition).is_some() => {
                let bucket = job.bucket;
                self.answered += 1;
                job.reply.fail(ClientError::Invalid(format!(
                    "bucket {bucket} is outside {}",
                    self.table.path
                )));
            }
            None => {
                let partition = job.partition;
                let waiting = self.unrouted.entry(partition).or_default();
                waiting.push(job);
                if waiting.len() == 1 {
                    self.start_refresh(partition);
                }
            }
        }
    }

    fn start_refresh(&mut self, partition: Option<i64>) {
        let client = self.client.clone();
        let table = Arc::clone(&self.table);
        let wait = self.config.request_timeout + ANSWER_GRACE;
        self.refreshes.spawn(async move {
            let route =
                match tokio::time::timeout(wait, client.refresh_route(&table, partition)).await {
                    Ok(route) => route,
                    Err(_) => Err(ClientError::Server {
                        api: ApiKey::MetaData.name(),
                        error: ErrorCode::RequestTimeOut.with_message(format!(
                            "no leaders for {} (partition {partition:?}) within {} ms",
                            table.path,
                            wait.as_millis()
                        )),
                    }),
                };
            (partition, route)
        });
    }

    fn on_refresh(&mut self, partition: Option<i64>, route: Result<TableRoute>) {
        let waiting = self.unrouted.remove(&partition).unwrap_or_default();
        match route {
            Ok(route) => {
                let leaders = (0..route.bucket_count())
                    .map(|bucket| self.server_index(route.leader(bucket)))
                    .collect();
                self.routes.insert(partition, leaders);
                for job in waiting {
                    self.route(job);
                }
            }
            Err(error) => {
                for job in waiting {
                    self.retry_or_fail(job, &error);
                }
            }
        }
    }

    /// The index of `connection`'s server, added on first sight; a server
    /// whose connection was replaced gets the new one.
    fn server_index(&mut self, connection: &ServerConnection) -> usize {
        match self
            .servers
            .iter()
            .position(|s| s.connection.addr() == connection.addr())
        {
            Some(at) => {
                self.servers[at].connection = connection.clone();
                at
            }
            None => {
                self.servers.push(Server {
                    connection: connection.clone(),
                    point: VecDeque::new(),
                    prefix: VecDeque::new(),
                    inflight: 0,
                    inflight_keys: 0,
                    prefix_next: false,
                });
                self.servers.len() - 1
            }
        }
    }

    /// Sends every request a free slot allows, one server after another:
    /// requests of the server's [`request_target`] keys while it has fewer
    /// than [`REQUESTS_PER_SERVER_MAX`] out, and whatever waits when it has
    /// none out. So under load the keys of many callers leave together
    /// (the server's cost is partly per request) in as many requests as
    /// keep the pipeline full, and when load is light a key waits for no
    /// one. Then tells the inbox how many more keys make a request ready.
    fn dispatch(&mut self) {
        let full = self.config.max_batch_size;
        let mut ready_at = full;
        for server in 0..self.servers.len() {
            loop {
                let s = &mut self.servers[server];
                let queued = s.point.len() + s.prefix.len();
                let target = request_target(queued + s.inflight_keys, full);
                if s.inflight >= REQUESTS_PER_SERVER_MAX
                    || self.inflight >= self.config.max_inflight_requests
                {
                    break;
                }
                let ready = |queue: &VecDeque<Job>| {
                    !queue.is_empty() && (queue.len() >= target || s.inflight == 0)
                };
                let prefix = match (ready(&s.point), ready(&s.prefix)) {
                    (false, false) => {
                        ready_at = ready_at.min(target.saturating_sub(queued).max(1));
                        break;
                    }
                    (true, false) => false,
                    (false, true) => true,
                    (true, true) => s.prefix_next,
                };
                s.prefix_next = !prefix;
                let queue = if prefix { &mut s.prefix } else { &mut s.point };
                let take = queue.len().min(target);
                let mut groups: Vec<(BucketKey, Vec<Job>)> = Vec::new();
                for job in queue.drain(..take) {
                    let bucket = (job.partition, job.bucket);
                    // A request spans few buckets: a scan beats a map.
                    match groups.iter_mut().find(|(b, _)| *b == bucket) {
                        Some((_, jobs)) => jobs.push(job),
                        None => groups.push((bucket, vec![job])),
                    }
                }
                s.inflight += 1;
                s.inflight_keys += take;
                self.inflight += 1;
                self.inbox.inflight.fetch_add(1, Ordering::AcqRel);
                let connection = s.connection.clone();
                self.send(
                    connection,
                    Request {
                        server,
                        prefix,
                        keys: take,
                        groups,
                    },
                );
            }
        }
        self.inbox.ready_at.store(ready_at, Ordering::Relaxed);
    }

    /// Spawns one request's round trip.
    fn send(&mut self, connection: ServerConnection, request: Request) {
        let table_id = self.table.table_id;
        let wait = self.config.request_timeout + ANSWER_GRACE;
        let inbox = Arc::clone(&self.inbox);
        self.requests.spawn(async move {
            let api = request.api();
            let run = request.run(&connection, table_id);
            let result = match tokio::time::timeout(wait, run).await {
                Ok(result) => result,
                Err(_) => Err(ClientError::Server {
                    api: api.name(),
                    error: ErrorCode::RequestTimeOut.with_message(format!(
                        "no answer from {} within {} ms",
                        connection.addr(),
                        wait.as_millis()
                    )),
                }),
            };
            let mut answer = Answer { request, result };
            // The callers of every bucket that answered cleanly hear now,
            // without waiting for the batcher to be woken; it settles the
            // rest (errors, retries) and the slot.
            let answered = answer.complete_clean();
            inbox.give_back(answered);
            answer
        });
    }

    fn on_answer(&mut self, answer: Answer) {
        let Answer { request, result } = answer;
        self.inflight -= 1;
        self.inbox.inflight.fetch_sub(1, Ordering::AcqRel);
        let server = &mut self.servers[request.server];
        server.inflight -= 1;
        server.inflight_keys -= request.keys;
        let api = request.api();
        let mut answers = match result {
            Ok(answers) => answers,
            Err(error) => {
                for (_, jobs) in request.groups {
                    for job in jobs {
                        self.retry_or_fail(job, &error);
                    }
                }
                return;
            }
        };
        // The groups left after the request's task answered the clean ones.
        for (i, ((partition, bucket), jobs)) in request.groups.into_iter().enumerate() {
            let Some(at) = answer_of(&answers, i, (partition, bucket)) else {
                let error = ClientError::Protocol {
                    api: api.name(),
                    message: format!("no answer for bucket {bucket} (partition {partition:?})"),
                };
                self.answered += jobs.len();
                jobs.into_iter()
                    .for_each(|job| job.reply.fail(error.duplicate()));
                continue;
            };
            let answer = &mut answers[at];
            if let Some((code, message)) = answer.error.take() {
                let error = ClientError::server(
                    api,
                    ErrorCode::from_code(code)
                        .unwrap_or(ErrorCode::UnknownServerError)
                        .with_message(message.unwrap_or_default()),
                );
                for job in jobs {
                    self.retry_or_fail(job, &error);
                }
                continue;
            }
            if answer.values.len() != jobs.len() {
                let error = ClientError::Protocol {
                    api: api.name(),
                    message: format!(
                        "{} values for {} keys of bucket {bucket} (partition {partition:?})",
                        answer.values.len(),
                        jobs.len()
                    ),
                };
                self.answered += jobs.len();
                jobs.into_iter()
                    .for_each(|job| job.reply.fail(error.duplicate()));
                continue;
            }
            let values = std::mem::replace(&mut answer.values, Values::Point(Vec::new()));
            self.answered += jobs.len();
            complete(jobs, values);
        }
    }

    /// Resends `job` after a back-off when `error` is retriable and its
    /// retries are not spent (dropping the route first when the error
    /// says it is stale); fails it otherwise.
    fn retry_or_fail(&mut self, mut job: Job, error: &ClientError) {
        // KV_STORAGE_EXCEPTION is retriable (a busy store), as Fluss's
        // `KvStorageException` extends `RetriableException`.
        if !error.is_retriable() || job.attempts >= self.config.max_retries {
            self.answered += 1;
            job.reply.fail(error.duplicate());
            return;
        }
        if error.needs_metadata_refresh() {
            self.routes.remove(job.partition);
        }
        job.attempts += 1;
        tracing::debug!(
            table = %self.table.path,
            bucket = job.bucket,
            attempt = job.attempts,
            error = %error,
            "lookup failed; retrying"
        );
        let at = Instant::now() + backoff(i32::try_from(job.attempts).unwrap_or(i32::MAX));
        self.delayed.push((at, job));
    }

    /// Routes the resends whose back-off is over.
    fn release_due(&mut self) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.delayed.len() {
            if self.delayed[i].0 <= now {
                let (_, job) = self.delayed.swap_remove(i);
                self.route(job);
            } else {
                i += 1;
            }
        }
    }
}

/// Keys a request to a server with `outstanding` keys (queued or in
/// flight) waits for: enough to spread them over the
/// [`REQUESTS_PER_SERVER_MAX`] request slots, at least one, at most `full`
/// (`client.lookup.max-batch-size`).
fn request_target(outstanding: usize, full: usize) -> usize {
    outstanding
        .div_ceil(REQUESTS_PER_SERVER_MAX)
        .clamp(1, full.max(1))
}

impl Answer {
    /// Answers the keys of every bucket whose answer has no error and one
    /// value per key, and drops those groups from the request; returns how
    /// many keys it answered.
    fn complete_clean(&mut self) -> usize {
        let Ok(answers) = &mut self.result else {
            return 0;
        };
        let mut answered = 0;
        let groups = std::mem::take(&mut self.request.groups);
        for (i, ((partition, bucket), jobs)) in groups.into_iter().enumerate() {
            match answer_of(answers, i, (partition, bucket)).map(|at| &mut answers[at]) {
                Some(a) if a.error.is_none() && a.values.len() == jobs.len() => {
                    let values = std::mem::replace(&mut a.values, Values::Point(Vec::new()));
                    answered += jobs.len();
                    complete(jobs, values);
                }
                _ => self.request.groups.push(((partition, bucket), jobs)),
            }
        }
        answered
    }
}

/// Where in `answers` the answer for `bucket` is, the `i`-th group looked
/// at: answers come in request order, so position `i` is tried first, then
/// the rest. For the groups a request's task left to the batcher, `i` no
/// longer matches (the clean groups before them are gone) and the scan
/// finds them; that is the rare path of errors and retries.
fn answer_of(answers: &[BucketAnswer], i: usize, bucket: BucketKey) -> Option<usize> {
    let (partition, bucket) = bucket;
    let matches = |a: &BucketAnswer| a.bucket_id == bucket && a.partition_id == partition;
    if answers.get(i).is_some_and(matches) {
        Some(i)
    } else {
        answers.iter().position(matches)
    }
}

/// Answers each of `jobs` with its value, in order.
fn complete(jobs: Vec<Job>, values: Values) {
    match values {
        Values::Point(values) => {
            for (job, value) in jobs.into_iter().zip(values) {
                if let Reply::Point(tx) = job.reply {
                    let _ = tx.send(Ok(value));
                }
            }
        }
        Values::Prefix(lists) => {
            for (job, values) in jobs.into_iter().zip(lists) {
                if let Reply::Prefix(tx) = job.reply {
                    let _ = tx.send(Ok(values));
                }
            }
        }
    }
}

impl KeyOf for Job {
    fn key(&self) -> &[u8] {
        self.key.as_slice()
    }
}

impl Request {
    /// The API this request goes as.
    fn api(&self) -> ApiKey {
        if self.prefix {
            ApiKey::PrefixLookup
        } else {
            ApiKey::Lookup
        }
    }

    /// Sends the request and reads each bucket's part of the answer.
    async fn run(&self, connection: &ServerConnection, table_id: i64) -> Result<Vec<BucketAnswer>> {
        let message = KeysRequest::new(table_id, &self.groups);
        Ok(if self.prefix {
            connection
                .request::<_, pb::PrefixLookupResponse>(ApiKey::PrefixLookup, &message)
                .await?
                .buckets_resp
                .into_iter()
                .map(|b| BucketAnswer {
                    partition_id: b.partition_id,
                    bucket_id: b.bucket_id,
                    error: b
                        .error_code
                        .filter(|&c| c != 0)
                        .map(|c| (c, b.error_message)),
                    values: Values::Prefix(b.value_lists.into_iter().map(|l| l.values).collect()),
                })
                .collect()
        } else {
            connection
                .request::<_, pb::LookupResponse>(ApiKey::Lookup, &message)
                .await?
                .buckets_resp
                .into_iter()
                .map(|b| BucketAnswer {
                    partition_id: b.partition_id,
                    bucket_id: b.bucket_id,
                    error: b
                        .error_code
                        .filter(|&c| c != 0)
                        .map(|c| (c, b.error_message)),
                    values: Values::Point(b.values.into_iter().map(|v| v.values).collect()),
                })
                .collect()
        })
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending::<()>().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's task answers the callers of the buckets that answered
    /// cleanly and leaves the rest (an error, a wrong number of values, no
    /// answer at all) to the batcher, which retries or fails them.
    #[test]
    fn a_request_answers_its_clean_buckets_and_leaves_the_rest_to_the_batcher() {
        let job = |bucket: i32| {
            let (tx, rx) = oneshot::channel();
            let job = Job {
                partition: None,
                bucket,
                key: KeyBytes::new(&[bucket as u8]),
                reply: Reply::Point(tx),
                attempts: 0,
            };
            (job, rx)
        };
        let (j0, mut r0) = job(0);
        let (j1a, mut r1a) = job(1);
        let (j1b, mut r1b) = job(1);
        let (j2, mut r2) = job(2);
        let (j3, mut r3) = job(3);
        let (j4, mut r4) = job(4);
        let value = |v: &'static [u8]| Some(Bytes::from_static(v));
        let bucket_answer = |bucket_id, error, values| BucketAnswer {
            partition_id: None,
            bucket_id,
            error,
            values: Values::Point(values),
        };
        let mut answer = Answer {
            request: Request {
                server: 0,
                prefix: false,
                keys: 6,
                groups: vec![
                    ((None, 0), vec![j0]),
                    ((None, 1), vec![j1a, j1b]),
                    ((None, 2), vec![j2]),
                    ((None, 3), vec![j3]),
                    ((None, 4), vec![j4]),
                ],
            },
            // Out of request order, as a server may answer.
            result: Ok(vec![
                bucket_answer(1, None, vec![value(b"one"), None]),
                bucket_answer(0, None, vec![value(b"zero")]),
                // An error wins even beside a value per key.
                bucket_answer(
                    2,
                    Some((ErrorCode::NotLeaderOrFollower.code(), None)),
                    vec![value(b"stale")],
                ),
                bucket_answer(3, None, vec![value(b"a"), value(b"b")]),
            ]),
        };

        assert_eq!(answer.complete_clean(), 3);

        let point = |rx: &mut oneshot::Receiver<Result<Option<Bytes>>>| match rx.try_recv() {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) => panic!("answered with an error: {e}"),
            Err(_) => None,
        };
        assert_eq!(point(&mut r0), Some(value(b"zero")));
        assert_eq!(point(&mut r1a), Some(value(b"one")));
        assert_eq!(point(&mut r1b), Some(None), "a missing key is None");
        for (rx, bucket) in [(&mut r2, 2), (&mut r3, 3), (&mut r4, 4)] {
            assert_eq!(point(rx), None, "bucket {bucket} must wait for the batcher");
        }
        let left: Vec<i32> = (answer.request.groups.iter())
            .map(|((_, bucket), _)| *bucket)
            .collect();
        assert_eq!(left, [2, 3, 4]);
        assert_eq!(
            answer.request.keys, 6,
            "the slot's key count is the batcher's to settle"
        );
    }

    #[test]
    fn a_request_waits_for_a_share_of_the_outstanding_keys_per_slot_up_to_a_full_one() {
        // (keys outstanding at the server, max-batch-size) -> keys a request waits for.
        let check = |outstanding: usize, full: usize, expected: usize| {
            assert_eq!(
                request_target(outstanding, full),
                expected,
                "{outstanding} outstanding, batches of {full}"
            );
        };
        assert_eq!(
            REQUESTS_PER_SERVER_MAX, 2,
            "the cases below assume two slots"
        );
        check(0, 128, 1);
        check(1, 128, 1);
        check(5, 128, 3);
        check(128, 128, 64);
        check(129, 128, 65);
        check(256, 128, 128);
        check(10_000, 128, 128);
        check(10_000, 1, 1);
    }

    /// Polls `future` once.
    fn poll_once<F: std::future::Future>(
        future: std::pin::Pin<&mut F>,
    ) -> std::task::Poll<F::Output> {
        future.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    }

    /// An inbox whose room holds `places` keys.
    fn inbox_of(places: usize) -> Inbox {
        Inbox::new(&LookupConfig {
            queue_size: places,
            ..LookupConfig::default()
        })
    }

    /// A caller leaving one key (its answer is dropped unheard).
    async fn leave_key(inbox: &Inbox) {
        let (tx, _rx) = oneshot::channel();
        inbox
            .submit(None, 0, KeyBytes::new(b"k"), Reply::Point(tx))
            .await;
    }

    #[test]
    fn a_full_room_makes_callers_wait_until_a_place_is_given_back() {
        let inbox = inbox_of(2);
        let first = poll_once(std::pin::pin!(leave_key(&inbox)));
        let second = poll_once(std::pin::pin!(leave_key(&inbox)));
        assert!(first.is_ready() && second.is_ready(), "two places are free");
        assert_eq!(inbox.taken(), 2);

        let mut third = std::pin::pin!(leave_key(&inbox));
        assert!(poll_once(third.as_mut()).is_pending(), "the room is full");
        assert_eq!(inbox.taken(), 2, "a waiting caller holds no place");
        assert!(
            poll_once(third.as_mut()).is_pending(),
            "nothing was given back"
        );

        inbox.give_back(1);
        let third = poll_once(third.as_mut());
        assert!(
            third.is_ready(),
            "a place given back goes to the waiting caller"
        );
        assert_eq!(inbox.taken(), 2);
        let mut left = Vec::new();
        inbox.drain(&mut left);
        assert_eq!(left.len(), 3, "every caller that got a place left its key");
        inbox.give_back(2);
        assert_eq!(inbox.taken(), 0, "every place is given back");
    }

    #[test]
    fn places_given_back_together_go_to_as_many_waiting_callers() {
        let inbox = inbox_of(2);
        for _ in 0..2 {
            assert!(poll_once(std::pin::pin!(leave_key(&inbox))).is_ready());
        }
        let mut third = std::pin::pin!(leave_key(&inbox));
        let mut fourth = std::pin::pin!(leave_key(&inbox));
        let mut fifth = std::pin::pin!(leave_key(&inbox));
        for waiting in [third.as_mut(), fourth.as_mut()] {
            assert!(poll_once(waiting).is_pending(), "the room is full");
        }
        assert!(poll_once(fifth.as_mut()).is_pending(), "the room is full");

        inbox.give_back(2);
        assert!(poll_once(third.as_mut()).is_ready());
        assert!(poll_once(fourth.as_mut()).is_ready());
        assert!(
            poll_once(fifth.as_mut()).is_pending(),
            "two places went back, and two callers took them"
        );
        assert_eq!(inbox.taken(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_beyond_the_room_all_get_a_place_in_turn_and_never_more_than_it_holds() {
        // More callers than places, on two threads, each holding its place
        // across a yield: every one gets its places (the test ends), and
        // no more callers hold a place at once than the room has.
        let inbox = Arc::new(inbox_of(3));
        let holding = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (inbox, holding, most) =
                    (Arc::clone(&inbox), Arc::clone(&holding), Arc::clone(&most));
                tokio::spawn(async move {
                    for _ in 0..50 {
                        leave_key(&inbox).await;
                        let now = holding.fetch_add(1, Ordering::AcqRel) + 1;
                        most.fetch_max(now, Ordering::AcqRel);
                        tokio::task::yield_now().await;
                        holding.fetch_sub(1, Ordering::AcqRel);
                        inbox.give_back(1);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("a caller panicked");
        }
        assert_eq!(inbox.taken(), 0, "every place is given back");
        let mut left = Vec::new();
        inbox.drain(&mut left);
        assert_eq!(left.len(), 64 * 50, "every key was left");
        let most = most.load(Ordering::Acquire);
        assert!(
            most <= 3,
            "{most} callers held a place at once in a room of 3"
        );
    }
}
