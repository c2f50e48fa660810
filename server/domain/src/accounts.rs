//! Departments and user accounts: registration, sign-in with rate limiting,
//! password changes, and the first admin.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::ids::{DepartmentId, UserId};
use crate::names::Role;
use crate::names::{DepartmentName, DisplayName, Invalid, NewPassword, Username};
use crate::store::StoreError;
use crate::store::Tx;
use crate::{audit, now_ms, passwords};

handle! {
    /// Departments and user accounts: registration, password changes, the first admin.
    Accounts
}

/// The department new accounts join when none is named (CLI, first admin).
pub const DEFAULT_DEPARTMENT: &str = "general";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Department {
    pub id: DepartmentId,
    pub name: String,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: UserId,
    pub username: String,
    pub display_name: String,
    pub department: Department,
    pub is_admin: bool,
    /// What they may do in their own department (admins may do everything everywhere).
    pub role: Role,
    pub is_active: bool,
    /// Sessions remember this; bumping it signs the user out everywhere.
    pub session_epoch: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("The username “{0}” is already taken.")]
    UsernameTaken(String),
    /// One message for unknown user, wrong password and deactivated account.
    #[error("Invalid username or password.")]
    InvalidCredentials,
    #[error("Too many failed sign-in attempts. Try again in a few minutes.")]
    RateLimited,
    #[error("The current password is not correct.")]
    WrongCurrentPassword,
    #[error("No such user.")]
    UnknownUser,
    #[error("Only administrators may do that.")]
    Forbidden,
    #[error("Only the department's maintainers and administrators may do that.")]
    NotMaintainer,
    #[error("Accounts are made by signing in with the company's identity provider.")]
    RegistrationClosed,
    #[error("This invitation is not valid: it was used or withdrawn, or it has expired. Ask for a new one.")]
    InvalidInvite,
    #[error("There is no department “{0}” to join. Pick one from the list, or ask an administrator to create it.")]
    UnknownDepartment(String),
    /// Only ever said to someone who gave the account's right password.
    #[error("Your request to join {0} is waiting for a maintainer's approval.")]
    AwaitingApproval(String),
    /// Said after single sign-on only: the provider has vouched for the person.
    #[error("Your account here is deactivated. Ask an administrator to reactivate it.")]
    Deactivated,
    #[error("{}", no_mapped_group(.0))]
    NoMappedGroup(Vec<String>),
    #[error("Passwords are turned off here: sign in with the company's identity provider.")]
    PasswordsOff,
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn no_mapped_group(groups: &[String]) -> String {
    let yours = if groups.is_empty() { "you are in no groups there".to_owned() } else { format!("your groups: {}", groups.join(", ")) };
    format!("None of your groups at the identity provider is linked to a department here ({yours}). Ask an administrator to link one.")
}

impl From<sqlx::Error> for AccountError {
    fn from(e: sqlx::Error) -> Self {
        AccountError::Store(e.into())
    }
}

/// What someone typed on the registration form, parsed.
#[derive(Debug, Clone)]
pub struct Registration {
    pub username: Username,
    pub display_name: DisplayName,
    pub department: DepartmentName,
    pub password: NewPassword,
    pub is_admin: bool,
    pub role: Role,
}

impl Registration {
    pub fn parse(username: &str, display_name: &str, department: &str, password: &str) -> Result<Self, AccountError> {
        let username = Username::parse(username)?;
        Ok(Self {
            display_name: DisplayName::parse(display_name)?,
            department: DepartmentName::parse(department)?,
            password: NewPassword::parse(password, &username)?,
            username,
            is_admin: false,
            role: Role::Member,
        })
    }
}

pub(crate) const USER_COLUMNS: &str = "u.id, u.username, u.display_name, u.is_admin, u.role, u.is_active, u.session_epoch, \
     d.id AS dept_id, d.name AS dept_name, d.title AS dept_title";

