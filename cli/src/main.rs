//! `clankie`: the command line of the Clankie fleet backbone.
//!
//! `up` runs the gateway and every service as separate processes and
//! supervises them; owner commands speak gRPC to the services over their Unix
//! sockets with the owner credential; `mcp --fleet` is the stdio MCP bridge a
//! worker pane registers in its harness.

mod bridge;
mod commands;
mod support;

use std::path::PathBuf;

use clankie_runtime::paths::StatePaths;
use clap::{Parser, Subcommand};
use commands::*;

#[derive(Parser)]
#[command(name = "clankie", version, about = "The Clankie fleet backbone")]
struct Cli {
    /// State directory (default: $CLANKIE_STATE or ~/.clankie). A blank
    /// CLANKIE_STATE (as a hire's environment has) counts as unset.
    #[arg(long, global = true)]
    state: Option<PathBuf>,
    /// Print only errors, and what the command was asked for (a token, JSON).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// The command's own log lines on stderr: -v info, -vv debug.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway and every service, each as its own process, until Ctrl-C.
    Up(up::UpArgs),
    /// Stop this state folder's `clankie up` (the gateway drains first) and wait until it is gone.
    Down,
    /// Print a shell completion script: `clankie completions bash > /etc/bash_completion.d/clankie`.
    Completions { shell: clap_complete::Shell },
    /// The last lines of a service's log (or every service's); `-f` follows them.
    Logs(logs::LogsArgs),
    /// Show each service's health.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Connect an MCP account: `connect NAME -- CMD ARGS...` or `connect NAME --url URL`.
    Connect(connect::ConnectArgs),
    /// Remove a connected account.
    Disconnect { name: String },
    /// List connected accounts with verification state and identity;
    /// `--workers`: the worker harnesses instead (Pi, with its probe).
    Accounts {
        #[arg(long)]
        json: bool,
        #[arg(long)]
        workers: bool,
        /// With --workers: Pi's executable or package folder.
        #[arg(long, requires = "workers")]
        pi: Option<std::path::PathBuf>,
        /// With --workers: the Node to probe Pi with.
        #[arg(long, requires = "workers")]
        node: Option<std::path::PathBuf>,
    },
    /// Manual grants: issue, list, revoke; legacy project records.
    Access {
        #[command(subcommand)]
        command: access::AccessCommand,
    },
    /// Fleet links and switches.
    Fleet {
        #[command(subcommand)]
        command: fleet::FleetCommand,
    },
    /// Serve MCP on stdio for a harness.
    Mcp(bridge::McpArgs),
    /// Projects: workspaces, caps, the owning lead.
    Project {
        #[command(subcommand)]
        command: project::ProjectCommand,
    },
    /// Lead conversations (the global head always exists).
    Lead {
        #[command(subcommand)]
        command: lead::LeadCommand,
    },
    /// Hire a worker or reviewer into a new pane of a linked session.
    Hire(hire::HireArgs),
    /// Run Claude Code as a fleet worker in this pane: the exact launcher,
    /// with the worker plugin's channel in a profile of its own.
    Claude(claude::ClaudeArgs),
    /// Pi as a harness: the release probe.
    Pi {
        #[command(subcommand)]
        command: pi::PiCommand,
    },
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
        command: tracker::TrackerCommand,
    },
    /// Projects on Auto: the master switch, the saved level, the scheduler's status.
    Auto {
        #[command(subcommand)]
        command: auto::AutoCommand,
    },
    /// The state folder's config.toml: `config check` reads it and shows
    /// every setting of `up` with where its value comes from.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// This build's version, and the protocol versions it speaks.
    Version {
        #[arg(long)]
        json: bool,
    },
    /// Check every service, the receipt store and the tracker budgets.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// The fleet's work: open hires and tracker budgets.
    Work {
        #[command(subcommand)]
        command: work::WorkCommand,
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
        #[arg(default_value = clankie_types::leads::HEAD)]
        conversation: String,
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// Wait up to this many milliseconds for a new entry (at most 25000).
        #[arg(long, default_value_t = 0)]
        wait: u32,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Read config.toml strictly and show the resolved settings
    /// (defaults → file → environment → flags).
    Check {
        #[arg(long)]
        json: bool,
    },
}

