//! Who belongs to a department and what they may do there: roles, the
//! registration policy, one-use invitations and requests to join.
//!
//! Nobody joins an existing department on their own unless the instance is
//! `open`: under `invite` (the default) a person arrives by an invitation a
//! maintainer or admin made, or asks to join and waits, with an account that
//! cannot sign in, until one of them decides.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::accounts::Accounts;
use crate::accounts::{ensure_department, insert_user, AccountError, Registration, User};
use crate::ids::UserId;
use crate::names::{Invalid, Role};
use crate::{audit, now_ms, passwords, tokens};

handle! {
    /// Invitations, roles and who belongs to which department.
    Membership
}

/// How people get an account (`TOOLSHED_REGISTRATION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistrationPolicy {
    /// By invitation, or by asking to join a department and being approved.
    #[default]
    Invite,
    /// Anyone who can reach the server registers into any department as an
    /// author; whoever names a new department becomes its maintainer.
    Open,
    /// Only through the company's identity provider; no local registration.
    Sso,
}

impl RegistrationPolicy {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw.trim() {
            "invite" => Ok(Self::Invite),
            "open" => Ok(Self::Open),
            "sso" => Ok(Self::Sso),
            _ => Err(Invalid { field: "Registration", reason: "must be invite, open or sso".into() }),
        }
    }
}

/// May `user` create, edit and publish listings of `department_id`?
pub fn may_author(user: &User, department_id: i64) -> bool {
    user.is_admin || (user.department.id.0 == department_id && user.role >= Role::Author)
}

/// May `user` manage the people of `department_id`?
pub fn may_maintain(user: &User, department_id: i64) -> bool {
    user.is_admin || (user.department.id.0 == department_id && user.role == Role::Maintainer)
}

/// What became of a registration.
#[derive(Debug, Clone)]
pub enum Joined {
    /// The account is active: sign them in.
    Member(User),
    /// The account waits for a maintainer of this department (its title).
    Pending(String),
}

/// An invitation as its link shows it, before anyone uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InviteInfo {
    pub department: String,
    pub department_title: String,
    pub role: Role,
}

/// An invitation just made: the token goes into the link, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewInvite {
    pub token: String,
    pub expires_at: i64,
}

/// An open invitation (neither used nor expired), for those who may withdraw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InviteRow {
    pub id: i64,
    pub department: String,
    pub role: Role,
    pub created_by: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// Someone in a department, as its maintainers see them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Person {
    pub username: String,
    pub display_name: String,
    pub department: String,
    pub role: Role,
    pub is_admin: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    pub username: String,
    pub display_name: String,
    pub department: String,
    pub requested_at: i64,
}

/// Invitations last a week unless their maker says otherwise; at most 30 days.
pub const INVITE_DAYS: i64 = 7;
const MAX_INVITE_DAYS: i64 = 30;
const DAY_MS: i64 = 86_400_000;

/// Rows a user may manage: all for admins, their own department's for maintainers.
fn managed_scope(user: &User) -> Result<Option<i64>, AccountError> {
    if user.is_admin {
        Ok(None)
    } else if user.role == Role::Maintainer {
        Ok(Some(user.department.id.0))
    } else {
        Err(AccountError::NotMaintainer)
    }
}

