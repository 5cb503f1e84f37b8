//! The optional `config.toml` in the state folder (`~/.clankie/config.toml`):
//! defaults for `clankie up`, resolved as built-in defaults → the file →
//! the environment → flags, each later one winning. `clankie config check`
//! reads the file strictly (an unknown key is an error, with its line) and
//! shows every setting with where its value came from.
//!
//! ```toml
//! [gateway]
//! listen = "127.0.0.1:7755"          # CLANKIE_GATEWAY_ADDR, --listen
//! allowed_hosts = ["fleet.lan"]      # --allowed-host (the file's and the flags' together)
//! relay_listen = "0.0.0.0:7756"      # CLANKIE_RELAY_ADDR: where remote machines connect (off when unset)
//!
//! [services]
//! bin_dir = "/usr/local/lib/clankie" # CLANKIE_BIN_DIR, --bin-dir
//!
//! [telemetry]
//! otlp_endpoint = "http://127.0.0.1:4317"  # OTEL_EXPORTER_OTLP_ENDPOINT
//! otlp_protocol = "grpc"                   # OTEL_EXPORTER_OTLP_PROTOCOL
//! ```

use std::path::PathBuf;

use anyhow::Context as _;
use clankie_runtime::paths::StatePaths;
use clap::parser::ValueSource;
use serde::Deserialize;
use serde_json::json;

use super::up::UpArgs;

/// The file's name in the state folder.
pub const FILE: &str = "config.toml";

/// What the file may say.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    #[serde(default)]
    pub gateway: Gateway,
    #[serde(default)]
    pub services: Services,
    #[serde(default)]
    pub telemetry: Telemetry,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gateway {
    pub listen: Option<std::net::SocketAddr>,
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    pub relay_listen: Option<std::net::SocketAddr>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Services {
    pub bin_dir: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Telemetry {
    pub otlp_endpoint: Option<String>,
    pub otlp_protocol: Option<OtlpProtocol>,
}

/// The OTLP protocols the exporters speak.
#[derive(Debug, Clone, Copy, Deserialize)]
pub enum OtlpProtocol {
    #[serde(rename = "grpc")]
    Grpc,
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

impl OtlpProtocol {
    fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::Grpc => "grpc",
            OtlpProtocol::HttpProtobuf => "http/protobuf",
        }
    }
}

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    Env,
    Flag,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File => "file",
            Source::Env => "env",
            Source::Flag => "flag",
        }
    }

    fn of(source: Option<ValueSource>) -> Source {
        match source {
            Some(ValueSource::CommandLine) => Source::Flag,
            Some(ValueSource::EnvVariable) => Source::Env,
            _ => Source::Default,
        }
    }
}

/// Reads the state folder's file; a missing file is every default. An
/// unreadable or invalid file is an error naming it (and the line), never
/// silently ignored.
pub fn load(paths: &StatePaths) -> anyhow::Result<File> {
    let path = paths.root().join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(File::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    parse(&text).with_context(|| format!("{} is not a valid clankie config", path.display()))
}

fn parse(text: &str) -> anyhow::Result<File> {
    toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_end()))
}

