//! The owner credential.
//!
//! `clankie up` creates a random token in `$CLANKIE_STATE/owner.token` (0600)
//! on first run. Owner RPCs carry it as `authorization: Bearer ...`; services
//! keep only its SHA-256 and compare in constant time. Fleet credentials never
//! satisfy an owner check.

use std::io;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::code::{ClankieError, ErrorCode};

/// Metadata key for bearer credentials.
pub const AUTHORIZATION: &str = "authorization";

/// Returns a fresh random token (256 bits, hex) with a readable prefix.
pub fn random_token(prefix: &str) -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{prefix}_{}", hex::encode(bytes))
}

/// SHA-256 of a token, hex encoded.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Compares two byte strings in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads the owner token, creating it (0600) when absent.
pub fn ensure_owner_token(path: &Path) -> io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "owner credential file is empty",
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                crate::state::private_dir(parent)?;
            }
            let token = random_token("clko");
            crate::state::atomic_write(path, token.as_bytes())?;
            Ok(token)
        }
        Err(e) => Err(e),
    }
}

/// Reads the owner token; never creates one.
pub fn read_owner_token(path: &Path) -> io::Result<String> {
    let t = std::fs::read_to_string(path)?;
    Ok(t.trim().to_string())
}

/// A service's view of the owner credential: only its hash.
#[derive(Clone)]
pub struct OwnerCheck {
    hash: String,
}

impl OwnerCheck {
    /// Loads the hash of the owner token at `path`.
    pub fn load(path: &Path) -> io::Result<Self> {
        Ok(OwnerCheck {
            hash: token_hash(&read_owner_token(path)?),
        })
    }

    pub fn from_token(token: &str) -> Self {
        OwnerCheck {
            hash: token_hash(token),
        }
    }

    /// True when HTTP headers carry the owner bearer.
    pub fn matches_headers(&self, headers: &http::HeaderMap) -> bool {
        headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| self.matches_token(t))
    }

    /// True when `token` (surrounding blanks aside) is the owner credential.
    pub fn matches_token(&self, token: &str) -> bool {
        let t = token.trim();
        !t.is_empty() && constant_time_eq(token_hash(t).as_bytes(), self.hash.as_bytes())
    }

    /// Accepts a request carrying the owner bearer, refuses anything else.
    pub fn verify(&self, metadata: &tonic::metadata::MetadataMap) -> Result<(), ClankieError> {
        let presented = bearer(metadata).ok_or_else(|| {
            ErrorCode::OwnerCredentialRequired.err("this command needs the owner credential")
        })?;
        if constant_time_eq(token_hash(presented).as_bytes(), self.hash.as_bytes()) {
            Ok(())
        } else {
            Err(ErrorCode::OwnerCredentialInvalid.err("the owner credential does not match"))
        }
    }
}

/// Extracts a `Bearer` token from gRPC metadata.
pub fn bearer(metadata: &tonic::metadata::MetadataMap) -> Option<&str> {
    let value = metadata.get(AUTHORIZATION)?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_token_is_created_private_and_stable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("owner.token");
        let a = ensure_owner_token(&p).expect("create");
        let b = ensure_owner_token(&p).expect("read");
        assert_eq!(a, b);
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let check = OwnerCheck::load(&p).expect("load");
        let mut md = tonic::metadata::MetadataMap::new();
        assert_eq!(
            check.verify(&md).expect_err("missing").code,
            ErrorCode::OwnerCredentialRequired
        );
        md.insert(AUTHORIZATION, "Bearer nope".parse().expect("ascii"));
        assert_eq!(
            check.verify(&md).expect_err("wrong").code,
            ErrorCode::OwnerCredentialInvalid
        );
        md.insert(AUTHORIZATION, format!("Bearer {a}").parse().expect("ascii"));
        check.verify(&md).expect("owner");
    }
}
