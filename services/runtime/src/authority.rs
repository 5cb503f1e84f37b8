//! Stock gRPC tools on a Unix socket. grpcurl 1.8 (grpc-go before 1.5x)
//! sends the socket's path as the request's `:authority`, which is no URI
//! authority, so the HTTP/2 server refuses every stream of it
//! (`PROTOCOL_ERROR`) before any service code runs. On a Unix socket the
//! authority names nothing, so any is accepted: the first request of each
//! connection is read here, and
//!
//! - when its authority is a real one (every client of the stack), the
//!   connection's bytes go on untouched from then on;
//! - when it is not, every request header block of the connection is
//!   decoded and encoded again with `localhost` in its place (the server's
//!   header table then follows this encoder, the client's follows ours).
//!
//! Bounded: a header block larger than [`MAX_BLOCK`], or anything that is
//! not HTTP/2 as expected, ends the inspection and leaves the bytes as they
//! came (the server then refuses them, as it would have).

use loona_hpack::{Decoder, Encoder};

/// The client connection preface (RFC 9113, 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The most header block bytes gathered before giving up on a connection.
pub const MAX_BLOCK: usize = 64 << 10;
/// The largest frame payload written (the default SETTINGS_MAX_FRAME_SIZE).
const MAX_FRAME: usize = 16_384;
/// What an invalid authority becomes.
const LOCALHOST: &[u8] = b"localhost";

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Waiting for the preface and the first request's headers.
    Inspect,
    /// Every request header block is re-encoded.
    Rewrite,
    /// The rest of the connection passes untouched.
    Pass,
}

/// A header block being gathered: its first frame's header and priority
/// fields, its fragments, and the original frames' bytes.
struct Block {
    stream: [u8; 4],
    flags: u8,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
    original: Vec<u8>,
}

/// The reading side of one connection: bytes in as they arrive, bytes out
/// as the server should read them.
pub struct AuthorityFix {
    mode: Mode,
    preface_seen: bool,
    pending: Vec<u8>,
    block: Option<Block>,
    decoder: Decoder<'static>,
    encoder: Encoder<'static>,
}

impl Default for AuthorityFix {
    fn default() -> Self {
        AuthorityFix {
            mode: Mode::Inspect,
            preface_seen: false,
            pending: Vec::new(),
            block: None,
            decoder: Decoder::new(),
            encoder: Encoder::new(),
        }
    }
}

impl AuthorityFix {
    /// Whether the rest passes untouched (the caller may then read the
    /// socket directly).
    pub fn passing(&self) -> bool {
        self.mode == Mode::Pass && self.pending.is_empty()
    }

    /// How many bytes are held back, waiting for the rest of a frame or
    /// of a header block.
    pub fn held(&self) -> usize {
        self.pending.len() + self.block.as_ref().map_or(0, |b| b.original.len())
    }

    /// Takes bytes read from the client; appends what the server should
    /// read to `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        if self.mode == Mode::Pass {
            out.extend_from_slice(input);
            return;
        }
        self.pending.extend_from_slice(input);
        if !self.preface_seen {
            if self.pending.len() < PREFACE.len() {
                if !PREFACE.starts_with(&self.pending) {
                    self.give_up(out);
                }
                return;
            }
            if !self.pending.starts_with(PREFACE) {
                self.give_up(out);
                return;
            }
            out.extend(self.pending.drain(..PREFACE.len()));
            self.preface_seen = true;
        }
        while self.mode != Mode::Pass && self.pending.len() >= 9 {
            let length =
                u32::from_be_bytes([0, self.pending[0], self.pending[1], self.pending[2]]) as usize;
            if length > MAX_BLOCK {
                self.give_up(out);
                return;
            }
            if self.pending.len() < 9 + length {
                return;
            }
            let frame: Vec<u8> = self.pending.drain(..9 + length).collect();
            self.frame(frame, out);
        }
        if self.mode == Mode::Pass {
            out.append(&mut self.pending);
        }
    }

    /// One whole frame.
    fn frame(&mut self, frame: Vec<u8>, out: &mut Vec<u8>) {
        let (kind, flags) = (frame[3], frame[4]);
        let stream = [frame[5], frame[6], frame[7], frame[8]];
        match (kind, self.block.is_some()) {
            (HEADERS, false) => {
                let Some((priority, fragment)) = headers_payload(flags, &frame[9..]) else {
                    return self.give_up_with(frame, out);
                };
                self.block = Some(Block {
                    stream,
                    flags,
                    priority,
                    fragment: fragment.to_vec(),
                    original: frame,
                });
            }
            (CONTINUATION, true) => {
                let Some(block) = self.block.as_mut() else {
                    return;
                };
                // Bounded by the frames' bytes, so empty frames count too.
                if block.stream != stream || block.original.len() + frame.len() > MAX_BLOCK {
                    return self.give_up_with(frame, out);
                }
                block.fragment.extend_from_slice(&frame[9..]);
                block.original.extend_from_slice(&frame);
                block.flags |= flags & END_HEADERS;
            }
            // A header block is never interleaved; anything else passes.
            (_, false) => {
                out.extend_from_slice(&frame);
                return;
            }
            (_, true) => return self.give_up_with(frame, out),
        }
        if self
            .block
            .as_ref()
            .is_some_and(|b| b.flags & END_HEADERS != 0)
            && let Some(block) = self.block.take()
        {
            self.block_done(block, out);
        }
    }

    /// A whole header block: passed as it came, or encoded again.
    fn block_done(&mut self, block: Block, out: &mut Vec<u8>) {
        let Ok(mut fields) = self.decoder.decode(&block.fragment) else {
            out.extend_from_slice(&block.original);
            self.mode = Mode::Pass;
            return;
        };
        if self.mode == Mode::Inspect {
            let bad = fields.iter().any(|(n, v)| {
                n == b":authority" && http::uri::Authority::try_from(&v[..]).is_err()
            });
            if !bad {
                out.extend_from_slice(&block.original);
                self.mode = Mode::Pass;
                return;
            }
            self.mode = Mode::Rewrite;
        }
        for (name, value) in fields.iter_mut() {
            if name == b":authority" && http::uri::Authority::try_from(&value[..]).is_err() {
                *value = LOCALHOST.to_vec();
            }
        }
        let encoded = self
            .encoder
            .encode(fields.iter().map(|(n, v)| (&n[..], &v[..])));
        write_block(&block, &encoded, out);
    }

    /// The client is done sending: what is held passes as it came.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.give_up(out);
    }

    /// Stops inspecting: what is held passes as it came.
    fn give_up(&mut self, out: &mut Vec<u8>) {
        self.mode = Mode::Pass;
        if let Some(block) = self.block.take() {
            out.extend_from_slice(&block.original);
        }
        out.append(&mut self.pending);
    }

    fn give_up_with(&mut self, frame: Vec<u8>, out: &mut Vec<u8>) {
        let rest = std::mem::take(&mut self.pending);
        self.pending = frame;
        self.pending.extend_from_slice(&rest);
        self.give_up(out);
    }
}

