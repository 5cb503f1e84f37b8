//! Group commit for the tracker's store.
//!
//! Every store call is queued here and run by one blocking thread at a
//! time. What queued while the last batch committed runs next as one
//! batch ([`Store::batch`]): one transaction, each write a savepoint of it,
//! one synced commit. So eight concurrent writers pay for about one fsync
//! per batch instead of one each. A call is answered only after its batch
//! committed; a write that failed rolled back its own savepoint only.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;

use clankie_runtime::ClankieError;
use parking_lot::Mutex;

use crate::store::{BatchJob, Store};

/// Answers a queued call once its batch's commit is known (the cursor after
/// it, or why it did not commit).
pub(crate) type Finish = Box<dyn FnOnce(Result<i64, ClankieError>) + Send>;

/// One queued store call: it runs inside the batch and returns how to
/// answer it.
pub(crate) type Job = Box<dyn FnOnce(&mut Store) -> Finish + Send>;

/// The most calls one batch takes, so a long queue still answers in
/// bounded steps.
const MOST_PER_BATCH: usize = 64;

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// A thread is draining the queue.
    running: bool,
}

/// The queue of store calls waiting for the next batch.
#[derive(Default)]
pub(crate) struct Commits {
    queue: Mutex<Queue>,
}

impl Commits {
    /// Queues `job`; true when no thread is draining, so the caller must
    /// start one ([`Commits::drain`]).
    pub(crate) fn push(&self, job: Job) -> bool {
        let mut q = self.queue.lock();
        q.jobs.push_back(job);
        !std::mem::replace(&mut q.running, true)
    }

    /// The next batch, or none (the drainer stops, under the same lock a
    /// push checks, so no call is left waiting).
    fn take(&self) -> Option<Vec<Job>> {
        let mut q = self.queue.lock();
        if q.jobs.is_empty() {
            q.running = false;
            return None;
        }
        let n = q.jobs.len().min(MOST_PER_BATCH);
        Some(q.jobs.drain(..n).collect())
    }

    /// Runs batches until the queue is empty (on a blocking thread).
    /// `commit` runs one batch on the store and returns the cursor after
    /// it; each call's answer is sent after that.
    pub(crate) fn drain(
        &self,
        store: &Mutex<Store>,
        cursor_after: impl Fn(&Store) -> Result<i64, ClankieError>,
        refusal: impl Fn(crate::store::StoreError) -> ClankieError,
    ) {
        while let Some(jobs) = self.take() {
            let mut store = store.lock();
            // A call that panics loses only its own answer (its sender is
            // dropped); its savepoint rolled back as the panic unwound.
            let runs: Vec<BatchJob<'_, Option<Finish>>> = jobs
                .into_iter()
                .map(|job| {
                    Box::new(move |s: &mut Store| {
                        std::panic::catch_unwind(AssertUnwindSafe(|| job(s))).ok()
                    }) as BatchJob<'_, Option<Finish>>
                })
                .collect();
            let ran = store.batch(runs);
            let cursor = cursor_after(&store);
            drop(store);
            for (finish, committed) in ran {
                if let Some(finish) = finish {
                    finish(committed.map_err(&refusal).and_then(|()| cursor.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn refusal(e: crate::store::StoreError) -> ClankieError {
        clankie_runtime::ErrorCode::Internal.err(e.to_string())
    }

    fn save(n: usize, answers: mpsc::Sender<Result<i64, ClankieError>>) -> Job {
        Box::new(move |s: &mut Store| {
            let title = format!("t{n}");
            if n == 7 {
                panic!("a call that panics");
            }
            let _ = s.save_issue(
                "w1",
                crate::store::SaveIssue {
                    team: Some("ENG".into()),
                    title: Some(title),
                    ..Default::default()
                },
            );
            Box::new(move |committed| {
                let _ = answers.send(committed);
            })
        })
    }

    #[test]
    fn queued_calls_run_as_few_batches_and_each_is_answered_after_its_commit() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut store = Store::open(&dir.path().join("tracker")).expect("open");
        store
            .create_team("ENG", "Engineering", "lead")
            .expect("team");
        let store = Mutex::new(store);
        let commits = Commits::default();
        let (tx, rx) = mpsc::channel();
        let mut starts = 0;
        for n in 0..100 {
            starts += usize::from(commits.push(save(n, tx.clone())));
        }
        drop(tx);
        assert_eq!(starts, 1, "only the first push starts a drainer");
        let batches = std::sync::atomic::AtomicUsize::new(0);
        commits.drain(
            &store,
            |s| {
                batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                s.cursor().map_err(refusal)
            },
            refusal,
        );
        assert_eq!(
            batches.into_inner(),
            2,
            "100 queued calls are two batches of at most 64"
        );
        let answers: Vec<_> = rx.iter().collect();
        assert_eq!(
            answers.len(),
            99,
            "the call that panicked loses only its own answer"
        );
        assert!(answers.iter().all(Result::is_ok));
        let written = store
            .lock()
            .issues(Some("ENG"), None, 200)
            .expect("list")
            .len();
        assert_eq!(written, 99);
        assert!(
            commits.push(save(200, mpsc::channel().0)),
            "an empty queue leaves no drainer running"
        );
    }
}
