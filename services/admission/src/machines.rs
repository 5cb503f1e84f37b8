//! Remote machines of a fleet: each runs its own stack, proves its own panes
//! from its own kernel, and relays their requests to this (the main) stack.
//!
//! The owner registers a machine by name. Registration answers a one-time
//! enrolment secret, shown once. Only its SHA-256 is kept, in
//! `admission/machines.json` (0600, atomic rename after fsync), with an
//! expiry: the secret lets the machine enrol once, and is then spent. An
//! unreadable file lists and admits no machine, and is never saved over:
//! adding or removing a machine is refused until the owner repairs it.
//!
//! Enrolment binds a key: the machine connects over TLS with a certificate
//! of its own, the gateway reads the certificate's SHA-256 from the
//! handshake, and the secret is spent binding that fingerprint. From then on
//! the machine is known by the key it proves on each connection, never by a
//! name it sends. A wrong, spent, expired or unknown secret is refused with
//! one reason, so a caller learns nothing about which machines exist.

use clankie_proto::admission::v1 as admission_pb;
use clankie_runtime::owner;
use clankie_runtime::state::{GuardError, Guarded, Refused};
use clankie_runtime::{ClankieError, ErrorCode};
use serde::{Deserialize, Serialize};

/// How long an enrolment secret works when the owner names no expiry.
pub const ENROLMENT_WINDOW_MS: i64 = 60 * 60 * 1000;

/// The prefix of an enrolment secret, so one pasted in the wrong place is
/// recognised.
const SECRET_PREFIX: &str = "clkm";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineRecord {
    pub name: String,
    pub fleet: String,
    pub added_at_ms: i64,
    /// SHA-256 of the enrolment secret while it is unspent; empty after.
    #[serde(default)]
    pub enrolment_sha256: String,
    #[serde(default)]
    pub enrolment_expires_at_ms: i64,
    /// When the machine spent its secret (0: not yet).
    #[serde(default)]
    pub enrolled_at_ms: i64,
    /// The SHA-256 (hex) of the certificate the machine enrolled with.
    #[serde(default)]
    pub key_sha256: String,
}