pub(crate) fn user_from_row(row: &sqlx::any::AnyRow) -> Result<User, sqlx::Error> {
    Ok(User {
        id: UserId(row.try_get("id")?),
        username: row.try_get("username")?,
        display_name: row.try_get("display_name")?,
        is_admin: row.try_get::<i64, _>("is_admin")? != 0,
        role: Role::from_column(&row.try_get::<String, _>("role")?)?,
        is_active: row.try_get::<i64, _>("is_active")? != 0,
        session_epoch: row.try_get("session_epoch")?,
        department: Department {
            id: DepartmentId(row.try_get("dept_id")?),
            name: row.try_get("dept_name")?,
            title: row.try_get("dept_title")?,
        },
    })
}

/// "finance-ops" → "Finance ops": a readable default title for a new department.
fn title_from_slug(slug: &str) -> String {
    let words = slug.replace(['-', '_'], " ");
    let mut chars = words.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

impl Accounts<'_> {
    pub async fn departments(self) -> Result<Vec<Department>, AccountError> {
        let rows = sqlx::query("SELECT id, name, title FROM departments ORDER BY name").fetch_all(self.core.db().pool()).await?;
        rows.iter()
            .map(|r| Ok(Department { id: DepartmentId(r.try_get("id")?), name: r.try_get("name")?, title: r.try_get("title")? }))
            .collect()
    }

    /// Creates the account, active, and its department when it does not exist
    /// yet (the CLI, the first admin, demo data, open registration).
    pub async fn register(self, reg: Registration, actor: Option<UserId>) -> Result<User, AccountError> {
        let hash = passwords::hash(reg.password.expose().to_owned()).await;
        let mut tx = self.core.begin().await?;
        let department_id = ensure_department(&mut tx, &reg.department, now_ms()).await?;
        let id = insert_user(&mut tx, &reg, &hash, department_id, true, actor).await?;
        tx.commit().await?;
        self.user(id).await?.ok_or(AccountError::UnknownUser)
    }

    pub async fn user(self, id: UserId) -> Result<Option<User>, AccountError> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users u JOIN departments d ON d.id = u.department_id WHERE u.id = $1");
        let row = sqlx::query(&sql).bind(id.0).fetch_optional(self.core.db().pool()).await?;
        Ok(row.as_ref().map(user_from_row).transpose()?)
    }

    pub async fn user_by_username(self, username: &str) -> Result<Option<User>, AccountError> {
        Ok(self.user_with_hash(&username.trim().to_ascii_lowercase()).await?.map(|(u, _)| u))
    }

    pub(crate) async fn user_with_hash(self, username: &str) -> Result<Option<(User, String)>, AccountError> {
        let sql = format!(
            "SELECT {USER_COLUMNS}, u.password_hash FROM users u JOIN departments d ON d.id = u.department_id WHERE u.username = $1"
        );
        let row = sqlx::query(&sql).bind(username).fetch_optional(self.core.db().pool()).await?;
        Ok(match row {
            Some(r) => Some((user_from_row(&r)?, r.try_get("password_hash")?)),
            None => None,
        })
    }

    /// The user behind a session, if the session is still valid for them:
    /// the account exists, is active, and the password has not changed since.
    pub async fn user_for_session(self, id: UserId, epoch: i64) -> Result<Option<User>, AccountError> {
        Ok(self.user(id).await?.filter(|u| u.is_active && u.session_epoch == epoch))
    }

    /// Whether the person signs in here with a password: not when passwords
    /// are off, nor for an account single sign-on made (it has none).
    pub async fn signs_in_with_password(self, user: &User) -> Result<bool, AccountError> {
        if !self.core.settings().passwords {
            return Ok(false);
        }
        let found = self.user_with_hash(&user.username).await?;
        Ok(found.is_some_and(|(_, hash)| hash != crate::passwords::NO_PASSWORD))
    }

    /// Changes the password and signs every other session out; returns the
    /// updated user so the caller can keep its own session.
    pub async fn change_password(self, id: UserId, current: &str, new: &str) -> Result<User, AccountError> {
        let user = self.user(id).await?.ok_or(AccountError::UnknownUser)?;
        let (_, hash) = self.user_with_hash(&user.username).await?.ok_or(AccountError::UnknownUser)?;
        if !passwords::verify(current.to_owned(), Some(hash)).await {
            return Err(AccountError::WrongCurrentPassword);
        }
        let new = NewPassword::parse(new, &Username::parse(&user.username)?)?;
        let new_hash = passwords::hash(new.expose().to_owned()).await;
        let mut tx = self.core.begin().await?;
        sqlx::query("UPDATE users SET password_hash = $1, session_epoch = session_epoch + 1, updated_at = $2 WHERE id = $3")
            .bind(&new_hash)
            .bind(now_ms())
            .bind(id.0)
            .execute(&mut *tx)
            .await?;
        audit::record(&mut tx, Some(id), "user.password_changed", &format!("user:{}", user.username), None, None).await?;
        tx.commit().await?;
        self.user(id).await?.ok_or(AccountError::UnknownUser)
    }

    /// On an empty database, creates `admin` with a generated password and returns
    /// the password (to be printed once). Returns `None` when any user exists.
    pub async fn ensure_first_admin(self) -> Result<Option<(String, String)>, AccountError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM users").fetch_one(self.core.db().pool()).await?;
        if row.try_get::<i64, _>("n")? > 0 {
            return Ok(None);
        }
        let password = passwords::generate_for("admin");
        let mut reg = Registration::parse("admin", "Administrator", DEFAULT_DEPARTMENT, &password)?;
        reg.is_admin = true;
        reg.role = Role::Maintainer;
        let user = self.register(reg, None).await?;
        Ok(Some((user.username, password)))
    }
}

