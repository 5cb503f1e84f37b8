//! The accept-time caller check of an internal socket, beside a bare gRPC
//! round trip on the same kind of socket.
//!
//! Two servers in this process serve tonic-health on Unix sockets: one
//! through the stack's own listener (`clankie_runtime::grpc::serve`: the
//! peer classified at accept, the caller layer on every request, the owner
//! credential presented), one plain tonic with neither. Measured in one
//! interleaved loop:
//!
//! - the check alone: `StackRule::classify` of a freshly accepted
//!   connection (SO_PEERCRED, SO_PEERPIDFD, `/proc` stat, exe and cgroup,
//!   the pidfd poll);
//! - a health round trip on a warm connection, guarded and plain;
//! - a new connection and its first health call, guarded and plain.

use std::time::{Duration, Instant};

use clankie_runtime::grpc::{self, Meta};
use clankie_runtime::listener::{CallerLayer, StackRule};
use clankie_runtime::owner::OwnerCheck;
use tokio_util::sync::CancellationToken;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::{line, summarize, us};

const SERVICE: &str = "clankie.bench.v1.Bench";

async fn check(client: &mut HealthClient<grpc::Client>) -> anyhow::Result<()> {
    client
        .check(HealthCheckRequest {
            service: SERVICE.into(),
        })
        .await?;
    Ok(())
}

async fn plain_server(path: std::path::PathBuf, shutdown: CancellationToken) {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_service_status(SERVICE, tonic_health::ServingStatus::Serving)
        .await;
    let Ok(listener) = tokio::net::UnixListener::bind(&path) else {
        return;
    };
    let _ = tonic::transport::Server::builder()
        .add_service(health)
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::UnixListenerStream::new(listener),
            shutdown.cancelled(),
        )
        .await;
}

pub async fn bench_caller(rounds: usize) -> anyhow::Result<()> {
    println!("== internal socket: accept-time caller check vs a bare gRPC round trip ==");
    let dir = tempfile::Builder::new().prefix("ckb").tempdir_in("/tmp")?;
    let token = clankie_runtime::owner::random_token("clko");
    let shutdown = CancellationToken::new();
    let guarded = dir.path().join("guarded.sock");
    let plain = dir.path().join("plain.sock");
    let listener = tokio::net::UnixListener::bind(&guarded)?;
    let layer = CallerLayer::new("bench", Some(OwnerCheck::from_token(&token)));
    tokio::spawn(grpc::serve(
        listener,
        layer,
        SERVICE,
        None,
        clankie_runtime::readiness::Readiness::always(),
        shutdown.clone(),
    ));
    tokio::spawn(plain_server(plain.clone(), shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let raw = dir.path().join("raw.sock");
    let raw_listener = tokio::net::UnixListener::bind(&raw)?;
    let rule = StackRule::current();
    let mut warm_guarded = HealthClient::new(grpc::client(&guarded, Meta::owner(&token)));
    let mut warm_plain = HealthClient::new(grpc::client(&plain, Meta::default()));
    check(&mut warm_guarded).await?;
    check(&mut warm_plain).await?;

    let (mut classify, mut rt_g, mut rt_p, mut first_g, mut first_p) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (accepted, _client) =
            tokio::join!(raw_listener.accept(), tokio::net::UnixStream::connect(&raw));
        let (stream, _) = accepted?;
        let t = Instant::now();
        std::hint::black_box(rule.classify(&stream));
        classify.push(t.elapsed());

        let t = Instant::now();
        check(&mut warm_guarded).await?;
        rt_g.push(t.elapsed());
        let t = Instant::now();
        check(&mut warm_plain).await?;
        rt_p.push(t.elapsed());

        let t = Instant::now();
        check(&mut HealthClient::new(grpc::client(
            &guarded,
            Meta::owner(&token),
        )))
        .await?;
        first_g.push(t.elapsed());
        let t = Instant::now();
        check(&mut HealthClient::new(grpc::client(
            &plain,
            Meta::default(),
        )))
        .await?;
        first_p.push(t.elapsed());
    }
    shutdown.cancel();
    let (c, g, p, fg, fp) = (
        summarize(classify),
        summarize(rt_g),
        summarize(rt_p),
        summarize(first_g),
        summarize(first_p),
    );
    line("caller check (classify at accept)", &c);
    line("warm round trip, guarded", &g);
    line("warm round trip, plain tonic", &p);
    line("connect + first call, guarded", &fg);
    line("connect + first call, plain", &fp);
    println!(
        "  check / plain warm round trip: p50 x{:.2}, p99 x{:.2}",
        us(c.p50) / us(p.p50).max(1e-9),
        us(c.p99) / us(p.p99).max(1e-9)
    );
    println!(
        "  guarded / plain: warm p50 x{:.2}; connect + first call p50 x{:.2}, p99 x{:.2}",
        us(g.p50) / us(p.p50).max(1e-9),
        us(fg.p50) / us(fp.p50).max(1e-9),
        us(fg.p99) / us(fp.p99).max(1e-9)
    );
    Ok(())
}