/// A HEADERS frame's priority fields and header block fragment, without
/// its padding; None when the lengths do not add up.
fn headers_payload(flags: u8, payload: &[u8]) -> Option<(Option<[u8; 5]>, &[u8])> {
    let mut rest = payload;
    let mut pad = 0usize;
    if flags & PADDED != 0 {
        pad = *rest.first()? as usize;
        rest = &rest[1..];
    }
    let priority = if flags & PRIORITY != 0 {
        let p: [u8; 5] = rest.get(..5)?.try_into().ok()?;
        rest = &rest[5..];
        Some(p)
    } else {
        None
    };
    let end = rest.len().checked_sub(pad)?;
    Some((priority, &rest[..end]))
}

/// Writes `encoded` as a HEADERS frame (with the block's priority and
/// END_STREAM) and CONTINUATION frames as needed, without padding.
fn write_block(block: &Block, encoded: &[u8], out: &mut Vec<u8>) {
    let keep = block.flags & !(PADDED | END_HEADERS);
    let first_room = MAX_FRAME - if block.priority.is_some() { 5 } else { 0 };
    let (first, mut rest) = encoded.split_at(encoded.len().min(first_room));
    let mut flags = keep;
    if rest.is_empty() {
        flags |= END_HEADERS;
    }
    let mut payload = Vec::with_capacity(first.len() + 5);
    if let Some(p) = block.priority {
        payload.extend_from_slice(&p);
    }
    payload.extend_from_slice(first);
    frame_header(out, payload.len(), HEADERS, flags, block.stream);
    out.extend_from_slice(&payload);
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(rest.len().min(MAX_FRAME));
        rest = tail;
        let flags = if rest.is_empty() { END_HEADERS } else { 0 };
        frame_header(out, chunk.len(), CONTINUATION, flags, block.stream);
        out.extend_from_slice(chunk);
    }
}

