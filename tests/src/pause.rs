//! Stopping a process for a scenario, and knowing it is stopped.
//!
//! `kill(SIGSTOP)` returns once the signal is queued, not once the process
//! is stopped: in a multi-threaded process one thread takes the signal and
//! only then stops the others, so on a busy machine another thread can go
//! on answering requests for a while. A scenario that needs "the service
//! answers nothing from now on" waits for every thread to say so.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a stop may take to reach every thread before the scenario is
/// broken (a patience, never a measurement).
const PATIENCE: Duration = Duration::from_secs(20);

/// Stops `pid` and returns once every one of its threads is stopped (or it
/// is gone).
pub fn pause(pid: i32) {
    match kill(Pid::from_raw(pid), Signal::SIGSTOP) {
        // Gone already: it answers nothing, as a stopped one would.
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => panic!("stopping {pid}: {e}"),
    }
    let end = Instant::now() + PATIENCE;
    while !all_stopped(pid) {
        assert!(
            Instant::now() < end,
            "{pid} did not stop within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Lets a paused `pid` run again.
pub fn resume(pid: i32) {
    // A process that died while stopped has nothing to resume.
    let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
}

/// Whether every thread of `pid` is in a stopped state (true when the
/// process is gone: it answers nothing either way).
fn all_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.filter_map(|t| t.ok()).all(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|stat| state(&stat))
            // Gone between the listing and the read: not running.
            .is_none_or(|s| matches!(s, 'T' | 't' | 'Z' | 'X'))
    })
}

/// The state letter of a `/proc/…/stat` line: the field after the command,
/// which is in parentheses and may itself hold spaces and parentheses.
fn state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert_eq!(state("12 (a) b) T 1 2"), Some('T'));
        assert_eq!(state("12 (tokio-rt) S 1"), Some('S'));
        assert_eq!(state("garbage"), None);
    }

    #[test]
    fn a_paused_child_has_every_thread_stopped_and_resumes() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id() as i32;
        assert!(!all_stopped(pid), "a sleeping child is not stopped");
        pause(pid);
        assert!(all_stopped(pid));
        resume(pid);
        let running = (0..400).any(|_| {
            std::thread::sleep(Duration::from_millis(5));
            !all_stopped(pid)
        });
        let _ = child.kill();
        let _ = child.wait();
        assert!(running, "resumed");
    }
}
