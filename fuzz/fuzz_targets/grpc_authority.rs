//! The authority fix on the internal sockets: whatever a local process
//! sends, in whatever chunks, the fix never panics, never holds more than
//! its bound, and, once it lets a connection pass, passes bytes unchanged.
#![no_main]

use clankie_runtime::authority::{AuthorityFix, MAX_BLOCK};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the chunk size, so frames split everywhere.
    let Some((&chunk, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let mut fix = AuthorityFix::default();
    let mut out = Vec::new();
    for piece in rest.chunks(chunk) {
        let passing = fix.passing();
        let before = out.len();
        fix.feed(piece, &mut out);
        if passing {
            assert_eq!(&out[before..], piece);
        }
        // Held back: at most one frame being read and one header block.
        assert!(fix.held() <= 2 * (MAX_BLOCK + 9) + 24, "{}", fix.held());
    }
    fix.finish(&mut out);
    assert!(fix.passing());
});