fn frame_header(out: &mut Vec<u8>, length: usize, kind: u8, flags: u8, stream: [u8; 4]) {
    let l = (length as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&stream);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's bytes: the preface, SETTINGS, and one request whose
    /// headers `encoder` encodes.
    fn request(encoder: &mut Encoder<'static>, authority: &[u8], flags: u8) -> Vec<u8> {
        let block = encoder.encode([
            (&b":method"[..], &b"POST"[..]),
            (b":scheme", b"http"),
            (b":path", b"/grpc.health.v1.Health/Check"),
            (b":authority", authority),
            (b"content-type", b"application/grpc"),
        ]);
        let mut out = Vec::new();
        frame_header(
            &mut out,
            block.len(),
            HEADERS,
            END_HEADERS | flags,
            [0, 0, 0, 1],
        );
        out.extend_from_slice(&block);
        out
    }

    fn settings() -> Vec<u8> {
        let mut out = PREFACE.to_vec();
        frame_header(&mut out, 0, 0x4, 0, [0; 4]);
        out
    }

    /// What the server's decoder reads from `bytes` (after the preface
    /// and SETTINGS): each header block's fields.
    fn server_reads(bytes: &[u8]) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut decoder = Decoder::new();
        let mut rest = &bytes[PREFACE.len() + 9..];
        let (mut blocks, mut block) = (Vec::new(), Vec::new());
        while rest.len() >= 9 {
            let length = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            let (kind, flags, payload) = (rest[3], rest[4], &rest[9..9 + length]);
            if kind == HEADERS {
                let (_, fragment) = headers_payload(flags, payload).expect("a HEADERS frame");
                block = fragment.to_vec();
            } else if kind == CONTINUATION {
                block.extend_from_slice(payload);
            }
            if (kind == HEADERS || kind == CONTINUATION) && flags & END_HEADERS != 0 {
                blocks.push(decoder.decode(&block).expect("decodes"));
            }
            rest = &rest[9 + length..];
        }
        blocks
    }

    fn authority(fields: &[(Vec<u8>, Vec<u8>)]) -> &[u8] {
        fields
            .iter()
            .find(|(n, _)| n == b":authority")
            .map(|(_, v)| &v[..])
            .unwrap_or_default()
    }

    #[test]
    fn a_real_authority_passes_untouched_and_then_everything_does() {
        let mut client = Encoder::new();
        let mut bytes = settings();
        bytes.extend(request(&mut client, b"localhost", 0));
        let mut fix = AuthorityFix::default();
        let mut out = Vec::new();
        // Byte by byte: frames split anywhere.
        for b in &bytes {
            fix.feed(std::slice::from_ref(b), &mut out);
        }
        assert_eq!(out, bytes);
        assert!(fix.passing());
        let second = request(&mut client, b"localhost", 0);
        out.clear();
        fix.feed(&second, &mut out);
        assert_eq!(out, second);
    }

    #[test]
    fn a_socket_path_as_authority_becomes_localhost_in_every_request() {
        let mut client = Encoder::new();
        let path = b"/root/.clankie/run/tracker.sock";
        let mut bytes = settings();
        bytes.extend(request(&mut client, path, 0));
        bytes.extend(request(&mut client, path, 0));
        let mut fix = AuthorityFix::default();
        let mut out = Vec::new();
        fix.feed(&bytes, &mut out);
        assert!(!fix.passing());
        let blocks = server_reads(&out);
        assert_eq!(blocks.len(), 2);
        for fields in &blocks {
            assert_eq!(authority(fields), b"localhost");
            assert!(
                fields
                    .iter()
                    .any(|(n, v)| n == b":path" && v == b"/grpc.health.v1.Health/Check")
            );
        }
    }

    #[test]
    fn a_padded_block_split_over_continuations_is_read_whole() {
        let mut client = Encoder::new();
        let block = client.encode([
            (&b":method"[..], &b"POST"[..]),
            (b":scheme", b"http"),
            (b":path", b"/x"),
            (b":authority", b"/a/socket"),
        ]);
        let (a, b) = block.split_at(block.len() / 2);
        let mut bytes = settings();
        // HEADERS, padded by 3, with priority; then one CONTINUATION.
        let mut payload = vec![3u8, 0, 0, 0, 0, 16];
        payload.extend_from_slice(a);
        payload.extend_from_slice(&[0, 0, 0]);
        frame_header(
            &mut bytes,
            payload.len(),
            HEADERS,
            PADDED | PRIORITY,
            [0, 0, 0, 1],
        );
        bytes.extend_from_slice(&payload);
        frame_header(&mut bytes, b.len(), CONTINUATION, END_HEADERS, [0, 0, 0, 1]);
        bytes.extend_from_slice(b);
        let mut out = Vec::new();
        let mut fix = AuthorityFix::default();
        fix.feed(&bytes, &mut out);
        // The rewritten block keeps the priority fields, drops the padding.
        let at = PREFACE.len() + 9;
        assert_eq!(out[at + 4], PRIORITY | END_HEADERS);
        assert_eq!(out[at + 9..at + 14], [0, 0, 0, 0, 16]);
        assert_eq!(authority(&server_reads(&out)[0]), b"localhost");
    }

    #[test]
    fn what_is_not_http2_passes_as_it_came() {
        for garbage in [
            b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            vec![0xff; 100],
            {
                let mut b = settings();
                // A frame claiming a block past the bound.
                b.extend_from_slice(&[0xff, 0xff, 0xff, HEADERS, 0, 0, 0, 0, 1]);
                b
            },
            {
                let mut b = settings();
                // A HEADERS frame whose padding is longer than it.
                b.extend_from_slice(&[0, 0, 1, HEADERS, PADDED | END_HEADERS, 0, 0, 0, 1, 9]);
                b
            },
        ] {
            let mut fix = AuthorityFix::default();
            let mut out = Vec::new();
            fix.feed(&garbage, &mut out);
            assert_eq!(out, garbage);
            assert!(fix.passing());
        }
    }
}
