//! The tmux and Herdr parsers: list-panes lines, control-mode blocks, the
//! watching client's notifications and pane lists, and Herdr answer lines,
//! from any bytes.
#![no_main]

use clankie_panes::herdr::herdr_pane;
use clankie_panes::tmux::{BlockReader, Notice, notice, pane_list, parse_tmux};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut block = BlockReader::default();
    for line in text.lines() {
        if let Some(p) = parse_tmux(line) {
            assert!(p.pane_id.starts_with('%'));
        }
        let _ = block.feed(line.to_string());
        if let Notice::Panes(value) = notice(line) {
            assert!(pane_list(value).keys().all(|p| p.starts_with('%')));
        }
        let _ = clankie_panes::herdr::notice(line, "clankie_events_1");
        if let Ok(v) = clankie_panes::herdr::socket::parse_answer(line, "clankie_1") {
            let _ = herdr_pane("%1", String::new(), &v);
        }
    }
});
