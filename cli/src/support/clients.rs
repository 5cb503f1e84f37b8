//! The owner's clients: the credential the CLI reads from the state folder,
//! one constructor per service that carries it, and the one-line refusal a
//! command prints for a gRPC status.

use anyhow::bail;
use clankie_proto::admission::v1::admission_client::AdmissionClient;
use clankie_proto::auto::v1::auto_client::AutoClient;
use clankie_proto::mailbox::v1::mailbox_client::MailboxClient;
use clankie_proto::mcphost::v1::mcp_host_client::McpHostClient;
use clankie_proto::tracker::v1::tracker_client::TrackerClient;
use clankie_runtime::grpc::{Client, Meta};
use clankie_runtime::paths::StatePaths;
use clankie_runtime::{ClankieError, owner};

/// A client meta carrying the owner credential.
pub fn owner_meta(paths: &StatePaths) -> anyhow::Result<Meta> {
    let path = paths.owner_credential();
    match owner::read_owner_token(&path) {
        Ok(t) if !t.is_empty() => Ok(Meta::owner(&t)),
        _ => {
            if std::env::var("CLANKIE_WORKER_PANE").as_deref() == Ok("1") {
                bail!("hired workers don't hold the owner's credential");
            }
            // No credential yet: no stack has run on this state folder.
            Err(super::exit::Refusal {
                exit: super::exit::Exit::Down,
                text: format!(
                    "no owner credential in {}; start the stack with `clankie up` first",
                    paths.root().display()
                ),
            }
            .into())
        }
    }
}

pub fn admission(paths: &StatePaths) -> anyhow::Result<AdmissionClient<Client>> {
    Ok(clankie_runtime::clients::admission(
        paths,
        owner_meta(paths)?,
    ))
}

pub fn mcp_host(paths: &StatePaths) -> anyhow::Result<McpHostClient<Client>> {
    Ok(clankie_runtime::clients::mcp_host(
        paths,
        owner_meta(paths)?,
    ))
}

pub fn mailbox(paths: &StatePaths) -> anyhow::Result<MailboxClient<Client>> {
    Ok(clankie_runtime::clients::mailbox(paths, owner_meta(paths)?))
}

/// Every registered project, as the mailbox holds it now.
pub async fn projects(
    c: &mut MailboxClient<Client>,
) -> anyhow::Result<Vec<clankie_proto::mailbox::v1::Project>> {
    Ok(
        c.list_projects(clankie_proto::mailbox::v1::ListProjectsRequest {})
            .await
            .map_err(refused)?
            .into_inner()
            .projects,
    )
}

pub fn tracker(paths: &StatePaths) -> anyhow::Result<TrackerClient<Client>> {
    Ok(clankie_runtime::clients::tracker(paths, owner_meta(paths)?))
}

pub fn auto(paths: &StatePaths) -> anyhow::Result<AutoClient<Client>> {
    Ok(clankie_runtime::clients::auto(paths, owner_meta(paths)?))
}

/// A refusal decided here (not by a service), as a one-line error with its
/// exit code.
pub fn refusal(e: ClankieError) -> anyhow::Error {
    super::exit::Refusal {
        exit: super::exit::Exit::of(e.code),
        text: format!("refused ({}): {}", e.code, e.message),
    }
    .into()
}

/// Turns a gRPC status into a one-line refusal: the CLI's one decode.
#[allow(
    clippy::disallowed_methods,
    reason = "the CLI's one decode, which also names a service that is not running"
)]
pub fn refused(s: tonic::Status) -> anyhow::Error {
    use super::exit::{Exit, Refusal};
    let e = ClankieError::from_status(&s);
    if s.code() == tonic::Code::Unavailable && s.message().contains("transport") {
        return Refusal {
            exit: Exit::Down,
            text: "the service is not running (start it with `clankie up`)".into(),
        }
        .into();
    }
    Refusal {
        exit: Exit::of(e.code),
        text: format!("refused ({}): {}", e.code, e.message),
    }
    .into()
}
