//! Accounts from the company's identity provider (OpenID Connect).
//!
//! The protocol (discovery, PKCE, token checks) is the server's; this module
//! gets an identity the provider has vouched for and decides who that is here:
//! the account linked to its `(issuer, subject)`, or a new one whose department
//! and role come from the first of the person's groups an admin has mapped.
//! The mapping decides once, at the first sign-in: afterwards departments and
//! roles change here (admins, maintainers), not at the provider. Only the admin
//! group, when configured, follows the provider at every sign-in.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::accounts::Accounts;
use crate::accounts::{insert_user, AccountError, Registration, User};
use crate::admin::AdminError;
use crate::ids::UserId;
use crate::names::Role;
use crate::names::{DepartmentName, DisplayName, Invalid, NewPassword, Username};
use crate::store::Tx;
use crate::{audit, now_ms, passwords};

handle! {
    /// Single sign-on with the company's identity provider.
    Sso
}

/// The session key where a failed single sign-on's sentence waits for the sign-in page.
pub const FAILURE_KEY: &str = "sso.failure";

/// Who the provider says signed in (its ID token and user info, checked).
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub issuer: String,
    /// The provider's stable, unique id for the person.
    pub subject: String,
    pub preferred_username: Option<String>,
    pub email: Option<String>,
    pub name: Option<String>,
    /// The values of the groups claim.
    pub groups: Vec<String>,
}

/// A provider group that puts new accounts in a department with a role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMapping {
    pub group: String,
    pub department: String,
    pub department_title: String,
    pub role: Role,
}

