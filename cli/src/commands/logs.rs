//! `clankie logs [SERVICE] [-f] [-n LINES]`: the last lines of a service's
//! log (`logs/<service>.log`), or of every service's, each line named by
//! its service; `-f` follows them across rotation. `accounts/NAME` reads a
//! stdio account's own log (its server's stderr).

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clankie_runtime::Service;
use clankie_runtime::paths::StatePaths;
use clap::Args;

use crate::support::exit::{Exit, Refusal};

#[derive(Args)]
pub struct LogsArgs {
    /// A service (admission, tracker, mcp-host, mailbox, auto, gateway), or
    /// `accounts/NAME`; every service when left out.
    pub service: Option<String>,
    /// Keep printing what is written, across rotation.
    #[arg(short, long)]
    pub follow: bool,
    /// How many of the last lines to print first.
    #[arg(short = 'n', long, default_value_t = 50)]
    pub lines: usize,
}

/// One log being read: where, under which name, and how far.
struct Tail {
    name: String,
    path: PathBuf,
    offset: u64,
    inode: u64,
}

impl Tail {
    fn new(name: String, path: PathBuf) -> Self {
        Tail {
            name,
            path,
            offset: 0,
            inode: 0,
        }
    }

    /// The last `n` lines now; the read position moves to the end.
    fn last(&mut self, n: usize) -> Vec<String> {
        let Ok(text) = std::fs::read(&self.path) else {
            return Vec::new();
        };
        self.offset = text.len() as u64;
        self.inode = inode(&self.path);
        let text = String::from_utf8_lossy(&text);
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(n)..]
            .iter()
            .map(|l| l.to_string())
            .collect()
    }

    /// What was written since the last read; a rotated or truncated file is
    /// read again from its start.
    fn new_lines(&mut self) -> Vec<String> {
        let now = inode(&self.path);
        let len = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if now != self.inode || len < self.offset {
            self.inode = now;
            self.offset = 0;
        }
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut buf).is_err() {
            return Vec::new();
        }
        // Only whole lines: a line being written is read next time.
        let whole = buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.offset += whole as u64;
        String::from_utf8_lossy(&buf[..whole])
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn inode(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).map_or(0, |m| m.ino())
}

pub async fn logs(paths: StatePaths, args: LogsArgs) -> anyhow::Result<ExitCode> {
    let mut tails: Vec<Tail> = match args.service.as_deref() {
        None => Service::START_ORDER
            .iter()
            .map(|s| {
                Tail::new(
                    s.name().to_string(),
                    paths.logs_dir().join(format!("{}.log", s.name())),
                )
            })
            .collect(),
        Some(name) => {
            let path = match name.strip_prefix("accounts/") {
                Some(account) if !account.is_empty() && !account.contains('/') => {
                    paths.account_log(account)
                }
                _ if Service::START_ORDER.iter().any(|s| s.name() == name) => {
                    paths.logs_dir().join(format!("{name}.log"))
                }
                _ => {
                    return Err(Refusal {
                        exit: Exit::NotFound,
                        text: format!(
                            "no log named {name}: a service (admission, tracker, mcp-host, mailbox, auto, gateway) or accounts/NAME"
                        ),
                    }
                    .into());
                }
            };
            vec![Tail::new(name.to_string(), path)]
        }
    };
    let named = tails.len() > 1;
    let print = |name: &str, line: &str| {
        if named {
            println!("{name:<9} {line}");
        } else {
            println!("{line}");
        }
    };
    for t in &mut tails {
        for line in t.last(args.lines) {
            print(&t.name, &line);
        }
    }
    if !args.follow {
        return Ok(Exit::Ok.code());
    }
    // Until interrupted (or the reader goes away).
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        for t in &mut tails {
            for line in t.new_lines() {
                print(&t.name, &line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_reads_new_whole_lines_and_starts_over_after_rotation() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("x.log");
        std::fs::write(&path, "a\nb\nc\n").expect("write");
        let mut t = Tail::new("x".into(), path.clone());
        assert_eq!(t.last(2), ["b", "c"]);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        std::io::Write::write_all(&mut f, b"d\npart").expect("append");
        assert_eq!(t.new_lines(), ["d"]);
        std::io::Write::write_all(&mut f, b"ial\n").expect("append");
        assert_eq!(t.new_lines(), ["partial"]);
        // Rotated: the old file moved aside, a new one begun.
        std::fs::rename(&path, dir.path().join("x.log.1")).expect("rotate");
        std::fs::write(&path, "fresh\n").expect("new");
        assert_eq!(t.new_lines(), ["fresh"]);
    }
}
