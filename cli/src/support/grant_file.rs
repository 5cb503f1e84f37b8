//! The private file `clankie access issue --out` writes and `clankie mcp
//! --grant` reads: a grant's bearer and the endpoint it is served on. Made
//! new (never over an existing file), 0600, fsynced; its bearer is never
//! printed or logged.

use std::io::Write;
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
    /// Writes a new private file; an existing one is never replaced, and a
    /// path with a symbolic link in any component is refused.
    pub fn create(&self, path: &Path) -> anyhow::Result<()> {
        let mut f = create_new_private(path)
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

/// Creates `path` as a new 0600 file. Each folder on the way is opened
/// relative to the one before and never through a symbolic link, and the
/// file itself is never a link: a link planted anywhere on the path (by a
/// process that expects the bearer to land where it can read it) refuses
/// the write, and nothing can be swapped in between the checks.
fn create_new_private(path: &Path) -> anyhow::Result<std::fs::File> {
    use nix::fcntl::{OFlag, open, openat};
    use nix::sys::stat::Mode;
    use std::path::Component;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
        bail!("{} names no file", path.display());
    };
    let walk = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    let refused = |e: nix::Error, what: &Path| match e {
        nix::Error::ELOOP | nix::Error::ENOTDIR => anyhow::anyhow!(
            "{} is a symbolic link (or not a folder); a grant file is never written through a link",
            what.display()
        ),
        e => anyhow::anyhow!("{}: {e}", what.display()),
    };
    let mut dir = open("/", walk, Mode::empty()).map_err(|e| refused(e, Path::new("/")))?;
    let mut walked = std::path::PathBuf::from("/");
    for c in parent.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(c) => {
                walked.push(c);
                dir = openat(&dir, c, walk, Mode::empty()).map_err(|e| refused(e, &walked))?;
            }
            Component::ParentDir | Component::Prefix(_) => {
                bail!("{} holds `..`; name the folder directly", path.display())
            }
        }
    }
    let create =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(&dir, name, create, Mode::from_bits_truncate(0o600))
        .map_err(|e| refused(e, path))?;
    Ok(std::fs::File::from(fd))
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
        // A symbolic link anywhere on the path refuses the write, and
        // nothing lands where the link points.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, dir.path().join("linked")).expect("link");
        let through = dir.path().join("linked").join("g.json");
        let err = f.create(&through).expect_err("through a linked folder");
        assert!(format!("{err:#}").contains("symbolic link"), "{err:#}");
        std::os::unix::fs::symlink(elsewhere.join("h.json"), dir.path().join("h.json"))
            .expect("link");
        assert!(
            f.create(&dir.path().join("h.json")).is_err(),
            "the file itself"
        );
        assert_eq!(std::fs::read_dir(&elsewhere).expect("dir").count(), 0);
        assert!(
            f.create(&dir.path().join("sub/../i.json")).is_err(),
            "no .."
        );
    }
}
