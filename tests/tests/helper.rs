//! The census helper, real and deliberately broken, behind the admission
//! service's queue.

use std::time::{Duration, Instant};

use clankie_admission::helper::{Failure, HelperClient, MAX_QUEUE};
use clankie_proto::helper::v1 as helper_pb;
use clankie_tests::{bin_dir, file_lines, python, repo_root};
use tokio_util::sync::CancellationToken;

fn real() -> Vec<String> {
    vec![bin_dir().join("clankie-helper").display().to_string()]
}

fn fake(args: &[&str]) -> Vec<String> {
    let mut v = vec![
        python().display().to_string(),
        repo_root()
            .join("tests/peers/fake_helper.py")
            .display()
            .to_string(),
    ];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

fn ping() -> helper_pb::request::Job {
    helper_pb::request::Job::Ping(helper_pb::Ping {})
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_helper_observes_processes_and_socket_holders() {
    let client = HelperClient::start(real(), CancellationToken::new());
    let reply = client.run(ping()).await.expect("ping");
    assert!(matches!(
        reply.result,
        Some(helper_pb::reply::Result::Pong(_))
    ));

    let me = std::process::id() as i32;
    let reply = client
        .run(helper_pb::request::Job::Observe(
            helper_pb::ObserveProcesses {
                pids: vec![me],
                with_ancestry: true,
                identity_only: false,
            },
        ))
        .await
        .expect("observe");
    let Some(helper_pb::reply::Result::Observation(obs)) = reply.result else {
        panic!("observation expected: {reply:?}");
    };
    assert_eq!(obs.processes[0].pid, me);
    assert!(obs.processes[0].pidfs_id > 0);
    assert!(!obs.processes[0].executable.is_empty());
    assert!(obs.processes.len() >= 2, "the ancestry reaches init");
    assert_eq!(obs.processes.last().map(|p| p.ppid), Some(0));

    let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
    let inode = {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/proc/self/fd/{}", a.as_raw_fd()))
            .expect("fd")
            .ino()
    };
    let reply = client
        .run(helper_pb::request::Job::SocketHolders(
            helper_pb::FindSocketHolders { inode, uid: None },
        ))
        .await
        .expect("census");
    let Some(helper_pb::reply::Result::Holders(h)) = reply.result else {
        panic!("holders expected: {reply:?}");
    };
    assert_eq!(h.pids, vec![me]);
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_and_wrong_ids_refuse_and_a_later_request_starts_a_fresh_helper() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("starts");
    let mut cmd = fake(&["garbage"]);
    cmd.insert(0, "env".into());
    cmd.insert(1, format!("FAKE_HELPER_LOG={}", log.display()));
    let client = HelperClient::start(cmd, CancellationToken::new());
    assert_eq!(client.run(ping()).await.err(), Some(Failure::Malformed));
    assert_eq!(client.run(ping()).await.err(), Some(Failure::Malformed));
    assert_eq!(
        file_lines(&log).len(),
        2,
        "each failure closes the helper; the next job starts one"
    );

    let client = HelperClient::start(fake(&["wrong-id"]), CancellationToken::new());
    assert_eq!(client.run(ping()).await.err(), Some(Failure::Malformed));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_helper_killed_mid_job_refuses_then_a_fresh_helper_serves() {
    let dir = tempfile::tempdir().expect("tmp");
    let marker = dir.path().join("second");
    // The first helper never answers (to be killed); the next is the real one.
    let script = format!(
        "if [ -e {m} ]; then exec {real}; else touch {m}; exec sleep 30; fi",
        m = marker.display(),
        real = real()[0]
    );
    let client = HelperClient::start(
        vec!["sh".into(), "-c".into(), script],
        CancellationToken::new(),
    );
    let job = tokio::spawn({
        let client = client.clone();
        async move { client.run(ping()).await }
    });
    // Find the silent helper and kill it.
    let mut killed = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let me = std::process::id() as i32;
        // Only once `sh` has become `sleep 30` (argv "sleep\030"), so the
        // marker exists and the next start runs the real helper.
        for pid in clankie_tests::Stack::children_matching(me, "sleep\u{0}30") {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            killed = true;
        }
        if killed {
            break;
        }
    }
    assert!(killed);
    let started = Instant::now();
    assert_eq!(job.await.expect("join").err(), Some(Failure::Exited));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "exit is noticed at once"
    );
    let reply = client.run(ping()).await.expect("fresh helper");
    assert!(matches!(
        reply.result,
        Some(helper_pb::reply::Result::Pong(_))
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_queue_is_bounded_and_cancelling_removes_only_that_job() {
    // A helper that never answers keeps the first job active for its 10 s.
    let client = HelperClient::start(fake(&["silent"]), CancellationToken::new());
    let mut jobs = Vec::new();
    let c = client.clone();
    jobs.push(tokio::spawn(async move { c.run(ping()).await }));
    // Wait until the first job is active (taken from the queue).
    let started = Instant::now();
    while client.taken() < 1 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the first job never became active"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..(MAX_QUEUE + 39) {
        let c = client.clone();
        jobs.push(tokio::spawn(async move { c.run(ping()).await }));
    }
    // Refusals are immediate; wait for them to be reported.
    let started = Instant::now();
    while jobs.iter().filter(|j| j.is_finished()).count() < 39 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "refusals were not immediate"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(client.queued(), MAX_QUEUE);
    let mut full = 0;
    let mut waiting = Vec::new();
    for j in jobs {
        if j.is_finished() {
            assert_eq!(j.await.expect("join").err(), Some(Failure::QueueFull));
            full += 1;
        } else {
            waiting.push(j);
        }
    }
    assert_eq!(full, 39, "one active, 128 queued, the rest refused");
    // Cancel one queued job: only it leaves the queue.
    waiting.pop().expect("a queued job").abort();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(client.queued(), MAX_QUEUE - 1);
    for j in waiting {
        j.abort();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_active_job_is_drained_before_the_next_job() {
    let client = HelperClient::start(fake(&["delay", "0.3"]), CancellationToken::new());
    client.run(ping()).await.expect("warm up");
    let active = tokio::spawn({
        let c = client.clone();
        async move { c.run(ping()).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    active.abort();
    // The next job gets its own reply (matching id), not the cancelled one's.
    let reply = client.run(ping()).await.expect("next job");
    assert!(matches!(
        reply.result,
        Some(helper_pb::reply::Result::Pong(_))
    ));
}

fn observe(pids: Vec<i32>) -> helper_pb::request::Job {
    helper_pb::request::Job::Observe(helper_pb::ObserveProcesses {
        pids,
        with_ancestry: false,
        identity_only: false,
    })
}

/// The helper process this test's client started.
fn helper_pid() -> i32 {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            clankie_tests::ppid(*pid) == me
                && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "clankie-helper")
        })
        .expect("the helper")
}

/// Plain observations queued together are one exchange with the real
/// helper, and each job hears exactly its own processes, as they are now.
#[tokio::test(flavor = "multi_thread")]
async fn observations_queued_together_are_one_exchange_and_each_gets_its_own_facts() {
    let client = HelperClient::start(real(), CancellationToken::new());
    client.run(ping()).await.expect("warm up");
    let mut children: Vec<std::process::Child> = (0..10)
        .map(|_| {
            std::process::Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("sleep")
        })
        .collect();
    // One of them is gone before anything is asked.
    let mut gone = children.pop().expect("a child");
    let gone_pid = gone.id() as i32;
    gone.kill().expect("kill");
    gone.wait().expect("reap");
    let pids: Vec<i32> = children.iter().map(|c| c.id() as i32).collect();

    // The helper stopped: the first job waits for its answer, the rest
    // queue behind it; then it goes on.
    let helper = nix::unistd::Pid::from_raw(helper_pid());
    clankie_tests::pause(helper.as_raw());
    let before = client.exchanges();
    let first = {
        let c = client.clone();
        let pid = pids[0];
        tokio::spawn(async move { c.run(observe(vec![pid])).await })
    };
    while client.taken() < 2 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut jobs = Vec::new();
    for (i, pid) in pids.iter().enumerate().skip(1) {
        let c = client.clone();
        // Each job names its own child, the one before it, and the gone one.
        let mine = vec![*pid, pids[i - 1], gone_pid];
        jobs.push((
            mine.clone(),
            tokio::spawn(async move { c.run(observe(mine)).await }),
        ));
    }
    while client.queued() < jobs.len() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    nix::sys::signal::kill(helper, nix::sys::signal::Signal::SIGCONT).expect("continue");

    let reply = first.await.expect("join").expect("first");
    let Some(helper_pb::reply::Result::Observation(o)) = reply.result else {
        panic!("{reply:?}");
    };
    assert_eq!(o.processes.len(), 1);
    for (mine, job) in jobs {
        let reply = job.await.expect("join").expect("observed");
        let Some(helper_pb::reply::Result::Observation(o)) = reply.result else {
            panic!("{reply:?}");
        };
        let got: Vec<i32> = o.processes.iter().map(|f| f.pid).collect();
        assert_eq!(got, mine, "its own processes, in its order");
        for f in &o.processes {
            assert_eq!(f.exited, f.pid == gone_pid, "{f:?}");
            if !f.exited {
                assert!(f.pidfs_id > 0 && f.start_time > 0, "{f:?}");
            }
        }
    }
    assert_eq!(
        client.exchanges() - before,
        2,
        "the first job's own exchange, then one for the nine behind it"
    );

    // With ancestry: each job hears its processes and their parents up to
    // init, exactly as a job of its own hears them, though the chains meet.
    let ancestry = |pids: Vec<i32>| {
        helper_pb::request::Job::Observe(helper_pb::ObserveProcesses {
            pids,
            with_ancestry: true,
            identity_only: false,
        })
    };
    let chain = |r: helper_pb::Reply| match r.result {
        Some(helper_pb::reply::Result::Observation(o)) => o
            .processes
            .iter()
            .map(|f| (f.pid, f.ppid, f.pidfs_id, f.exited))
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    clankie_tests::pause(helper.as_raw());
    let before = client.exchanges();
    let taken = client.taken();
    let first = {
        let c = client.clone();
        let pid = pids[0];
        tokio::spawn(async move { c.run(ancestry(vec![pid])).await })
    };
    while client.taken() < taken + 1 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut jobs = Vec::new();
    for (i, pid) in pids.iter().enumerate().skip(1) {
        let c = client.clone();
        let mine = vec![*pid, pids[i - 1]];
        let job = ancestry(mine.clone());
        jobs.push((mine, tokio::spawn(async move { c.run(job).await })));
    }
    while client.queued() < jobs.len() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    nix::sys::signal::kill(helper, nix::sys::signal::Signal::SIGCONT).expect("continue");
    first.await.expect("join").expect("first");
    let mut merged = Vec::new();
    for (mine, job) in jobs {
        merged.push((mine, chain(job.await.expect("join").expect("observed"))));
    }
    assert_eq!(client.exchanges() - before, 2, "merged with ancestry too");
    for (mine, got) in merged {
        let alone = chain(client.run(ancestry(mine.clone())).await.expect("alone"));
        assert_eq!(got, alone, "{mine:?}");
        assert!(got.iter().any(|f| f.1 == 0), "up to init: {got:?}");
    }
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// A merged observation the helper does not answer as one (this fake
/// answers every request with a pong) is run again job by job: each job
/// still gets the helper's answer to itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_merged_observation_refused_as_a_whole_runs_job_by_job() {
    let client = HelperClient::start(fake(&["delay", "0.3"]), CancellationToken::new());
    client.run(ping()).await.expect("warm up");
    let before = client.exchanges();
    let active = {
        let c = client.clone();
        tokio::spawn(async move { c.run(ping()).await })
    };
    while client.exchanges() == before {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let jobs: Vec<_> = (1..=4)
        .map(|pid| {
            let c = client.clone();
            tokio::spawn(async move { c.run(observe(vec![pid])).await })
        })
        .collect();
    active.await.expect("join").expect("ping");
    for job in jobs {
        let reply = job.await.expect("join").expect("answered");
        assert!(
            matches!(reply.result, Some(helper_pb::reply::Result::Pong(_))),
            "{reply:?}"
        );
    }
    // The ping, one merged try, then each of the four on its own.
    assert_eq!(client.exchanges() - before, 6);
}

/// The queue's 128 counts helper requests: a burst of alike observations
/// behind an active exchange holds one slot per merged group, so it is not
/// refused, and the slots left are exactly what other jobs may still take.
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_alike_observations_holds_one_queue_slot_per_merged_group() {
    let client = HelperClient::start(real(), CancellationToken::new());
    client.run(ping()).await.expect("warm up");
    let me = std::process::id() as i32;
    let helper = nix::unistd::Pid::from_raw(helper_pid());
    clankie_tests::pause(helper.as_raw());
    let before = client.exchanges();
    let first = {
        let c = client.clone();
        tokio::spawn(async move { c.run(observe(vec![me])).await })
    };
    while client.taken() < 2 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    const BURST: usize = 300;
    let observations: Vec<_> = (0..BURST)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.run(observe(vec![me])).await })
        })
        .collect();
    while client.queued() < BURST {
        assert!(
            !observations.iter().any(|j| j.is_finished()),
            "an observation of the burst was refused"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let groups = BURST.div_ceil(64);
    assert_eq!(client.depth(), groups as u64, "merged groups, not jobs");
    // Jobs that cannot merge take one slot each, up to the bound.
    let pings: Vec<_> = (0..MAX_QUEUE)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { c.run(ping()).await })
        })
        .collect();
    let room = MAX_QUEUE - groups;
    let started = Instant::now();
    while pings.iter().filter(|j| j.is_finished()).count() < MAX_QUEUE - room {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "refusals were not immediate"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(client.depth(), MAX_QUEUE as u64);
    nix::sys::signal::kill(helper, nix::sys::signal::Signal::SIGCONT).expect("continue");

    first.await.expect("join").expect("first");
    for job in observations {
        let reply = job.await.expect("join").expect("observed");
        let Some(helper_pb::reply::Result::Observation(o)) = reply.result else {
            panic!("{reply:?}");
        };
        let got: Vec<i32> = o.processes.iter().map(|f| f.pid).collect();
        assert_eq!(got, vec![me]);
    }
    let mut refused = 0;
    for job in pings {
        match job.await.expect("join") {
            Ok(_) => {}
            Err(Failure::QueueFull) => refused += 1,
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(refused, MAX_QUEUE - room, "only the pings past the bound");
    assert_eq!(
        client.exchanges() - before,
        (1 + groups + room) as u64,
        "the first, one per merged group, one per ping"
    );
}