/// The `up` subcommand's matches with no flags given: what the environment
/// and the defaults say (`config check` resolves the file against them).
pub(crate) fn up_matches_without_flags() -> clap::ArgMatches {
    use clap::CommandFactory as _;
    Cli::command()
        .try_get_matches_from(["clankie", "up"])
        .ok()
        .and_then(|m| m.subcommand_matches("up").cloned())
        .unwrap_or_default()
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

/// A printing command whose reader went away (`clankie status | head -1`)
/// ends quietly with the status a shell shows for SIGPIPE (141), as Unix
/// tools do, instead of a panic report and 101. Only that one failure is
/// taken over (`println!` panics on it, and its message says so); every
/// other panic keeps the default report.
fn quiet_on_closed_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.starts_with("failed printing to std") && text.contains("Broken pipe") {
            std::process::exit(141);
        }
        report(info);
    }));
}

fn main() -> std::process::ExitCode {
    // What the CLI and the stack it starts create is the owner's alone.
    clankie_runtime::state::private_umask();
    quiet_on_closed_pipe();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    support::output::set_quiet(cli.quiet);
    let log_filter = match cli.verbose {
        0 => None,
        1 => Some(tracing_subscriber::EnvFilter::new("info")),
        _ => Some(tracing_subscriber::EnvFilter::new("debug")),
    };
    let up_matches = matches
        .subcommand_matches("up")
        .cloned()
        .unwrap_or_default();
    // The command's name only (never its arguments) names its span.
    let command_name = matches.subcommand_name().unwrap_or("clankie").to_owned();
    // The bridges install their own subscriber (their logs are theirs);
    // `up` lives as long as the stack, so it is no one span.
    let (traced, rooted) = match cli.command {
        Command::Mcp(_) => (false, false),
        Command::Up(_) => (true, false),
        _ => (true, true),
    };
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
        if traced {
            // No log lines on a command's stderr unless -v; spans go out
            // when OTLP is configured.
            clankie_runtime::telemetry::init_with("cli", log_filter);
        }
        let span = if rooted {
            tracing::info_span!("cli.command", command = %command_name)
        } else {
            tracing::Span::none()
        };
        let run = async move {
            match cli.command {
                Command::Up(args) => up::run(paths, args, up_matches).await,
                Command::Status { json } => status::status(paths, json).await,
                Command::Down => down::down(paths).await,
                Command::Logs(args) => logs::logs(paths, args).await,
                Command::Completions { shell } => {
                    use clap::CommandFactory as _;
                    let mut script = Vec::new();
                    clap_complete::generate(shell, &mut Cli::command(), "clankie", &mut script);
                    print!("{}", String::from_utf8_lossy(&script));
                    Ok(std::process::ExitCode::SUCCESS)
                }
                Command::Connect(args) => connect::connect(paths, args).await,
                Command::Disconnect { name } => connect::disconnect(paths, name).await,
                Command::Accounts {
                    workers: true,
                    pi: pi_path,
                    node,
                    json,
                } => pi::workers(pi_path.as_deref(), node.as_deref(), json).await,
                Command::Accounts { json, .. } => accounts::accounts(paths, json).await,
                Command::Fleet { command } => fleet::fleet(paths, command).await,
                Command::Access { command } => access::access(paths, command).await,
                Command::Mcp(args) => bridge::run(paths, args).await,
                Command::Project { command } => project::project(paths, command).await,
                Command::Lead { command } => lead::lead(paths, command).await,
                Command::Hire(args) => hire::hire(paths, args).await,
                Command::Claude(args) => claude::run(args).await,
                Command::Pi { command } => pi::run(command).await,
                Command::Close {
                    hire_id,
                    conversation,
                } => hire::close(paths, hire_id, conversation).await,
                Command::Message {
                    hire_id,
                    text,
                    conversation,
                } => message::message(paths, hire_id, text, conversation).await,
                Command::Review { command } => review::run(paths, command).await,
                Command::Tracker { command } => tracker::run(paths, command).await,
                Command::Auto { command } => auto::run(paths, command).await,
                Command::Doctor { json } => doctor::doctor(paths, json).await,
                Command::Config {
                    command: ConfigCommand::Check { json },
                } => config::check(&paths, json),
                Command::Version { json } => {
                    version::print(json);
                    Ok(std::process::ExitCode::SUCCESS)
                }
                Command::Work { command } => work::work(paths, command).await,
                Command::Herdr {
                    command:
                        HerdrCommand::Agent {
                            command: AgentCommand::List { json },
                        },
                } => roster::agent_list(paths, json).await,
                Command::Roster { json } => roster::roster(paths, json).await,
                Command::Transcript {
                    conversation,
                    after,
                    wait,
                    json,
                } => transcript::transcript(paths, conversation, after, wait, json).await,
            }
        };
        tracing::Instrument::instrument(run, span).await
    });
    if traced {
        // Flushes the command's spans before the process ends.
        clankie_runtime::telemetry::shutdown();
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("clankie: {e:#}");
            support::exit::of_error(&e).code()
        }
    }
}
