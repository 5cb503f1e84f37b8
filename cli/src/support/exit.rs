//! The CLI's exit codes: one table, documented in `docs/CLI.md`, used by
//! every command. A refusal carries its reason to `main`, which picks the
//! code from it here.

use std::process::ExitCode;

use clankie_runtime::ErrorCode;

/// What a command's exit code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done.
    Ok = 0,
    /// Refused or failed, with the reason on stderr; or not healthy.
    Failed = 1,
    /// The command line itself is wrong (clap's own code).
    Usage = 2,
    /// Not settled: the request may have applied (uncertain), or a thing
    /// was saved but is not verified yet. Check again before repeating.
    Unsettled = 3,
    /// What the command names does not exist.
    NotFound = 4,
    /// The stack is not running (or a service of it does not answer).
    Down = 5,
}

impl Exit {
    pub fn code(self) -> ExitCode {
        ExitCode::from(self as u8)
    }

    /// The exit a service's refusal reason calls for.
    pub fn of(code: ErrorCode) -> Exit {
        match code.http() {
            http::StatusCode::NOT_FOUND => Exit::NotFound,
            _ => Exit::Failed,
        }
    }
}

/// A service's refusal, as the CLI prints it and exits on it.
#[derive(Debug)]
pub struct Refusal {
    pub exit: Exit,
    pub text: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Refusal {}

/// A command line that is wrong in a way clap cannot see (two options
/// that exclude each other, nothing asked for).
pub fn usage(text: impl Into<String>) -> anyhow::Error {
    Refusal {
        exit: Exit::Usage,
        text: text.into(),
    }
    .into()
}

/// The exit an error calls for: a refusal's own, else a failure.
pub fn of_error(e: &anyhow::Error) -> Exit {
    e.chain()
        .find_map(|c| c.downcast_ref::<Refusal>())
        .map_or(Exit::Failed, |r| r.exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_pick_their_exit_and_other_errors_fail() {
        assert_eq!(Exit::of(ErrorCode::HireNotFound), Exit::NotFound);
        assert_eq!(Exit::of(ErrorCode::RouteNotFound), Exit::NotFound);
        assert_eq!(Exit::of(ErrorCode::StateUnreadable), Exit::Failed);
        let refused = anyhow::Error::new(Refusal {
            exit: Exit::NotFound,
            text: "refused (hire_not_found): no such hire".into(),
        })
        .context("closing");
        assert_eq!(of_error(&refused), Exit::NotFound);
        assert_eq!(of_error(&anyhow::anyhow!("other")), Exit::Failed);
        assert_eq!(Exit::Down.code(), ExitCode::from(5));
    }
}