/// The settings of `up` after the file, with their sources.
pub struct Resolved {
    pub rows: Vec<(&'static str, serde_json::Value, Source)>,
    /// Variables the services are started with (the file's relay listener
    /// and OTLP settings, where the environment has none).
    pub service_env: Vec<(&'static str, String)>,
}

/// Applies the file to `args` where neither a flag nor the environment
/// set a value (`matches`: the `up` subcommand's).
pub fn apply(file: &File, args: &mut UpArgs, matches: &clap::ArgMatches) -> Resolved {
    let mut rows = Vec::new();
    let listen = Source::of(matches.value_source("listen"));
    let listen = match (listen, file.gateway.listen) {
        (Source::Default, Some(addr)) => {
            args.listen = addr.to_string();
            Source::File
        }
        (s, _) => s,
    };
    rows.push(("gateway.listen", json!(args.listen), listen));
    let hosts = if file.gateway.allowed_hosts.is_empty() {
        Source::of(matches.value_source("allowed_hosts"))
    } else {
        let flags = std::mem::take(&mut args.allowed_hosts);
        let given = !flags.is_empty();
        args.allowed_hosts = file.gateway.allowed_hosts.clone();
        for host in flags {
            if !args.allowed_hosts.contains(&host) {
                args.allowed_hosts.push(host);
            }
        }
        if given { Source::Flag } else { Source::File }
    };
    rows.push(("gateway.allowed_hosts", json!(args.allowed_hosts), hosts));
    let bin = Source::of(matches.value_source("bin_dir"));
    let bin = match (&args.bin_dir, &file.services.bin_dir) {
        (None, Some(dir)) => {
            args.bin_dir = Some(dir.clone());
            Source::File
        }
        (None, None) => Source::Default,
        _ => bin,
    };
    rows.push(("services.bin_dir", json!(args.bin_dir), bin));
    let mut service_env = Vec::new();
    for (key, var, from_file) in [
        (
            "gateway.relay_listen",
            "CLANKIE_RELAY_ADDR",
            file.gateway.relay_listen.map(|a| a.to_string()),
        ),
        (
            "telemetry.otlp_endpoint",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            file.telemetry.otlp_endpoint.clone(),
        ),
        (
            "telemetry.otlp_protocol",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            file.telemetry.otlp_protocol.map(|p| p.as_str().to_owned()),
        ),
    ] {
        let (value, source) = match (std::env::var(var).ok().filter(|v| !v.is_empty()), from_file) {
            (Some(v), _) => (Some(v), Source::Env),
            (None, Some(v)) => {
                service_env.push((var, v.clone()));
                (Some(v), Source::File)
            }
            (None, None) => (None, Source::Default),
        };
        rows.push((key, json!(value), source));
    }
    Resolved { rows, service_env }
}

/// `clankie config check`: the file read strictly, then every setting of
/// `up` with its value and source. Exit 1 when the file is invalid.
pub fn check(paths: &StatePaths, json_out: bool) -> anyhow::Result<std::process::ExitCode> {
    let path = paths.root().join(FILE);
    let file = load(paths)?;
    // What `up` would be started with here: the same parser, no flags.
    let matches = crate::up_matches_without_flags();
    let mut args = <UpArgs as clap::FromArgMatches>::from_arg_matches(&matches)
        .context("resolving the settings of up")?;
    let resolved = apply(&file, &mut args, &matches);
    let exists = path.exists();
    if json_out {
        crate::support::output::print_json(&json!({
            "file": path,
            "exists": exists,
            "settings": resolved.rows.iter().map(|(k, v, s)| json!({
                "key": k, "value": v, "source": s.as_str(),
            })).collect::<Vec<_>>(),
        }));
    } else {
        println!(
            "{}: {}",
            path.display(),
            if exists {
                "valid"
            } else {
                "absent (every setting is its default)"
            }
        );
        for (key, value, source) in &resolved.rows {
            println!("  {key:<24} {value}  ({})", source.as_str());
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_read_strictly() {
        let f = parse(
            "[gateway]\nlisten = \"127.0.0.1:9000\"\nallowed_hosts = [\"a\"]\n[telemetry]\notlp_protocol = \"http/protobuf\"\n",
        )
        .expect("valid");
        assert_eq!(f.gateway.listen.map(|a| a.port()), Some(9000));
        let relay = parse("[gateway]\nrelay_listen = \"0.0.0.0:7756\"\n").expect("relay");
        assert_eq!(relay.gateway.relay_listen.map(|a| a.port()), Some(7756));
        assert!(matches!(
            f.telemetry.otlp_protocol,
            Some(OtlpProtocol::HttpProtobuf)
        ));
        let e = parse("[gateway]\nlisen = \"127.0.0.1:9000\"\n").expect_err("unknown key");
        assert!(e.to_string().contains("lisen"), "{e}");
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(parse("[gateway]\nlisten = \"nowhere\"\n").is_err());
        assert!(parse("[telemetry]\notlp_protocol = \"carrier pigeon\"\n").is_err());
        assert!(parse("").is_ok());
    }
}