impl Sso<'_> {
    /// The account for `identity`, made on its first sign-in. Fails when the
    /// account is deactivated, or when a new person is in no mapped group.
    pub async fn sso_sign_in(self, identity: &Identity) -> Result<User, AccountError> {
        let linked = sqlx::query("SELECT user_id FROM user_identities WHERE issuer = $1 AND subject = $2")
            .bind(&identity.issuer)
            .bind(&identity.subject)
            .fetch_optional(self.core.db().pool())
            .await?;
        let user = match linked {
            Some(row) => Accounts::new(self.core).user(UserId(row.try_get("user_id")?)).await?.ok_or(AccountError::UnknownUser)?,
            None => self.sso_register(identity).await?,
        };
        if !user.is_active {
            return Err(AccountError::Deactivated);
        }
        self.follow_admin_group(user, identity).await
    }

    async fn sso_register(self, identity: &Identity) -> Result<User, AccountError> {
        let mapped = self.mapping_for(&identity.groups).await?;
        let Some((department_id, department, role)) = mapped else { return Err(AccountError::NoMappedGroup(identity.groups.clone())) };
        let display_name = identity.name.as_deref().or(identity.preferred_username.as_deref()).unwrap_or(&identity.subject);
        let display_name = DisplayName::parse(&display_name.chars().take(DisplayName::MAX).collect::<String>())?;
        let mut tx = self.core.begin().await?;
        let username = free_username(&mut tx, &username_base(identity)).await?;
        let reg = Registration {
            // Never used to sign in: the stored hash is `passwords::NO_PASSWORD`.
            password: NewPassword::parse(&passwords::generate_for(username.as_str()), &username)?,
            username,
            display_name,
            department: DepartmentName::parse(&department)?,
            is_admin: false,
            role,
        };
        let id = insert_user(&mut tx, &reg, passwords::NO_PASSWORD, department_id, true, None).await?;
        sqlx::query("INSERT INTO user_identities (issuer, subject, user_id, created_at) VALUES ($1, $2, $3, $4)")
            .bind(&identity.issuer)
            .bind(&identity.subject)
            .bind(id.0)
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Accounts::new(self.core).user(id).await?.ok_or(AccountError::UnknownUser)
    }

    /// The department (id, name) and role of the most powerful mapping among
    /// `groups` (ties: the group first in name order).
    async fn mapping_for(self, groups: &[String]) -> Result<Option<(i64, String, Role)>, AccountError> {
        let rows = sqlx::query(
            "SELECT m.group_name, m.department_id, d.name, m.role FROM sso_group_mappings m \
             JOIN departments d ON d.id = m.department_id ORDER BY m.group_name",
        )
        .fetch_all(self.core.db().pool())
        .await?;
        let mut best: Option<(i64, String, Role)> = None;
        for row in rows {
            let group: String = row.try_get("group_name")?;
            if !groups.contains(&group) {
                continue;
            }
            let role = Role::from_column(&row.try_get::<String, _>("role")?)?;
            if best.as_ref().is_none_or(|(_, _, r)| role > *r) {
                best = Some((row.try_get("department_id")?, row.try_get("name")?, role));
            }
        }
        Ok(best)
    }

    /// Makes the account an admin exactly when the provider puts it in the
    /// admin group (`TOOLSHED_SSO_ADMIN_GROUP`), keeping the last active admin.
    async fn follow_admin_group(self, user: User, identity: &Identity) -> Result<User, AccountError> {
        let Some(group) = &self.core.settings().sso_admin_group else { return Ok(user) };
        let is_admin = identity.groups.contains(group);
        if is_admin == user.is_admin {
            return Ok(user);
        }
        let mut tx = self.core.begin().await?;
        if !is_admin && !crate::admin::another_active_admin(&mut tx, user.id).await? {
            tracing::warn!(user = %user.username, "left the admin group at the provider but is the last active admin here: stays one");
            return Ok(user);
        }
        crate::admin::write_admin_flag(&mut tx, user.id, is_admin).await?;
        let (before, after) = (serde_json::json!({"is_admin": user.is_admin}), serde_json::json!({"is_admin": is_admin}));
        audit::record(&mut tx, Some(user.id), "user.admin_from_provider", &format!("user:{}", user.username), Some(before), Some(after))
            .await?;
        tx.commit().await?;
        Accounts::new(self.core).user(user.id).await?.ok_or(AccountError::UnknownUser)
    }

    /// Every group mapping, for admins.
    pub async fn group_mappings(self, admin: &User) -> Result<Vec<GroupMapping>, AdminError> {
        crate::admin::require_admin(admin)?;
        let rows = sqlx::query(
            "SELECT m.group_name, d.name, d.title, m.role FROM sso_group_mappings m JOIN departments d ON d.id = m.department_id \
             ORDER BY m.group_name",
        )
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(GroupMapping {
                    group: r.try_get("group_name")?,
                    department: r.try_get("name")?,
                    department_title: r.try_get("title")?,
                    role: Role::from_column(&r.try_get::<String, _>("role")?)?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Maps `group` (replacing its mapping, if any) to `department` with `role`.
    pub async fn map_group(self, admin: &User, group: &str, department: &str, role: Role) -> Result<(), AdminError> {
        crate::admin::require_admin(admin)?;
        let group = group.trim();
        if group.is_empty() || group.chars().count() > 256 || group.chars().any(char::is_control) {
            return Err(Invalid { field: "Group", reason: "must be 1 to 256 characters, without control characters".into() }.into());
        }
        let mut tx = self.core.begin().await?;
        let row = sqlx::query("SELECT id FROM departments WHERE name = $1").bind(department.trim()).fetch_optional(&mut *tx).await?;
        let Some(row) = row else { return Err(AdminError::UnknownDepartment(department.trim().to_owned())) };
        let department_id: i64 = row.try_get("id")?;
        let before = sqlx::query(
            "SELECT d.name, m.role FROM sso_group_mappings m JOIN departments d ON d.id = m.department_id WHERE m.group_name = $1",
        )
        .bind(group)
        .fetch_optional(&mut *tx)
        .await?
        .map(|r| {
            Ok::<_, sqlx::Error>(
                serde_json::json!({"department": r.try_get::<String, _>("name")?, "role": r.try_get::<String, _>("role")?}),
            )
        })
        .transpose()?;
        sqlx::query(
            "INSERT INTO sso_group_mappings (group_name, department_id, role, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (group_name) DO UPDATE SET department_id = excluded.department_id, role = excluded.role",
        )
        .bind(group)
        .bind(department_id)
        .bind(role.as_str())
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        let after = serde_json::json!({"department": department.trim(), "role": role.as_str()});
        audit::record(&mut tx, Some(admin.id), "sso.group_mapped", &format!("group:{group}"), before, Some(after)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Removes `group`'s mapping; accounts it made stay where they are.
    pub async fn unmap_group(self, admin: &User, group: &str) -> Result<(), AdminError> {
        crate::admin::require_admin(admin)?;
        let mut tx = self.core.begin().await?;
        let removed = sqlx::query("DELETE FROM sso_group_mappings WHERE group_name = $1").bind(group).execute(&mut *tx).await?;
        if removed.rows_affected() == 0 {
            return Ok(());
        }
        audit::record(&mut tx, Some(admin.id), "sso.group_unmapped", &format!("group:{group}"), None, None).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// A username from the provider's preferred username, else the email's local
/// part, else the subject: lowercased, other characters as '-', cut to fit.
fn username_base(identity: &Identity) -> String {
    let raw = identity
        .preferred_username
        .as_deref()
        .or_else(|| identity.email.as_deref().and_then(|e| e.split('@').next()))
        .unwrap_or(&identity.subject);
    let raw = raw.split('@').next().unwrap_or(raw);
    let slug: String =
        raw.to_ascii_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).collect();
    let slug = slug.trim_matches('-');
    let slug = if slug.starts_with(|c: char| c.is_ascii_lowercase()) { slug.to_owned() } else { format!("u-{slug}") };
    // Room for a "-NN" suffix.
    slug.chars().take(Username::MAX - 3).collect::<String>().trim_end_matches('-').to_owned()
}

/// `base`, or `base-2`, `base-3`, … whichever no account has yet.
async fn free_username(tx: &mut Tx, base: &str) -> Result<Username, AccountError> {
    let base = if base.len() < 2 { format!("{base}-user") } else { base.to_owned() };
    for n in 1..100 {
        let candidate = if n == 1 { base.clone() } else { format!("{base}-{n}") };
        let taken = sqlx::query("SELECT 1 FROM users WHERE username = $1").bind(&candidate).fetch_optional(&mut **tx).await?.is_some();
        if !taken {
            return Ok(Username::parse(&candidate)?);
        }
    }
    Err(AccountError::UsernameTaken(base))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(preferred: Option<&str>, email: Option<&str>, subject: &str) -> String {
        let identity = Identity {
            subject: subject.into(),
            preferred_username: preferred.map(Into::into),
            email: email.map(Into::into),
            ..Default::default()
        };
        username_base(&identity)
    }

    #[test]
    fn usernames_come_from_the_preferred_username_then_the_email_then_the_subject() {
        assert_eq!(named(Some("Ada.Lovelace"), Some("ada@example.com"), "1"), "ada-lovelace");
        assert_eq!(named(Some("ada@corp.example"), None, "1"), "ada");
        assert_eq!(named(None, Some("Grace.Hopper@example.com"), "1"), "grace-hopper");
        assert_eq!(named(None, None, "248289761001"), "u-248289761001");
        assert!(named(Some(&"x".repeat(80)), None, "1").len() <= Username::MAX - 3);
        assert!(Username::parse(&named(Some("Ünïcode Näme"), None, "1")).is_ok());
    }
}