impl Membership<'_> {
    pub fn registration_policy(self) -> RegistrationPolicy {
        self.core.settings().registration
    }

    /// Registers someone from the registration form: with an invitation (its
    /// department and role), or as the policy allows without one.
    pub async fn join(self, mut reg: Registration, invite: Option<&str>) -> Result<Joined, AccountError> {
        let policy = self.registration_policy();
        // A local account needs a password to sign in with.
        if policy == RegistrationPolicy::Sso || !self.core.settings().passwords {
            return Err(AccountError::RegistrationClosed);
        }
        let hash = passwords::hash(reg.password.expose().to_owned()).await;
        let now = now_ms();
        let mut tx = self.core.begin().await?;
        if let Some(token) = invite.map(str::trim).filter(|t| !t.is_empty()) {
            // Claimed in this transaction: a failed registration gives the invitation back.
            let claimed = sqlx::query(
                "UPDATE invites SET used_at = $1 WHERE token_hash = $2 AND used_at IS NULL AND expires_at > $1 \
                 RETURNING id, department_id, role",
            )
            .bind(now)
            .bind(tokens::hash(token))
            .fetch_optional(&mut *tx)
            .await?;
            let Some(invite) = claimed else { return Err(AccountError::InvalidInvite) };
            reg.role = Role::from_column(&invite.try_get::<String, _>("role")?)?;
            let department_id: i64 = invite.try_get("department_id")?;
            let id = insert_user(&mut tx, &reg, &hash, department_id, true, None).await?;
            sqlx::query("UPDATE invites SET used_by = $1 WHERE id = $2")
                .bind(id.0)
                .bind(invite.try_get::<i64, _>("id")?)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(Joined::Member(Accounts::new(self.core).user(id).await?.ok_or(AccountError::UnknownUser)?));
        }
        let existing =
            sqlx::query("SELECT id, title FROM departments WHERE name = $1").bind(reg.department.as_str()).fetch_optional(&mut *tx).await?;
        match (policy, existing) {
            (RegistrationPolicy::Open, existing) => {
                reg.role = if existing.is_some() { Role::Author } else { Role::Maintainer };
                let department_id = ensure_department(&mut tx, &reg.department, now).await?;
                let id = insert_user(&mut tx, &reg, &hash, department_id, true, None).await?;
                tx.commit().await?;
                Ok(Joined::Member(Accounts::new(self.core).user(id).await?.ok_or(AccountError::UnknownUser)?))
            }
            (_, None) => Err(AccountError::UnknownDepartment(reg.department.to_string())),
            (_, Some(department)) => {
                let department_id: i64 = department.try_get("id")?;
                reg.role = Role::Member;
                let id = insert_user(&mut tx, &reg, &hash, department_id, false, None).await?;
                sqlx::query("INSERT INTO join_requests (user_id, department_id, created_at) VALUES ($1, $2, $3)")
                    .bind(id.0)
                    .bind(department_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Joined::Pending(department.try_get("title")?))
            }
        }
    }

    /// The department title an inactive account asked to join, if it waits for approval.
    pub(crate) async fn pending_department(self, user: UserId) -> Result<Option<String>, AccountError> {
        let row = sqlx::query("SELECT d.title FROM join_requests r JOIN departments d ON d.id = r.department_id WHERE r.user_id = $1")
            .bind(user.0)
            .fetch_optional(self.core.db().pool())
            .await?;
        Ok(row.map(|r| r.try_get("title")).transpose()?)
    }

    /// What an invitation link offers, if it can still be used.
    pub async fn invite_info(self, token: &str) -> Result<Option<InviteInfo>, AccountError> {
        let row = sqlx::query(
            "SELECT d.name, d.title, i.role FROM invites i JOIN departments d ON d.id = i.department_id \
             WHERE i.token_hash = $1 AND i.used_at IS NULL AND i.expires_at > $2",
        )
        .bind(tokens::hash(token.trim()))
        .bind(now_ms())
        .fetch_optional(self.core.db().pool())
        .await?;
        let Some(r) = row else { return Ok(None) };
        Ok(Some(InviteInfo {
            department: r.try_get("name")?,
            department_title: r.try_get("title")?,
            role: Role::from_column(&r.try_get::<String, _>("role")?)?,
        }))
    }

    /// Makes a one-use invitation to `department` with `role`, valid for `days`.
    pub async fn create_invite(self, actor: &User, department: &str, role: Role, days: i64) -> Result<NewInvite, AccountError> {
        if !(1..=MAX_INVITE_DAYS).contains(&days) {
            return Err(Invalid { field: "Valid for", reason: format!("must be between 1 and {MAX_INVITE_DAYS} days") }.into());
        }
        let row =
            sqlx::query("SELECT id FROM departments WHERE name = $1").bind(department.trim()).fetch_optional(self.core.db().pool()).await?;
        let Some(row) = row else { return Err(AccountError::UnknownDepartment(department.trim().to_owned())) };
        let department_id: i64 = row.try_get("id")?;
        if !may_maintain(actor, department_id) {
            return Err(AccountError::NotMaintainer);
        }
        let token = format!("inv_{}", passwords::generate());
        let now = now_ms();
        let expires_at = now + days * DAY_MS;
        let mut tx = self.core.begin().await?;
        sqlx::query(
            "INSERT INTO invites (token_hash, department_id, role, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(tokens::hash(&token))
        .bind(department_id)
        .bind(role.as_str())
        .bind(actor.id.0)
        .bind(now)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        let after = serde_json::json!({"role": role.as_str(), "expires_at": expires_at});
        audit::record(&mut tx, Some(actor.id), "invite.created", &format!("department:{}", department.trim()), None, Some(after)).await?;
        tx.commit().await?;
        Ok(NewInvite { token, expires_at })
    }

    /// Open invitations `actor` may withdraw, newest first.
    pub async fn open_invites(self, actor: &User) -> Result<Vec<InviteRow>, AccountError> {
        let scope = managed_scope(actor)?;
        let rows = sqlx::query(
            "SELECT i.id, d.name AS department, i.role, u.username AS created_by, i.created_at, i.expires_at \
             FROM invites i JOIN departments d ON d.id = i.department_id JOIN users u ON u.id = i.created_by \
             WHERE i.used_at IS NULL AND i.expires_at > $1 AND ($2 = 0 OR i.department_id = $2) ORDER BY i.created_at DESC",
        )
        .bind(now_ms())
        .bind(scope.unwrap_or(0))
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(InviteRow {
                    id: r.try_get("id")?,
                    department: r.try_get("department")?,
                    role: Role::from_column(&r.try_get::<String, _>("role")?)?,
                    created_by: r.try_get("created_by")?,
                    created_at: r.try_get("created_at")?,
                    expires_at: r.try_get("expires_at")?,
                })
            })
            .collect()
    }

    /// Withdraws an open invitation: its link stops working at once.
    pub async fn withdraw_invite(self, actor: &User, id: i64) -> Result<(), AccountError> {
        let scope = managed_scope(actor)?;
        let mut tx = self.core.begin().await?;
        let row =
            sqlx::query("DELETE FROM invites WHERE id = $1 AND used_at IS NULL AND ($2 = 0 OR department_id = $2) RETURNING department_id")
                .bind(id)
                .bind(scope.unwrap_or(0))
                .fetch_optional(&mut *tx)
                .await?;
        // Someone else's invitation is as unknown as a missing one.
        let Some(row) = row else { return Err(AccountError::InvalidInvite) };
        let department: String = sqlx::query("SELECT name FROM departments WHERE id = $1")
            .bind(row.try_get::<i64, _>("department_id")?)
            .fetch_one(&mut *tx)
            .await?
            .try_get("name")?;
        let target = format!("department:{department}");
        audit::record(&mut tx, Some(actor.id), "invite.withdrawn", &target, Some(serde_json::json!({"invite": id})), None).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Requests to join that `actor` may decide, oldest first.
    pub async fn join_requests(self, actor: &User) -> Result<Vec<JoinRequest>, AccountError> {
        let scope = managed_scope(actor)?;
        let rows = sqlx::query(
            "SELECT u.username, u.display_name, d.name AS department, r.created_at FROM join_requests r \
             JOIN users u ON u.id = r.user_id JOIN departments d ON d.id = r.department_id \
             WHERE ($1 = 0 OR r.department_id = $1) ORDER BY r.created_at",
        )
        .bind(scope.unwrap_or(0))
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(JoinRequest {
                    username: r.try_get("username")?,
                    display_name: r.try_get("display_name")?,
                    department: r.try_get("department")?,
                    requested_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// Approves a request to join with `role` (the account becomes active) or,
    /// with `None`, turns it down (the account stays inactive).
    pub async fn decide_join_request(self, actor: &User, username: &str, role: Option<Role>) -> Result<(), AccountError> {
        let scope = managed_scope(actor)?;
        let mut tx = self.core.begin().await?;
        let row = sqlx::query(
            "DELETE FROM join_requests WHERE user_id = (SELECT id FROM users WHERE username = $1) AND ($2 = 0 OR department_id = $2) \
             RETURNING user_id",
        )
        .bind(username.trim().to_ascii_lowercase())
        .bind(scope.unwrap_or(0))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Err(AccountError::UnknownUser) };
        let user_id: i64 = row.try_get("user_id")?;
        let target = format!("user:{}", username.trim().to_ascii_lowercase());
        match role {
            Some(role) => {
                sqlx::query("UPDATE users SET is_active = 1, role = $1, updated_at = $2 WHERE id = $3")
                    .bind(role.as_str())
                    .bind(now_ms())
                    .bind(user_id)
                    .execute(&mut *tx)
                    .await?;
                let after = serde_json::json!({"role": role.as_str(), "active": true});
                audit::record(&mut tx, Some(actor.id), "user.join_approved", &target, None, Some(after)).await?;
            }
            None => audit::record(&mut tx, Some(actor.id), "user.join_declined", &target, None, None).await?,
        }
        tx.commit().await?;
        Ok(())
    }

    /// The active people `actor` manages: their department's, or everyone's for admins.
    pub async fn people(self, actor: &User) -> Result<Vec<Person>, AccountError> {
        let scope = managed_scope(actor)?;
        let rows = sqlx::query(
            "SELECT u.username, u.display_name, d.name AS department, u.role, u.is_admin FROM users u \
             JOIN departments d ON d.id = u.department_id WHERE u.is_active = 1 AND ($1 = 0 OR u.department_id = $1) \
             ORDER BY d.name, u.username",
        )
        .bind(scope.unwrap_or(0))
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Person {
                    username: r.try_get("username")?,
                    display_name: r.try_get("display_name")?,
                    department: r.try_get("department")?,
                    role: Role::from_column(&r.try_get::<String, _>("role")?)?,
                    is_admin: r.try_get::<i64, _>("is_admin")? != 0,
                })
            })
            .collect()
    }

    /// Changes someone's role in their department: admins anywhere,
    /// maintainers in their own.
    pub async fn set_role(self, actor: &User, username: &str, role: Role) -> Result<User, AccountError> {
        let user = Accounts::new(self.core).user_by_username(username).await?.ok_or(AccountError::UnknownUser)?;
        if !may_maintain(actor, user.department.id.0) {
            return Err(AccountError::NotMaintainer);
        }
        let mut tx = self.core.begin().await?;
        sqlx::query("UPDATE users SET role = $1, updated_at = $2 WHERE id = $3")
            .bind(role.as_str())
            .bind(now_ms())
            .bind(user.id.0)
            .execute(&mut *tx)
            .await?;
        let (before, after) = (serde_json::json!({"role": user.role.as_str()}), serde_json::json!({"role": role.as_str()}));
        audit::record(&mut tx, Some(actor.id), "user.role_changed", &format!("user:{}", user.username), Some(before), Some(after)).await?;
        tx.commit().await?;
        Accounts::new(self.core).user(user.id).await?.ok_or(AccountError::UnknownUser)
    }
}
