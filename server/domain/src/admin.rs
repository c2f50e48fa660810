//! Administration: every account (roles, deactivation, departments), the
//! departments themselves (create, rename, review before publish), and the
//! audit log with its filters. Every method checks `is_admin` itself.
//!
//! **Renaming a department changes its title only.** Its slug (`name`) is in
//! every listing's URL, MCP endpoint and token scope, so changing it would break
//! every client configured with them; the slug is fixed at creation.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::accounts::Accounts;
use crate::accounts::{AccountError, User};
use crate::membership::Membership;
use crate::names::{DepartmentName, Invalid, Title};
use crate::store::StoreError;
use crate::store::Tx;
use crate::{audit, now_ms};

handle! {
    /// Administration: every account, the departments and the audit log.
    Admin
}

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("Only administrators may do that.")]
    Forbidden,
    #[error("No user “{0}”.")]
    UnknownUser(String),
    #[error("No department “{0}”.")]
    UnknownDepartment(String),
    #[error("The department “{0}” already exists.")]
    DepartmentTaken(String),
    /// Someone must always be able to administer the instance.
    #[error("The last active administrator cannot be demoted or deactivated.")]
    LastAdmin,
    #[error("“{0}” is not an active member of {1}: only its own people may decide its approvals.")]
    NotAMember(String, String),
    #[error("You cannot deactivate your own account.")]
    DeactivateSelf,
    /// Activating would skip the maintainers' decision.
    #[error("“{0}” asked to join a department: approve or decline the request on the People page.")]
    AwaitingApproval(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for AdminError {
    fn from(e: sqlx::Error) -> Self {
        AdminError::Store(e.into())
    }
}

impl From<AccountError> for AdminError {
    fn from(e: AccountError) -> Self {
        match e {
            AccountError::Store(e) => AdminError::Store(e),
            AccountError::Invalid(e) => AdminError::Invalid(e),
            _ => AdminError::Forbidden,
        }
    }
}

/// A department as the admin page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepartmentRow {
    pub name: String,
    pub title: String,
    pub review_required: bool,
    /// Publishes need test cases, all passing.
    pub tests_required: bool,
    /// Calls of its tools that write wait for an approver.
    pub approval_required: bool,
    /// Its maintainers register its apps for connected accounts.
    pub maintainers_register_apps: bool,
    /// Who decides its approvals (usernames); empty: its maintainers.
    #[serde(default)]
    pub approvers: Vec<String>,
    pub members: i64,
}

/// Which audit entries to show; blank text and `None` mean "any".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Actions starting with this, e.g. `tool.` or `user.deactivated`.
    pub action: String,
    /// The acting user's username, exactly.
    pub actor: String,
    /// Targets starting with this, e.g. `tool:finance/` or `user:alice`.
    pub target: String,
    /// From this instant (Unix ms, inclusive).
    pub from_ms: Option<i64>,
    /// Before this instant (Unix ms, exclusive).
    pub to_ms: Option<i64>,
    /// From 1.
    pub page: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    pub page: i64,
    pub has_more: bool,
}

/// Makes `user` an admin or not (the caller checks rights and writes the audit row).
pub(crate) async fn write_admin_flag(tx: &mut Tx, user: crate::ids::UserId, is_admin: bool) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE users SET is_admin = $1, updated_at = $2 WHERE id = $3")
        .bind(i64::from(is_admin))
        .bind(now_ms())
        .bind(user.0)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Whether an active admin other than `user` exists.
pub(crate) async fn another_active_admin(tx: &mut Tx, user: crate::ids::UserId) -> Result<bool, sqlx::Error> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM users WHERE is_admin = 1 AND is_active = 1 AND id <> $1")
        .bind(user.0)
        .fetch_one(&mut **tx)
        .await?;
    Ok(row.try_get::<i64, _>("n")? > 0)
}

pub(crate) fn require_admin(user: &User) -> Result<(), AdminError> {
    if user.is_admin {
        Ok(())
    } else {
        Err(AdminError::Forbidden)
    }
}

