//! Signing in without letting anyone lock others out.
//!
//! Guesses are limited per account and *source*: a client address, or a device
//! (a browser that signed in as that user before and kept the device cookie).
//! An attacker exhausts the limits of their own sources at the accounts they
//! guess at only: the account's owner still signs in from their browser, and
//! everyone else behind the same address (a shared NAT or proxy) still signs
//! in to their own account. An address spraying guesses over many accounts is
//! stopped by a per-address bound [`ADDRESS_FACTOR`] times the per-account one.
//! People behind the same proxy are told apart by `X-Forwarded-For` when the
//! proxy is trusted (`TOOLSHED_TRUSTED_PROXIES`).
//!
//! Every attempt is stored (in the database, so every replica counts it)
//! *before* its password is checked, so a burst of concurrent guesses is
//! counted in full: at most the limit of them get their password checked. One
//! that succeeds is removed, and so is one refused by a limit: only failed
//! password checks count, so hammering a locked account adds nothing to its
//! address's count.

use std::net::IpAddr;

use sqlx::Row;

use crate::accounts::Accounts;
use crate::accounts::{AccountError, User};
use crate::ids::UserId;
use crate::membership::Membership;
use crate::{now_ms, passwords, tokens};

handle! {
    /// Signing in with a password, rate-limited per account and address.
    SignIn
}

/// Where a sign-in comes from.
#[derive(Debug, Clone)]
pub struct SignInFrom {
    /// The client's address (see [`TrustedProxies::client`]).
    pub client: IpAddr,
    /// The device cookie's token, if the browser presented one.
    pub device: Option<String>,
}

impl SignInFrom {
    pub fn address(client: IpAddr) -> Self {
        Self { client, device: None }
    }
}

/// A successful sign-in.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub user: User,
    /// The token for the browser's device cookie (the one it presented, or a new one).
    pub device: String,
}

/// How long a device cookie is honoured.
pub const DEVICE_LIFETIME_MS: i64 = 180 * 86_400_000;

/// Untrusted sources together (addresses without a known device) may guess at
/// one account this many times the per-source limit before they are all
/// refused; known devices still sign in.
const UNTRUSTED_SOURCES_FACTOR: i64 = 10;

/// One address (without a known device) may fail this many times the
/// per-account limit at all accounts together before it is refused at every
/// account: far above what the people behind one NAT mistype, low enough to
/// stop a password spray.
pub const ADDRESS_FACTOR: i64 = 20;

/// Proxies whose `X-Forwarded-For` is believed, from `TOOLSHED_TRUSTED_PROXIES`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrustedProxies(Vec<ipnet::IpNet>);

impl TrustedProxies {
    /// Addresses or CIDR ranges, separated by commas or spaces.
    pub fn parse(list: &str) -> Result<Self, String> {
        list.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()).map(parse_net).collect::<Result<_, _>>().map(Self)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address: the peer, unless the peer is a trusted proxy; then
    /// the right-most `X-Forwarded-For` hop that is not one (hops left of an
    /// untrusted one could be forged by the client itself).
    pub fn client(&self, peer: IpAddr, forwarded_for: &[&str]) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.trusts(client) {
            return client;
        }
        let hops = forwarded_for.iter().flat_map(|h| h.split(',')).map(str::trim).collect::<Vec<_>>();
        for hop in hops.into_iter().rev() {
            match parse_hop(hop) {
                Some(ip) => {
                    client = ip;
                    if !self.trusts(ip) {
                        break;
                    }
                }
                // Garbage: believe nothing further left.
                None => break,
            }
        }
        client
    }
}

fn parse_net(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("“{s}” is neither an IP address nor a CIDR range"))
}

/// One `X-Forwarded-For` entry: an address, possibly `[v6]:port` or `v4:port`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    hop.parse::<std::net::SocketAddr>().ok().map(|s| s.ip().to_canonical())
}

