//! The scripted model (`tests/peers/model_server.py`): one server that
//! speaks OpenAI chat completions (Pi), Anthropic Messages (Claude Code)
//! and OpenAI Responses (Codex), each turn scripted by the conversation,
//! and logs every request it saw.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::{eventually, file_lines, python, repo_root};

/// The scripted model, listening on a free loopback port.
pub struct Model {
    pub child: std::process::Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Model {
    pub async fn start(dir: &Path) -> Model {
        let port_file = dir.join("model.port");
        let log = dir.join("model.log");
        let child = std::process::Command::new(python())
            .arg(repo_root().join("tests/peers/model_server.py"))
            .arg(&port_file)
            .arg(&log)
            .spawn()
            .expect("model server");
        let port = eventually(Duration::from_secs(20), async || {
            std::fs::read_to_string(&port_file)
                .ok()?
                .trim()
                .parse()
                .ok()
        })
        .await
        .expect("the model server listens");
        Model { child, port, log }
    }

    /// Every request the model saw.
    pub fn requests(&self) -> Vec<Value> {
        file_lines(&self.log)
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Whether a request's newest message is a tool's result.
    pub fn after_tool(request: &Value) -> bool {
        request["roles"].as_array().and_then(|a| a.last()) == Some(&Value::from("tool"))
    }

    /// The tool results the model has been shown (over `api`, or any).
    pub fn tool_results(&self, api: Option<&str>) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| api.is_none_or(|a| r["api"] == a) && Self::after_tool(r))
            .filter_map(|r| r["last"].as_str().map(str::to_string))
            .collect()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
