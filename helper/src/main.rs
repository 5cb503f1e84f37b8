//! `clankie-helper`: answers census jobs on its stdin/stdout pipes until its
//! parent closes stdin. It opens no listener and keeps no state between jobs.

use std::io::{BufReader, BufWriter};
use std::process::ExitCode;

use clankie_helper::handle;
use clankie_proto::helper::v1 as helper_pb;
use clankie_types::helper::{self as frame, MAX_REQUEST};

fn main() -> ExitCode {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut input = BufReader::new(stdin.lock());
    let mut output = BufWriter::new(stdout.lock());
    loop {
        match frame::read_frame::<helper_pb::Request>(&mut input, MAX_REQUEST) {
            Ok(Some(req)) => {
                let reply = handle(req);
                if frame::write_frame(&mut output, &reply).is_err() {
                    return ExitCode::from(3);
                }
            }
            Ok(None) => return ExitCode::SUCCESS,
            // A malformed request means the pipe cannot be trusted: stop.
            Err(_) => return ExitCode::from(2),
        }
    }
}
