//! The gateway's HTTP intake: any bytes on a connection to the real router
//! (with no services behind it) get answers or a close, never a panic or a
//! hang.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt as _;

struct World {
    rt: tokio::runtime::Runtime,
    router: axum::Router,
    _state: tempfile::TempDir,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let state = tempfile::tempdir().expect("state");
        let router = rt.block_on(async {
            let shutdown = tokio_util::sync::CancellationToken::new();
            let gateway = clankie_gateway::Options {
                paths: clankie_runtime::paths::StatePaths::new(state.path().to_path_buf()),
                allowed_hosts: Vec::new(),
                request_budget: Duration::from_millis(200),
                session_caps: Default::default(),
            }
            .build(shutdown.clone());
            gateway.router(shutdown)
        });
        World {
            rt,
            router,
            _state: state,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    w.rt.block_on(async {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let service = w
            .router
            .clone()
            .map_request(|r: http::Request<hyper::body::Incoming>| r.map(axum::body::Body::new));
        let conn = hyper::server::conn::http1::Builder::new().serve_connection(
            hyper_util::rt::TokioIo::new(server),
            hyper_util::service::TowerToHyperService::new(service),
        );
        let served = tokio::spawn(conn);
        let _ = client.write_all(data).await;
        let _ = client.shutdown().await;
        let mut out = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut out)).await;
        assert!(read.is_ok(), "the gateway answered or closed");
        served.abort();
    });
});
