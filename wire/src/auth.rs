//! Request authentication on both protocols: pure computations, no clocks and no state (the
//! caller supplies the time and keeps the replay window).
//!
//! **Native frames** carry an authentication trailer when the SIGNED flag is set. The trailer
//! ends the frame, after the body, and is read from its end:
//!
//! | field        | bytes | meaning                                                        |
//! |--------------|-------|----------------------------------------------------------------|
//! | `mac`        | 16    | AES-256-GCM tag over the input below (GMAC), under the connection key |
//! | `timestamp`  | 8     | the signer's clock, Unix milliseconds                          |
//! | `seq`        | 8     | strictly increasing on one connection                          |
//! | `nonce`      | 16    | random, chosen once per connection by the client               |
//! | `access_key` | n     | UTF-8, 1..=255 bytes                                           |
//! | `n`          | 1     | length of `access_key`                                         |
//! | `version`    | 1     | [`TRAILER_VERSION`]                                            |
//!
//! Keys: the account's key is `BLAKE3 derive_key(KEY_CONTEXT, secret key)`; a connection's
//! key is the BLAKE3 keyed hash, under the account's key, of
//! `DOMAIN || n || access_key || nonce`, and keys AES-256-GCM. Both ends derive it once per
//! connection (the client when it makes its signer, the broker at the connection's first
//! signed request) and keep it.
//!
//! The MAC of a request is the GCM tag with the 12-byte IV `seq || 0u32` (big-endian), the
//! frame as associated data and the timestamp as the text (its ciphertext is thrown away;
//! the tag covers it): `frame[4..]`, where `frame` is the request as the handler sees it
//! (SIGNED cleared, trailer removed, length field excluded). The code, flags, request id,
//! header and body are all covered, and the access key and nonce through the key. GCM asks
//! that an IV never repeat under one key: the key is the connection's own (a random nonce
//! per connection) and `seq` only goes up on it. A receiver that checks the timestamp against
//! a window, a nonce never reused within that window, and `seq` increasing on the connection
//! refuses every replay.
//!
//! Why GMAC: a batched send pays the MAC per byte of its body, and AES-GCM's hash runs on
//! carry-less multiply instructions: on the test machine (`docs/perf.md`, Security) a tag
//! over 64 KiB took 3-5 µs against 18-22 µs for keyed BLAKE3 and 95 µs for HMAC-SHA256.
//! The AES-GCM is aws-lc's (`aws-lc-rs`), whose hash uses the wide-vector instructions where
//! the CPU has them.
//!
//! **Remoting requests** are signed as RocketMQ's `AclClientRPCHook` does: the `extFields`
//! (request header fields included) sorted by key, every value except `Signature`
//! concatenated, then the body; HMAC-SHA1 keyed with the secret key, base64 in `Signature`.
//! That scheme has no timestamp, so it cannot refuse a replay by itself (see
//! `docs/security.md`).

use std::sync::Arc;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use base64::Engine as _;
use hmac::{KeyInit, Mac};

use crate::error::{Result, WireError};
use crate::frame::{self, Flags, FRAME_BYTES_MAX, LENGTH_FIELD_BYTES, PREFIX_BYTES};
use crate::remoting::ext::ExtFields;

/// Domain separation for the native MAC (a MAC made for anything else never verifies here).
pub const DOMAIN: &[u8] = b"ringmq-native-mac-v1";
/// BLAKE3 `derive_key` context that turns a secret key into the account's native key.
pub const KEY_CONTEXT: &str = "ringmq 2026-12-07 native request MAC key (GMAC)";
/// Version byte that ends a trailer (1 was a BLAKE3 MAC of 32 bytes; no longer read).
pub const TRAILER_VERSION: u8 = 2;
/// Bytes of the per-connection nonce.
pub const NONCE_BYTES: usize = 16;
/// Bytes of the MAC (a GCM tag).
pub const MAC_BYTES: usize = 16;
/// Longest access key.
pub const ACCESS_KEY_BYTES_MAX: usize = 255;
/// Trailer bytes besides the access key.
pub const TRAILER_FIXED_BYTES: usize = MAC_BYTES + 8 + 8 + NONCE_BYTES + 1 + 1;

