//! The admission service's side of the census helper: one live helper
//! process on private pipes, and the bounded job queue in front of it.
//!
//! The rules, as the seed sets them:
//! - one live helper; a later request after a failure starts a fresh one;
//! - at most 128 queued jobs; beyond that a request is refused as
//!   unavailable;
//! - each active job has a 1 s transport timeout that starts when it becomes
//!   active (queue wait does not count), 10 s for a fresh helper's first reply;
//! - cancelling a queued job removes only it; cancelling an active job still
//!   drains and discards its reply before the next job uses the pipe;
//! - a malformed reply, an active timeout or the helper's exit refuses every
//!   pending observation and closes that helper;
//! - shutdown closes only this service's own helper.
//!
//! Observations waiting together (alike in following ancestry or not, and
//! in reading identities only or not) go to the helper as one: a burst of rechecks and seat observations (every
//! seat relisting after a catalog change) is one exchange instead of one
//! each. Every fact still comes from an
//! observation made after its job was queued, so none is older than a job
//! of its own would see. A merged observation the helper refuses is run
//! again job by job, so one job's unreadable process fails only that job.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use clankie_proto::helper::v1 as helper_pb;
use clankie_types::helper as frame;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

/// Queue depth (the helper requests the queued jobs will take) beyond which
/// jobs are refused.
pub const MAX_QUEUE: usize = 128;
/// The most jobs queued at once, merged or not: keeps the cost of counting
/// the depth on each arrival, and the queue's memory, bounded.
pub const MAX_QUEUED_JOBS: usize = 1024;
/// Transport timeout of an active job.
pub const ACTIVE_TIMEOUT: Duration = Duration::from_secs(1);
/// Timeout of a fresh helper's first reply (it pays for its start).
pub const FIRST_REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest reply accepted from the helper (the pipe's own bound).
pub use clankie_types::helper::MAX_REPLY;

/// Why a job got no observation. Fixed vocabulary: no PIDs, paths or argv.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    QueueFull,
    SpawnFailed,
    Timeout,
    Malformed,
    Exited,
    ShuttingDown,
}

impl Failure {
    pub fn reason(self) -> &'static str {
        match self {
            Failure::QueueFull => "helper_queue_full",
            Failure::SpawnFailed => "helper_spawn_failed",
            Failure::Timeout => "helper_timeout",
            Failure::Malformed => "helper_malformed_reply",
            Failure::Exited => "helper_exited",
            Failure::ShuttingDown => "helper_shutting_down",
        }
    }
}

struct Job {
    job: helper_pb::request::Job,
    reply: oneshot::Sender<Result<helper_pb::Reply, Failure>>,
    /// Runs on its own: its merged observation was refused.
    alone: bool,
}

/// The most plain observations merged into one exchange, and the most
/// processes one observation may name (the helper's own bound).
const MERGE_JOBS: usize = 64;
const MERGE_PIDS: usize = 256;

/// The pids of an observation that may be merged, and its kind: whether it
/// follows ancestry and whether it reads identities only (only
/// observations of one kind are merged).
fn mergeable(job: &Job) -> Option<(&[i32], Kind)> {
    match &job.job {
        helper_pb::request::Job::Observe(o) if !job.alone => Some((
            &o.pids,
            Kind {
                ancestry: o.with_ancestry,
                identity_only: o.identity_only,
            },
        )),
        _ => None,
    }
}

/// What an observation reads, beyond its pids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kind {
    ancestry: bool,
    identity_only: bool,
}

impl Kind {
    /// An index per kind, for grouping.
    fn slot(self) -> usize {
        usize::from(self.ancestry) | usize::from(self.identity_only) << 1
    }
}

