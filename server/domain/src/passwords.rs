//! Password hashing with argon2id (OWASP parameters: 19 MiB, 2 passes).
//! Hashing is deliberately slow, so it runs on the blocking pool.

use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

/// Not a PHC string: no password ever verifies against it, so an account made
/// by single sign-on cannot be entered with a password.
pub(crate) const NO_PASSWORD: &str = "sso";

/// A hash of a random password, verified against when the account does not exist
/// so that "no such user" takes as long as "wrong password".
fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| hash_blocking(&generate()))
}

fn hash_blocking(password: &str) -> String {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 with default parameters cannot fail on a generated salt")
        .to_string()
}

pub async fn hash(password: String) -> String {
    tokio::task::spawn_blocking(move || hash_blocking(&password)).await.expect("the hashing task does not panic")
}

/// `stored` is `None` when the account does not exist; the answer is then `false`
/// after the same amount of work.
pub async fn verify(password: String, stored: Option<String>) -> bool {
    tokio::task::spawn_blocking(move || {
        let exists = stored.is_some();
        let stored = stored.unwrap_or_else(|| dummy_hash().to_owned());
        let ok = PasswordHash::new(&stored).map(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok()).unwrap_or(false);
        ok && exists
    })
    .await
    .unwrap_or(false)
}

/// A random password for generated accounts (the first admin).
pub fn generate() -> String {
    use rand::distributions::{Alphanumeric, DistString};
    Alphanumeric.sample_string(&mut rand::thread_rng(), 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_only_its_own_password() {
        let h = hash("correct horse battery".into()).await;
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("correct horse battery".into(), Some(h.clone())).await);
        assert!(!verify("Correct horse battery".into(), Some(h)).await);
    }

    #[tokio::test]
    async fn an_unknown_account_never_verifies() {
        assert!(!verify("anything".into(), None).await);
    }
}
