//! `clankie access`: manual grants. `issue` writes a new private grant file
//! (the bearer goes there and nowhere else), `list` and `revoke` keep the
//! book, `project` keeps legacy project-grant records (no bearer, no
//! authority), and `fleet` refuses: fleet access is the owner's switch.

use crate::support::exit::Exit;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::paths::StatePaths;
use clankie_types::host::GrantStanding;
use clap::Subcommand;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::support::clients::{self, refused};
use crate::support::discovery;
use crate::support::grant_file::{GrantFile, check_endpoint};
use crate::support::output::{field, print_json};

#[derive(Subcommand)]
pub enum AccessCommand {
    /// Issue a manual grant from a request file; writes a new private
    /// grant file and prints only its metadata.
    Issue {
        request: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// The MCP endpoint the worker reaches (default: the gateway's,
        /// from its discovery file). HTTPS, or HTTP on loopback.
        #[arg(long)]
        endpoint: Option<String>,
    },
    /// Every grant record (manual and retired), never a bearer.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a grant for good: its sessions close and its calls that have
    /// not dispatched are aborted.
    Revoke { grant_id: String },
    /// Keep a legacy project-grant record (inspection only).
    Project {
        name: String,
        server: String,
        #[arg(long = "tool")]
        tools: Vec<String>,
    },
    /// Fleet grants are retired: fleet access is `fleet set --tools`.
    Fleet,
    /// `access ACCOUNT` shows an account's recorded identity;
    /// `access ACCOUNT verify` reads it again from the provider.
    #[command(external_subcommand)]
    Account(Vec<String>),
}

/// A grant request file, as the seeds write it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Request {
    principal_id: String,
    #[serde(default)]
    work_id: String,
    server: String,
    tools: Vec<RequestTool>,
    ttl_seconds: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RequestTool {
    name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
    #[serde(default)]
    forbidden_arguments: Vec<String>,
}

fn grant_json(g: &mcphost_pb::Grant) -> Value {
    json!({
        "grantId": g.grant_id,
        "kind": g.kind,
        "standing": GrantStanding::wire_word(g.standing),
        "principalId": g.principal_id,
        "workId": g.work_id,
        "server": g.server,
        "project": (!g.project.is_empty()).then_some(&g.project),
        "tools": g.tools.iter().map(|t| json!({
            "name": t.name,
            "arguments": serde_json::from_str::<Value>(&t.arguments_json).ok(),
            "forbiddenArguments": t.forbidden_arguments,
        })).collect::<Vec<_>>(),
        "issuedAtMs": g.issued_at_ms,
        "expiresAtMs": g.expires_at_ms,
        "revokedAtMs": (g.revoked_at_ms > 0).then_some(g.revoked_at_ms),
        "invalidated": (!g.invalidated.is_empty()).then_some(&g.invalidated),
    })
}

fn read_request(path: &Path) -> anyhow::Result<mcphost_pb::IssueGrantRequest> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let r: Request = serde_json::from_slice(&bytes).context("the grant request is not valid")?;
    Ok(mcphost_pb::IssueGrantRequest {
        principal_id: r.principal_id,
        work_id: r.work_id,
        server: r.server,
        tools: r
            .tools
            .into_iter()
            .map(|t| mcphost_pb::GrantTool {
                name: t.name,
                arguments_json: if t.arguments.is_empty() {
                    String::new()
                } else {
                    Value::Object(t.arguments).to_string()
                },
                forbidden_arguments: t.forbidden_arguments,
            })
            .collect(),
        ttl_seconds: r.ttl_seconds,
    })
}

async fn issue(
    paths: &StatePaths,
    request: &Path,
    out: &Path,
    endpoint: Option<String>,
) -> anyhow::Result<ExitCode> {
    let ask = read_request(request)?;
    // Checked before anything is issued, so a bad path costs no grant.
    if out.symlink_metadata().is_ok() {
        bail!("{} exists; a grant file is always new", out.display());
    }
    let endpoint = match endpoint {
        Some(e) => e,
        None => discovery::read(paths)?.mcp,
    };
    check_endpoint(&endpoint)?;
    let mut host = clients::mcp_host(paths)?;
    let issued = host.issue_grant(ask).await.map_err(refused)?.into_inner();
    let grant = issued.grant.unwrap_or_default();
    let file = GrantFile {
        version: 1,
        grant_id: grant.grant_id.clone(),
        endpoint,
        bearer: issued.bearer,
        server: grant.server.clone(),
        tools: grant.tools.iter().map(|t| t.name.clone()).collect(),
        principal_id: grant.principal_id.clone(),
        expires_at_ms: grant.expires_at_ms,
    };
    if let Err(e) = file.create(out) {
        // Undelivered, so revoked: a bearer nobody holds must not live.
        let revoked = host
            .revoke_grant(mcphost_pb::RevokeGrantRequest {
                grant_id: grant.grant_id.clone(),
            })
            .await;
        let what = match revoked {
            Ok(_) => "the grant was revoked".to_string(),
            Err(s) => format!(
                "revocation UNCONFIRMED ({}); run `clankie access revoke {}`",
                refused(s),
                grant.grant_id
            ),
        };
        bail!("{e:#}; {what}");
    }
    print_json(&json!({ "grant": grant_json(&grant), "file": out }));
    Ok(ExitCode::SUCCESS)
}

