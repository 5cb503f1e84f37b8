//! Sizes the edges agree on, so a bridge can stop reading where the service
//! would refuse.

/// The largest review candidate patch (bytes of `git diff --binary`). The
/// bridge stops reading the diff here; the mailbox refuses anything larger.
pub const MAX_CANDIDATE_PATCH: usize = 4 << 20;

/// The largest body of a review submission on the gateway: the patch in
/// base64 plus room for the summary, evidence and names.
pub const MAX_CANDIDATE_BODY: usize = MAX_CANDIDATE_PATCH / 3 * 4 + 4 + (64 << 10);

/// The largest gRPC message a review submission or read needs.
pub const MAX_CANDIDATE_MESSAGE: usize = MAX_CANDIDATE_PATCH + (1 << 20);
