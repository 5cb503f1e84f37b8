//! `clankie down`: stops this state folder's `clankie up` the way Ctrl-C
//! does (SIGTERM: the gateway drains, then the services stop in reverse),
//! and waits until it is gone.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clankie_runtime::paths::StatePaths;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::exit::{Exit, Refusal};
use crate::support::supervisor;

/// How long `down` waits: the gateway's drain and each service's grace.
const WAIT: Duration = Duration::from_secs(90);

pub async fn down(paths: StatePaths) -> anyhow::Result<ExitCode> {
    let Some(up) = supervisor::running(&paths) else {
        return Err(Refusal {
            exit: Exit::Down,
            text: format!("clankie is not running for {}", paths.root().display()),
        }
        .into());
    };
    kill(Pid::from_raw(up.pid), Signal::SIGTERM)?;
    crate::say!("stopping clankie for {}", paths.root().display());
    let until = Instant::now() + WAIT;
    while supervisor::alive(&up) {
        if Instant::now() > until {
            anyhow::bail!(
                "clankie up is still stopping after {} s; its log says why",
                WAIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    crate::say!("stopped");
    Ok(Exit::Ok.code())
}