/// Inserts the account (`active`: may sign in) in its transaction, audited.
pub(crate) async fn insert_user(
    tx: &mut Tx,
    reg: &Registration,
    password_hash: &str,
    department_id: i64,
    active: bool,
    actor: Option<UserId>,
) -> Result<UserId, AccountError> {
    let now = now_ms();
    let inserted = sqlx::query(
        "INSERT INTO users (username, display_name, department_id, password_hash, is_admin, role, is_active, session_epoch, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $8) RETURNING id",
    )
    .bind(reg.username.as_str())
    .bind(reg.display_name.as_str())
    .bind(department_id)
    .bind(password_hash)
    .bind(i64::from(reg.is_admin))
    .bind(reg.role.as_str())
    .bind(i64::from(active))
    .bind(now)
    .fetch_one(&mut **tx)
    .await
    .map_err(StoreError::from);
    let id: i64 = match inserted {
        Ok(row) => row.try_get("id")?,
        Err(e) if e.is_unique_violation() => return Err(AccountError::UsernameTaken(reg.username.to_string())),
        Err(e) => return Err(e.into()),
    };
    let department: String =
        sqlx::query("SELECT name FROM departments WHERE id = $1").bind(department_id).fetch_one(&mut **tx).await?.try_get("name")?;
    let after = serde_json::json!({
        "username": reg.username.as_str(),
        "department": department,
        "role": reg.role.as_str(),
        "is_admin": reg.is_admin,
        "active": active,
    });
    audit::record(tx, actor.or(Some(UserId(id))), "user.registered", &format!("user:{}", reg.username), None, Some(after)).await?;
    Ok(UserId(id))
}

pub(crate) async fn ensure_department(tx: &mut Tx, name: &DepartmentName, now: i64) -> Result<i64, AccountError> {
    sqlx::query("INSERT INTO departments (name, title, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING")
        .bind(name.as_str())
        .bind(title_from_slug(name.as_str()))
        .bind(now)
        .execute(&mut **tx)
        .await?;
    let row = sqlx::query("SELECT id FROM departments WHERE name = $1").bind(name.as_str()).fetch_one(&mut **tx).await?;
    Ok(row.try_get("id")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn department_titles_are_derived_from_slugs() {
        assert_eq!(title_from_slug("finance-ops"), "Finance ops");
        assert_eq!(title_from_slug("hr"), "Hr");
    }
}
