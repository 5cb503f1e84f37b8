//! The life of a service process, shared by every `services/*/src/main.rs`:
//! telemetry, the state folder, the signal-driven shutdown, serving the
//! service's routes on its socket with health and reflection, and the
//! close once the drain is over. A main only parses its own options and
//! builds its service.

use std::future::Future;
use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crate::paths::StatePaths;
use crate::readiness::Readiness;
use crate::service::Service;
use crate::{grpc, shutdown, telemetry};

/// The options every service takes.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// State directory (default: $CLANKIE_STATE or ~/.clankie).
    #[arg(long, env = "CLANKIE_STATE")]
    pub state: Option<PathBuf>,
}

impl CommonArgs {
    /// The state folder these options name.
    pub fn paths(&self) -> StatePaths {
        self.state
            .clone()
            .map(StatePaths::new)
            .unwrap_or_else(StatePaths::from_env)
    }
}

/// The options of a service that takes only the common ones.
#[derive(clap::Parser, Debug)]
#[command(version)]
struct OnlyCommon {
    #[command(flatten)]
    common: CommonArgs,
}

/// The whole `main` of a service that takes only the common options:
/// parses them (with `about` as its help), then [`run`]s the service on a
/// multi-threaded runtime.
pub fn main<S, F, Fut>(service: Service, about: &'static str, build: F) -> anyhow::Result<()>
where
    S: Served,
    F: FnOnce(StatePaths, CancellationToken) -> Fut,
    Fut: Future<Output = anyhow::Result<S>>,
{
    use clap::{CommandFactory, FromArgMatches};
    let matches = OnlyCommon::command()
        .name(service.binary())
        .about(about)
        .get_matches();
    let args = OnlyCommon::from_arg_matches(&matches)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(service, &args.common, build))
}

/// What a built service gives the shared main.
pub trait Served: Send + 'static {
    /// Its tonic routes.
    fn routes(&self) -> tonic::service::Routes;
    /// Its readiness check.
    fn readiness(&self) -> Readiness;
    /// Serves whatever the service offers beside its gRPC socket (the
    /// gateway's HTTP listeners) until `shutdown`; an error stops the
    /// whole process.
    fn serve_beside(
        &self,
        shutdown: CancellationToken,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        let _ = shutdown;
        async { Ok(()) }
    }
    /// Runs once serving has stopped and in-flight calls have drained.
    fn close(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        async {}
    }
}

/// Runs `service` until a signal: `build` gets the state folder and the
/// shutdown token, and its result is served on the service's socket.
pub async fn run<S, F, Fut>(service: Service, common: &CommonArgs, build: F) -> anyhow::Result<()>
where
    S: Served,
    F: FnOnce(StatePaths, CancellationToken) -> Fut,
    Fut: Future<Output = anyhow::Result<S>>,
{
    crate::state::private_umask();
    telemetry::init(service.name());
    let paths = common.paths();
    let shutdown = shutdown::on_signals();
    let served = build(paths.clone(), shutdown.clone()).await?;
    let grpc = grpc::serve_service(
        &paths,
        service,
        served.routes(),
        served.readiness(),
        shutdown.clone(),
    );
    let beside = async {
        let r = served.serve_beside(shutdown.clone()).await;
        // A listener beside failing stops the gRPC side too.
        if r.is_err() {
            shutdown.cancel();
        }
        r
    };
    let (result, beside) = tokio::join!(grpc, beside);
    let result = result.and(beside);
    shutdown.cancel();
    served.close().await;
    telemetry::shutdown();
    result
}
