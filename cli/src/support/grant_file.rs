//! The private file `clankie access issue --out` writes and `clankie mcp
//! --grant` reads: a grant's bearer and the endpoint it is served on. Made
//! new (never over an existing file), 0600, fsynced; its bearer is never
//! printed or logged.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantFile {
    pub version: u32,
    pub grant_id: String,
    /// The gateway's MCP endpoint: HTTPS, or HTTP on a loopback address.
    pub endpoint: String,
    pub bearer: String,
    pub server: String,
    pub tools: Vec<String>,
    pub principal_id: String,
    pub expires_at_ms: i64,
}

impl GrantFile {
    /// Writes a new private file; an existing one is never replaced.
    pub fn create(&self, path: &Path) -> anyhow::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("cannot create {} as a new private file", path.display()))?;
        let body = serde_json::to_vec_pretty(self)?;
        f.write_all(&body)?;
        f.sync_all()?;
        Ok(())
    }

    pub fn read(path: &Path) -> anyhow::Result<GrantFile> {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let file: GrantFile = serde_json::from_slice(&bytes)
            .context("the grant file is not one this release wrote (task-bound and renewable grants confer nothing)")?;
        if file.version != 1 || file.bearer.is_empty() {
            bail!("the grant file is not a manual grant of this release");
        }
        Ok(file)
    }
}

/// A grant's endpoint must be HTTPS, or HTTP on a loopback address: a
/// bearer never crosses a network in the clear.
pub fn check_endpoint(endpoint: &str) -> anyhow::Result<()> {
    let url = url::Url::parse(endpoint).context("the grant's endpoint is not a URL")?;
    match url.scheme() {
        "https" => Ok(()),
        "http" => {
            let loopback = match url.host() {
                Some(url::Host::Domain(d)) => d == "localhost",
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                None => false,
            };
            if loopback {
                Ok(())
            } else {
                bail!(
                    "refusing the grant's endpoint: plain HTTP is allowed on loopback only; use HTTPS"
                )
            }
        }
        other => bail!("refusing the grant's endpoint: {other} is neither HTTPS nor loopback HTTP"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_carries_a_bearer() {
        for ok in [
            "https://gw.example/mcp",
            "http://127.0.0.1:7755/mcp",
            "http://127.9.9.9/mcp",
            "http://[::1]:80/mcp",
            "http://localhost:7755/mcp",
        ] {
            assert!(check_endpoint(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://10.0.0.5:7755/mcp",
            "http://gw.example/mcp",
            "http://localhost.evil.example/mcp",
            "ftp://127.0.0.1/mcp",
            "not a url",
        ] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_file_is_new_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("g.json");
        let f = GrantFile {
            version: 1,
            grant_id: "g".into(),
            endpoint: "http://127.0.0.1:1/mcp".into(),
            bearer: "clkg_x".into(),
            server: "s".into(),
            tools: vec!["t".into()],
            principal_id: "p".into(),
            expires_at_ms: 1,
        };
        f.create(&path).expect("new");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(f.create(&path).is_err(), "never over an existing file");
        assert_eq!(GrantFile::read(&path).expect("reads").grant_id, "g");
    }
}
