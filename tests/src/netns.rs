//! Two network namespaces joined by a veth pair, for stacks that must
//! reach each other over a real link the test can cut (root only).

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A main and a remote namespace, `10.77.N.1` and `10.77.N.2` on the two
/// ends of one veth pair. Dropped, both namespaces (and the pair) go.
pub struct NetPair {
    pub main_ns: String,
    pub remote_ns: String,
    pub main_addr: String,
    pub remote_addr: String,
    remote_end: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip {args:?}: {e}"));
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A new namespace with its loopback up.
fn namespace(ns: &str) {
    ip(&["netns", "add", ns]);
    ip(&["-n", ns, "link", "set", "lo", "up"]);
}

/// A veth pair between two namespaces: each end (name, namespace,
/// address) moved there, addressed in a /24, and up.
fn join(a: (&str, &str, &str), b: (&str, &str, &str)) {
    ip(&["link", "add", a.0, "type", "veth", "peer", "name", b.0]);
    for (end, ns, addr) in [a, b] {
        ip(&["link", "set", end, "netns", ns]);
        ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", end]);
        ip(&["-n", ns, "link", "set", end, "up"]);
    }
}

impl NetPair {
    /// Makes the two namespaces and the link between them, up.
    pub fn new() -> NetPair {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // Unique across the test processes nextest runs at once.
        let tag = format!("{}x{n}", std::process::id() % 100_000);
        let subnet = (std::process::id() % 200 + n) % 250 + 1;
        let pair = NetPair {
            main_ns: format!("ckm{tag}"),
            remote_ns: format!("ckr{tag}"),
            main_addr: format!("10.77.{subnet}.1"),
            remote_addr: format!("10.77.{subnet}.2"),
            remote_end: format!("ckv{tag}r"),
        };
        namespace(&pair.main_ns);
        namespace(&pair.remote_ns);
        join(
            (&format!("ckv{tag}m"), &pair.main_ns, &pair.main_addr),
            (&pair.remote_end, &pair.remote_ns, &pair.remote_addr),
        );
        pair
    }

    /// Cuts the link (the remote end goes down; no reset reaches anyone).
    pub fn cut(&self) {
        ip(&[
            "-n",
            &self.remote_ns,
            "link",
            "set",
            &self.remote_end,
            "down",
        ]);
    }

    /// Restores a cut link.
    pub fn restore(&self) {
        ip(&["-n", &self.remote_ns, "link", "set", &self.remote_end, "up"]);
    }
}

impl Default for NetPair {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        for ns in [&self.main_ns, &self.remote_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// One main namespace and `n` remote ones, each remote joined to the main
/// by its own veth pair: remote `i` is `10.78.i.2`, and reaches the main at
/// `10.78.i.1`. Dropped, every namespace (and pair) goes.
pub struct NetStar {
    pub main_ns: String,
    pub remotes: Vec<String>,
}

impl NetStar {
    /// Makes the main namespace and `n` remotes (at most 250).
    pub fn new(n: usize) -> NetStar {
        assert!(n <= 250, "at most 250 remotes");
        let tag = std::process::id() % 100_000;
        let star = NetStar {
            main_ns: format!("cksm{tag}"),
            remotes: (0..n).map(|i| format!("cksr{tag}x{i}")).collect(),
        };
        namespace(&star.main_ns);
        for (i, ns) in star.remotes.iter().enumerate() {
            namespace(ns);
            join(
                (
                    &format!("ck{tag}m{i}"),
                    &star.main_ns,
                    &star.main_addr_for(i),
                ),
                (&format!("ck{tag}r{i}"), ns, &format!("10.78.{}.2", i + 1)),
            );
        }
        star
    }

    /// The main stack's address as remote `i` reaches it.
    pub fn main_addr_for(&self, i: usize) -> String {
        format!("10.78.{}.1", i + 1)
    }
}

impl Drop for NetStar {
    fn drop(&mut self) {
        for ns in std::iter::once(&self.main_ns).chain(&self.remotes) {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}