/// Takes the observations like `first` queued behind it, up to the bounds,
/// leaving everything else in its place.
fn take_mergeable(shared: &Shared, first: &Job) -> Vec<Job> {
    let Some((pids, kind)) = mergeable(first) else {
        return Vec::new();
    };
    let mut count = pids.len();
    let mut q = shared.queue.lock();
    let mut taken = Vec::new();
    let mut kept = VecDeque::with_capacity(q.len());
    while let Some(job) = q.pop_front() {
        let fits = mergeable(&job).is_some_and(|(p, k)| k == kind && count + p.len() <= MERGE_PIDS);
        if fits && taken.len() + 1 < MERGE_JOBS && !job.reply.is_closed() {
            count += mergeable(&job).map_or(0, |(p, _)| p.len());
            shared
                .taken
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            taken.push(job);
        } else {
            kept.push_back(job);
        }
    }
    *q = kept;
    taken
}

/// The helper requests the queued jobs will take: one each, except that
/// observations of one kind go merged, up to the bounds (the same
/// greedy grouping the driver takes them in). The queue's 128 counts these,
/// so a burst of alike observations holds a few slots, not one each.
fn requests<'a>(jobs: impl Iterator<Item = &'a Job>) -> usize {
    let mut n = 0;
    // The open group per kind: its jobs and pids.
    let mut open: [Option<(usize, usize)>; 4] = [None; 4];
    for job in jobs.filter(|j| !j.reply.is_closed()) {
        let Some((pids, kind)) = mergeable(job) else {
            n += 1;
            continue;
        };
        let group = &mut open[kind.slot()];
        match group {
            Some((j, p)) if *j < MERGE_JOBS && *p + pids.len() <= MERGE_PIDS => {
                *j += 1;
                *p += pids.len();
            }
            _ => {
                n += 1;
                *group = Some((1, pids.len()));
            }
        }
    }
    n
}

/// One observation naming every pid of `jobs`, once each.
fn merged(jobs: &[&Job]) -> helper_pb::request::Job {
    let mut seen = std::collections::HashSet::new();
    let kind = jobs.first().and_then(|j| mergeable(j)).map(|(_, k)| k);
    let pids = jobs
        .iter()
        .flat_map(|j| mergeable(j).map_or(&[][..], |(p, _)| p).iter().copied())
        .filter(|p| seen.insert(*p))
        .collect();
    helper_pb::request::Job::Observe(helper_pb::ObserveProcesses {
        pids,
        with_ancestry: kind.is_some_and(|k| k.ancestry),
        identity_only: kind.is_some_and(|k| k.identity_only),
    })
}

/// The helper's bound on one ancestry walk.
const MAX_HOPS: usize = 65;

/// `job`'s own answer out of a merged observation's facts, as the helper
/// answers a job of its own: each pid once, in order, and with ancestry
/// each one's parents up to init (or to one already given, one gone, or
/// the hop bound). The merged observation walked every such chain, each
/// process once, so every fact a chain needs is there.
fn split(
    job: &Job,
    id: u64,
    facts: &std::collections::HashMap<i32, helper_pb::ProcessFact>,
) -> Result<helper_pb::Reply, Failure> {
    let (pids, ancestry) = mergeable(job).map_or((&[][..], false), |(p, k)| (p, k.ancestry));
    let mut seen = std::collections::HashSet::new();
    let mut processes = Vec::new();
    for pid in pids {
        let mut next = Some(*pid);
        let mut hops = 0;
        while let Some(p) = next {
            if p <= 0 || !seen.insert(p) || hops >= MAX_HOPS {
                break;
            }
            hops += 1;
            let fact = facts.get(&p).cloned().ok_or(Failure::Malformed)?;
            next = (ancestry && fact.ppid > 0).then_some(fact.ppid);
            processes.push(fact);
        }
    }
    Ok(helper_pb::Reply {
        id,
        result: Some(helper_pb::reply::Result::Observation(
            helper_pb::Observation { processes },
        )),
    })
}

