//! A real headless Chromium (Debian's `chromium`), driven over WebDriver
//! by Debian's `chromedriver`, for the web console's tests and benchmark.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use serde_json::{Value, json};

use crate::{eventually, free_port};

/// Where Debian puts the browser and its driver.
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A chromedriver with one headless Chromium session; both end on drop.
pub struct Browser {
    pub client: Client,
    // Dropped after the client: the driver's group is killed last.
    _driver: DriverGuard,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless session.
    pub async fn start() -> anyhow::Result<Browser> {
        for tool in [CHROMIUM, CHROMEDRIVER] {
            anyhow::ensure!(
                std::path::Path::new(tool).exists(),
                "{tool} is missing: run scripts/install-peers (it installs Debian's chromium and chromium-driver)"
            );
        }
        let port = free_port();
        let profile = tempfile::tempdir()?;
        // Its own process group, so the browser it starts ends with it;
        // the browser's own temporary files go in the profile folder, which
        // goes with this browser.
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .env("TMPDIR", profile.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let driver = DriverGuard(Some(driver));
        let listening = eventually(Duration::from_secs(30), async || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .ok()
                .map(|_| ())
        })
        .await;
        anyhow::ensure!(listening.is_some(), "chromedriver did not listen");
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    // The tests run as root, where Chromium's own sandbox
                    // cannot start.
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-background-networking",
                    "--no-first-run",
                    format!("--user-data-dir={}", profile.path().join("data").display()),
                ],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await?;
        Ok(Browser {
            client,
            _driver: driver,
            _profile: profile,
        })
    }

    /// Opens the console at `base` (the gateway's URL) and signs in as a
    /// person would: types `owner` into the form and presses the button;
    /// returns once the console drew its first snapshot.
    pub async fn sign_in_console(&self, base: &str, owner: &str) -> anyhow::Result<()> {
        self.client.goto(&format!("{base}/console")).await?;
        let field = self.client.find(fantoccini::Locator::Id("token")).await?;
        field.send_keys(owner).await?;
        self.client
            .find(fantoccini::Locator::Id("sign-in"))
            .await?
            .click()
            .await?;
        let drawn = self
            .wait_js(
                "return document.documentElement.dataset.drawn;",
                Duration::from_secs(30),
            )
            .await;
        if drawn.is_none() {
            let at = self.client.current_url().await?;
            let page = self
                .js("return document.body ? document.body.innerText : '';")
                .await;
            anyhow::bail!("the console drew nothing after signing in; at {at}: {page}");
        }
        Ok(())
    }

    /// Runs `script` (a function body; `return` gives the value).
    pub async fn js(&self, script: &str) -> Value {
        self.client
            .execute(script, Vec::new())
            .await
            .unwrap_or(Value::Null)
    }

    /// Waits until `script` returns something truthy; returns it, or None
    /// after `within`.
    pub async fn wait_js(&self, script: &str, within: Duration) -> Option<Value> {
        eventually(within, async || {
            let v = self.js(script).await;
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
                _ => true,
            };
            truthy.then_some(v)
        })
        .await
    }

    /// The text of the element with `id` ("" when there is none).
    pub async fn text_of(&self, id: &str) -> String {
        self.js(&format!(
            "const e = document.getElementById({}); return e ? e.textContent : '';",
            json!(id)
        ))
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }
}

/// Kills chromedriver's whole group (the browser with it) on drop.
struct DriverGuard(Option<Child>);

impl Drop for DriverGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
