//! The OTLP receiver (`tests/peers/otlp_receiver.py`, built from the
//! official opentelemetry-proto definitions) and what the stack sent it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::{file_lines, peers, python, repo_root};

/// One exported span as the receiver wrote it.
#[derive(Clone, Debug)]
pub struct Span {
    pub service: String,
    pub trace: String,
    pub span: String,
    pub parent: String,
    pub name: String,
}

/// A running receiver on two loopback ports; killed on drop.
pub struct OtlpReceiver {
    child: Child,
    _dir: tempfile::TempDir,
    out: PathBuf,
    pub grpc_port: u16,
    pub http_port: u16,
}

impl OtlpReceiver {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("otlp.jsonl");
        let ports = dir.path().join("ports");
        let child = Command::new(python())
            .arg(repo_root().join("tests/peers/otlp_receiver.py"))
            .arg(&out)
            .arg(&ports)
            .env("PATH", peers().join("venv/bin"))
            .stdout(Stdio::null())
            .spawn()
            .expect("start the OTLP receiver");
        let mut read = String::new();
        for _ in 0..400 {
            if let Ok(s) = std::fs::read_to_string(&ports) {
                read = s;
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let mut it = read.split_whitespace().map(|p| p.parse::<u16>().ok());
        let (Some(Some(grpc_port)), Some(Some(http_port))) = (it.next(), it.next()) else {
            panic!("the OTLP receiver did not start (ports file: {read:?})");
        };
        OtlpReceiver {
            child,
            _dir: dir,
            out,
            grpc_port,
            http_port,
        }
    }

    /// The endpoint for `OTEL_EXPORTER_OTLP_ENDPOINT` over gRPC.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// The endpoint for `OTEL_EXPORTER_OTLP_ENDPOINT` over HTTP/protobuf.
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    fn rows(&self, signal: &str) -> Vec<Value> {
        file_lines(&self.out)
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["signal"] == signal)
            .collect()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_owned();
        self.rows("span")
            .iter()
            .map(|v| Span {
                service: s(v, "service"),
                trace: s(v, "trace"),
                span: s(v, "span"),
                parent: s(v, "parent"),
                name: s(v, "name"),
            })
            .collect()
    }

    /// Every metric data point received so far.
    pub fn metrics(&self) -> Vec<Value> {
        self.rows("metric")
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
