//! `clankie`: the command line of the Clankie fleet backbone.
//!
//! `up` runs the gateway and every service as separate processes and
//! supervises them; owner commands speak gRPC to the services over their Unix
//! sockets with the owner credential; `mcp --fleet` is the stdio MCP bridge a
//! worker pane registers in its harness.

mod auto_cmds;
mod bridge;
mod mailbox_cmds;
mod owner_cmds;
mod review;
mod terminal;
mod tracker_cmds;
mod up;

use std::path::PathBuf;

use clankie_runtime::paths::StatePaths;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "clankie", version, about = "The Clankie fleet backbone")]
struct Cli {
    /// State directory (default: $CLANKIE_STATE or ~/.clankie). A blank
    /// CLANKIE_STATE (as a hire's environment has) counts as unset.
    #[arg(long, global = true)]
    state: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway and every service, each as its own process, until Ctrl-C.
    Up(up::UpArgs),
    /// Show each service's health.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Connect an MCP account: `connect NAME -- CMD ARGS...` or `connect NAME --url URL`.
    Connect(owner_cmds::ConnectArgs),
    /// Remove a connected account.
    Disconnect { name: String },
    /// List connected accounts with verification state and identity.
    Accounts {
        #[arg(long)]
        json: bool,
    },
    /// Fleet links and switches.
    Fleet {
        #[command(subcommand)]
        command: owner_cmds::FleetCommand,
    },
    /// Serve MCP on stdio for a harness.
    Mcp(bridge::McpArgs),
    /// Projects: workspaces, caps, the owning lead.
    Project {
        #[command(subcommand)]
        command: mailbox_cmds::ProjectCommand,
    },
    /// Lead conversations (the global head always exists).
    Lead {
        #[command(subcommand)]
        command: mailbox_cmds::LeadCommand,
    },
    /// Hire a worker or reviewer into a new pane of a linked session.
    Hire(mailbox_cmds::HireArgs),
    /// Close a hire (only its owning conversation may).
    Close {
        hire_id: String,
        #[arg(long, env = "CLANKIE_CONVERSATION_ID", default_value = "")]
        conversation: String,
    },
    /// Send a message to a hire's seat (any lead may; the owner is named).
    Message {
        hire_id: String,
        text: String,
        #[arg(long, env = "CLANKIE_CONVERSATION_ID", default_value = "")]
        conversation: String,
    },
    /// Landing review: submit from a seat's pane; list or show as the owner.
    Review {
        #[command(subcommand)]
        command: review::ReviewCommand,
    },
    /// The built-in tracker on the owner's route: calls, teams, imports, profiles, budgets.
    Tracker {
        #[command(subcommand)]
        command: tracker_cmds::TrackerCommand,
    },
    /// Projects on Auto: the master switch, the saved level, the scheduler's status.
    Auto {
        #[command(subcommand)]
        command: auto_cmds::AutoCommand,
    },
    /// Check every service, the receipt store and the tracker budgets.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// The fleet's work: open hires and tracker budgets.
    Work {
        #[command(subcommand)]
        command: tracker_cmds::WorkCommand,
    },
    /// Herdr-style views of the roster.
    Herdr {
        #[command(subcommand)]
        command: HerdrCommand,
    },
    /// Every hire with its lead, or unowned.
    Roster {
        #[arg(long)]
        json: bool,
    },
    /// A conversation's transcript after a sequence number.
    Transcript {
        #[arg(default_value = "global")]
        conversation: String,
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// Wait up to this many milliseconds for a new entry (at most 25000).
        #[arg(long, default_value_t = 0)]
        wait: u32,
    },
}

#[derive(Subcommand)]
enum HerdrCommand {
    /// Worker agents with their lead (`unowned` when it is gone).
    Agent {
        #[command(subcommand)]
        command: AgentCommand,
    },
}

#[derive(Subcommand)]
enum AgentCommand {
    /// Every hire: owner, hired, and `mine` when CLANKIE_CONVERSATION_ID is set.
    List {
        #[arg(long)]
        json: bool,
    },
}

fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let paths = cli
        .state
        .clone()
        .map(StatePaths::new)
        .unwrap_or_else(StatePaths::from_env);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("clankie: cannot start: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Up(args) => up::run(paths, args).await,
            Command::Status { json } => up::status(paths, json).await,
            Command::Connect(args) => owner_cmds::connect(paths, args).await,
            Command::Disconnect { name } => owner_cmds::disconnect(paths, name).await,
            Command::Accounts { json } => owner_cmds::accounts(paths, json).await,
            Command::Fleet { command } => owner_cmds::fleet(paths, command).await,
            Command::Mcp(args) => bridge::run(paths, args).await,
            Command::Project { command } => mailbox_cmds::project(paths, command).await,
            Command::Lead { command } => mailbox_cmds::lead(paths, command).await,
            Command::Hire(args) => mailbox_cmds::hire(paths, args).await,
            Command::Close {
                hire_id,
                conversation,
            } => mailbox_cmds::close(paths, hire_id, conversation).await,
            Command::Message {
                hire_id,
                text,
                conversation,
            } => mailbox_cmds::message(paths, hire_id, text, conversation).await,
            Command::Review { command } => review::run(paths, command).await,
            Command::Tracker { command } => tracker_cmds::run(paths, command).await,
            Command::Auto { command } => auto_cmds::run(paths, command).await,
            Command::Doctor { json } => tracker_cmds::doctor(paths, json).await,
            Command::Work { command } => tracker_cmds::work(paths, command).await,
            Command::Herdr {
                command:
                    HerdrCommand::Agent {
                        command: AgentCommand::List { json },
                    },
            } => mailbox_cmds::agent_list(paths, json).await,
            Command::Roster { json } => mailbox_cmds::roster(paths, json).await,
            Command::Transcript {
                conversation,
                after,
                wait,
            } => mailbox_cmds::transcript(paths, conversation, after, wait).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("clankie: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
