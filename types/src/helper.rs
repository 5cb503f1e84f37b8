//! The census helper's pipe: length-delimited protobuf frames (a varint
//! length, then the message), their size bounds, and the names of the
//! helper's refusal reasons. The helper writes these frames and admission
//! reads them; both bound a length before reading its body.

use std::io::{self, Read, Write};

use clankie_proto::helper::v1::Reason;
use prost::Message;

/// Largest request frame the helper reads.
pub const MAX_REQUEST: usize = 64 << 10;
/// Largest reply frame: the helper answers `REPLY_TOO_LARGE` instead of a
/// larger one, and admission refuses a larger one as malformed.
pub const MAX_REPLY: usize = 1 << 20;
/// A varint length takes at most this many bytes.
pub const MAX_PREFIX: usize = 10;

/// Decodes a varint length from its prefix bytes; `None` while incomplete.
pub fn decode_len(prefix: &[u8]) -> io::Result<Option<usize>> {
    let mut value: u64 = 0;
    for (i, &b) in prefix.iter().enumerate().take(MAX_PREFIX) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(Some(usize::try_from(value).unwrap_or(usize::MAX)));
        }
    }
    if prefix.len() >= MAX_PREFIX {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame length is not a varint",
        ));
    }
    Ok(None)
}

/// Refuses a length past `max` before anything is read for it.
pub fn check_len(len: usize, max: usize) -> io::Result<()> {
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame is larger than allowed",
        ));
    }
    Ok(())
}

/// Reads one frame; `Ok(None)` on a clean end of stream.
pub fn read_frame<M: Message + Default>(r: &mut impl Read, max: usize) -> io::Result<Option<M>> {
    let mut prefix = Vec::with_capacity(MAX_PREFIX);
    let len = loop {
        let mut b = [0u8; 1];
        if r.read(&mut b)? == 0 {
            if prefix.is_empty() {
                return Ok(None);
            }
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        prefix.push(b[0]);
        if let Some(len) = decode_len(&prefix)? {
            break len;
        }
    };
    check_len(len, max)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    M::decode(body.as_slice())
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes one frame and flushes.
pub fn write_frame(w: &mut impl Write, msg: &impl Message) -> io::Result<()> {
    w.write_all(&msg.encode_length_delimited_to_vec())?;
    w.flush()
}

/// The reason's name in logs and refusal counters (`census_timeout`).
pub fn reason_name(reason: Reason) -> &'static str {
    match reason {
        Reason::Unspecified => "helper_unspecified",
        Reason::UnknownJob => "unknown_job",
        Reason::ReplyTooLarge => "reply_too_large",
        Reason::TooManyPids => "too_many_pids",
        Reason::BadAddress => "bad_address",
        Reason::ProcessGone => "process_gone",
        Reason::ObservationDenied => "observation_denied",
        Reason::ObservationFailed => "observation_failed",
        Reason::SocketNotFound => "socket_not_found",
        Reason::NotLoopback => "not_loopback",
        Reason::SockDiagFailed => "sock_diag_failed",
        Reason::SockDiagMalformed => "sock_diag_malformed",
        Reason::CensusTimeout => "census_timeout",
        Reason::CensusUnknownOwner => "census_unknown_owner",
        Reason::CensusUnstable => "census_unstable",
        Reason::ProcUnreadable => "proc_unreadable",
    }
}

#[cfg(test)]
mod tests {
    use clankie_proto::helper::v1 as helper_pb;

    use super::*;

    #[test]
    fn frames_round_trip_and_bound_their_length() {
        let req = helper_pb::Request {
            id: 7,
            job: Some(helper_pb::request::Job::Ping(helper_pb::Ping {})),
        };
        let mut buf = Vec::new();
        write_frame(&mut buf, &req).expect("write");
        write_frame(&mut buf, &req).expect("write");
        let mut r = buf.as_slice();
        assert_eq!(
            read_frame::<helper_pb::Request>(&mut r, 1024).expect("read"),
            Some(req.clone())
        );
        assert_eq!(
            read_frame::<helper_pb::Request>(&mut r, 1024).expect("read"),
            Some(req)
        );
        assert_eq!(
            read_frame::<helper_pb::Request>(&mut r, 1024).expect("eof"),
            None
        );
        let huge = [0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(read_frame::<helper_pb::Request>(&mut huge.as_slice(), 1024).is_err());
        let garbage = [0x80u8; 12];
        assert!(read_frame::<helper_pb::Request>(&mut garbage.as_slice(), 1024).is_err());
        let truncated = [0x05u8, 1, 2];
        assert!(read_frame::<helper_pb::Request>(&mut truncated.as_slice(), 1024).is_err());
    }

    #[test]
    fn every_reason_has_its_own_name() {
        let names: std::collections::HashSet<_> = (0..=15)
            .map(|n| reason_name(Reason::try_from(n).expect("a reason")))
            .collect();
        assert_eq!(names.len(), 16);
        assert!(
            Reason::try_from(16).is_err(),
            "a new reason needs a name here"
        );
    }
}