/// RocketMQ's extFields names (`SessionCredentials`).
pub const ACCESS_KEY_FIELD: &str = "AccessKey";
pub const SIGNATURE_FIELD: &str = "Signature";
pub const SECURITY_TOKEN_FIELD: &str = "SecurityToken";

type HmacSha1 = hmac::Hmac<sha1::Sha1>;
type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// A secret key. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, to key a MAC. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// An access key and its secret, as a client signs with them.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    access_key: String,
    secret: Secret,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &self.secret)
            .finish()
    }
}

impl Credentials {
    /// Refuses an empty or over-long access key and an empty secret.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Result<Self> {
        let access_key = access_key.into();
        let secret = Secret::new(secret_key);
        check_access_key(&access_key)?;
        if secret.is_empty() {
            return Err(WireError::Invalid {
                what: "secret key",
                detail: "empty",
            });
        }
        Ok(Credentials { access_key, secret })
    }

    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// The native MAC key of these credentials.
    pub fn native_key(&self) -> NativeKey {
        NativeKey::new(self.secret.expose().as_bytes())
    }

    /// The remoting (RocketMQ ACL 1.0) signing key of these credentials.
    pub fn remoting_key(&self) -> RemotingKey {
        RemotingKey::new(self.secret.expose().as_bytes())
    }
}

fn check_access_key(k: &str) -> Result<()> {
    if k.is_empty() || k.len() > ACCESS_KEY_BYTES_MAX {
        return Err(WireError::Invalid {
            what: "access key",
            detail: "must be 1 to 255 bytes",
        });
    }
    Ok(())
}

/// An account's native key (derived from its secret once, not per request).
#[derive(Clone, PartialEq, Eq)]
pub struct NativeKey([u8; 32]);

impl std::fmt::Debug for NativeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NativeKey(<redacted>)")
    }
}

impl NativeKey {
    pub fn new(secret: &[u8]) -> Self {
        NativeKey(blake3::derive_key(KEY_CONTEXT, secret))
    }

    /// The key of the connection that signs as `access_key` with `nonce`.
    pub fn connection(&self, access_key: &str, nonce: &[u8; NONCE_BYTES]) -> ConnKey {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(DOMAIN);
        h.update(&[access_key.len() as u8]);
        h.update(access_key.as_bytes());
        h.update(nonce);
        let bytes = h.finalize();
        let key = UnboundKey::new(&AES_256_GCM, bytes.as_bytes())
            .map(LessSafeKey::new)
            .unwrap_or_else(|_| unreachable_aes_key());
        ConnKey {
            root: self.clone(),
            access_key: access_key.to_owned(),
            nonce: *nonce,
            key: Arc::new(key),
        }
    }
}

/// One connection's MAC key: see the module docs. Cheap to clone.
#[derive(Clone)]
pub struct ConnKey {
    root: NativeKey,
    access_key: String,
    nonce: [u8; NONCE_BYTES],
    key: Arc<LessSafeKey>,
}

impl std::fmt::Debug for ConnKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnKey")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

impl ConnKey {
    /// Was this key derived from `root` for `access_key` and `nonce`?
    pub fn is_for(&self, root: &NativeKey, access_key: &str, nonce: &[u8; NONCE_BYTES]) -> bool {
        self.nonce == *nonce && self.access_key == access_key && self.root == *root
    }

