//! `clankie-bench grants`: a direct grant tool call through the gateway and
//! mcp-host (receipts on), beside the same server-everything tool called
//! directly, interleaved in one run; and the latency of issuing and revoking
//! a grant beside a bare owner RPC (listing grants) on the same socket.

use std::sync::Arc;
use std::time::Instant;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::grpc::Meta;
use clankie_runtime::paths::StatePaths;
use clankie_tests::{Stack, peer_path};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::{line, summarize, us};

type Client = Arc<rmcp::service::RunningService<rmcp::RoleClient, ()>>;

async fn echo(client: &Client) -> anyhow::Result<()> {
    let mut p = CallToolRequestParams::new("echo");
    p.arguments = json!({"message": "bench"}).as_object().cloned();
    let r = client.call_tool(p).await?;
    anyhow::ensure!(r.is_error != Some(true), "echo failed: {r:?}");
    Ok(())
}

fn ratio(name: &str, base: &crate::Summary, measured: &crate::Summary) {
    println!(
        "  {name}: p50 x{:.2}, p99 x{:.2}",
        us(measured.p50) / us(base.p50).max(1e-9),
        us(measured.p99) / us(base.p99).max(1e-9)
    );
}

pub async fn bench_grants(rounds: usize) -> anyhow::Result<()> {
    println!(
        "== direct grant tool (gateway + mcp-host, receipts on) vs direct server-everything =="
    );
    let stack = Stack::start().await?;
    stack.connect_stdio("everything", &["mcp-server-everything", "stdio"], &[]);
    let paths = StatePaths::new(stack.state.path());
    let owner = clankie_runtime::owner::read_owner_token(&paths.owner_credential())?;
    let mut host = clankie_runtime::clients::mcp_host(&paths, Meta::owner(&owner));
    let ask = || mcphost_pb::IssueGrantRequest {
        principal_id: "bench".into(),
        work_id: String::new(),
        server: "everything".into(),
        tools: vec![mcphost_pb::GrantTool {
            name: "echo".into(),
            ..Default::default()
        }],
        ttl_seconds: 900,
    };
    // The account verifies in the background after connect.
    let mut issued = None;
    for _ in 0..300 {
        if let Ok(r) = host.issue_grant(ask()).await {
            issued = Some(r.into_inner());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let issued = issued.ok_or_else(|| anyhow::anyhow!("the grant was never issued"))?;
    let granted = Arc::new(stack.client(&issued.bearer).await?);

    let mut cmd = tokio::process::Command::new("mcp-server-everything");
    cmd.arg("stdio").env("PATH", peer_path());
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let direct: Client = Arc::new(().serve(transport).await?);

    for _ in 0..50 {
        echo(&direct).await?;
        echo(&granted).await?;
    }
    let (mut d, mut g) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let t = Instant::now();
        echo(&direct).await?;
        d.push(t.elapsed());
        let t = Instant::now();
        echo(&granted).await?;
        g.push(t.elapsed());
    }
    let (ds, gs) = (summarize(d), summarize(g));
    line("direct echo", &ds);
    line("grant echo through the gateway", &gs);
    ratio("grant call / direct", &ds, &gs);

    println!("== grant issue and revoke vs a bare owner RPC (ListGrants) ==");
    let n = (rounds / 10).max(20);
    let (mut list, mut issue, mut revoke) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        host.list_grants(mcphost_pb::ListGrantsRequest {}).await?;
        list.push(t.elapsed());
        let t = Instant::now();
        let g = host.issue_grant(ask()).await?.into_inner();
        issue.push(t.elapsed());
        let t = Instant::now();
        host.revoke_grant(mcphost_pb::RevokeGrantRequest {
            grant_id: g.grant.map(|g| g.grant_id).unwrap_or_default(),
        })
        .await?;
        revoke.push(t.elapsed());
    }
    let (ls, is, rs) = (summarize(list), summarize(issue), summarize(revoke));
    line("ListGrants (baseline)", &ls);
    line("IssueGrant (durable)", &is);
    line("RevokeGrant (durable)", &rs);
    ratio("issue / list", &ls, &is);
    ratio("revoke / list", &ls, &rs);
    drop(stack);
    Ok(())
}
