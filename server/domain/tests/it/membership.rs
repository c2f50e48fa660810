//! Who joins which department, and what each role may do, on SQLite and PostgreSQL.

use crate::support::user;
use toolshed_domain::accounts::Registration;
use toolshed_domain::membership::{Joined, RegistrationPolicy};
use toolshed_domain::names::Role;
use toolshed_domain::signin::SignInFrom;
use toolshed_domain::tools::{NewTool, ToolError};
use toolshed_domain::{AccountError, Db, Settings, Toolshed, User};

fn toolshed(db: Db, registration: RegistrationPolicy) -> Toolshed {
    Toolshed::new(db, Settings { registration, ..Settings::default() })
}

fn newcomer(name: &str, department: &str) -> Registration {
    Registration::parse(name, name, department, "a-long-enough-password").unwrap()
}

async fn admin(ts: &Toolshed) -> User {
    let mut reg = newcomer("root", "general");
    reg.is_admin = true;
    ts.accounts().register(reg, None).await.unwrap()
}

fn joined(j: Joined) -> User {
    match j {
        Joined::Member(u) => u,
        Joined::Pending(d) => panic!("waits for {d}"),
    }
}

fn here() -> SignInFrom {
    SignInFrom::address("10.0.0.1".parse().unwrap())
}

fn draft(name: &str) -> NewTool {
    NewTool::parse(name, name, "", "", "everyone").unwrap()
}

store_test!(an_invitation_brings_its_department_and_role_and_works_once, |db: Db| async move {
    let ts = toolshed(db, RegistrationPolicy::Invite);
    let root = admin(&ts).await;
    user(&ts, "fiona", "finance").await;
    let invite = ts.membership().create_invite(&root, "finance", Role::Author, 7).await.unwrap();
    // The form's department is ignored: the invitation says where.
    let ada = joined(ts.membership().join(newcomer("ada", "legal"), Some(&invite.token)).await.unwrap());
    assert_eq!((ada.department.name.as_str(), ada.role, ada.is_active), ("finance", Role::Author, true));
    let again = ts.membership().join(newcomer("eve", "finance"), Some(&invite.token)).await.unwrap_err();
    assert!(matches!(again, AccountError::InvalidInvite), "{again:?}");
    assert!(ts.accounts().user_by_username("eve").await.unwrap().is_none(), "nothing written for a used invitation");
    assert!(ts.membership().invite_info(&invite.token).await.unwrap().is_none());
});

store_test!(a_registration_that_fails_gives_the_invitation_back, |db: Db| async move {
    let ts = toolshed(db, RegistrationPolicy::Invite);
    let root = admin(&ts).await;
    let invite = ts.membership().create_invite(&root, "general", Role::Member, 7).await.unwrap();
    let taken = ts.membership().join(newcomer("root", "general"), Some(&invite.token)).await.unwrap_err();
    assert!(matches!(taken, AccountError::UsernameTaken(_)), "{taken:?}");
    let ada = joined(ts.membership().join(newcomer("ada", "general"), Some(&invite.token)).await.unwrap());
    assert_eq!(ada.role, Role::Member);
});

store_test!(an_expired_or_withdrawn_invitation_is_refused, |db: Db| async move {
    let ts = toolshed(db, RegistrationPolicy::Invite);
    let root = admin(&ts).await;
    let expired = ts.membership().create_invite(&root, "general", Role::Author, 1).await.unwrap();
    sqlx::query("UPDATE invites SET expires_at = 0").execute(ts.db().pool()).await.unwrap();
    let withdrawn = ts.membership().create_invite(&root, "general", Role::Author, 1).await.unwrap();
    let open = ts.membership().open_invites(&root).await.unwrap();
    assert_eq!(open.len(), 1, "the expired one is not listed");
    ts.membership().withdraw_invite(&root, open[0].id).await.unwrap();
    for token in [&expired.token, &withdrawn.token, &"inv_made-up".to_owned()] {
        let err = ts.membership().join(newcomer("ada", "general"), Some(token)).await.unwrap_err();
        assert!(matches!(err, AccountError::InvalidInvite), "{err:?}");
    }
    assert!(ts.membership().create_invite(&root, "general", Role::Author, 31).await.is_err(), "at most 30 days");
});

