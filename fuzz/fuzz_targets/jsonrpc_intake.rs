//! The gateway's JSON-RPC intake: any body gets its ids or a refusal,
//! never a panic, and accepted ids are within their bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(ids) = clankie_gateway::fuzzing::request_ids(data) {
        for id in ids {
            assert!(id.len() <= clankie_runtime::limits::field::JSONRPC_ID);
        }
    }
});
