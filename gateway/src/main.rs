//! `clankie-gateway`: the HTTP and MCP front door.

use std::time::Duration;

use clankie_gateway::Listening;
use clankie_runtime::Service;
use clankie_runtime::main_kit::{self, CommonArgs};
use clap::Parser;

/// Serves MCP over streamable HTTP for fleet members, plus /healthz and /readyz.
#[derive(Parser)]
#[command(version)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "CLANKIE_GATEWAY_ADDR", default_value = clankie_gateway::DEFAULT_ADDR)]
    listen: std::net::SocketAddr,
    /// Loopback address of the local TCP listener, for pane clients that
    /// cannot speak to a Unix socket (port 0 picks a free port).
    #[arg(
        long,
        env = "CLANKIE_GATEWAY_LOCAL_ADDR",
        default_value = "127.0.0.1:0"
    )]
    local_listen: std::net::SocketAddr,
    /// Address of the relay listener (TLS) where remote machines of the
    /// fleet connect; off when unset.
    #[arg(long, env = "CLANKIE_RELAY_ADDR")]
    relay_listen: Option<std::net::SocketAddr>,
    /// Extra Host names accepted besides loopback (for remote bearer links).
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// Total budget of one request in milliseconds (at most 30000).
    #[arg(long, env = "CLANKIE_REQUEST_BUDGET_MS", default_value_t = 30_000)]
    request_budget_ms: u64,
    /// Most MCP sessions open at once on one listener.
    #[arg(long, env = "CLANKIE_MAX_SESSIONS", default_value_t = clankie_gateway::SessionCaps::default().total)]
    max_sessions: usize,
    /// Most MCP sessions one principal (a pane or a bearer link) may hold.
    #[arg(long, env = "CLANKIE_MAX_SESSIONS_PER_PRINCIPAL", default_value_t = clankie_gateway::SessionCaps::default().per_principal)]
    max_sessions_per_principal: usize,
    /// Milliseconds a connection has to send a complete request head.
    #[arg(long, env = "CLANKIE_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// Most connections one listener holds.
    #[arg(long, env = "CLANKIE_MAX_CONNECTIONS", default_value_t = clankie_gateway::ConnLimits::default().max_conns)]
    max_connections: usize,
    /// Most connections one listener holds that have not sent a request yet
    /// (past it, the oldest such connection is closed).
    #[arg(long, env = "CLANKIE_MAX_WAITING", default_value_t = clankie_gateway::ConnLimits::default().max_waiting)]
    max_waiting: usize,
    /// Most connections one peer holds: one address on a TCP listener, one
    /// process on the Unix socket.
    #[arg(long, env = "CLANKIE_MAX_CONNECTIONS_PER_PEER", default_value_t = clankie_gateway::ConnLimits::default().max_per_peer)]
    max_connections_per_peer: usize,
    /// Most connections one admitted member (pane, bearer link, grant)
    /// holds proven.
    #[arg(long, env = "CLANKIE_MAX_CONNECTIONS_PER_MEMBER", default_value_t = clankie_gateway::ConnLimits::default().max_per_member)]
    max_connections_per_member: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let options = |paths| clankie_gateway::Options {
        paths,
        allowed_hosts: args.allowed_hosts.clone(),
        request_budget: Duration::from_millis(args.request_budget_ms),
        session_caps: clankie_gateway::SessionCaps {
            total: args.max_sessions,
            per_principal: args.max_sessions_per_principal,
        },
    };
    let at = clankie_gateway::Addresses {
        listen: args.listen,
        local_listen: args.local_listen,
        // Taken before any thread starts.
        passed: clankie_gateway::Passed::from_env()?,
        relay: args.relay_listen,
    };
    let limits = clankie_gateway::ConnLimits {
        header_timeout: Duration::from_millis(args.header_timeout_ms),
        max_conns: args.max_connections,
        max_waiting: args.max_waiting,
        max_per_peer: args.max_connections_per_peer,
        max_per_member: args.max_connections_per_member,
    };
    raise_descriptor_limit();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(main_kit::run(
            Service::Gateway,
            &args.common,
            |paths, shutdown| Listening::bind(options(paths), at, limits, shutdown),
        ))
}

/// The connection and session caps allow thousands of connections (a
/// thousand seats each hold one parked poll), past a soft descriptor limit
/// that is often 1,024. The hard limit is the operator's; the soft one is
/// raised to it, as most servers do at start.
fn raise_descriptor_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    if let (Some(current), Some(maximum)) = (now.current, now.maximum)
        && current < maximum
    {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(maximum),
                maximum: Some(maximum),
            },
        );
    }
}