store_test!(without_an_invitation_an_account_waits_for_a_maintainer, |db: Db| async move {
    let ts = toolshed(db, RegistrationPolicy::Invite);
    let root = admin(&ts).await;
    let invite = ts.membership().create_invite(&root, "general", Role::Maintainer, 7).await.unwrap();
    let maya = joined(ts.membership().join(newcomer("maya", "general"), Some(&invite.token)).await.unwrap());
    match ts.membership().join(newcomer("ada", "general"), None).await.unwrap() {
        Joined::Pending(department) => assert_eq!(department, "General"),
        Joined::Member(_) => panic!("joined on her own"),
    }
    // Only the right password learns that the request waits.
    let err = ts.signin().sign_in("ada", "a-long-enough-password", &here()).await.unwrap_err();
    assert!(matches!(err, AccountError::AwaitingApproval(ref d) if d == "General"), "{err:?}");
    let err = ts.signin().sign_in("ada", "not-her-password", &here()).await.unwrap_err();
    assert!(matches!(err, AccountError::InvalidCredentials), "{err:?}");
    let waiting = ts.membership().join_requests(&maya).await.unwrap();
    assert_eq!(waiting.iter().map(|r| r.username.as_str()).collect::<Vec<_>>(), ["ada"]);
    // The admin's user list says she waits, and reactivating cannot skip the decision.
    let listed = ts.admin().all_users(&root).await.unwrap().into_iter().find(|u| u.username == "ada").unwrap();
    assert!(listed.awaiting_approval && !listed.is_active);
    let err = ts.admin().set_active(&root, "ada", true).await.unwrap_err();
    assert!(matches!(err, toolshed_domain::admin::AdminError::AwaitingApproval(_)), "{err:?}");
    ts.membership().decide_join_request(&maya, "ada", Some(Role::Author)).await.unwrap();
    let ada = ts.signin().sign_in("ada", "a-long-enough-password", &SignInFrom::address("10.0.0.2".parse().unwrap())).await.unwrap().user;
    assert_eq!((ada.role, ada.department.name.as_str()), (Role::Author, "general"));
    assert!(ts.membership().join_requests(&maya).await.unwrap().is_empty());
    assert!(!ts.admin().all_users(&root).await.unwrap().into_iter().find(|u| u.username == "ada").unwrap().awaiting_approval);
    let log = ts.admin().audit_log(&root, &toolshed_domain::admin::AuditFilter { page: 1, ..Default::default() }).await.unwrap();
    assert!(log.entries.iter().any(|e| e.action == "user.join_approved" && e.actor.as_deref() == Some("maya")));
});

store_test!(a_declined_request_leaves_an_account_that_cannot_sign_in, |db: Db| async move {
    let ts = toolshed(db, RegistrationPolicy::Invite);
    let root = admin(&ts).await;
    ts.membership().join(newcomer("ada", "general"), None).await.unwrap();
    ts.membership().decide_join_request(&root, "ada", None).await.unwrap();
    let err = ts.signin().sign_in("ada", "a-long-enough-password", &here()).await.unwrap_err();
    assert!(matches!(err, AccountError::InvalidCredentials), "{err:?}");
    let again = ts.membership().decide_join_request(&root, "ada", Some(Role::Member)).await.unwrap_err();
    assert!(matches!(again, AccountError::UnknownUser), "decided once: {again:?}");
});

