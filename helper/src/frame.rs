//! Length-delimited protobuf frames on a byte stream: a varint length, then
//! the message. Both directions bound the length before reading the body.

use std::io::{self, Read, Write};

use prost::Message;

/// Decodes a varint length from its prefix bytes; `None` while incomplete.
pub fn decode_len(prefix: &[u8]) -> io::Result<Option<usize>> {
    let mut value: u64 = 0;
    for (i, &b) in prefix.iter().enumerate() {
        if i >= 10 {
            break;
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(Some(value as usize));
        }
    }
    if prefix.len() >= 10 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame length is not a varint",
        ));
    }
    Ok(None)
}

/// Reads one frame; `Ok(None)` on a clean end of stream.
pub fn read_frame<M: Message + Default>(r: &mut impl Read, max: usize) -> io::Result<Option<M>> {
    let mut prefix = Vec::with_capacity(10);
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
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame is larger than allowed",
        ));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use clankie_proto::helper::v1 as pb;

    #[test]
    fn frames_round_trip_and_bound_their_length() {
        let req = pb::Request {
            id: 7,
            job: Some(pb::request::Job::Ping(pb::Ping {})),
        };
        let mut buf = Vec::new();
        write_frame(&mut buf, &req).expect("write");
        write_frame(&mut buf, &req).expect("write");
        let mut r = buf.as_slice();
        assert_eq!(
            read_frame::<pb::Request>(&mut r, 1024).expect("read"),
            Some(req.clone())
        );
        assert_eq!(
            read_frame::<pb::Request>(&mut r, 1024).expect("read"),
            Some(req)
        );
        assert_eq!(read_frame::<pb::Request>(&mut r, 1024).expect("eof"), None);
        let huge = [0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(read_frame::<pb::Request>(&mut huge.as_slice(), 1024).is_err());
        let garbage = [0x80u8; 12];
        assert!(read_frame::<pb::Request>(&mut garbage.as_slice(), 1024).is_err());
        let truncated = [0x05u8, 1, 2];
        assert!(read_frame::<pb::Request>(&mut truncated.as_slice(), 1024).is_err());
    }
}
