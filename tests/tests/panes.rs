//! Pane hosts against the real multiplexer: a private tmux server.

use clankie_panes::{PaneError, PaneHost, Tmux};
use clankie_tests::{TmuxServer, ppid};

#[tokio::test(flavor = "multi_thread")]
async fn tmux_reports_each_panes_shell_and_forgets_closed_panes() {
    let server = TmuxServer::start("work");
    let other = server.run(&["new-session", "-d", "-s", "other", "-P", "-F", "#{pane_id}"]);
    let second = server.run(&[
        "split-window",
        "-t",
        "work",
        "-c",
        "/tmp",
        "-P",
        "-F",
        "#{pane_id}",
    ]);
    let host = Tmux::new(server.socket.clone(), Some("work".into()));
    let panes = host.panes().await.expect("panes");
    assert_eq!(panes.len(), 2, "only the linked session: {panes:?}");
    assert!(panes.iter().all(|p| p.session == "work"));
    assert!(!panes.iter().any(|p| p.pane_id == other));

    let pane = host.pane(&second).await.expect("pane");
    assert_eq!(pane.pane_id, second);
    // The shell is a real process, a child of the tmux server.
    let server_pid: i32 = server
        .run(&["display-message", "-p", "#{pid}"])
        .parse()
        .expect("pid");
    assert_eq!(ppid(pane.shell_pid), server_pid);
    assert!(!pane.command.is_empty());

    server.run(&["kill-pane", "-t", &second]);
    assert_eq!(host.pane(&second).await, Err(PaneError::NotFound));
    assert_eq!(host.pane("not-a-pane").await, Err(PaneError::NotFound));
    assert_eq!(host.pane("%1;kill-server").await, Err(PaneError::NotFound));
    // A restarted server on the same socket: the host's control client
    // notices and starts a new one.
    server.kill();
    // The old server may still be going away: try until the new one is up.
    let mut up = false;
    for _ in 0..50 {
        up = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&server.socket)
            .args(["new-session", "-d", "-s", "work"])
            .status()
            .is_ok_and(|s| s.success());
        if up {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(up, "a new tmux server on the same socket");
    let panes = host.panes().await.expect("panes after restart");
    assert_eq!(panes.len(), 1);

    let gone = Tmux::new(server.socket.with_file_name("nope.sock"), None);
    assert!(matches!(gone.panes().await, Err(PaneError::Unavailable(_))));
}

/// A burst of pane reads (every seat relisting after a catalog change)
/// shares listings, and each read still sees tmux as it was after it asked:
/// a pane killed before the burst is gone for every read that names it.
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_pane_reads_shares_listings_and_none_is_stale() {
    let server = TmuxServer::start("work");
    let mut ids = vec![server.run(&["display-message", "-p", "-t", "work", "#{pane_id}"])];
    for _ in 0..23 {
        ids.push(server.run(&["new-window", "-t", "work", "-P", "-F", "#{pane_id}"]));
    }
    let host = Tmux::new(server.socket.clone(), Some("work".into()));
    let all = host.panes().await.expect("panes");
    assert_eq!(all.len(), ids.len());
    let before = host.listings();
    // The server stopped, so the first read waits for its answer and every
    // other read is asked behind it; then it goes on.
    let server_pid: i32 = server
        .run(&["display-message", "-p", "#{pid}"])
        .parse()
        .expect("pid");
    let pid = nix::unistd::Pid::from_raw(server_pid);
    clankie_tests::pause(server_pid);
    let asked = host.reads();
    let reads: Vec<_> = ids
        .iter()
        .map(|id| {
            let (host, id) = (host.clone(), id.clone());
            tokio::spawn(async move { host.pane(&id).await })
        })
        .collect();
    while host.reads() < asked + ids.len() as u64 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("continue tmux");
    for (id, read) in ids.iter().zip(reads) {
        let pane = read.await.expect("join").expect("pane");
        let shell = all.iter().find(|p| &p.pane_id == id).expect("listed");
        assert_eq!(pane.shell_pid, shell.shell_pid, "{id}");
    }
    // The first read's own listing, then one whole listing for the rest.
    let used = host.listings() - before;
    assert_eq!(used, 2, "{} reads took {used} listings", ids.len());

    // Killed, then read in a burst: gone for every read that names it,
    // although an earlier whole listing still held it.
    let victim = ids.pop().expect("a pane");
    server.run(&["kill-pane", "-t", &victim]);
    let reads: Vec<_> = ids
        .iter()
        .chain(std::iter::once(&victim))
        .map(|id| {
            let (host, id) = (host.clone(), id.clone());
            tokio::spawn(async move { (id.clone(), host.pane(&id).await) })
        })
        .collect();
    for read in reads {
        let (id, pane) = read.await.expect("join");
        if id == victim {
            assert_eq!(pane, Err(PaneError::NotFound));
        } else {
            assert!(pane.is_ok(), "{id}: {pane:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_herdr_client_speaks_the_schema_and_reads_shell_pids() {
    use clankie_panes::Herdr;
    let me = std::process::id() as i32;
    let mut herdr =
        clankie_tests::HerdrFixture::start(&format!(r#"{{"w1:p1": {me}, "w1:p2": 1}}"#), None)
            .await;
    let socket = herdr.socket.clone();
    let host = Herdr::new(socket.clone());
    let ping = host
        .request("ping", serde_json::json!({}))
        .await
        .expect("ping");
    assert_eq!(ping["protocol"], 20);
    let pane = host.pane("w1:p1").await.expect("pane");
    assert_eq!(pane.shell_pid, me);
    assert_eq!(pane.session, "w1");
    assert_eq!(host.panes().await.expect("panes").len(), 2);
    assert_eq!(host.pane("w9:p9").await, Err(PaneError::NotFound));
    let found = herdr.stop();
    assert!(found.is_empty(), "schema violations: {found:?}");
    // With the fixture gone the host is unavailable, not "not found".
    assert!(matches!(
        host.pane("w1:p1").await,
        Err(PaneError::Unavailable(_))
    ));
}

/// The pane map's watcher against real tmux: an entry recorded for a pane
/// goes when its window's layout changes, when its window is swapped into
/// another session (only the subscribed pane list says so), and everything
/// goes when the session is renamed.
#[tokio::test(flavor = "multi_thread")]
async fn the_pane_map_forgets_what_tmux_reports_changed() {
    use clankie_panes::Shell;
    let server = TmuxServer::start("work");
    server.run(&["new-session", "-d", "-s", "other"]);
    let host = Tmux::new(server.socket.clone(), Some("work".into()));
    let map = host.map().expect("a session link keeps a map");
    let live = clankie_tests::eventually(std::time::Duration::from_secs(10), async || {
        map.begin_read().map(|_| ())
    })
    .await;
    assert!(live.is_some(), "the watcher attached");
    let record = |pane: &str| {
        let p = server.run(&[
            "display-message",
            "-p",
            "-t",
            pane,
            "#{pane_pid} #{window_id}",
        ]);
        let (pid, window) = p.split_once(' ').expect("pid and window");
        let shell = Shell {
            pid: pid.parse().expect("pid"),
            pidfs_id: 1,
            start_time: 1,
            tty: 1,
        };
        map.record(map.begin_read(), pane, window, shell);
        assert!(
            map.by_pane(pane).is_some_and(|h| map.holds(&h)),
            "{pane} recorded"
        );
    };
    let gone = async |pane: &str| {
        clankie_tests::eventually(std::time::Duration::from_secs(5), async || {
            map.by_pane(pane).is_none().then_some(())
        })
        .await
        .is_some()
    };
    let split = server.run(&[
        "split-window",
        "-d",
        "-t",
        "work:0",
        "-P",
        "-F",
        "#{pane_id}",
    ]);
    let alone = server.run(&["new-window", "-d", "-t", "work", "-P", "-F", "#{pane_id}"]);
    let kept = server.run(&["new-window", "-d", "-t", "work", "-P", "-F", "#{pane_id}"]);
    for p in [&split, &alone, &kept] {
        record(p);
    }
    server.run(&["break-pane", "-d", "-s", &split, "-t", "other:"]);
    assert!(
        gone(&split).await,
        "a layout change forgets its window's panes"
    );
    let window = server.run(&["display-message", "-p", "-t", &alone, "#{window_id}"]);
    server.run(&["swap-window", "-d", "-s", &window, "-t", "other:0"]);
    assert!(
        gone(&alone).await,
        "the pane list forgets a swapped-out pane"
    );
    assert!(map.by_pane(&kept).is_some(), "an untouched pane stays");
    server.run(&["rename-session", "-t", "work", "renamed"]);
    assert!(gone(&kept).await, "a renamed session forgets everything");
}
