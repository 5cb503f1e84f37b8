//! The helper's frame codec: a byte stream decodes into requests until it
//! ends or a frame is refused, never a panic, never past the size bound.
#![no_main]

use clankie_proto::helper::v1 as helper_pb;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = clankie_types::helper::decode_len(data);
    let mut input = data;
    for _ in 0..64 {
        match clankie_types::helper::read_frame::<helper_pb::Request>(&mut input, 1 << 16) {
            Ok(Some(req)) => {
                let mut out = Vec::new();
                clankie_types::helper::write_frame(&mut out, &req).expect("encode");
                let back = clankie_types::helper::read_frame::<helper_pb::Request>(&mut &out[..], 1 << 16)
                    .expect("re-read")
                    .expect("a frame");
                assert_eq!(back, req);
            }
            Ok(None) | Err(_) => break,
        }
    }
});
