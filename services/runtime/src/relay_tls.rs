//! TLS between a remote machine's stack and the main stack.
//!
//! Neither side trusts a certificate authority. Each holds a self-signed
//! certificate of its own (made once, kept 0600 in its state folder), and
//! each is known by the SHA-256 of that certificate:
//!
//! - the machine **pins** the main stack's fingerprint, printed to the owner
//!   beside the enrolment secret, and refuses any other server before it
//!   sends a byte of its own;
//! - the main stack **requires** a client certificate and checks only that
//!   the peer holds its key (the handshake's signature); which machine that
//!   key belongs to is looked up by its fingerprint in the machines file,
//!   bound there when the machine spent its enrolment secret.

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use serde::{Deserialize, Serialize};

use crate::{ClankieError, ErrorCode};

/// The ALPN both sides speak: gRPC's HTTP/2.
const ALPN_H2: &[u8] = b"h2";

/// A certificate and the key it certifies.
#[derive(Clone)]
pub struct Identity {
    cert: CertificateDer<'static>,
    /// PKCS#8 DER.
    key: Vec<u8>,
}

/// The identity as kept on disk: one file, so the pair is replaced whole.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IdentityFile {
    version: u32,
    cert_der: String,
    key_pkcs8: String,
}

impl Identity {
    /// A fresh self-signed identity naming `name`.
    pub fn generate(name: &str) -> io::Result<Identity> {
        let made = rcgen::generate_simple_self_signed(vec![name.to_string()])
            .map_err(|e| io::Error::other(format!("making a certificate: {e}")))?;
        Ok(Identity {
            cert: made.cert.der().clone(),
            key: made.signing_key.serialize_der(),
        })
    }

    /// The identity kept at `path`, made and saved (0600, atomic rename
    /// after fsync) when there is none. A file that cannot be read is an
    /// error and is never replaced: a new key would orphan every pin and
    /// enrolment made with the old one.
    pub fn load_or_create(path: &Path, name: &str) -> io::Result<Identity> {
        match std::fs::read(path) {
            Ok(bytes) => Self::read(path, &bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let made = Self::generate(name)?;
                let file = IdentityFile {
                    version: 1,
                    cert_der: hex::encode(made.cert.as_ref()),
                    key_pkcs8: hex::encode(&made.key),
                };
                let bytes = serde_json::to_vec(&file).map_err(io::Error::other)?;
                if publish_new(path, &bytes)? {
                    Ok(made)
                } else {
                    // Another process made one first: that one is the key.
                    Self::read(path, &std::fs::read(path)?)
                }
            }
            Err(e) => Err(e),
        }
    }

    /// The identity in `bytes` (read from `path`), or an error naming the
    /// file without its folder (errors reach logs).
    fn read(path: &Path, bytes: &[u8]) -> io::Result<Identity> {
        Self::parse(bytes).map_err(|e| {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the relay identity {} is unreadable ({e}); not replacing it",
                    name.unwrap_or_default()
                ),
            )
        })
    }

    fn parse(bytes: &[u8]) -> Result<Identity, String> {
        let file: IdentityFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if file.version != 1 {
            return Err(format!("version {} is not known", file.version));
        }
        let cert = hex::decode(&file.cert_der).map_err(|e| e.to_string())?;
        let key = hex::decode(&file.key_pkcs8).map_err(|e| e.to_string())?;
        Ok(Identity {
            cert: CertificateDer::from(cert),
            key,
        })
    }

    /// The SHA-256 (lowercase hex) of this identity's certificate.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.cert)
    }

    fn chain(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (
            vec![self.cert.clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone())),
        )
    }
}

/// Writes `bytes` (0600, fsynced) to `path` only if nothing is there:
/// published by a hard link, which never replaces a file, so two processes
/// making an identity at once end with one. Answers whether it was ours.
fn publish_new(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no folder"))?;
    crate::state::private_dir(dir)?;
    let tmp = dir.join(format!(
        ".identity-{}-{:016x}.tmp",
        std::process::id(),
        rand::random::<u64>()
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            crate::state::sync_dir(dir)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// The SHA-256 (lowercase hex) of a certificate's DER.
pub fn fingerprint(cert: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(cert))
}

/// Whether `pin` is spelled as a fingerprint: 64 lowercase hex digits
/// (colons and case as other tools print them are accepted and dropped).
pub fn normalize_pin(pin: &str) -> Option<String> {
    let pin: String = pin
        .chars()
        .filter(|c| *c != ':')
        .collect::<String>()
        .to_ascii_lowercase();
    (pin.len() == 64 && pin.bytes().all(|b| b.is_ascii_hexdigit())).then_some(pin)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The main stack's side: its own certificate, and a client certificate
/// required of every connection (any key, proven by the handshake).
pub fn server_config(identity: &Identity) -> Result<rustls::ServerConfig, rustls::Error> {
    let provider = provider();
    let algs = provider.signature_verification_algorithms;
    let (chain, key) = identity.chain();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(AnyHeldKey { algs }))
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(config)
}

/// The machine's side: the main stack's certificate must be the one pinned,
/// and the machine presents its own.
pub fn client_config(
    identity: &Identity,
    pin: &str,
) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = provider();
    let algs = provider.signature_verification_algorithms;
    let (chain, key) = identity.chain();
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            sha256: pin.to_string(),
            algs,
        }))
        .with_client_auth_cert(chain, key)?;
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(config)
}