    fn mac(&self, stamp: &Stamp, unsigned_frame: &[u8]) -> Option<[u8; MAC_BYTES]> {
        let mut iv = [0u8; 12];
        iv[..8].copy_from_slice(&stamp.seq.to_be_bytes());
        let mut text = stamp.timestamp_ms.to_be_bytes();
        let tag = self
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(iv),
                Aad::from(&unsigned_frame[LENGTH_FIELD_BYTES..]),
                &mut text,
            )
            .ok()?;
        let mut out = [0u8; MAC_BYTES];
        out.copy_from_slice(tag.as_ref());
        Some(out)
    }
}

#[cold]
fn unreachable_aes_key<T>() -> T {
    // A 32-byte key is AES-256's length; this is never reached.
    panic!("AES-256-GCM refused a 32-byte key")
}

/// A pre-keyed HMAC for RocketMQ's remoting signature: HMAC-SHA1, RocketMQ's, signs and
/// verifies; HMAC-SHA256, which the Rust port's admin tool (`rocketmq-admin-cli`) signs
/// with, also verifies (told apart by the signature's length: 20 or 32 bytes).
#[derive(Clone)]
pub struct RemotingKey {
    sha1: HmacSha1,
    sha256: HmacSha256,
}

impl std::fmt::Debug for RemotingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RemotingKey(<redacted>)")
    }
}

impl RemotingKey {
    pub fn new(secret: &[u8]) -> Self {
        RemotingKey {
            sha1: HmacSha1::new_from_slice(secret).unwrap_or_else(|_| unreachable_key()),
            sha256: HmacSha256::new_from_slice(secret).unwrap_or_else(|_| unreachable_key()),
        }
    }

    fn mac<M: Mac + Clone>(key: &M, ext_fields: &ExtFields, body: &[u8]) -> M {
        let mut m = key.clone();
        for (k, v) in ext_fields {
            if k != SIGNATURE_FIELD {
                m.update(v.as_bytes());
            }
        }
        m.update(body);
        m
    }

    /// The `Signature` value RocketMQ's client computes for these fields and body.
    pub fn signature(&self, ext_fields: &ExtFields, body: &[u8]) -> String {
        let tag = Self::mac(&self.sha1, ext_fields, body)
            .finalize()
            .into_bytes();
        base64::engine::general_purpose::STANDARD.encode(tag)
    }

    /// Does `signature` (base64) sign these fields and body? Compared in constant time.
    pub fn verify(&self, ext_fields: &ExtFields, body: &[u8], signature: &str) -> bool {
        let Ok(tag) = base64::engine::general_purpose::STANDARD.decode(signature.trim()) else {
            return false;
        };
        if tag.len() == 32 {
            Self::mac(&self.sha256, ext_fields, body)
                .verify_slice(&tag)
                .is_ok()
        } else {
            Self::mac(&self.sha1, ext_fields, body)
                .verify_slice(&tag)
                .is_ok()
        }
    }
}

/// Signs a remoting request in place: adds `AccessKey`, then `Signature` over the result.
pub fn sign_remoting(
    ext_fields: &mut ExtFields,
    credentials: &Credentials,
    key: &RemotingKey,
    body: &[u8],
) {
    ext_fields.insert(ACCESS_KEY_FIELD, &credentials.access_key);
    ext_fields.remove(SIGNATURE_FIELD);
    let sig = key.signature(ext_fields, body);
    ext_fields.insert(SIGNATURE_FIELD, sig);
}

#[cold]
fn unreachable_key<T>() -> T {
    // `Hmac::new_from_slice` accepts every key length; this is never reached.
    panic!("HMAC refused a key")
}

/// What makes one signed request unique on its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub nonce: [u8; NONCE_BYTES],
    pub seq: u64,
    pub timestamp_ms: u64,
}

/// Signs the requests of one connection: one nonce, a sequence that counts up.
#[derive(Debug, Clone)]
pub struct Signer {
    credentials: Credentials,
    key: ConnKey,
    seq: u64,
}

