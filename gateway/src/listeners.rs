//! The gateway as a stack process: its three HTTP listeners bound (or taken
//! from a service manager, `activation.rs`) before anything is announced, the discovery file written once they are, and all
//! three served beside the gRPC health socket the shared main serves.

use std::net::SocketAddr;

use clankie_runtime::main_kit::Served;
use clankie_runtime::paths::StatePaths;
use clankie_runtime::readiness::Readiness;
use clankie_runtime::uds;
use tokio_util::sync::CancellationToken;

use crate::{ConnLimits, Gateway, Options};

/// Where the gateway listens.
pub struct Addresses {
    /// The bearer listener.
    pub listen: SocketAddr,
    /// The local loopback TCP listener; must be a loopback address.
    pub local_listen: SocketAddr,
    /// Listeners a service manager passed, served in place of binding.
    pub passed: crate::activation::Passed,
    /// The relay listener for remote machines (TLS), when this stack takes
    /// them.
    pub relay: Option<SocketAddr>,
}

/// A built gateway with its listeners bound.
pub struct Listening {
    gateway: Gateway,
    paths: StatePaths,
    limits: ConnLimits,
    tcp: parking_lot::Mutex<Option<tokio::net::TcpListener>>,
    local_tcp: parking_lot::Mutex<Option<tokio::net::TcpListener>>,
    local_unix: parking_lot::Mutex<Option<tokio::net::UnixListener>>,
    relay: parking_lot::Mutex<Option<crate::relay::Bound>>,
    /// Removes the local socket's file at the end, unless a service
    /// manager made it (and keeps it).
    _local_socket: Option<uds::SocketGuard>,
}

impl Listening {
    /// Binds the three listeners, builds the gateway and writes
    /// `run/fleet/gateway.json`.
    pub async fn bind(
        options: Options,
        mut at: Addresses,
        limits: ConnLimits,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Listening> {
        let paths = options.paths.clone();
        let tcp = match at.passed.take_bearer()? {
            Some(l) => l,
            None => tokio::net::TcpListener::bind(at.listen).await?,
        };
        let local_tcp = match at.passed.take_local_tcp()? {
            Some(l) => l,
            None => tokio::net::TcpListener::bind(at.local_listen).await?,
        };
        let local_addr = local_tcp.local_addr()?;
        if !local_addr.ip().is_loopback() {
            anyhow::bail!("the local TCP listener must be on a loopback address, not {local_addr}");
        }
        let local_socket = paths.local_mcp_socket();
        let (local_unix, guard) = match at.passed.take_local_unix()? {
            // Bridges find the socket at its path in the state folder.
            Some(l) => {
                let at = l.local_addr()?;
                if at.as_pathname() != Some(local_socket.as_path()) {
                    anyhow::bail!(
                        "the passed local-unix socket must be {} (ListenStream=), not {at:?}",
                        local_socket.display()
                    );
                }
                (l, None)
            }
            None => (
                uds::bind(&local_socket).await?,
                Some(uds::SocketGuard(local_socket)),
            ),
        };
        let relay = match at.relay {
            Some(at) => Some(crate::relay::Bound::bind(at, &paths.relay_identity()).await?),
            None => None,
        };
        let gateway = options.build(shutdown);
        let addr = tcp.local_addr()?;
        let relay_at = relay
            .as_ref()
            .map(crate::relay::Bound::discovery)
            .transpose()?;
        gateway.write_discovery(addr, local_addr, relay_at)?;
        tracing::info!(%addr, local = %local_addr, "gateway serving");
        Ok(Listening {
            gateway,
            paths,
            limits,
            tcp: parking_lot::Mutex::new(Some(tcp)),
            local_tcp: parking_lot::Mutex::new(Some(local_tcp)),
            local_unix: parking_lot::Mutex::new(Some(local_unix)),
            relay: parking_lot::Mutex::new(relay),
            _local_socket: guard,
        })
    }
}

impl Served for Listening {
    /// The gateway's gRPC socket serves health (and reflection) only.
    fn routes(&self) -> tonic::service::Routes {
        tonic::service::Routes::default()
    }

    fn readiness(&self) -> Readiness {
        Readiness::always()
    }

    async fn serve_beside(&self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let (Some(tcp), Some(local_tcp), Some(local_unix)) = (
            self.tcp.lock().take(),
            self.local_tcp.lock().take(),
            self.local_unix.lock().take(),
        ) else {
            anyhow::bail!("the gateway's listeners are already served");
        };
        let limits = self.limits;
        let relay = self.relay.lock().take();
        let shared = self.gateway.shared.clone();
        let relay = async {
            match relay {
                Some(r) => r.serve(shared, shutdown.clone()).await,
                None => Ok(()),
            }
        };
        let machine = crate::uplink::keep(
            self.paths.clone(),
            self.gateway.shared.relay_out.clone(),
            shutdown.clone(),
        );
        // The first listener to fail ends the others (and the process).
        tokio::try_join!(
            relay,
            machine,
            self.gateway.serve(tcp, limits, shutdown.clone()),
            self.gateway
                .serve_local(local_unix, limits, shutdown.clone()),
            self.gateway
                .serve_local_tcp(local_tcp, limits, shutdown.clone()),
        )?;
        Ok(())
    }

    async fn close(self) {
        let _ = std::fs::remove_file(self.paths.gateway_discovery());
    }
}
