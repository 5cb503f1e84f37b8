//! The exit-code table (docs/CLI.md), and a printing command whose reader
//! is gone ends without a panic.

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

#[test]
fn a_printing_command_with_its_reader_gone_ends_quietly() {
    let state = tempfile::tempdir().expect("state");
    for args in [&["status"][..], &["status", "--json"], &["--help"]] {
        // A pipe whose read end is closed before the command starts: its
        // first write meets a reader that is gone.
        let (read, write): (OwnedFd, OwnedFd) = nix::unistd::pipe().expect("pipe");
        drop(read);
        let out = Command::new(env!("CARGO_BIN_EXE_clankie"))
            .arg("--state")
            .arg(state.path())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(write))
            .stderr(Stdio::piped())
            .output()
            .expect("run clankie");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
        // 141 is what a shell shows for SIGPIPE; clap's own help output
        // meets the closed pipe and ends 0.
        assert!(
            matches!(out.status.code(), Some(0 | 141)),
            "{args:?} ends as Unix tools do: {:?} {err}",
            out.status
        );
    }
}

/// Exit codes follow the one table in docs/CLI.md without a stack: a
/// stopped stack is 5, a wrong command line 2, a plain read 0.
#[test]
fn exit_codes_follow_the_table_without_a_stack() {
    let state = tempfile::tempdir().expect("state");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_clankie"))
            .arg("--state")
            .arg(state.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run clankie")
    };
    for (args, code) in [
        (&["status"][..], 5),
        (&["project", "list"], 5),
        (&["close", "hire-1"], 5),
        (
            &[
                "connect",
                "x",
                "--url",
                "http://127.0.0.1:1/mcp",
                "--",
                "cmd",
            ],
            2,
        ),
        (&["no-such-command"], 2),
        (&["version"], 0),
        (&["version", "--json"], 0),
    ] {
        let out = run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: serde_json::Value =
        serde_json::from_slice(&run(&["version", "--json"]).stdout).expect("json");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
}