impl Signer {
    /// `nonce` must be random and used for no other connection.
    pub fn new(credentials: Credentials, nonce: [u8; NONCE_BYTES]) -> Self {
        let key = credentials
            .native_key()
            .connection(&credentials.access_key, &nonce);
        Signer {
            credentials,
            key,
            seq: 0,
        }
    }

    pub fn access_key(&self) -> &str {
        &self.credentials.access_key
    }

    /// Signs the next frame written on the connection; frames must be written in the order
    /// they are signed.
    pub fn sign(&mut self, frame_bytes: &mut Vec<u8>, now_ms: u64) -> Result<()> {
        let stamp = Stamp {
            nonce: self.key.nonce,
            seq: self.seq + 1,
            timestamp_ms: now_ms,
        };
        sign_with(frame_bytes, &self.key, stamp)?;
        self.seq += 1;
        Ok(())
    }
}

/// Signs a whole unsigned request frame in place: sets SIGNED, appends the trailer and
/// fixes the length field. Nothing changes on error. Derives the connection key each call:
/// a connection signs with a [`Signer`], which keeps it.
pub fn sign(
    frame_bytes: &mut Vec<u8>,
    access_key: &str,
    key: &NativeKey,
    stamp: Stamp,
) -> Result<()> {
    check_access_key(access_key)?;
    sign_with(
        frame_bytes,
        &key.connection(access_key, &stamp.nonce),
        stamp,
    )
}

/// [`sign`] with the connection's key; `stamp.nonce` must be the key's.
fn sign_with(frame_bytes: &mut Vec<u8>, key: &ConnKey, stamp: Stamp) -> Result<()> {
    let access_key = key.access_key.as_str();
    check_access_key(access_key)?;
    let f = frame::parse(frame_bytes)?;
    if f.is_response() || f.flags.is_signed() {
        return Err(WireError::Invalid {
            what: "frame to sign",
            detail: "only an unsigned request can be signed",
        });
    }
    let flags = f.flags.with_signed(true);
    let total = frame_bytes.len() + TRAILER_FIXED_BYTES + access_key.len();
    if total > FRAME_BYTES_MAX {
        return Err(WireError::FrameTooLarge {
            len: total,
            max: FRAME_BYTES_MAX,
        });
    }
    let tag = key.mac(&stamp, frame_bytes).ok_or(WireError::Invalid {
        what: "frame to sign",
        detail: "too long for AES-GCM",
    })?;
    frame_bytes.reserve(TRAILER_FIXED_BYTES + access_key.len());
    frame_bytes.extend_from_slice(&tag);
    frame_bytes.extend_from_slice(&stamp.timestamp_ms.to_be_bytes());
    frame_bytes.extend_from_slice(&stamp.seq.to_be_bytes());
    frame_bytes.extend_from_slice(&stamp.nonce);
    frame_bytes.extend_from_slice(access_key.as_bytes());
    frame_bytes.push(access_key.len() as u8);
    frame_bytes.push(TRAILER_VERSION);
    set_length(frame_bytes, total);
    frame_bytes[6..8].copy_from_slice(&flags.bits().to_be_bytes());
    Ok(())
}

fn set_length(frame_bytes: &mut [u8], total: usize) {
    // total <= FRAME_BYTES_MAX, which fits u32 (checked in frame.rs).
    let len = (total - LENGTH_FIELD_BYTES) as u32;
    frame_bytes[..LENGTH_FIELD_BYTES].copy_from_slice(&len.to_be_bytes());
}

/// The trailer of a signed request, removed from its frame by [`strip`].
#[derive(Clone, PartialEq, Eq)]
pub struct Signed {
    pub access_key: String,
    pub stamp: Stamp,
    mac: [u8; MAC_BYTES],
}

impl std::fmt::Debug for Signed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signed")
            .field("access_key", &self.access_key)
            .field("stamp", &self.stamp)
            .finish_non_exhaustive()
    }
}

