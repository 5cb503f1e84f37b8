//! The receipt manifest reader: any bytes as `connected-calls.json` open
//! the store (healthy, or refused as corrupt) without a panic, and a
//! refused store never overwrites the file.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("dir");
    let manifest = dir.path().join("connected-calls.json");
    std::fs::write(&manifest, data).expect("write");
    runtime().block_on(async {
        let store = clankie_mcp_host::receipts::ReceiptStore::open(dir.path(), 1000).expect("open");
        let _ = store.stats();
        if store.health().is_err() {
            assert_eq!(std::fs::read(&manifest).expect("read"), data, "left in place");
        }
    });
});