/// `%` and `_` in typed text match themselves in `LIKE … ESCAPE '\'`.
fn like_prefix(text: &str) -> String {
    format!("{}%", text.trim().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRow {
    pub username: String,
    pub display_name: String,
    pub department: String,
    pub is_admin: bool,
    pub is_active: bool,
    /// Asked to join and waits for a maintainer (inactive until then).
    pub awaiting_approval: bool,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub at_ms: i64,
    pub actor: Option<String>,
    pub action: String,
    pub target: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl Admin<'_> {
    /// Every account, for admins only (`Forbidden` otherwise).
    pub async fn all_users(self, admin: &User) -> Result<Vec<UserRow>, AccountError> {
        if !admin.is_admin {
            return Err(AccountError::Forbidden);
        }
        let rows = sqlx::query(
            "SELECT u.username, u.display_name, d.name AS dept, u.is_admin, u.is_active, u.created_at, \
             CASE WHEN r.user_id IS NULL THEN 0 ELSE 1 END AS awaiting \
             FROM users u JOIN departments d ON d.id = u.department_id LEFT JOIN join_requests r ON r.user_id = u.id \
             ORDER BY u.username",
        )
        .fetch_all(self.core.db().pool())
        .await?;
        Ok(rows
            .iter()
            .map(|r| {
                Ok(UserRow {
                    username: r.try_get("username")?,
                    display_name: r.try_get("display_name")?,
                    department: r.try_get("dept")?,
                    is_admin: r.try_get::<i64, _>("is_admin")? != 0,
                    is_active: r.try_get::<i64, _>("is_active")? != 0,
                    awaiting_approval: r.try_get::<i64, _>("awaiting")? != 0,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?)
    }

    pub const AUDIT_PAGE: i64 = 50;

    /// One page of the audit log, newest first, filtered. Admins only.
    pub async fn audit_log(self, admin: &User, filter: &AuditFilter) -> Result<AuditPage, AdminError> {
        require_admin(admin)?;
        let page = filter.page.max(1);
        let rows = sqlx::query(
            "SELECT a.at_ms, u.username AS actor, a.action, a.target, a.before_json, a.after_json FROM audit_log a \
             LEFT JOIN users u ON u.id = a.actor_id \
             WHERE a.action LIKE $1 ESCAPE '\\' AND a.target LIKE $2 ESCAPE '\\' AND ($3 = '' OR u.username = $3) \
             AND a.at_ms >= $4 AND a.at_ms < $5 ORDER BY a.id DESC LIMIT $6 OFFSET $7",
        )
        .bind(like_prefix(&filter.action))
        .bind(like_prefix(&filter.target))
        .bind(filter.actor.trim().to_ascii_lowercase())
        .bind(filter.from_ms.unwrap_or(i64::MIN))
        .bind(filter.to_ms.unwrap_or(i64::MAX))
        .bind(Self::AUDIT_PAGE + 1)
        .bind((page - 1) * Self::AUDIT_PAGE)
        .fetch_all(self.core.db().pool())
        .await?;
        let mut entries = rows
            .iter()
            .map(|r| {
                Ok(AuditEntry {
                    at_ms: r.try_get("at_ms")?,
                    actor: r.try_get("actor")?,
                    action: r.try_get("action")?,
                    target: r.try_get("target")?,
                    before: r.try_get("before_json")?,
                    after: r.try_get("after_json")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let has_more = entries.len() as i64 > Self::AUDIT_PAGE;
        entries.truncate(Self::AUDIT_PAGE as usize);
        Ok(AuditPage { entries, page, has_more })
    }

    /// The user `username` as an admin acts on them.
    async fn target_user(self, username: &str) -> Result<User, AdminError> {
        Accounts::new(self.core).user_by_username(username).await?.ok_or_else(|| AdminError::UnknownUser(username.trim().to_owned()))
    }

    /// Fails with `LastAdmin` when `user` is the only active admin.
    async fn keep_an_admin(self, tx: &mut Tx, user: &User) -> Result<(), AdminError> {
        if !(user.is_admin && user.is_active) {
            return Ok(());
        }
        if !another_active_admin(tx, user.id).await? {
            return Err(AdminError::LastAdmin);
        }
        Ok(())
    }

    /// Promotes a user to admin or demotes them; the last active admin stays one.
    pub async fn set_admin(self, admin: &User, username: &str, is_admin: bool) -> Result<User, AdminError> {
        require_admin(admin)?;
        let user = self.target_user(username).await?;
        let mut tx = self.core.begin().await?;
        if !is_admin {
            self.keep_an_admin(&mut tx, &user).await?;
        }
        write_admin_flag(&mut tx, user.id, is_admin).await?;
        let action = if is_admin { "user.promoted" } else { "user.demoted" };
        let target = format!("user:{}", user.username);
        audit::record(
            &mut tx,
            Some(admin.id),
            action,
            &target,
            Some(serde_json::json!({"is_admin": user.is_admin})),
            Some(serde_json::json!({"is_admin": is_admin})),
        )
        .await?;
        tx.commit().await?;
        self.target_user(username).await
    }

    /// Deactivates an account (its sessions, API tokens and OAuth grants stop
    /// working at once: the session epoch moves on, token checks read
    /// `is_active`, grants are revoked) or reactivates it (old sessions and
    /// grants stay dead).
    pub async fn set_active(self, admin: &User, username: &str, active: bool) -> Result<User, AdminError> {
        require_admin(admin)?;
        let user = self.target_user(username).await?;
        if !active && user.id == admin.id {
            return Err(AdminError::DeactivateSelf);
        }
        if active && Membership::new(self.core).pending_department(user.id).await?.is_some() {
            return Err(AdminError::AwaitingApproval(user.username));
        }
        let mut tx = self.core.begin().await?;
        if !active {
            self.keep_an_admin(&mut tx, &user).await?;
            crate::oauth::revoke_all_grants(&mut tx, user.id).await?;
        }
        sqlx::query("UPDATE users SET is_active = $1, session_epoch = session_epoch + $2, updated_at = $3 WHERE id = $4")
            .bind(i64::from(active))
            .bind(i64::from(!active))
            .bind(now_ms())
            .bind(user.id.0)
            .execute(&mut *tx)
            .await?;
        let action = if active { "user.reactivated" } else { "user.deactivated" };
        let target = format!("user:{}", user.username);
        audit::record(
            &mut tx,
            Some(admin.id),
            action,
            &target,
            Some(serde_json::json!({"is_active": user.is_active})),
            Some(serde_json::json!({"is_active": active})),
        )
        .await?;
        tx.commit().await?;
        if !active {
            // After the commit: revoking waits on providers, which may be slow or down.
            if let Err(e) = crate::connections::Connections::new(self.core).forget_all(user.id).await {
                // Deactivated all the same: their calls stop, whatever became of the tokens.
                tracing::error!(user = %user.username, error = %e, "forgetting a deactivated person's connected accounts failed");
            }
        }
        self.target_user(username).await
    }

    /// Moves a user to another existing department. Their tools stay where
    /// they are: a tool belongs to its department, not to its author.
    pub async fn move_user(self, admin: &User, username: &str, department: &DepartmentName) -> Result<User, AdminError> {
        require_admin(admin)?;
        let user = self.target_user(username).await?;
        let mut tx = self.core.begin().await?;
        let row = sqlx::query("SELECT id FROM departments WHERE name = $1").bind(department.as_str()).fetch_optional(&mut *tx).await?;
        let Some(row) = row else { return Err(AdminError::UnknownDepartment(department.to_string())) };
        let dept_id: i64 = row.try_get("id")?;
        sqlx::query("UPDATE users SET department_id = $1, updated_at = $2 WHERE id = $3")
            .bind(dept_id)
            .bind(now_ms())
            .bind(user.id.0)
            .execute(&mut *tx)
            .await?;
        let target = format!("user:{}", user.username);
        let (before, after) =
            (serde_json::json!({"department": user.department.name}), serde_json::json!({"department": department.as_str()}));
        audit::record(&mut tx, Some(admin.id), "user.department_changed", &target, Some(before), Some(after)).await?;
        tx.commit().await?;
        self.target_user(username).await
    }

    /// Every department with its settings and member count. Admins only.
    pub async fn admin_departments(self, admin: &User) -> Result<Vec<DepartmentRow>, AdminError> {
        require_admin(admin)?;
        let rows = sqlx::query(
            "SELECT d.name, d.title, d.review_required, d.tests_required, d.approval_required, d.maintainers_register_apps, (SELECT COUNT(*) FROM users u WHERE u.department_id = d.id) AS members \
             FROM departments d ORDER BY d.name",
        )
        .fetch_all(self.core.db().pool())
        .await?;
        Ok(rows.iter().map(department_from_row).collect::<Result<_, _>>()?)
    }

    pub async fn create_department(self, admin: &User, name: &DepartmentName, title: &Title) -> Result<(), AdminError> {
        require_admin(admin)?;
        let mut tx = self.core.begin().await?;
        let inserted = sqlx::query("INSERT INTO departments (name, title, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING")
            .bind(name.as_str())
            .bind(title.as_str())
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
        if inserted.rows_affected() == 0 {
            return Err(AdminError::DepartmentTaken(name.to_string()));
        }
        let after = serde_json::json!({"title": title.as_str()});
        audit::record(&mut tx, Some(admin.id), "department.created", &format!("department:{name}"), None, Some(after)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Changes a department's title; its slug never changes (see the module docs).
    pub async fn rename_department(self, admin: &User, name: &DepartmentName, title: &Title) -> Result<(), AdminError> {
        require_admin(admin)?;
        let before = self.department_row(name).await?;
        let mut tx = self.core.begin().await?;
        sqlx::query("UPDATE departments SET title = $1 WHERE name = $2").bind(title.as_str()).bind(name.as_str()).execute(&mut *tx).await?;
        let (b, a) = (serde_json::json!({"title": before.title}), serde_json::json!({"title": title.as_str()}));
        audit::record(&mut tx, Some(admin.id), "department.renamed", &format!("department:{name}"), Some(b), Some(a)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// A department's settings, for its maintainers and admins.
    pub async fn department_settings(self, actor: &User, name: &DepartmentName) -> Result<DepartmentRow, AdminError> {
        let own = actor.department.name == name.as_str();
        if !crate::membership::may_maintain(actor, if own { actor.department.id.0 } else { -1 }) {
            return Err(AdminError::Forbidden);
        }
        self.department_row(name).await
    }

    /// Whether publishing the department's tools needs test cases that all
    /// pass: its maintainers' decision, or an admin's.
    pub async fn set_tests_required(self, actor: &User, name: &DepartmentName, required: bool) -> Result<(), AdminError> {
        let row = sqlx::query("SELECT id, tests_required FROM departments WHERE name = $1")
            .bind(name.as_str())
            .fetch_optional(self.core.db().pool())
            .await?
            .ok_or_else(|| AdminError::UnknownDepartment(name.to_string()))?;
        if !crate::membership::may_maintain(actor, row.try_get("id")?) {
            return Err(AdminError::Forbidden);
        }
        let before = row.try_get::<i64, _>("tests_required")? != 0;
        let mut tx = self.core.begin().await?;
        sqlx::query("UPDATE departments SET tests_required = $1 WHERE name = $2")
            .bind(i64::from(required))
            .bind(name.as_str())
            .execute(&mut *tx)
            .await?;
        let (b, a) = (serde_json::json!({"tests_required": before}), serde_json::json!({"tests_required": required}));
        audit::record(&mut tx, Some(actor.id), "department.tests_changed", &format!("department:{name}"), Some(b), Some(a)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether calls of the department's tools that write wait for an
    /// approver ([`crate::approvals`]), and who decides them instead of its
    /// maintainers (none: its maintainers do; each an active member of it).
    /// Its maintainers' decision, or an admin's.
    pub async fn set_approvals(self, actor: &User, name: &DepartmentName, required: bool, approvers: &[String]) -> Result<(), AdminError> {
        let before = self.department_row(name).await?;
        let dept: i64 =
            sqlx::query_scalar("SELECT id FROM departments WHERE name = $1").bind(name.as_str()).fetch_one(self.core.db().pool()).await?;
        if !crate::membership::may_maintain(actor, dept) {
            return Err(AdminError::Forbidden);
        }
        let mut named: Vec<&str> = approvers.iter().map(|u| u.trim().trim_start_matches('@')).filter(|u| !u.is_empty()).collect();
        named.sort_unstable();
        named.dedup();
        let mut tx = self.core.begin().await?;
        sqlx::query("DELETE FROM department_approvers WHERE department_id = $1").bind(dept).execute(&mut *tx).await?;
        for username in &named {
            let added = sqlx::query(
                "INSERT INTO department_approvers (department_id, user_id) \
                 SELECT $1, id FROM users WHERE username = $2 AND department_id = $1 AND is_active = 1",
            )
            .bind(dept)
            .bind(username)
            .execute(&mut *tx)
            .await?;
            if added.rows_affected() != 1 {
                return Err(AdminError::NotAMember((*username).to_owned(), name.to_string()));
            }
        }
        sqlx::query("UPDATE departments SET approval_required = $1 WHERE id = $2")
            .bind(i64::from(required))
            .bind(dept)
            .execute(&mut *tx)
            .await?;
        let b = serde_json::json!({"approval_required": before.approval_required, "approvers": before.approvers});
        let a = serde_json::json!({"approval_required": required, "approvers": named});
        audit::record(&mut tx, Some(actor.id), "department.approvals_changed", &format!("department:{name}"), Some(b), Some(a)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether publishes in the department wait for an admin's review.
    pub async fn set_review_required(self, admin: &User, name: &DepartmentName, required: bool) -> Result<(), AdminError> {
        self.set_flag(admin, name, "review_required", "department.review_changed", required).await
    }

    /// Whether the department's maintainers register its apps for connected
    /// accounts ([`crate::connections`]).
    pub async fn set_maintainers_register_apps(self, admin: &User, name: &DepartmentName, allowed: bool) -> Result<(), AdminError> {
        self.set_flag(admin, name, "maintainers_register_apps", "department.app_registration_changed", allowed).await
    }

    /// Sets a department's yes/no `column` (admins only), audited as `action`.
    async fn set_flag(
        self,
        admin: &User,
        name: &DepartmentName,
        column: &'static str,
        action: &str,
        value: bool,
    ) -> Result<(), AdminError> {
        require_admin(admin)?;
        let mut tx = self.core.begin().await?;
        let was: Option<i64> = sqlx::query_scalar(&format!("SELECT {column} FROM departments WHERE name = $1"))
            .bind(name.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        let was = was.ok_or_else(|| AdminError::UnknownDepartment(name.to_string()))?;
        sqlx::query(&format!("UPDATE departments SET {column} = $1 WHERE name = $2"))
            .bind(i64::from(value))
            .bind(name.as_str())
            .execute(&mut *tx)
            .await?;
        let (b, a) = (serde_json::json!({column: was != 0}), serde_json::json!({column: value}));
        audit::record(&mut tx, Some(admin.id), action, &format!("department:{name}"), Some(b), Some(a)).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn department_row(self, name: &DepartmentName) -> Result<DepartmentRow, AdminError> {
        let row = sqlx::query(
            "SELECT d.name, d.title, d.review_required, d.tests_required, d.approval_required, d.maintainers_register_apps, (SELECT COUNT(*) FROM users u WHERE u.department_id = d.id) AS members \
             FROM departments d WHERE d.name = $1",
        )
        .bind(name.as_str())
        .fetch_optional(self.core.db().pool())
        .await?;
        let row = row.ok_or_else(|| AdminError::UnknownDepartment(name.to_string()))?;
        let mut department = department_from_row(&row)?;
        department.approvers = sqlx::query_scalar(
            "SELECT u.username FROM department_approvers p JOIN users u ON u.id = p.user_id \
             JOIN departments d ON d.id = p.department_id WHERE d.name = $1 ORDER BY u.username",
        )
        .bind(name.as_str())
        .fetch_all(self.core.db().pool())
        .await?;
        Ok(department)
    }
}

fn department_from_row(r: &sqlx::any::AnyRow) -> Result<DepartmentRow, sqlx::Error> {
    Ok(DepartmentRow {
        name: r.try_get("name")?,
        title: r.try_get("title")?,
        review_required: r.try_get::<i64, _>("review_required")? != 0,
        tests_required: r.try_get::<i64, _>("tests_required")? != 0,
        approval_required: r.try_get::<i64, _>("approval_required")? != 0,
        maintainers_register_apps: r.try_get::<i64, _>("maintainers_register_apps")? != 0,
        approvers: Vec::new(),
        members: r.try_get("members")?,
    })
}
