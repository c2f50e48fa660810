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

/// 20 random letters and digits: invitation codes, dummy hashes.
pub fn generate() -> String {
    use rand::distributions::{Alphanumeric, DistString};
    Alphanumeric.sample_string(&mut rand::thread_rng(), 20)
}

/// A random password for an account nobody types one for (the first admin,
/// the demo tools' author, an account made by single sign-on). A password may
/// not contain its username, and 20 random characters sometimes do: a short
/// username often.
pub fn generate_for(username: &str) -> String {
    let username = username.to_ascii_lowercase();
    loop {
        let password = generate();
        if username.is_empty() || !password.to_ascii_lowercase().contains(&username) {
            return password;
        }
    }
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

    #[test]
    fn a_generated_password_never_contains_its_username() {
        // The shortest username: about 1 in 50 draws of 20 characters holds it.
        let username = crate::names::Username::parse("ab").unwrap();
        for _ in 0..1000 {
            let password = generate_for("ab");
            assert!(!password.to_ascii_lowercase().contains("ab"), "{password}");
            assert!(crate::names::NewPassword::parse(&password, &username).is_ok(), "{password}");
        }
    }

    #[tokio::test]
    async fn an_unknown_account_never_verifies() {
        assert!(!verify("anything".into(), None).await);
    }
}
