//! `clankie completions SHELL`: a script each shell accepts, naming the
//! commands people type.

use std::process::{Command, Stdio};

fn completions(shell: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_clankie"))
        .args(["completions", shell])
        .stdin(Stdio::null())
        .output()
        .expect("run clankie");
    assert!(
        out.status.success(),
        "{shell}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn each_shell_gets_a_script_naming_the_commands() {
    for shell in ["bash", "zsh", "fish"] {
        let script = completions(shell);
        for word in ["up", "down", "fleet", "review", "transcript", "json"] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
    // bash itself parses the script and then knows how to complete clankie.
    let bash = completions("bash");
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("clankie.bash");
    std::fs::write(&file, bash).expect("write");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p clankie", file.display()))
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("clankie"));
    // An unknown shell is a usage error.
    let out = Command::new(env!("CARGO_BIN_EXE_clankie"))
        .args(["completions", "tcsh"])
        .stdin(Stdio::null())
        .output()
        .expect("run clankie");
    assert_eq!(out.status.code(), Some(2));
}
