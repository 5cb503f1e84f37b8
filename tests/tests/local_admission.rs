//! Local fleet admission end to end: a bridge inside a pane of a linked tmux
//! session reaches the tools with no token; the same bridge elsewhere is
//! refused; a pane that goes away loses its proof.

use std::time::Duration;

use clankie_tests::{Stack, TmuxServer, bin_dir, file_lines, peer_path, python, repo_root};
use serde_json::Value;

async fn wait_file(path: &std::path::Path, timeout: Duration) -> Option<Value> {
    clankie_tests::wait_json(path, timeout).await
}

/// Every tool a seat in a linked pane is offered (peer messages on).
fn seat_tools() -> Value {
    serde_json::json!([
        "clankie_call",
        "clankie_tools",
        "list_fleet_seats",
        "message_clankie",
        "message_peer"
    ])
}

/// Starts `python SCRIPT ARGS...` as the process of a new pane in session
/// `work`, with the stack's state and the peers' PATH; returns the pane id.
fn run_in_pane(stack: &Stack, tmux: &TmuxServer, script: &str, args: &[String]) -> String {
    let command = format!(
        "exec env CLANKIE_STATE={state} PATH={path} {py} {script} {args}",
        state = stack.state.path().display(),
        path = peer_path(),
        py = python().display(),
        script = repo_root().join(script).display(),
        args = args.join(" "),
    );
    tmux.run(&[
        "split-window",
        "-t",
        "work",
        "-P",
        "-F",
        "#{pane_id}",
        &command,
    ])
}

/// Runs `python SCRIPT ARGS...` here, outside any pane.
fn run_outside(stack: &Stack, script: &str, args: &[String]) {
    let status = std::process::Command::new(python())
        .arg(repo_root().join(script))
        .args(args)
        .env("CLANKIE_STATE", stack.state.path())
        .env("PATH", peer_path())
        .env("RUST_LOG", "warn")
        .status()
        .expect("outside client");
    assert!(status.success(), "{script} failed");
}

fn fleet_status(stack: &Stack) -> Value {
    serde_json::from_str(&stack.clankie_ok(&["fleet", "status", "--json"])).expect("json")
}

