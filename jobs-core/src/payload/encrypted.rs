//! Laravel's encrypted job classes (`ShouldBeEncrypted`): the command is encrypted with the
//! app's key as Laravel's `Encrypter` does it, AES-CBC with an HMAC-SHA256 over the IV and the
//! ciphertext. [`LaravelKey::decrypt_command`] checks the MAC and returns the serialized object.

use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, KeyIvInit};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Deserialize;

use super::{decode_hex, php};

/// The environment variable [`QueueConfig::default`](crate::QueueConfig) reads the key from:
/// Laravel's own `APP_KEY`.
pub const APP_KEY_ENV: &str = "APP_KEY";

/// A Laravel app's key (`APP_KEY`): 32 bytes for AES-256-CBC, Laravel's default cipher, or
/// 16 for AES-128-CBC.
#[derive(Clone)]
pub struct LaravelKey(Vec<u8>);

/// Why an encrypted command cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecryptError {
    /// The key is neither `base64:` and 16 or 32 bytes nor 16 or 32 characters.
    #[error("the Laravel app key must be base64:<16 or 32 bytes> or 16 or 32 characters")]
    InvalidKey,
    /// The command is not Laravel's encrypted payload (base64 of `{iv, value, mac}`).
    #[error("not a Laravel encrypted payload")]
    NotEncrypted,
    /// The MAC does not match: another app's key, or the payload was altered.
    #[error("the MAC does not match: encrypted with another key, or altered")]
    MacMismatch,
    /// An AEAD cipher (AES-GCM), which this reader does not take.
    #[error("encrypted with an AEAD cipher (AES-GCM), which this worker does not read")]
    UnsupportedCipher,
    /// The ciphertext or what it decrypts to is not what Laravel writes.
    #[error("the command does not decrypt to a serialized job: {0}")]
    Malformed(String),
}

#[derive(Deserialize)]
struct Envelope {
    iv: String,
    value: String,
    mac: String,
    #[serde(default)]
    tag: Option<String>,
}

impl LaravelKey {
    /// The key as `APP_KEY` holds it: `base64:...`, or the raw characters.
    ///
    /// ```
    /// use redjob::payload::encrypted::LaravelKey;
    /// assert!(LaravelKey::parse("base64:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").is_ok());
    /// assert!(LaravelKey::parse("too short").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<LaravelKey, DecryptError> {
        let bytes = match text.strip_prefix("base64:") {
            Some(encoded) => STANDARD
                .decode(encoded)
                .map_err(|_| DecryptError::InvalidKey)?,
            None => text.as_bytes().to_vec(),
        };
        match bytes.len() {
            16 | 32 => Ok(LaravelKey(bytes)),
            _ => Err(DecryptError::InvalidKey),
        }
    }

    /// The key in `APP_KEY`, if that is set and valid.
    pub fn from_env() -> Option<LaravelKey> {
        std::env::var(APP_KEY_ENV)
            .ok()
            .and_then(|text| LaravelKey::parse(&text).ok())
    }

    /// The serialized job object inside an encrypted command, after checking its MAC.
    pub fn decrypt_command(&self, command: &str) -> Result<String, DecryptError> {
        let json = STANDARD
            .decode(command)
            .map_err(|_| DecryptError::NotEncrypted)?;
        let envelope: Envelope =
            serde_json::from_slice(&json).map_err(|_| DecryptError::NotEncrypted)?;
        if envelope.tag.as_deref().is_some_and(|tag| !tag.is_empty()) {
            return Err(DecryptError::UnsupportedCipher);
        }
        let mac = decode_hex(&envelope.mac).ok_or(DecryptError::MacMismatch)?;
        let signer = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.0);
        let signed = format!("{}{}", envelope.iv, envelope.value);
        ring::hmac::verify(&signer, signed.as_bytes(), &mac)
            .map_err(|_| DecryptError::MacMismatch)?;
        let malformed = |what: &str| DecryptError::Malformed(what.to_owned());
        let iv = STANDARD
            .decode(&envelope.iv)
            .map_err(|_| malformed("the IV is not base64"))?;
        let mut data = STANDARD
            .decode(&envelope.value)
            .map_err(|_| malformed("the value is not base64"))?;
        let plain = match self.0.len() {
            32 => cbc::Decryptor::<aes::Aes256>::new_from_slices(&self.0, &iv)
                .map_err(|_| malformed("the IV is not 16 bytes"))?
                .decrypt_padded_mut::<Pkcs7>(&mut data)
                .map_err(|_| malformed("bad padding"))?,
            _ => cbc::Decryptor::<aes::Aes128>::new_from_slices(&self.0, &iv)
                .map_err(|_| malformed("the IV is not 16 bytes"))?
                .decrypt_padded_mut::<Pkcs7>(&mut data)
                .map_err(|_| malformed("bad padding"))?,
        };
        // Laravel encrypts serialize(serialize($job)): a PHP string holding the object.
        match php::unserialize(plain).map_err(|err| DecryptError::Malformed(err.to_string()))? {
            serde_json::Value::String(object) => Ok(object),
            _ => Err(malformed("not a serialized string")),
        }
    }
}

impl std::fmt::Debug for LaravelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LaravelKey(<redacted>)")
    }
}