/// `access ACCOUNT [verify]`.
async fn account(paths: &StatePaths, words: &[String]) -> anyhow::Result<ExitCode> {
    let json = words.iter().any(|w| w == "--json");
    let words: Vec<&String> = words.iter().filter(|w| *w != "--json").collect();
    let (name, verb) = match words.as_slice() {
        [name] => ((*name).clone(), None),
        [name, verb] => ((*name).clone(), Some(verb.as_str())),
        _ => bail!("use `clankie access ACCOUNT [--json]` or `clankie access ACCOUNT verify`"),
    };
    let mut host = clients::mcp_host(paths)?;
    match verb {
        None => {
            let accounts = host
                .list_accounts(mcphost_pb::ListAccountsRequest {})
                .await
                .map_err(refused)?
                .into_inner()
                .accounts;
            let a = accounts
                .iter()
                .find(|a| a.name == name)
                .with_context(|| format!("no connected account {name}"))?;
            if json {
                print_json(&super::accounts::account_json(a));
            } else {
                super::accounts::print_account(a);
            }
        }
        Some("verify") => {
            let v = host
                .verify_account(mcphost_pb::VerifyAccountRequest { name })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&json!({
                "identity": v.identity.as_ref().map(super::accounts::identity_json),
                "change": v.change,
                "invalidatedGrants": v.invalidated_grants,
            }));
        }
        Some(other) => bail!("unknown access verb {other}: only `verify`"),
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn access(paths: StatePaths, command: AccessCommand) -> anyhow::Result<ExitCode> {
    match command {
        AccessCommand::Issue {
            request,
            out,
            endpoint,
        } => issue(&paths, &request, &out, endpoint).await,
        AccessCommand::List { json } => {
            let grants = clients::mcp_host(&paths)?
                .list_grants(mcphost_pb::ListGrantsRequest {})
                .await
                .map_err(refused)?
                .into_inner()
                .grants;
            if json {
                print_json(&json!({ "grants": grants.iter().map(grant_json).collect::<Vec<_>>() }));
            } else {
                for g in &grants {
                    let tools: Vec<&str> = g.tools.iter().map(|t| t.name.as_str()).collect();
                    println!(
                        "{:<24} {:<11} {:<8} {} {} [{}]",
                        field(&g.grant_id),
                        GrantStanding::wire_word(g.standing),
                        field(&g.kind),
                        field(&g.server),
                        field(&g.principal_id),
                        field(&tools.join(", "))
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AccessCommand::Revoke { grant_id } => {
            let g = clients::mcp_host(&paths)?
                .revoke_grant(mcphost_pb::RevokeGrantRequest { grant_id })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&grant_json(&g));
            Ok(ExitCode::SUCCESS)
        }
        AccessCommand::Project {
            name,
            server,
            tools,
        } => {
            let g = clients::mcp_host(&paths)?
                .keep_project_grant(mcphost_pb::KeepProjectGrantRequest {
                    project: name,
                    server,
                    tools,
                })
                .await
                .map_err(refused)?
                .into_inner();
            print_json(&json!({
                "record": grant_json(&g),
                "note": "a legacy project-grant record: it carries no bearer and gives no fleet access",
            }));
            Ok(ExitCode::SUCCESS)
        }
        AccessCommand::Account(words) => account(&paths, &words).await,
        AccessCommand::Fleet => {
            eprintln!(
                "clankie: fleet grants are retired: admitted panes reach every verified account; \
                 the owner turns that off with `clankie fleet set --tools off`, and issues manual grants with \
                 `clankie access issue`"
            );
            Ok(Exit::Failed.code())
        }
    }
}
