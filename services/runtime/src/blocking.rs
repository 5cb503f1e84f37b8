//! Blocking file work (an fsync) done from async code without stalling the
//! tasks queued behind it.
//!
//! A durable write inside a task holds its worker thread for the length of
//! the sync. Tokio runs a task the current one wakes (a parked poll told of
//! a new delivery, say) from that worker's LIFO slot, which no other worker
//! may steal, so the woken task would wait for the whole sync. On the
//! multi-threaded runtime the worker's queue, LIFO slot included, is handed
//! to another thread for the duration instead.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f`, which blocks (file syncs), handing this worker's queued tasks
/// to another thread first when on a multi-threaded runtime. Elsewhere (a
/// current-thread runtime, a plain thread) it just runs `f`.
pub fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_outside_any_runtime() {
        assert_eq!(off_worker(|| 7), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn runs_inline_on_a_current_thread_runtime() {
        assert_eq!(off_worker(|| 8), 8);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_task_woken_during_the_block_runs_before_it_ends() {
        // Both tasks on the one worker (the test body itself runs on the
        // main thread): without the hand-off the woken task could only run
        // once the blocking section returned.
        let on_worker = tokio::spawn(async {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let (wake, woken) = tokio::sync::oneshot::channel::<()>();
            let waiter = tokio::spawn(async move {
                woken.await.ok();
                tx.send(()).ok();
            });
            tokio::task::yield_now().await;
            let ran = off_worker(move || {
                wake.send(()).ok();
                rx.recv_timeout(std::time::Duration::from_secs(20)).is_ok()
            });
            waiter.await.ok();
            ran
        });
        assert!(
            on_worker.await.expect("the task on the worker"),
            "the woken task ran while the section blocked"
        );
    }
}
