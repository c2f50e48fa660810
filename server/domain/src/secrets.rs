//! Credentials Toolshed must use but never show back (external MCP servers'
//! keys, LLM endpoints' keys): sealed with ChaCha20-Poly1305 before they reach
//! the database, opened only on the way to the service they belong to.
//!
//! Each sealed value is bound to what it belongs to (`purpose`, e.g.
//! `"mcp_server:7"`), so a ciphertext copied onto another row does not open.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// Length of the key in bytes.
pub const KEY_LEN: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    /// Wrong key (another deployment's data, a rotated key) or tampered data.
    #[error("a stored secret cannot be opened: the secrets key changed or the data was altered")]
    Unreadable,
}

/// Seals and opens secrets with the deployment's key. Cheap to clone.
#[derive(Clone)]
pub struct SecretBox {
    key: std::sync::Arc<LessSafeKey>,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

impl SecretBox {
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        let key = UnboundKey::new(&CHACHA20_POLY1305, key).expect("a 32-byte key suits ChaCha20-Poly1305");
        Self { key: std::sync::Arc::new(LessSafeKey::new(key)) }
    }

    /// A box with a fresh random key: for tests and throwaway instances, whose
    /// sealed data nobody needs to read after a restart.
    pub fn ephemeral() -> Self {
        let mut key = [0u8; KEY_LEN];
        SystemRandom::new().fill(&mut key).expect("the system's random source works");
        Self::new(&key)
    }

    /// `nonce ‖ ciphertext ‖ tag`. A random 96-bit nonce per value is safe for
    /// far more values than a deployment will ever seal.
    pub fn seal(&self, purpose: &str, plaintext: &str) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).expect("the system's random source works");
        let mut sealed = plaintext.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(purpose.as_bytes()), &mut sealed)
            .expect("sealing fails only for absurd lengths");
        [nonce.as_slice(), &sealed].concat()
    }

    pub fn open(&self, purpose: &str, sealed: &[u8]) -> Result<String, SecretError> {
        if sealed.len() < NONCE_LEN {
            return Err(SecretError::Unreadable);
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SecretError::Unreadable)?;
        let mut buf = rest.to_vec();
        let plain = self.key.open_in_place(nonce, Aad::from(purpose.as_bytes()), &mut buf).map_err(|_| SecretError::Unreadable)?;
        String::from_utf8(plain.to_vec()).map_err(|_| SecretError::Unreadable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_with_the_same_key_and_purpose() {
        let secrets = SecretBox::ephemeral();
        let sealed = secrets.seal("mcp_server:1", "Bearer abc");
        assert!(!sealed.windows(3).any(|w| w == b"abc"), "the plaintext must not be visible");
        assert_eq!(secrets.open("mcp_server:1", &sealed).unwrap(), "Bearer abc");
    }

    #[test]
    fn a_secret_does_not_open_for_another_purpose_key_or_after_tampering() {
        let secrets = SecretBox::ephemeral();
        let mut sealed = secrets.seal("mcp_server:1", "k");
        assert_eq!(secrets.open("mcp_server:2", &sealed), Err(SecretError::Unreadable));
        assert_eq!(SecretBox::ephemeral().open("mcp_server:1", &sealed), Err(SecretError::Unreadable));
        assert_eq!(secrets.open("mcp_server:1", &sealed[..5]), Err(SecretError::Unreadable));
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert_eq!(secrets.open("mcp_server:1", &sealed), Err(SecretError::Unreadable));
    }

    #[test]
    fn sealing_twice_gives_different_ciphertexts() {
        let secrets = SecretBox::ephemeral();
        assert_ne!(secrets.seal("p", "same"), secrets.seal("p", "same"));
    }
}