struct Shared {
    queue: Mutex<VecDeque<Job>>,
    ready: Notify,
    /// Jobs the driver has made active, for diagnostics.
    taken: std::sync::atomic::AtomicU64,
    /// Requests written to a helper.
    exchanges: std::sync::atomic::AtomicU64,
}

/// A cheap handle to the helper queue.
#[derive(Clone)]
pub struct HelperClient {
    shared: Arc<Shared>,
}

impl HelperClient {
    /// Starts the queue driver; `command` is the helper program and its
    /// arguments. The helper itself starts on the first job.
    pub fn start(command: Vec<String>, shutdown: CancellationToken) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
            taken: std::sync::atomic::AtomicU64::new(0),
            exchanges: std::sync::atomic::AtomicU64::new(0),
        });
        tokio::spawn(drive(shared.clone(), command, shutdown));
        HelperClient { shared }
    }

    /// The queue's depth: the helper requests its jobs will take.
    pub fn depth(&self) -> u64 {
        requests(self.shared.queue.lock().iter()) as u64
    }

    /// Runs one job. Dropping the returned future cancels it: a queued job is
    /// removed, an active one is drained and discarded.
    pub async fn run(&self, job: helper_pb::request::Job) -> Result<helper_pb::Reply, Failure> {
        let (tx, rx) = oneshot::channel();
        {
            let mut q = self.shared.queue.lock();
            q.retain(|j| !j.reply.is_closed());
            let job = Job {
                job,
                reply: tx,
                alone: false,
            };
            if q.len() >= MAX_QUEUED_JOBS
                || requests(q.iter().chain(std::iter::once(&job))) > MAX_QUEUE
            {
                return Err(Failure::QueueFull);
            }
            q.push_back(job);
        }
        self.shared.ready.notify_one();
        rx.await.unwrap_or(Err(Failure::ShuttingDown))
    }

    /// Jobs the driver has taken from the queue so far.
    pub fn taken(&self) -> u64 {
        self.shared.taken.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Requests written to a helper so far (merged observations are one).
    pub fn exchanges(&self) -> u64 {
        self.shared
            .exchanges
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Jobs waiting (cancelled ones excluded).
    pub fn queued(&self) -> usize {
        let q = self.shared.queue.lock();
        q.iter().filter(|j| !j.reply.is_closed()).count()
    }
}

struct Live {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    fresh: bool,
}

fn spawn(command: &[String]) -> Option<Live> {
    let (program, args) = command.split_first()?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let stdin = child.stdin.take()?;
    let stdout = BufReader::new(child.stdout.take()?);
    Some(Live {
        child,
        stdin,
        stdout,
        fresh: true,
    })
}

async fn read_reply(stdout: &mut BufReader<ChildStdout>) -> Result<helper_pb::Reply, Failure> {
    let mut prefix = Vec::with_capacity(frame::MAX_PREFIX);
    let len = loop {
        let b = stdout.read_u8().await.map_err(|_| Failure::Exited)?;
        prefix.push(b);
        if let Some(len) = frame::decode_len(&prefix).map_err(|_| Failure::Malformed)? {
            break len;
        }
    };
    frame::check_len(len, MAX_REPLY).map_err(|_| Failure::Malformed)?;
    let mut body = vec![0u8; len];
    stdout
        .read_exact(&mut body)
        .await
        .map_err(|_| Failure::Exited)?;
    helper_pb::Reply::decode(body.as_slice()).map_err(|_| Failure::Malformed)
}

fn next_job(shared: &Shared) -> Option<Job> {
    let mut q = shared.queue.lock();
    while let Some(job) = q.pop_front() {
        // A job cancelled while queued is simply dropped.
        if !job.reply.is_closed() {
            shared
                .taken
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            return Some(job);
        }
    }
    None
}

fn fail_all(shared: &Shared, failure: Failure) {
    let mut q = shared.queue.lock();
    for job in q.drain(..) {
        let _ = job.reply.send(Err(failure));
    }
}

async fn drive(shared: Arc<Shared>, command: Vec<String>, shutdown: CancellationToken) {
    let mut live: Option<Live> = None;
    let mut next_id: u64 = 0;
    loop {
        let job = loop {
            if let Some(job) = next_job(&shared) {
                break job;
            }
            tokio::select! {
                _ = shared.ready.notified() => {}
                _ = shutdown.cancelled() => {
                    fail_all(&shared, Failure::ShuttingDown);
                    // Dropping closes only our own helper (kill_on_drop).
                    drop(live);
                    return;
                }
            }
        };
        if live.is_none() {
            live = spawn(&command);
            if live.is_none() {
                tracing::warn!(
                    reason = Failure::SpawnFailed.reason(),
                    "fleet.local_proof.diagnostic"
                );
                let _ = job.reply.send(Err(Failure::SpawnFailed));
                fail_all(&shared, Failure::SpawnFailed);
                continue;
            }
        }
        let Some(helper) = live.as_mut() else {
            continue;
        };
        next_id += 1;
        let id = next_id;
        let more = take_mergeable(&shared, &job);
        let request = if more.is_empty() {
            job.job.clone()
        } else {
            merged(&std::iter::once(&job).chain(&more).collect::<Vec<_>>())
        };
        let frame = helper_pb::Request {
            id,
            job: Some(request),
        }
        .encode_length_delimited_to_vec();
        // The timeout starts now that the job is active.
        let limit = if helper.fresh {
            FIRST_REPLY_TIMEOUT
        } else {
            ACTIVE_TIMEOUT
        };
        shared
            .exchanges
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let exchange = async {
            helper
                .stdin
                .write_all(&frame)
                .await
                .map_err(|_| Failure::Exited)?;
            helper.stdin.flush().await.map_err(|_| Failure::Exited)?;
            let reply = read_reply(&mut helper.stdout).await?;
            if reply.id != id {
                return Err(Failure::Malformed);
            }
            Ok(reply)
        };
        let outcome = match tokio::time::timeout(limit, exchange).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout),
        };
        match outcome {
            Ok(reply) if more.is_empty() => {
                helper.fresh = false;
                // A cancelled caller's reply is drained here and discarded.
                let _ = job.reply.send(Ok(reply));
            }
            Ok(reply) => {
                helper.fresh = false;
                let Some(helper_pb::reply::Result::Observation(o)) = reply.result else {
                    // Refused as a whole: each job again on its own, first.
                    let mut q = shared.queue.lock();
                    shared
                        .taken
                        .fetch_sub(1 + more.len() as u64, std::sync::atomic::Ordering::AcqRel);
                    for mut j in std::iter::once(job).chain(more).rev() {
                        j.alone = true;
                        q.push_front(j);
                    }
                    continue;
                };
                let facts = o.processes.into_iter().map(|f| (f.pid, f)).collect();
                let mut again = Vec::new();
                for j in std::iter::once(job).chain(more) {
                    match split(&j, id, &facts) {
                        Ok(answer) => {
                            let _ = j.reply.send(Ok(answer));
                        }
                        // A chain the merged walk cut short (the hop
                        // bound): that job on its own.
                        Err(_) => again.push(j),
                    }
                }
                let mut q = shared.queue.lock();
                for mut j in again.into_iter().rev() {
                    shared
                        .taken
                        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    j.alone = true;
                    q.push_front(j);
                }
            }
            Err(failure) => {
                tracing::warn!(reason = failure.reason(), "fleet.local_proof.diagnostic");
                // The jobs queued behind the broken exchange share its fate,
                // and the helper is gone, before its caller hears: a job
                // sent after that answer always meets a fresh helper.
                fail_all(&shared, failure);
                if let Some(mut dead) = live.take() {
                    let _ = dead.child.start_kill();
                    let _ = dead.child.wait().await;
                }
                for j in std::iter::once(job).chain(more) {
                    let _ = j.reply.send(Err(failure));
                }
            }
        }
    }
}