impl SignIn<'_> {
    /// Checks a sign-in. Past a source's limit every attempt from it is refused
    /// without looking at the password, so guessing cannot continue there.
    /// Each result is counted in the metrics (`toolshed_sign_ins_total`).
    pub async fn sign_in(self, username: &str, password: &str, from: &SignInFrom) -> Result<SignedIn, AccountError> {
        let result = self.checked(username, password, from).await;
        self.core.metrics().sign_in(match &result {
            Ok(_) => "ok",
            Err(AccountError::InvalidCredentials) => "wrong",
            Err(AccountError::RateLimited) => "rate_limited",
            Err(AccountError::AwaitingApproval(_)) => "awaiting_approval",
            Err(AccountError::PasswordsOff) => "passwords_off",
            Err(_) => "error",
        });
        result
    }

    async fn checked(self, username: &str, password: &str, from: &SignInFrom) -> Result<SignedIn, AccountError> {
        let username = username.trim().to_ascii_lowercase();
        let settings = self.core.settings();
        if !settings.passwords {
            return Err(AccountError::PasswordsOff);
        }
        let client = from.client.to_string();
        // A device counts only for the user it signed in as.
        let device = match &from.device {
            Some(token) => self.known_device(&username, token).await?,
            None => None,
        };
        let now = now_ms();
        let attempt: i64 = sqlx::query("INSERT INTO login_attempts (username, client, device, at_ms) VALUES ($1, $2, $3, $4) RETURNING id")
            .bind(&username)
            .bind(&client)
            .bind(device.as_ref().map(|(hash, _)| hash.as_str()))
            .bind(now)
            .fetch_one(self.core.db().pool())
            .await?
            .try_get("id")?;
        let since = now - settings.login_window_ms;
        let limit = settings.login_failures_per_account;
        let refused = match &device {
            Some((hash, _)) => self.attempts("username = $1 AND device = $2", &[&username, hash], since).await? > limit,
            None => {
                self.attempts("username = $1 AND client = $2 AND device IS NULL", &[&username, &client], since).await? > limit
                    || self.attempts("client = $1 AND device IS NULL", &[&client], since).await? > limit * ADDRESS_FACTOR
                    || self.attempts("username = $1 AND device IS NULL", &[&username], since).await? > limit * UNTRUSTED_SOURCES_FACTOR
            }
        };
        if refused {
            tracing::warn!(%username, %client, known_device = device.is_some(), "sign-in refused: too many attempts from this source");
            // No password was checked: the attempt must not count against the
            // address, or one locked account would lock its neighbours too.
            self.forget_attempt(attempt).await?;
            return Err(AccountError::RateLimited);
        }
        let found = Accounts::new(self.core).user_with_hash(&username).await?;
        let (user, hash) = match found {
            Some((u, h)) => (Some(u), Some(h)),
            None => (None, None),
        };
        let ok = passwords::verify(password.to_owned(), hash).await;
        match user {
            Some(user) if ok && user.is_active => {
                self.forget_attempt(attempt).await?;
                let device = match (device, &from.device) {
                    (Some(_), Some(token)) => token.clone(),
                    _ => self.new_device(user.id).await?,
                };
                Ok(SignedIn { user, device })
            }
            // The right password for an account that asked to join: say it waits.
            Some(user) if ok && !user.is_active => match Membership::new(self.core).pending_department(user.id).await? {
                Some(department) => Err(AccountError::AwaitingApproval(department)),
                None => Err(AccountError::InvalidCredentials),
            },
            _ => {
                // Keep the table small: a day of history is plenty for any window.
                sqlx::query("DELETE FROM login_attempts WHERE at_ms < $1").bind(now - 86_400_000).execute(self.core.db().pool()).await?;
                Err(AccountError::InvalidCredentials)
            }
        }
    }

    async fn forget_attempt(self, attempt: i64) -> Result<(), AccountError> {
        sqlx::query("DELETE FROM login_attempts WHERE id = $1").bind(attempt).execute(self.core.db().pool()).await?;
        Ok(())
    }

    /// Attempts in the window matching `filter` (whose `$n` are `binds`).
    async fn attempts(self, filter: &str, binds: &[&str], since: i64) -> Result<i64, AccountError> {
        let sql = format!("SELECT COUNT(*) AS n FROM login_attempts WHERE {filter} AND at_ms > ${}", binds.len() + 1);
        let mut query = sqlx::query(&sql);
        for b in binds {
            query = query.bind(*b);
        }
        Ok(query.bind(since).fetch_one(self.core.db().pool()).await?.try_get("n")?)
    }

    /// The stored hash of `token` if it is a live device of `username`.
    async fn known_device(self, username: &str, token: &str) -> Result<Option<(String, UserId)>, AccountError> {
        let hash = tokens::hash(token);
        let row = sqlx::query(
            "SELECT d.user_id FROM login_devices d JOIN users u ON u.id = d.user_id \
             WHERE d.token_hash = $1 AND u.username = $2 AND d.created_at > $3",
        )
        .bind(&hash)
        .bind(username)
        .bind(now_ms() - DEVICE_LIFETIME_MS)
        .fetch_optional(self.core.db().pool())
        .await?;
        Ok(match row {
            Some(r) => Some((hash, UserId(r.try_get("user_id")?))),
            None => None,
        })
    }

    async fn new_device(self, user: UserId) -> Result<String, AccountError> {
        use base64::Engine;
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let now = now_ms();
        let mut tx = self.core.db().begin().await?;
        sqlx::query("INSERT INTO login_devices (token_hash, user_id, created_at) VALUES ($1, $2, $3)")
            .bind(tokens::hash(&token))
            .bind(user.0)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM login_devices WHERE created_at <= $1").bind(now - DEVICE_LIFETIME_MS).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let proxies = TrustedProxies::parse("10.0.0.1").unwrap();
        assert_eq!(proxies.client(ip("192.0.2.9"), &["203.0.113.5"]), ip("192.0.2.9"));
        assert_eq!(TrustedProxies::default().client(ip("10.0.0.1"), &["203.0.113.5"]), ip("10.0.0.1"));
    }

    #[test]
    fn behind_trusted_proxies_the_client_is_the_rightmost_untrusted_hop() {
        let proxies = TrustedProxies::parse("10.0.0.0/8, 127.0.0.1").unwrap();
        // The client claims to be 1.1.1.1; the proxy appended what it saw.
        assert_eq!(proxies.client(ip("127.0.0.1"), &["1.1.1.1, 203.0.113.5, 10.1.2.3"]), ip("203.0.113.5"));
        assert_eq!(proxies.client(ip("127.0.0.1"), &["1.1.1.1", "203.0.113.5:4711"]), ip("203.0.113.5"));
        assert_eq!(proxies.client(ip("::ffff:127.0.0.1"), &["[2001:db8::7]:443"]), ip("2001:db8::7"));
        // Nothing usable forwarded: the last trusted hop it is.
        assert_eq!(proxies.client(ip("127.0.0.1"), &["garbage"]), ip("127.0.0.1"));
        assert_eq!(proxies.client(ip("127.0.0.1"), &[]), ip("127.0.0.1"));
    }

    #[test]
    fn trusted_proxies_must_be_addresses_or_ranges() {
        assert!(TrustedProxies::parse("").unwrap() == TrustedProxies::default());
        assert!(TrustedProxies::parse("10.0.0.1 fd00::/8").is_ok());
        assert!(TrustedProxies::parse("proxy.internal").unwrap_err().contains("proxy.internal"));
    }
}