/// The handshake-signature half of a verifier, the same for both sides:
/// the peer must hold the key of the certificate it shows, checked with
/// the provider's algorithms (`self.algs`).
macro_rules! handshake_signatures {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.algs.supported_schemes()
        }
    };
}

/// A server whose certificate is the pinned one (and who holds its key).
#[derive(Debug)]
struct Pinned {
    sha256: String,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = fingerprint(end_entity);
        if crate::owner::constant_time_eq(seen.as_bytes(), self.sha256.as_bytes()) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    handshake_signatures!();
}

/// A client that holds the key of the certificate it shows. Which machine
/// that is, if any, is decided by its fingerprint after the handshake.
#[derive(Debug)]
struct AnyHeldKey {
    algs: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for AnyHeldKey {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    handshake_signatures!();
}

/// The name a machine asks for; any will do, since the pin decides.
const SERVER_NAME: &str = "clankie-main";

/// How long a machine waits to reach the main stack.
const CONNECT: std::time::Duration = std::time::Duration::from_secs(10);

/// One TLS connection to the main stack's relay listener at `addr`.
async fn connect(
    connector: &tokio_rustls::TlsConnector,
    addr: &str,
) -> io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::time::timeout(CONNECT, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting timed out"))??;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(SERVER_NAME).map_err(io::Error::other)?;
    tokio::time::timeout(CONNECT, connector.connect(name, tcp))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the TLS handshake timed out"))?
}

/// Whether the main stack at `addr` shows the pinned certificate (and
/// accepts this identity's handshake): checked before anything is sent.
pub async fn check_pin(addr: &str, identity: &Identity, pin: &str) -> Result<(), ClankieError> {
    let config = client_config(identity, pin)
        .map_err(|e| ErrorCode::Internal.err(format!("relay TLS: {e}")))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    match connect(&connector, addr).await {
        Ok(_) => Ok(()),
        Err(e) if is_mismatch(&e) => Err(ErrorCode::RelayCertificateMismatch.err(format!(
            "the stack at {addr} shows a certificate other than the one pinned; nothing was sent"
        ))),
        Err(e) => Err(ErrorCode::ServiceUnavailable
            .err(format!("cannot reach the main stack at {addr}: {e}"))),
    }
}

/// Whether a failed connection failed on the pin.
fn is_mismatch(e: &io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)))
}

/// A gRPC channel (connecting lazily, and again after a drop) to the main
/// stack's relay listener at `addr`, pinned to `pin`, showing `identity`.
pub fn channel(
    addr: &str,
    identity: &Identity,
    pin: &str,
) -> Result<tonic::transport::Channel, rustls::Error> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(identity, pin)?));
    let addr = addr.to_string();
    let connect = tower::service_fn(move |_: http::Uri| {
        let (connector, addr) = (connector.clone(), addr.clone());
        async move {
            let tls = connect(&connector, &addr).await?;
            Ok::<_, io::Error>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    Ok(
        tonic::transport::Endpoint::from_static("http://clankie-main")
            .connect_timeout(CONNECT)
            .connect_with_connector_lazy(connect),
    )
}

/// The fingerprint of the certificate a server-side TLS connection's peer
/// proved, if it showed one.
pub fn peer_fingerprint(conn: &rustls::ServerConnection) -> Option<String> {
    conn.peer_certificates()
        .and_then(|c| c.first())
        .map(|c| fingerprint(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_made_once_kept_private_and_never_replaced_when_unreadable() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("relay/identity.json");
        let made = Identity::load_or_create(&path, "main").expect("made");
        let again = Identity::load_or_create(&path, "main").expect("loaded");
        assert_eq!(made.fingerprint(), again.fingerprint());
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o077, 0, "private: {mode:o}");
        std::fs::write(&path, b"{ torn").expect("tear");
        assert!(Identity::load_or_create(&path, "main").is_err());
        assert_eq!(std::fs::read(&path).expect("kept"), b"{ torn");
    }

    #[test]
    fn two_makers_at_once_end_with_one_identity() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("relay/identity.json");
        let made: Vec<String> = std::thread::scope(|s| {
            let makers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| Identity::load_or_create(&path, "m").map(|i| i.fingerprint())))
                .collect();
            makers
                .into_iter()
                .map(|m| m.join().expect("joined").expect("made"))
                .collect()
        });
        let kept = Identity::load_or_create(&path, "m")
            .expect("kept")
            .fingerprint();
        assert!(made.iter().all(|f| *f == kept), "{made:?} vs {kept}");
    }

    #[test]
    fn pins_are_read_as_other_tools_print_them() {
        let fp = "AB:".repeat(31) + "AB";
        assert_eq!(normalize_pin(&fp), Some("ab".repeat(32)));
        assert_eq!(normalize_pin("abc"), None);
        assert_eq!(normalize_pin(&"g".repeat(64)), None);
    }
}