impl Signed {
    /// Does the MAC sign `unsigned_frame` (the frame [`strip`] left) with this trailer's
    /// fields under the account's `key`? Derives the connection key: a receiver that keeps
    /// it calls [`Self::verify_with`].
    pub fn verify(&self, key: &NativeKey, unsigned_frame: &[u8]) -> bool {
        self.verify_with(
            &key.connection(&self.access_key, &self.stamp.nonce),
            unsigned_frame,
        )
    }

    /// Does the MAC sign `unsigned_frame` under the connection key `key`, made for this
    /// trailer's access key and nonce? Compared in constant time.
    pub fn verify_with(&self, key: &ConnKey, unsigned_frame: &[u8]) -> bool {
        if unsigned_frame.len() < PREFIX_BYTES
            || key.access_key != self.access_key
            || key.nonce != self.stamp.nonce
        {
            return false;
        }
        key.mac(&self.stamp, unsigned_frame).is_some_and(|tag| {
            aws_lc_rs::constant_time::verify_slices_are_equal(&tag, &self.mac).is_ok()
        })
    }
}

/// If `frame_bytes` (one whole frame, as [`frame::check`] delimited it) is signed, removes
/// its trailer, clears SIGNED, fixes the length field and returns the trailer; an unsigned
/// frame is left as it is (`Ok(None)`). A trailer that does not fit its frame is an error
/// and leaves the frame unchanged.
pub fn strip(frame_bytes: &mut Vec<u8>) -> Result<Option<Signed>> {
    let Some(prefix) = frame::peek(frame_bytes) else {
        return Err(WireError::Truncated {
            what: "frame prefix",
            need: PREFIX_BYTES,
            have: frame_bytes.len(),
        });
    };
    let flags = Flags::from_bits(prefix.flags)?;
    if !flags.is_signed() {
        return Ok(None);
    }
    let bad = |detail| WireError::Invalid {
        what: "authentication trailer",
        detail,
    };
    let n = frame_bytes.len();
    let content = PREFIX_BYTES + prefix.header_len as usize;
    if n < content + TRAILER_FIXED_BYTES || prefix.frame_len != n as u64 {
        return Err(bad("shorter than its fixed fields"));
    }
    if frame_bytes[n - 1] != TRAILER_VERSION {
        return Err(bad("unknown version"));
    }
    let key_len = usize::from(frame_bytes[n - 2]);
    let trailer_len = TRAILER_FIXED_BYTES + key_len;
    if key_len == 0 || n < content + trailer_len {
        return Err(bad("access key length does not fit the frame"));
    }
    let t = &frame_bytes[n - trailer_len..];
    let access_key = std::str::from_utf8(&t[MAC_BYTES + 32..MAC_BYTES + 32 + key_len])
        .map_err(|_| bad("access key is not UTF-8"))?
        .to_owned();
    let mut mac = [0u8; MAC_BYTES];
    mac.copy_from_slice(&t[..MAC_BYTES]);
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&t[at..at + 8]);
        u64::from_be_bytes(b)
    };
    let mut nonce = [0u8; NONCE_BYTES];
    nonce.copy_from_slice(&t[MAC_BYTES + 16..MAC_BYTES + 32]);
    let stamp = Stamp {
        timestamp_ms: u64_at(MAC_BYTES),
        seq: u64_at(MAC_BYTES + 8),
        nonce,
    };
    frame_bytes.truncate(n - trailer_len);
    let total = frame_bytes.len();
    set_length(frame_bytes, total);
    frame_bytes[6..8].copy_from_slice(&flags.with_signed(false).bits().to_be_bytes());
    Ok(Some(Signed {
        access_key,
        stamp,
        mac,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::RequestCode;

    fn request(body: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        frame::encode_prefix(
            &mut f,
            RequestCode::SendMessage,
            Flags::REQUEST,
            7,
            3,
            body.len(),
        )
        .expect("prefix");
        f.extend_from_slice(b"hdr");
        f.extend_from_slice(body);
        f
    }

    fn stamp(seq: u64) -> Stamp {
        Stamp {
            nonce: [9; NONCE_BYTES],
            seq,
            timestamp_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn a_signed_frame_strips_back_to_the_original_and_verifies() {
        let original = request(b"the body");
        let key = NativeKey::new(b"s3cret");
        let mut f = original.clone();
        sign(&mut f, "alice", &key, stamp(1)).expect("sign");
        assert!(frame::check(&f, FRAME_BYTES_MAX).expect("valid").is_some());
        assert!(frame::parse(&f).expect("parse").flags.is_signed());
        let signed = strip(&mut f).expect("strip").expect("signed");
        assert_eq!(f, original);
        assert_eq!(signed.access_key, "alice");
        assert_eq!(signed.stamp, stamp(1));
        assert!(signed.verify(&key, &f));
        assert!(!signed.verify(&NativeKey::new(b"other"), &f));
    }

    #[test]
    fn any_changed_byte_or_field_fails_verification() {
        let key = NativeKey::new(b"s3cret");
        let mut f = request(b"the body");
        sign(&mut f, "alice", &key, stamp(1)).expect("sign");
        for i in 0..f.len() {
            let mut g = f.clone();
            g[i] ^= 0x01;
            // A flipped byte either breaks the trailer, or the MAC no longer verifies.
            if let Ok(Some(s)) = strip(&mut g) {
                assert!(!s.verify(&key, &g), "byte {i} flipped and still verified");
            }
        }
    }

    #[test]
    fn the_request_id_and_stamp_are_covered() {
        let key = NativeKey::new(b"k");
        let mut f = request(b"x");
        sign(&mut f, "a", &key, stamp(5)).expect("sign");
        let s = strip(&mut f).expect("strip").expect("signed");
        let mut other = s.clone();
        other.stamp.seq = 6;
        assert!(!other.verify(&key, &f));
        let mut other = s.clone();
        other.stamp.timestamp_ms += 1;
        assert!(!other.verify(&key, &f));
        f[15] ^= 1; // request id
        assert!(!s.verify(&key, &f));
    }

    #[test]
    fn a_connection_key_verifies_only_its_own_access_key_and_nonce() {
        let root = NativeKey::new(b"s3cret");
        let mut f = request(b"the body");
        sign(&mut f, "alice", &root, stamp(1)).expect("sign");
        let s = strip(&mut f).expect("strip").expect("signed");
        let kept = root.connection("alice", &[9; NONCE_BYTES]);
        assert!(kept.is_for(&root, "alice", &[9; NONCE_BYTES]));
        assert!(s.verify_with(&kept, &f));
        let other_nonce = root.connection("alice", &[8; NONCE_BYTES]);
        assert!(!other_nonce.is_for(&root, "alice", &[9; NONCE_BYTES]));
        assert!(!s.verify_with(&other_nonce, &f));
        assert!(!s.verify_with(&root.connection("bob", &[9; NONCE_BYTES]), &f));
        let other_root = NativeKey::new(b"other");
        assert!(!kept.is_for(&other_root, "alice", &[9; NONCE_BYTES]));
        assert!(!s.verify_with(&other_root.connection("alice", &[9; NONCE_BYTES]), &f));
    }

    #[test]
    fn a_trailer_of_the_first_version_is_refused() {
        let mut f = request(b"abc");
        sign(&mut f, "a", &NativeKey::new(b"k"), stamp(1)).expect("sign");
        *f.last_mut().expect("version") = 1;
        let err = strip(&mut f).expect_err("version 1");
        assert!(err.to_string().contains("unknown version"), "{err}");
    }

    #[test]
    fn unsigned_frames_pass_through_and_bad_trailers_are_refused() {
        let mut f = request(b"abc");
        let copy = f.clone();
        assert!(strip(&mut f).expect("unsigned").is_none());
        assert_eq!(f, copy);
        // SIGNED set but no trailer room.
        f[7] |= 4;
        assert!(strip(&mut f).is_err());
        assert_eq!(&f[8..], &copy[8..]);
    }

    #[test]
    fn responses_and_signed_frames_cannot_be_signed() {
        let key = NativeKey::new(b"k");
        let mut f = request(b"");
        sign(&mut f, "a", &key, stamp(1)).expect("sign");
        assert!(sign(&mut f, "a", &key, stamp(2)).is_err());
        assert!(sign(&mut request(b""), "", &key, stamp(1)).is_err());
    }

    #[test]
    fn remoting_signature_matches_rocketmq_clients() {
        // The vector rocketmq-client-rust 1.0's AclClientRPCHook test pins: fields a=first,
        // z=last, AccessKey=ak, SecurityToken=token, body "body", secret "secret".
        let mut ext = ExtFields::new();
        for (k, v) in [
            ("a", "first"),
            ("z", "last"),
            (ACCESS_KEY_FIELD, "ak"),
            (SECURITY_TOKEN_FIELD, "token"),
            (SIGNATURE_FIELD, "stale"),
        ] {
            ext.insert(k, v);
        }
        let key = RemotingKey::new(b"secret");
        assert_eq!(key.signature(&ext, b"body"), "wuJkFDNRMKY6aFXTDwT/vg0UC8M=");
        assert!(key.verify(&ext, b"body", "wuJkFDNRMKY6aFXTDwT/vg0UC8M="));
        assert!(!key.verify(&ext, b"bodY", "wuJkFDNRMKY6aFXTDwT/vg0UC8M="));
        assert!(!key.verify(&ext, b"body", "not base64!"));
        // The same request signed with HMAC-SHA256, as the Rust port's admin tool signs
        // (the vector its AclClientRPCHook test pins for the secure profile).
        let sha256 = "mBwsFNM/fUVM2NmLpnXIS+x+x7EZXmyuboG/4ZGmwa0=";
        assert!(key.verify(&ext, b"body", sha256));
        assert!(!key.verify(&ext, b"bodY", sha256));
        assert!(!RemotingKey::new(b"other").verify(&ext, b"body", sha256));
    }

    #[test]
    fn the_trailer_layout_matches_an_independent_implementation() {
        // Made in Python (struct, the `blake3` package for derive_key and the keyed hash,
        // `cryptography`'s AESGCM for the tag) from the layout in the module docs: SEND,
        // request id 1, header "hdr", body "records", access key "alice", secret
        // "fuzz-secret", nonce 16 x 0x07, seq 1, timestamp 1_800_000_000_000.
        const PYTHON: &str = "00000051000a00040000000000000001000000036864727265636f726473\
            df6cb114ce43efa053c7b2721ada1205000001a3185c50000000000000000001070707070707070707\
            07070707070707616c6963650502";
        let want: Vec<u8> = (0..PYTHON.len() / 2)
            .map(|i| u8::from_str_radix(&PYTHON[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        let mut f = Vec::new();
        frame::encode_prefix(&mut f, RequestCode::SendMessage, Flags::REQUEST, 1, 3, 7)
            .expect("prefix");
        f.extend_from_slice(b"hdrrecords");
        let stamp = Stamp {
            nonce: [7; NONCE_BYTES],
            seq: 1,
            timestamp_ms: 1_800_000_000_000,
        };
        sign(&mut f, "alice", &NativeKey::new(b"fuzz-secret"), stamp).expect("sign");
        assert_eq!(f, want);
    }

    #[test]
    fn secrets_do_not_show_in_debug() {
        let c = Credentials::new("alice", "hunter2").expect("valid");
        let s = format!("{c:?} {:?} {:?}", c.native_key(), c.remoting_key());
        assert!(s.contains("alice"));
        assert!(!s.contains("hunter2"));
    }
}
