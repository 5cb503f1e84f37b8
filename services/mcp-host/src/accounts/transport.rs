//! How an account is reached: a command over stdio, or a streamable HTTP
//! endpoint, as the owner connected it.

use std::collections::BTreeMap;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::{ClankieError, ErrorCode};
use clankie_types::host::TransportKind;
use serde::{Deserialize, Serialize};

/// How an account is reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Transport {
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        #[serde(default)]
        cwd: Option<String>,
    },
    Http {
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    pub(super) fn kind(&self) -> TransportKind {
        match self {
            Transport::Stdio { .. } => TransportKind::Stdio,
            Transport::Http { .. } => TransportKind::Http,
        }
    }

    /// A display target; header values are never shown.
    pub(super) fn target(&self) -> String {
        match self {
            Transport::Stdio { command, args, .. } => {
                let mut s = command.clone();
                for a in args {
                    s.push(' ');
                    s.push_str(a);
                }
                s
            }
            Transport::Http { url, headers } => {
                if headers.is_empty() {
                    url.clone()
                } else {
                    let names: Vec<&str> = headers.keys().map(|k| k.as_str()).collect();
                    format!("{url} (headers: {})", names.join(", "))
                }
            }
        }
    }

    /// Validates a transport from the wire.
    pub fn from_pb(
        t: Option<mcphost_pb::connect_request::Transport>,
    ) -> Result<Self, ClankieError> {
        match t {
            Some(mcphost_pb::connect_request::Transport::Stdio(s)) => {
                if s.command.trim().is_empty() {
                    return Err(ErrorCode::InvalidArgument.err("a stdio account needs a command"));
                }
                Ok(Transport::Stdio {
                    command: s.command,
                    args: s.args,
                    env: s.env.into_iter().collect(),
                    cwd: (!s.cwd.is_empty()).then_some(s.cwd),
                })
            }
            Some(mcphost_pb::connect_request::Transport::Http(h)) => {
                let ok = h.url.starts_with("http://") || h.url.starts_with("https://");
                if !ok {
                    return Err(
                        ErrorCode::InvalidArgument.err("an http account needs an http(s) URL")
                    );
                }
                for (k, v) in &h.headers {
                    if http::HeaderName::from_bytes(k.as_bytes()).is_err()
                        || http::HeaderValue::from_str(v).is_err()
                    {
                        return Err(ErrorCode::InvalidArgument
                            .err(format!("header {k} is not a valid HTTP header")));
                    }
                }
                Ok(Transport::Http {
                    url: h.url,
                    headers: h.headers.into_iter().collect(),
                })
            }
            None => Err(ErrorCode::InvalidArgument.err("choose a stdio command or an --url")),
        }
    }
}
