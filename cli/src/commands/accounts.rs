//! `clankie accounts`: every connected account with its verification
//! state, recorded identity and last error.

use std::process::ExitCode;

use clankie_proto::mcphost::v1 as mcphost_pb;
use clankie_runtime::paths::StatePaths;
use clankie_types::host::TransportKind;

use crate::support::clients::{self, refused};
use crate::support::output::{field, print_json};

use clankie_runtime::clients::account_state_word as state_name;

pub use clankie_types::views::{account as account_json, account_identity as identity_json};

pub fn print_account(a: &mcphost_pb::Account) {
    let identity = if a.identity_name.is_empty() {
        "-".to_string()
    } else {
        // Named by the upstream server: never raw on the terminal.
        field(&format!("{} {}", a.identity_name, a.identity_version)).into_owned()
    };
    println!(
        "{:<20} {:<12} {:<5} tools={:<4} identity={} target={}{}{}",
        a.name,
        state_name(a.state),
        TransportKind::wire_word(a.transport),
        a.tool_count,
        identity,
        a.target,
        match &a.provider_identity {
            Some(i) => format!(
                " user={} workspace={}{}",
                field(&i.user_id),
                field(&i.workspace_id),
                if i.email.is_empty() {
                    String::new()
                } else {
                    format!(" email={}", field(&i.email))
                }
            ),
            None => String::new(),
        },
        if a.last_error.is_empty() {
            String::new()
        } else {
            format!(" error={}", field(&a.last_error))
        }
    );
}

pub async fn accounts(paths: StatePaths, json: bool) -> anyhow::Result<ExitCode> {
    let resp = clients::mcp_host(&paths)?
        .list_accounts(mcphost_pb::ListAccountsRequest {})
        .await
        .map_err(refused)?
        .into_inner();
    if json {
        let list: Vec<_> = resp.accounts.iter().map(account_json).collect();
        print_json(&serde_json::json!({ "revision": resp.revision.to_string(), "accounts": list }));
    } else if resp.accounts.is_empty() {
        println!("no connected accounts (add one with `clankie connect NAME -- CMD ARGS...`)");
    } else {
        for a in &resp.accounts {
            print_account(a);
        }
        println!("catalog revision {}", resp.revision);
    }
    Ok(ExitCode::SUCCESS)
}