store_test!(nobody_creates_a_department_by_registering_under_invite_or_joins_under_sso, |db: Db| async move {
    let ts = toolshed(db.clone(), RegistrationPolicy::Invite);
    admin(&ts).await;
    let err = ts.membership().join(newcomer("ada", "skunkworks"), None).await.unwrap_err();
    assert!(matches!(err, AccountError::UnknownDepartment(ref d) if d == "skunkworks"), "{err:?}");
    assert_eq!(ts.accounts().departments().await.unwrap().len(), 1);
    let sso = toolshed(db, RegistrationPolicy::Sso);
    let err = sso.membership().join(newcomer("bob", "general"), None).await.unwrap_err();
    assert!(matches!(err, AccountError::RegistrationClosed), "{err:?}");
});

store_test!(open_registration_makes_authors_and_founders_maintainers, |db: Db| async move {
    let ts = toolshed(db, RegistrationPolicy::Open);
    admin(&ts).await;
    let ada = joined(ts.membership().join(newcomer("ada", "general"), None).await.unwrap());
    let bob = joined(ts.membership().join(newcomer("bob", "skunkworks"), None).await.unwrap());
    assert_eq!((ada.role, bob.role), (Role::Author, Role::Maintainer));
});

store_test!(members_browse_and_run_while_authors_create_and_publish, |db: Db| async move {
    let ts = toolshed(db, RegistrationPolicy::Invite);
    let root = admin(&ts).await;
    let fiona = user(&ts, "fiona", "finance").await;
    let tool = ts.tools().create_tool(&fiona, draft("rates")).await.unwrap();
    let invite = ts.membership().create_invite(&root, "finance", Role::Member, 7).await.unwrap();
    let mia = joined(ts.membership().join(newcomer("mia", "finance"), Some(&invite.token)).await.unwrap());
    assert!(matches!(ts.tools().create_tool(&mia, draft("mine")).await, Err(ToolError::NotAnAuthor)));
    assert!(!toolshed_domain::tools::can_edit(&mia, &tool), "a member does not edit the department's tools");
    let mia = ts.membership().set_role(&root, "mia", Role::Author).await.unwrap();
    ts.tools().create_tool(&mia, draft("mine")).await.unwrap();
    assert!(toolshed_domain::tools::can_edit(&mia, &tool));
});

store_test!(a_maintainer_manages_their_own_department_only, |db: Db| async move {
    let ts = toolshed(db, RegistrationPolicy::Invite);
    let root = admin(&ts).await;
    user(&ts, "lena", "legal").await;
    let fiona = user(&ts, "fiona", "finance").await;
    let invite = ts.membership().create_invite(&root, "finance", Role::Maintainer, 7).await.unwrap();
    let max = joined(ts.membership().join(newcomer("max", "finance"), Some(&invite.token)).await.unwrap());
    ts.membership().join(newcomer("ada", "legal"), None).await.unwrap();
    ts.membership().join(newcomer("bea", "finance"), None).await.unwrap();
    let not_theirs = [
        ts.membership().create_invite(&max, "legal", Role::Member, 7).await.map(|_| ()),
        ts.membership().decide_join_request(&max, "ada", Some(Role::Member)).await,
        ts.membership().set_role(&max, "lena", Role::Maintainer).await.map(|_| ()),
    ];
    for r in not_theirs {
        assert!(matches!(r, Err(AccountError::NotMaintainer | AccountError::UnknownUser)), "{r:?}");
    }
    assert_eq!(ts.membership().join_requests(&max).await.unwrap().iter().map(|r| r.username.as_str()).collect::<Vec<_>>(), ["bea"]);
    let people: Vec<_> = ts.membership().people(&max).await.unwrap().into_iter().map(|p| p.username).collect();
    assert_eq!(people, ["fiona", "max"]);
    // An author is no maintainer.
    assert!(matches!(ts.membership().create_invite(&fiona, "finance", Role::Member, 7).await, Err(AccountError::NotMaintainer)));
    assert!(matches!(ts.membership().join_requests(&fiona).await, Err(AccountError::NotMaintainer)));
    ts.membership().set_role(&max, "fiona", Role::Member).await.unwrap();
    assert_eq!(ts.accounts().user_by_username("fiona").await.unwrap().unwrap().role, Role::Member);
});