async fn linked_stack() -> (Stack, TmuxServer) {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let tmux = TmuxServer::start("work");
    let socket = tmux.socket.display().to_string();
    stack.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
    (stack, tmux)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loopback_tcp_client_in_a_pane_needs_no_token_and_one_outside_is_refused() {
    let (stack, tmux) = linked_stack().await;
    let inside = stack.state.path().join("tcp-inside.json");
    let args = [
        stack.state.path().display().to_string(),
        inside.display().to_string(),
    ];
    run_in_pane(&stack, &tmux, "tests/clients/tcp_call.py", &args);
    let seen = wait_file(&inside, Duration::from_secs(60))
        .await
        .expect("the pane's client finished");
    assert_eq!(seen["probe"]["status"], 200, "{seen}");
    assert_eq!(seen["tools"], seat_tools(), "{seen}");
    assert_eq!(seen["call"]["outcome"], "ok", "{seen}");

    let outside = stack.state.path().join("tcp-outside.json");
    run_outside(
        &stack,
        "tests/clients/tcp_call.py",
        &[
            stack.state.path().display().to_string(),
            outside.display().to_string(),
        ],
    );
    let seen: Value =
        serde_json::from_slice(&std::fs::read(&outside).expect("result")).expect("json");
    assert_eq!(seen["probe"]["status"], 403, "{seen}");
    assert_eq!(seen["probe"]["code"], "local_process_membership_required");
    let dispatched = file_lines(&stack.state.path().join("audit/connected-calls.jsonl"))
        .iter()
        .filter(|l| l.contains("\"dispatch\""))
        .count();
    assert_eq!(dispatched, 1, "only the pane's call was forwarded");
    let status = fleet_status(&stack);
    assert!(
        status["localProofs"]["refusals"]["no_pane_in_lineage"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forked_child_sharing_a_connection_is_refused_on_tcp_and_unix() {
    let (stack, tmux) = linked_stack().await;
    let tcp = stack.state.path().join("shared-tcp.json");
    let unix = stack.state.path().join("shared-unix.json");
    for (mode, out) in [("tcp", &tcp), ("unix", &unix)] {
        let args = [
            mode.to_string(),
            stack.state.path().display().to_string(),
            out.display().to_string(),
        ];
        run_in_pane(&stack, &tmux, "tests/clients/shared_fd.py", &args);
    }
    let tcp = wait_file(&tcp, Duration::from_secs(60))
        .await
        .expect("tcp run");
    let unix = wait_file(&unix, Duration::from_secs(60))
        .await
        .expect("unix run");
    // TCP: the census sees the child holding the socket too.
    assert_eq!(tcp["parent_with_child_holding"]["status"], 403, "{tcp}");
    assert_eq!(
        tcp["parent_with_child_holding"]["code"],
        "local_process_membership_required"
    );
    // Unix: the parent is admitted (the MCP service itself answers), the
    // child's bytes on the shared descriptor are refused, and the
    // connection stays refused for the parent too.
    let first = unix["parent_first"]["status"].as_u64().unwrap_or(0);
    assert!(first != 403 && first != 503 && first != 0, "{unix}");
    assert_eq!(unix["child_on_shared"]["status"], 403, "{unix}");
    assert_eq!(
        unix["child_on_shared"]["code"],
        "local_process_membership_required"
    );
    assert_eq!(unix["parent_after"]["status"], 403, "{unix}");
    let status = fleet_status(&stack);
    let refusals = &status["localProofs"]["refusals"];
    assert!(
        refusals["shared_descriptor"].as_u64().unwrap_or(0) >= 3,
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bridge_in_a_linked_pane_needs_no_token_and_one_outside_is_refused() {
    let stack = Stack::start().await.expect("stack");
    stack.connect_stdio("time", &["mcp-server-time"], &[]);
    let tmux = TmuxServer::start("work");
    let socket = tmux.socket.display().to_string();
    let out = stack.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
    assert!(out.contains("linked tmux"), "{out}");

    // Inside a pane: the pane's process runs the MCP client, which runs the bridge.
    let result = stack.state.path().join("inside.json");
    let args = [
        bin_dir().join("clankie").display().to_string(),
        result.display().to_string(),
        "10".into(),
    ];
    let pane = run_in_pane(&stack, &tmux, "tests/clients/local_call.py", &args);
    let seen = wait_file(&result, Duration::from_secs(60))
        .await
        .expect("the pane's client finished");
    assert_eq!(seen["tools"], seat_tools(), "{seen}");
    assert_eq!(seen["call"]["outcome"], "ok", "{seen}");
    assert_eq!(seen["again"], 10, "{seen}");
    // The bridge keeps its connections: eleven calls (and its listing and
    // seat channel) are a few full proofs, each connection's first, and the
    // rest rechecks of them.
    let status = fleet_status(&stack);
    let counters = &status["localProofs"];
    let proofs = counters["proofs"].as_u64().unwrap_or(0);
    assert!((1..=5).contains(&proofs), "{status}");
    assert!(counters["reuses"].as_u64().unwrap_or(0) >= 11, "{status}");
    let audit = file_lines(&stack.state.path().join("audit/connected-calls.jsonl"));
    assert!(
        audit
            .iter()
            .any(|l| l.contains(&format!("fleet:local:pane:{pane}"))),
        "the principal names the proven pane: {audit:?}"
    );

    // Outside any pane: the same client, run by the test itself, is refused.
    let outside = stack.state.path().join("outside.json");
    let status = std::process::Command::new(python())
        .arg(repo_root().join("tests/clients/local_call.py"))
        .arg(bin_dir().join("clankie"))
        .arg(&outside)
        .env("CLANKIE_STATE", stack.state.path())
        .env("PATH", peer_path())
        .env("RUST_LOG", "warn")
        .status()
        .expect("outside client");
    assert!(status.success());
    let seen: Value =
        serde_json::from_slice(&std::fs::read(&outside).expect("outside result")).expect("json");
    assert!(seen.get("tools").is_none(), "{seen}");
    assert_eq!(seen["isError"], true);
    assert_eq!(
        seen["call"]["error"]["code"], "local_process_membership_required",
        "{seen}"
    );
    assert_eq!(
        file_lines(&stack.state.path().join("audit/connected-calls.jsonl"))
            .iter()
            .filter(|l| l.contains("\"dispatch\""))
            .count(),
        11,
        "the inside client's eleven calls; nothing was forwarded for the refused one"
    );

    // The counters saw one proven connection reused, and the refusals by reason.
    let status: Value =
        serde_json::from_str(&stack.clankie_ok(&["fleet", "status", "--json"])).expect("json");
    let counters = &status["localProofs"];
    assert!(counters["proofs"].as_u64().unwrap_or(0) >= 1, "{status}");
    assert!(counters["reuses"].as_u64().unwrap_or(0) >= 1, "{status}");
    assert!(
        counters["refusals"]["no_pane_in_lineage"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "{status}"
    );
}

mod proof {
    //! The proof itself, seen only through the gateway: no test (and no
    //! process but the gateway) may name a pid to admission.
    use super::*;

    /// `env` words that give a pane client the stack's state and the peers.
    fn client_env(stack: &Stack) -> String {
        format!(
            "env CLANKIE_STATE={} PATH={}",
            stack.state.path().display(),
            peer_path()
        )
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_pane_process_is_proven_and_loses_its_proof_when_the_pane_goes() {
        let (stack, tmux) = linked_stack().await;
        // The pane's shell starts the client in its own session, so it
        // outlives the pane and asks again on its proven connection.
        let out = stack.state.path().join("hold");
        let client = format!(
            "{} {} {} hold {}",
            client_env(&stack),
            python().display(),
            repo_root().join("tests/clients/local_http.py").display(),
            out.display()
        );
        let pane = tmux.run(&[
            "split-window",
            "-t",
            "work",
            "-P",
            "-F",
            "#{pane_id}",
            &format!("exec bash -c 'setsid {client} & exec sleep 300'"),
        ]);
        let first = wait_file(&out.with_extension("first"), Duration::from_secs(60))
            .await
            .expect("the pane's client asked once");
        assert_eq!(first["status"], 200, "proven while the pane lives: {first}");

        // The pane goes: the recheck on the same connection refuses, and the
        // full proof it falls back to finds no pane in the lineage.
        tmux.run(&["kill-pane", "-t", &pane]);
        std::fs::write(out.with_extension("go"), "").expect("go");
        let after = wait_file(&out, Duration::from_secs(60))
            .await
            .expect("the client asked again");
        assert_eq!(after["status"], 403, "{after}");
        assert_eq!(
            after["code"], "local_process_membership_required",
            "{after}"
        );
        let status = fleet_status(&stack);
        assert!(
            status["localProofs"]["proofs"].as_u64().unwrap_or(0) >= 1,
            "{status}"
        );
    }

    /// Starts `local_http.py each OUT` in its own session from a new pane's
    /// shell (`split`: a split of the session's first window, else a new
    /// window), so it outlives the pane; with `ignore_hup` the shell also
    /// ignores SIGHUP and outlives it too. `env` is more `NAME=VALUE`
    /// words for the client. Returns the pane and its shell.
    fn each_pane(
        stack: &Stack,
        tmux: &TmuxServer,
        out: &std::path::Path,
        (ignore_hup, split): (bool, bool),
        env: &str,
    ) -> (String, i32) {
        let client = format!(
            "env {env} {} {} {} each {}",
            client_env(stack),
            python().display(),
            repo_root().join("tests/clients/local_http.py").display(),
            out.display()
        );
        let trap = if ignore_hup { "trap \"\" HUP; " } else { "" };
        let shell = format!("exec bash -c '{trap}setsid {client} & exec sleep 300'");
        let made = if split {
            tmux.run(&[
                "split-window",
                "-t",
                "work:0",
                "-P",
                "-F",
                "#{pane_id} #{pane_pid}",
                &shell,
            ])
        } else {
            tmux.run(&[
                "new-window",
                "-d",
                "-t",
                "work",
                "-P",
                "-F",
                "#{pane_id} #{pane_pid}",
                &shell,
            ])
        };
        let (pane, pid) = made.split_once(' ').expect("pane and pid");
        (pane.to_string(), pid.parse().expect("pid"))
    }

    /// Has the `each` client ask its Nth time (0: its first, unasked) and
    /// returns the answer.
    async fn ask(out: &std::path::Path, n: u32) -> Value {
        let path = |s: String| std::path::PathBuf::from(format!("{}.{s}", out.display()));
        if n > 0 {
            std::fs::write(path(format!("go{n}")), "").expect("go");
        }
        wait_file(&path(n.to_string()), Duration::from_secs(60))
            .await
            .unwrap_or_else(|| panic!("no answer {n} in {}", out.display()))
    }

    /// Has the `each` client ask again, from its `next` ask on, until one
    /// recheck is answered by the pane map with no pane read (the map goes
    /// live only once its watcher has attached, and a read begun before any
    /// event is not recorded, so on a busy machine that can take a few
    /// asks). Returns the next ask's number.
    async fn until_the_map_answers(stack: &Stack, out: &std::path::Path, mut next: u32) -> u32 {
        for _ in 0..50 {
            let before = pane_counters(stack);
            let seen = ask(out, next).await;
            next += 1;
            assert_eq!(seen["status"], 200, "a recheck: {seen}");
            let after = pane_counters(stack);
            if after.0 == before.0 && after.1 > before.1 {
                return next;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the pane map never answered a recheck of {}", out.display());
    }

    /// (pane-host reads, pane-map hits) so far.
    fn pane_counters(stack: &Stack) -> (u64, u64) {
        let status = fleet_status(stack);
        let n = |k: &str| status["localProofs"][k].as_u64().unwrap_or(0);
        (n("paneReads"), n("paneMapHits"))
    }

    /// The tmux clients that watch `tmux`'s session for admission's pane
    /// map (the reading client passes its flags in another order).
    fn watchers(tmux: &TmuxServer) -> Vec<i32> {
        let socket = tmux.socket.display().to_string();
        std::fs::read_dir("/proc")
            .expect("proc")
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                    let c = String::from_utf8_lossy(&c).replace('\0', " ");
                    c.contains(&socket) && c.contains("no-output,read-only,ignore-size")
                })
            })
            .collect()
    }

    fn signal_all(pids: &[i32], signal: nix::sys::signal::Signal) {
        for pid in pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), signal);
        }
    }

    /// A pane closed while its shell lives on (it ignores SIGHUP), and a
    /// pane respawned the same way, with tmux's word of both held back: the
    /// map still names each pane with its old shell, and only the kernel
    /// says that shell lost its terminal. Both must refuse. (Mutation
    /// check: without the terminal in `shows`, both are admitted.)
    #[tokio::test(flavor = "multi_thread")]
    async fn a_closed_or_respawned_pane_is_refused_before_tmux_says_so() {
        let (stack, tmux) = linked_stack().await;
        let closed = stack.state.path().join("closed");
        let respawned = stack.state.path().join("respawned");
        let (closed_pane, closed_shell) = each_pane(&stack, &tmux, &closed, (true, true), "");
        let (respawned_pane, _) = each_pane(&stack, &tmux, &respawned, (true, false), "");
        // A full proof, then rechecks until the map answers one with no
        // pane read.
        let mut next = Vec::new();
        for out in [&closed, &respawned] {
            assert_eq!(ask(out, 0).await["status"], 200, "a full proof");
            next.push(until_the_map_answers(&stack, out, 1).await);
        }

        let watching = watchers(&tmux);
        assert!(!watching.is_empty(), "admission watches the session");
        watching.iter().for_each(|w| clankie_tests::pause(*w));
        tmux.run(&["kill-pane", "-t", &closed_pane]);
        tmux.run(&[
            "respawn-pane",
            "-k",
            "-t",
            &respawned_pane,
            "exec sleep 300",
        ]);
        assert!(
            std::path::Path::new(&format!("/proc/{closed_shell}")).exists(),
            "the closed pane's shell lives on"
        );
        for (out, n) in [&closed, &respawned].into_iter().zip(next) {
            let seen = ask(out, n).await;
            assert_eq!(seen["status"], 403, "{seen}");
            assert_eq!(seen["code"], "local_process_membership_required", "{seen}");
        }
        signal_all(&watching, nix::sys::signal::Signal::SIGCONT);
    }

    /// A pane moved to another session, and a window swapped with another
    /// session's: tmux says so (a layout change at once; the pane list
    /// subscription within its one-second check), and the map forgets
    /// them. (Mutation checks: without `Notice::Window`, or without the
    /// pane list, the stale entry admits.)
    #[tokio::test(flavor = "multi_thread")]
    async fn a_pane_moved_or_swapped_out_of_the_linked_session_is_refused() {
        let (stack, tmux) = linked_stack().await;
        tmux.run(&["new-session", "-d", "-s", "other"]);
        let moved = stack.state.path().join("moved");
        let swapped = stack.state.path().join("swapped");
        let (moved_pane, _) = each_pane(&stack, &tmux, &moved, (false, true), "");
        let (swapped_pane, _) = each_pane(&stack, &tmux, &swapped, (false, false), "");
        let mut next = Vec::new();
        for out in [&moved, &swapped] {
            assert_eq!(ask(out, 0).await["status"], 200);
            next.push(until_the_map_answers(&stack, out, 1).await);
        }

        tmux.run(&["break-pane", "-d", "-s", &moved_pane, "-t", "other:"]);
        let seen = ask(&moved, next[0]).await;
        assert_eq!(seen["status"], 403, "moved: {seen}");

        let window = tmux.run(&["display-message", "-p", "-t", &swapped_pane, "#{window_id}"]);
        tmux.run(&["swap-window", "-d", "-s", &window, "-t", "other:0"]);
        // tmux re-evaluates the subscribed pane list once a second (later
        // on a busy machine): ask until the stale entry is gone, for at
        // most 15 s. (A watcher that subscribed before its attach answered
        // never heard the list, so this failed one run in six; it now
        // subscribes after, and the map waits for the first list.)
        let mut seen = Value::Null;
        for n in next[1]..next[1] + 30 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            seen = ask(&swapped, n).await;
            if seen["status"] == 403 {
                break;
            }
        }
        assert_eq!(seen["status"], 403, "swapped: {seen}");
        assert_eq!(seen["code"], "local_process_membership_required", "{seen}");
    }

    /// A Herdr link keeps a pane map too. A pane it knows is rechecked with
    /// no Herdr read, and when Herdr says the pane closed the map forgets
    /// it at once. Here the pane's shell (a real one, with a terminal, from
    /// a tmux pane the fixture names as its Herdr pane) lives on, so only
    /// the event can refuse. (Mutation check: ignoring Herdr's events
    /// admits the closed pane.)
    #[tokio::test(flavor = "multi_thread")]
    async fn a_herdr_pane_that_closed_is_forgotten_from_herdrs_event() {
        let stack = Stack::start().await.expect("stack");
        stack.connect_stdio("time", &["mcp-server-time"], &[]);
        let tmux = TmuxServer::start("work");
        let out = stack.state.path().join("herdr-each");
        let (_, made) = each_pane(&stack, &tmux, &out, (false, true), "TMUX_PANE=w1:p1");
        let mut herdr =
            clankie_tests::HerdrFixture::start(&format!(r#"{{"w1:p1": {made}}}"#), None).await;
        let socket = herdr.socket.display().to_string();
        stack.clankie_ok(&["fleet", "link", "--herdr", "--socket", &socket]);
        // The client's first ask may come before the link: it is refused,
        // and its next one is proven in full.
        ask(&out, 0).await;
        assert_eq!(ask(&out, 1).await["status"], 200, "proven");
        let next = until_the_map_answers(&stack, &out, 2).await;

        clankie_panes::Herdr::new(herdr.socket.clone())
            .request("pane.close", serde_json::json!({ "pane_id": "w1:p1" }))
            .await
            .expect("closed in Herdr");
        let seen = ask(&out, next).await;
        assert_eq!(seen["status"], 403, "{seen}");
        assert_eq!(seen["code"], "local_process_membership_required", "{seen}");
        let found = herdr.stop();
        assert!(found.is_empty(), "schema violations: {found:?}");
    }

    /// Waits for a pid written to `path`.
    async fn pid_file(path: &std::path::Path) -> i32 {
        clankie_tests::eventually(Duration::from_secs(30), async || {
            std::fs::read_to_string(path).ok()?.trim().parse().ok()
        })
        .await
        .unwrap_or_else(|| panic!("no pid in {}", path.display()))
    }

    /// A new pane running an interactive shell (job control on); returns
    /// the pane id and the shell's pid.
    fn shell_pane(tmux: &TmuxServer) -> (String, i32) {
        let out = tmux.run(&[
            "split-window",
            "-t",
            "work",
            "-P",
            "-F",
            "#{pane_id} #{pane_pid}",
            "exec bash --norc --noprofile -i",
        ]);
        let (pane, pid) = out.split_once(' ').expect("pane and pid");
        (pane.to_string(), pid.parse().expect("pid"))
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_seat_names_the_foreground_agent_whose_child_holds_the_socket() {
        let (stack, tmux) = linked_stack().await;
        let dir = tempfile::tempdir().expect("dir");
        // `python peer_seat.py CLANKIE DIR NAME`: a real MCP client of the bridge.
        let seat_client = |name: &str| {
            format!(
                "{} {} {} {} {name}",
                python().display(),
                repo_root().join("tests/clients/peer_seat.py").display(),
                bin_dir().join("clankie").display(),
                dir.path().display()
            )
        };

        // The agent runs in the shell's foreground and starts a real MCP
        // client (and through it the bridge), as an agent starts its bridge.
        let (pane, _shell) = shell_pane(&tmux);
        let child_file = dir.path().join("agent-child.pid");
        let agent_cmd = format!(
            "{} {} {} {} --model test -- {}",
            client_env(&stack),
            python().display(),
            repo_root().join("tests/clients/seat_agent.py").display(),
            child_file.display(),
            seat_client("a")
        );
        tmux.run(&["send-keys", "-t", &pane, &agent_cmd, "Enter"]);
        let child = pid_file(&child_file).await;
        let seat = wait_file(&dir.path().join("a.seat"), Duration::from_secs(60))
            .await
            .expect("the agent's client became a seat");
        assert_eq!(seat["paneId"], pane.as_str(), "{seat}");
        let agent = seat["binding"]["agentPid"].as_i64().unwrap_or(0) as i32;
        assert_eq!(
            agent,
            clankie_tests::ppid(child),
            "the client's parent: {seat}"
        );
        let exe = seat["binding"]["agentExecutable"].as_str().unwrap_or("");
        assert!(
            std::path::Path::new(exe)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python")),
            "{seat}"
        );

        // A background process of another pane's shell is in a linked pane,
        // but not under that pane's foreground agent: a member, not a seat.
        let (pane2, _) = shell_pane(&tmux);
        let bg = format!("{} {} &", client_env(&stack), seat_client("b"));
        tmux.run(&["send-keys", "-t", &pane2, &bg, "Enter"]);
        tmux.run(&["send-keys", "-t", &pane2, "sleep 301", "Enter"]);
        let counted = clankie_tests::eventually(Duration::from_secs(30), async || {
            let status = fleet_status(&stack);
            let refusals = &status["localProofs"]["refusals"]["foreground_mismatch"];
            (refusals.as_u64().unwrap_or(0) >= 1).then_some(())
        })
        .await;
        assert!(counted.is_some(), "no foreground_mismatch refusal counted");
        let refused = wait_file(&dir.path().join("b.last"), Duration::from_secs(10))
            .await
            .expect("the background process was refused a seat");
        assert_eq!(refused["isError"], true, "{refused}");
        assert!(
            !dir.path().join("b.seat").exists(),
            "the background process has no seat"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn another_uid_in_a_linked_pane_cannot_reach_the_local_socket() {
        let (stack, tmux) = linked_stack().await;
        let out_dir = tempfile::tempdir().expect("dir");
        std::fs::set_permissions(
            out_dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .expect("chmod");
        let out = out_dir.path().join("nobody.txt");
        let socket = stack.state.path().join("run/fleet/mcp.sock");
        let probe = format!(
            "import socket; s = socket.socket(socket.AF_UNIX); r = 'connected'\ntry:\n    s.connect('{}')\nexcept OSError as e:\n    r = type(e).__name__\nopen('{}', 'w').write(r)",
            socket.display(),
            out.display()
        );
        let script = out_dir.path().join("probe.py");
        std::fs::write(&script, probe).expect("script");
        tmux.run(&[
            "split-window",
            "-t",
            "work",
            &format!(
                "exec setpriv --reuid=65534 --regid=65534 --clear-groups {} {}",
                python().display(),
                script.display()
            ),
        ]);
        // The probe creates the file before it writes: wait for the word.
        let seen = clankie_tests::eventually(Duration::from_secs(30), async || {
            std::fs::read_to_string(&out).ok().filter(|s| !s.is_empty())
        })
        .await
        .unwrap_or_default();
        assert_eq!(
            seen, "PermissionError",
            "another uid is stopped by the folder"
        );
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(stack.state.path().join("run"))
                .expect("run dir")
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn two_hundred_connections_at_once_are_refused_cleanly_and_nothing_is_forwarded() {
        // Few may wait at once, so the burst is partly turned away (503)
        // and its clients retry after the wait the answer names.
        let stack = Stack::start_with(clankie_tests::StackOptions {
            env: vec![("CLANKIE_MAX_WAITING".into(), "8".into())],
            ..Default::default()
        })
        .await
        .expect("stack");
        stack.connect_stdio("time", &["mcp-server-time"], &[]);
        let tmux = TmuxServer::start("work");
        let socket = tmux.socket.display().to_string();
        stack.clankie_ok(&["fleet", "link", "--tmux", &socket, "--session", "work"]);
        let path = stack.state.path().join("run/fleet/mcp.sock");
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"burst","version":"0"}}}"#;
        // One exchange: the status and the Retry-After seconds, if any.
        let exchange = move |path: std::path::PathBuf| async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::UnixStream::connect(&path).await.ok()?;
            let req = format!(
                "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(req.as_bytes()).await.ok()?;
            let mut out = Vec::new();
            s.read_to_end(&mut out).await.ok()?;
            let text = String::from_utf8_lossy(&out).to_string();
            let status = text.split_whitespace().nth(1)?.parse::<u16>().ok()?;
            let wait = text
                .lines()
                .find_map(|l| l.strip_prefix("Retry-After: "))
                .and_then(|v| v.trim().parse::<u64>().ok());
            Some((status, wait))
        };
        let mut tasks = Vec::new();
        for _ in 0..200 {
            let path = path.clone();
            tasks.push(tokio::spawn(async move {
                let (first, wait) = exchange(path.clone()).await?;
                // A 503 names its wait; the client asks once more after it.
                let last = match (first, wait) {
                    (503, Some(secs)) => {
                        tokio::time::sleep(Duration::from_secs(secs)).await;
                        exchange(path).await.map(|(s, _)| s)
                    }
                    _ => None,
                };
                Some((first, last))
            }));
        }
        let all = tokio::time::timeout(Duration::from_secs(90), async {
            let mut codes = Vec::new();
            for t in tasks {
                codes.push(t.await.expect("join"));
            }
            codes
        })
        .await
        .expect("no hang");
        let firsts: Vec<u16> = all.iter().flatten().map(|(f, _)| *f).collect();
        let forbidden = firsts.iter().filter(|c| **c == 403).count();
        let unavailable = firsts.iter().filter(|c| **c == 503).count();
        let answered_on_retry = all
            .iter()
            .flatten()
            .filter(|(f, l)| *f == 503 && *l == Some(403))
            .count();
        eprintln!(
            "burst: {forbidden} x 403, {unavailable} x 503, {answered_on_retry} answered on retry"
        );
        assert_eq!(forbidden + unavailable, 200, "{all:?}");
        assert!(
            unavailable >= 1,
            "the burst was partly turned away: {all:?}"
        );
        assert!(
            answered_on_retry >= 1,
            "a turned-away client was answered after the named wait: {all:?}"
        );
        assert!(
            file_lines(&stack.state.path().join("audit/connected-calls.jsonl")).is_empty(),
            "nothing was forwarded"
        );
    }
}
