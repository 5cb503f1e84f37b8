//! Checking the whole history off the hot path: right after every start
//! (each file present at its committed size, every segment's bytes) and
//! then hourly (every file's bytes). A file that fails puts the store in the
//! refused state; the start check also removes files no commit names (left
//! by a crash between a write and its manifest).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Weak;
use std::time::Duration;

use clankie_runtime::ClankieError;

use super::disk::{self, BucketRef, SHARDS, SegmentRef};
use super::{Inner, lock};

const DEEP_EVERY: Duration = Duration::from_secs(3600);
const ORPHAN_MARGIN: Duration = Duration::from_secs(2);

pub(super) async fn watch(store: Weak<Inner>) {
    let mut deep = false;
    loop {
        let Some(inner) = store.upgrade() else {
            return;
        };
        let done = tokio::task::spawn_blocking(move || {
            inner.verify(deep);
            if !deep {
                inner.remove_orphans();
            }
        })
        .await;
        if done.is_err() {
            return;
        }
        deep = true;
        tokio::time::sleep(DEEP_EVERY).await;
    }
}

impl Inner {
    /// Checks every sealed bucket and segment the manifest names.
    pub(super) fn verify(&self, deep: bool) {
        let (segments, cold, healthy) = {
            let st = lock(&self.state);
            (
                st.segments.clone(),
                st.cold.values().cloned().collect::<Vec<_>>(),
                st.problem.is_none(),
            )
        };
        if !healthy {
            return;
        }
        let shards = self.dir.join(SHARDS);
        for g in segments {
            let buckets = match self.checked(
                || disk::read_segment(&shards, &g),
                || self.segment_current(&g),
            ) {
                Some(file) => file.buckets,
                None => return,
            };
            for b in buckets {
                if self
                    .check_bucket(&shards, &b, deep, || self.segment_current(&g))
                    .is_none()
                {
                    return;
                }
            }
        }
        for b in cold {
            if self
                .check_bucket(&shards, &b, deep, || self.cold_current(&b))
                .is_none()
            {
                return;
            }
        }
    }

    fn check_bucket(
        &self,
        shards: &Path,
        b: &BucketRef,
        deep: bool,
        current: impl Fn() -> bool,
    ) -> Option<()> {
        self.checked(
            || {
                if deep {
                    disk::read_verified(shards, &b.file, &b.sha256).map(drop)
                } else {
                    disk::check_size(shards, &b.file, b.bytes)
                }
            },
            current,
        )
    }

    /// Runs one check with commits held off; a failure counts only if the
    /// file is still part of the committed store (a commit may have
    /// superseded it since the snapshot).
    fn checked<T>(
        &self,
        check: impl FnOnce() -> Result<T, ClankieError>,
        current: impl Fn() -> bool,
    ) -> Option<T> {
        let _io = self.io.lock();
        match check() {
            Ok(v) => Some(v),
            Err(_) if !current() => None,
            Err(e) => {
                tracing::error!(reason = e.code.as_str(), problem = %e.message, "receipt history check failed");
                lock(&self.state).problem.get_or_insert(e.message);
                None
            }
        }
    }

    fn segment_current(&self, g: &SegmentRef) -> bool {
        lock(&self.state).segments.iter().any(|s| s.file == g.file)
    }

    fn cold_current(&self, b: &BucketRef) -> bool {
        lock(&self.state)
            .cold
            .get(&b.id)
            .is_some_and(|c| c.file == b.file)
    }

    /// Removes shard files that no commit names and that are older than
    /// this process's open (anything newer may be a commit in progress).
    pub(super) fn remove_orphans(&self) {
        let shards = self.dir.join(SHARDS);
        let (segments, mut named) = {
            let st = lock(&self.state);
            if st.problem.is_some() {
                return;
            }
            let mut named: HashSet<String> = st
                .hot
                .values()
                .filter_map(|b| b.committed.as_ref().map(|c| c.file.clone()))
                .collect();
            named.extend(st.cold.values().map(|b| b.file.clone()));
            named.extend(st.segments.iter().map(|g| g.file.clone()));
            (st.segments.clone(), named)
        };
        for g in &segments {
            match disk::read_segment(&shards, g) {
                Ok(file) => named.extend(file.buckets.into_iter().map(|b| b.file)),
                // Superseded meanwhile, or reported by the check: either
                // way, this is no time to delete anything.
                Err(_) => return,
            }
        }
        // File times come from a coarse clock that can lag the one
        // `opened_at` was read from; a margin keeps a fresh write safe (an
        // orphan younger than it waits for the next start).
        let before = self.opened_at - ORPHAN_MARGIN;
        let Ok(entries) = std::fs::read_dir(&shards) else {
            return;
        };
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().to_string();
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < before);
            if old && !named.contains(&name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}