impl MachineRecord {
    pub fn to_pb(&self) -> admission_pb::Machine {
        let enrolled = self.enrolled_at_ms != 0;
        admission_pb::Machine {
            name: self.name.clone(),
            fleet: self.fleet.clone(),
            added_at_ms: self.added_at_ms,
            enrolled,
            enrolled_at_ms: self.enrolled_at_ms,
            enrolment_expires_at_ms: if enrolled {
                0
            } else {
                self.enrolment_expires_at_ms
            },
            key_sha256: self.key_sha256.clone(),
            // The link is known to `machine_links`, not the file.
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MachinesFile {
    pub version: u32,
    pub machines: Vec<MachineRecord>,
}

/// The machines file: a missing one holds none, an unreadable one holds
/// none and is kept as it is.
pub fn load(path: std::path::PathBuf) -> Guarded<MachinesFile> {
    let machines = Guarded::load(path, MachinesFile::default, MachinesFile::default);
    if let Some(e) = machines.unreadable() {
        tracing::error!(error = %e, "machines file unreadable; no remote machine is admitted");
    }
    machines
}

/// The refusal for a change to an unreadable file, or one that failed to
/// save.
fn guard_refusal(e: GuardError) -> ClankieError {
    match e {
        GuardError::Unreadable => ErrorCode::FleetAdmissionUnavailable
            .err("the machines file cannot be read; not overwriting it"),
        GuardError::Write(e) => ErrorCode::Internal.err(format!("could not save machines: {e}")),
    }
}

/// A change the file refused, or one it could not save.
fn refusal(e: Refused<ClankieError>) -> ClankieError {
    match e {
        Refused::Change(e) => e,
        Refused::Guard(e) => guard_refusal(e),
    }
}

/// Registers `name` in `fleet`; answers the record and its secret.
pub fn add(
    file: &mut Guarded<MachinesFile>,
    name: &str,
    fleet: &str,
    expires_in_ms: i64,
    now_ms: i64,
) -> Result<(MachineRecord, String), ClankieError> {
    if !crate::valid_fleet_name(name) {
        return Err(ErrorCode::InvalidArgument
            .err("machine names use lowercase letters, digits and dashes (at most 40)"));
    }
    crate::check_fleet_name(fleet)?;
    if expires_in_ms < 0 {
        return Err(ErrorCode::InvalidArgument.err("an expiry is a positive duration"));
    }
    if file.unreadable().is_some() {
        return Err(guard_refusal(GuardError::Unreadable));
    }
    let secret = owner::random_token(SECRET_PREFIX);
    let window = if expires_in_ms == 0 {
        ENROLMENT_WINDOW_MS
    } else {
        expires_in_ms
    };
    let record = MachineRecord {
        name: name.to_string(),
        fleet: fleet.to_string(),
        added_at_ms: now_ms,
        enrolment_sha256: owner::token_hash(&secret),
        enrolment_expires_at_ms: now_ms.saturating_add(window),
        enrolled_at_ms: 0,
        key_sha256: String::new(),
    };
    let added = record.clone();
    file.try_update(move |next| {
        if next.machines.iter().any(|m| m.name == record.name) {
            return Err(ErrorCode::MachineExists.err(format!(
                "machine {} is registered already; remove it first to enrol it again",
                record.name
            )));
        }
        next.version = 1;
        next.machines.push(record);
        Ok(())
    })
    .map_err(refusal)?;
    Ok((added, secret))
}

/// Removes `name`.
pub fn remove(file: &mut Guarded<MachinesFile>, name: &str) -> Result<(), ClankieError> {
    if file.unreadable().is_some() {
        return Err(guard_refusal(GuardError::Unreadable));
    }
    file.try_update(|next| {
        let before = next.machines.len();
        next.machines.retain(|m| m.name != name);
        if next.machines.len() == before {
            return Err(ErrorCode::MachineNotFound.err(format!("no machine named {name}")));
        }
        Ok(())
    })
    .map_err(refusal)
}

/// The one refusal of an enrolment that does not hold: the same for an
/// unknown machine, a wrong secret, a spent one and an expired one.
fn enrolment_refused() -> ClankieError {
    ErrorCode::MachineEnrolmentRefused.err(
        "this enrolment secret is wrong, spent or expired, or names no machine; ask the owner for a new one (clankie fleet machine remove, then add)",
    )
}

/// Whether `pane` reads as a pane id a machine's stack proved: 1 to 64
/// letters, digits or `%_.-` (tmux's `%3`, Herdr's ids).
pub fn valid_pane(pane: &str) -> bool {
    (1..=64).contains(&pane.len())
        && pane
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"%_.-".contains(&b))
}

/// Whether `key` is a SHA-256 in lowercase hex.
fn valid_key(key: &str) -> bool {
    key.len() == 64
        && key
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Machine `name` spends `secret`, binding the certificate fingerprint
/// `key` its connection proved. The secret works once, before its expiry.
pub fn enrol(
    file: &mut Guarded<MachinesFile>,
    name: &str,
    secret: &str,
    key: &str,
    now_ms: i64,
) -> Result<MachineRecord, ClankieError> {
    if !valid_key(key) {
        return Err(ErrorCode::InvalidArgument.err("a machine key is a SHA-256 in lowercase hex"));
    }
    if file.unreadable().is_some() {
        return Err(guard_refusal(GuardError::Unreadable));
    }
    let offered = owner::token_hash(secret);
    file.try_update_when(|next| {
        // The same machine with the same key again (its answer was lost, or
        // its link file not saved): it holds the key bound to this name, so
        // it is that machine; nothing changes.
        if let Some(m) = next
            .machines
            .iter()
            .find(|m| m.name == name && m.key_sha256 == key && m.enrolled_at_ms != 0)
        {
            return Ok((m.clone(), false));
        }
        if next.machines.iter().any(|m| m.key_sha256 == key) {
            // One key, one machine: a second machine cannot borrow a key.
            return Err(enrolment_refused());
        }
        let m = next
            .machines
            .iter_mut()
            .find(|m| m.name == name)
            .ok_or_else(enrolment_refused)?;
        let holds = !m.enrolment_sha256.is_empty()
            && owner::constant_time_eq(m.enrolment_sha256.as_bytes(), offered.as_bytes())
            && now_ms < m.enrolment_expires_at_ms;
        if !holds {
            return Err(enrolment_refused());
        }
        m.enrolment_sha256.clear();
        m.enrolled_at_ms = now_ms;
        m.key_sha256 = key.to_string();
        Ok((m.clone(), true))
    })
    .map_err(refusal)
}

/// The enrolled machine whose certificate fingerprint is `key`.
pub fn by_key(file: &Guarded<MachinesFile>, key: &str) -> Result<MachineRecord, ClankieError> {
    if file.unreadable().is_some() {
        return Err(guard_refusal(GuardError::Unreadable));
    }
    file.machines
        .iter()
        .find(|m| valid_key(key) && m.key_sha256 == key)
        .cloned()
        .ok_or_else(|| {
            ErrorCode::MachineNotFound
                .err("no machine here is enrolled with this key; enrol it with a new secret")
        })
}

/// Every registered machine, by name; none while the file is unreadable.
pub fn list(file: &Guarded<MachinesFile>) -> admission_pb::ListMachinesResponse {
    let unreadable = file.unreadable().is_some();
    let mut machines: Vec<admission_pb::Machine> = if unreadable {
        Vec::new()
    } else {
        file.machines.iter().map(MachineRecord::to_pb).collect()
    };
    machines.sort_by(|a, b| a.name.cmp(&b.name));
    admission_pb::ListMachinesResponse {
        machines,
        unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> (tempfile::TempDir, Guarded<MachinesFile>) {
        let dir = tempfile::tempdir().expect("dir");
        let file = load(dir.path().join("machines.json"));
        (dir, file)
    }

    #[test]
    fn a_secret_is_kept_only_as_its_hash_and_expires() {
        let (dir, mut file) = fresh();
        let (m, secret) = add(&mut file, "pc", "local", 0, 1_000).expect("add");
        assert!(secret.starts_with("clkm_"), "{secret}");
        assert_eq!(m.enrolment_sha256, owner::token_hash(&secret));
        assert_eq!(m.enrolment_expires_at_ms, 1_000 + ENROLMENT_WINDOW_MS);
        let on_disk = std::fs::read_to_string(dir.path().join("machines.json")).expect("file");
        assert!(!on_disk.contains(&secret[5..]), "{on_disk}");
        assert!(on_disk.contains(&m.enrolment_sha256), "{on_disk}");
        let listed = list(&file);
        assert_eq!(listed.machines.len(), 1);
        assert!(!listed.machines[0].enrolled);
    }

    #[test]
    fn names_are_checked_and_unique() {
        let (_dir, mut file) = fresh();
        add(&mut file, "pc", "local", 0, 1).expect("add");
        let again = add(&mut file, "pc", "local", 0, 2).expect_err("twice");
        assert_eq!(again.code, ErrorCode::MachineExists);
        let long = "a".repeat(41);
        for bad in ["PC", "", "pc/1", long.as_str()] {
            let e = add(&mut file, bad, "local", 0, 3).expect_err(bad);
            assert_eq!(e.code, ErrorCode::InvalidArgument, "{bad}");
        }
        assert_eq!(list(&file).machines.len(), 1);
        let gone = remove(&mut file, "nope").expect_err("unknown");
        assert_eq!(gone.code, ErrorCode::MachineNotFound);
        remove(&mut file, "pc").expect("remove");
        assert!(list(&file).machines.is_empty());
    }

    const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_secret_binds_one_key_once_and_is_spent() {
        let (dir, mut file) = fresh();
        let (_, secret) = add(&mut file, "pc", "local", 0, 1_000).expect("add");
        let wrong = enrol(&mut file, "pc", "clkm_nope", KEY, 2_000).expect_err("wrong");
        assert_eq!(wrong.code, ErrorCode::MachineEnrolmentRefused);
        let unknown = enrol(&mut file, "mac", &secret, KEY, 2_000).expect_err("unknown");
        assert_eq!(unknown.code, ErrorCode::MachineEnrolmentRefused);
        assert_eq!(unknown.message, wrong.message, "one refusal for both");
        assert!(by_key(&file, KEY).is_err(), "not enrolled yet");
        let m = enrol(&mut file, "pc", &secret, KEY, 2_000).expect("enrol");
        assert_eq!((m.enrolled_at_ms, m.key_sha256.as_str()), (2_000, KEY));
        assert!(m.enrolment_sha256.is_empty(), "spent");
        // The same machine again, with its key: answered as it is.
        let again = enrol(&mut file, "pc", "clkm_anything", KEY, 2_500).expect("same key");
        assert_eq!(again.enrolled_at_ms, 2_000, "nothing changed");
        let other = KEY.replace('0', "1");
        let replay = enrol(&mut file, "pc", &secret, &other, 3_000).expect_err("replay");
        assert_eq!(replay.code, ErrorCode::MachineEnrolmentRefused);
        assert_eq!(by_key(&file, KEY).expect("known").name, "pc");
        assert!(by_key(&file, &other).is_err());
        // What was saved is what is known after a restart.
        let again = load(dir.path().join("machines.json"));
        assert_eq!(by_key(&again, KEY).expect("kept").name, "pc");
        assert!(list(&again).machines[0].enrolled);
    }

    #[test]
    fn an_expired_secret_or_a_borrowed_key_is_refused() {
        let (_dir, mut file) = fresh();
        let (_, pc) = add(&mut file, "pc", "local", 1_000, 0).expect("add");
        let late = enrol(&mut file, "pc", &pc, KEY, 1_000).expect_err("expired");
        assert_eq!(late.code, ErrorCode::MachineEnrolmentRefused);
        let (_, mac) = add(&mut file, "mac", "local", 0, 0).expect("add");
        remove(&mut file, "pc").expect("remove");
        let (_, pc) = add(&mut file, "pc", "local", 0, 0).expect("add");
        enrol(&mut file, "pc", &pc, KEY, 1).expect("enrol");
        let borrowed = enrol(&mut file, "mac", &mac, KEY, 2).expect_err("borrowed");
        assert_eq!(borrowed.code, ErrorCode::MachineEnrolmentRefused);
        let bad = enrol(&mut file, "mac", &mac, "ABC", 2).expect_err("bad key");
        assert_eq!(bad.code, ErrorCode::InvalidArgument);
    }

    #[test]
    fn an_unreadable_file_lists_nothing_and_is_never_overwritten() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("machines.json");
        std::fs::write(&path, b"{ not json").expect("write");
        let mut file = load(path.clone());
        let listed = list(&file);
        assert!(listed.unreadable && listed.machines.is_empty());
        let e = add(&mut file, "pc", "local", 0, 1).expect_err("add");
        assert_eq!(e.code, ErrorCode::FleetAdmissionUnavailable);
        let e = remove(&mut file, "pc").expect_err("remove");
        assert_eq!(e.code, ErrorCode::FleetAdmissionUnavailable);
        assert_eq!(std::fs::read(&path).expect("kept"), b"{ not json");
    }
}
