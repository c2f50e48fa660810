//! Accounts from the identity provider: who a signed-in identity is here, on
//! SQLite and PostgreSQL. (The protocol itself is tested against a real
//! provider in end2end/tests/sso.test.mjs.)

use crate::support::user;
use toolshed_domain::accounts::Registration;
use toolshed_domain::admin::AdminError;
use toolshed_domain::names::Role;
use toolshed_domain::signin::SignInFrom;
use toolshed_domain::sso::Identity;
use toolshed_domain::{AccountError, Db, Settings, Toolshed, User};

const ISSUER: &str = "https://id.example.test";

fn identity(subject: &str, username: &str, groups: &[&str]) -> Identity {
    Identity {
        issuer: ISSUER.into(),
        subject: subject.into(),
        preferred_username: Some(username.into()),
        email: Some(format!("{username}@example.test")),
        name: Some(format!("{username} at the provider")),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

async fn admin(ts: &Toolshed) -> User {
    let mut reg = Registration::parse("root", "Root", "general", "a-long-enough-password").unwrap();
    reg.is_admin = true;
    ts.accounts().register(reg, None).await.unwrap()
}

store_test!(a_first_sign_in_makes_the_account_in_the_department_its_group_is_mapped_to, |db: Db| async move {
    let ts = Toolshed::new(db, Settings::default());
    let root = admin(&ts).await;
    user(&ts, "fiona", "finance").await;
    user(&ts, "rita", "research").await;
    ts.sso().map_group(&root, "fin-staff", "finance", Role::Member).await.unwrap();
    ts.sso().map_group(&root, "fin-devs", "finance", Role::Author).await.unwrap();
    ts.sso().map_group(&root, "research-team", "research", Role::Member).await.unwrap();

    // The most powerful of the person's mapped groups decides.
    let ada = ts.sso().sso_sign_in(&identity("sub-ada", "Ada.L", &["staff", "fin-staff", "fin-devs"])).await.unwrap();
    assert_eq!((ada.username.as_str(), ada.department.name.as_str(), ada.role), ("ada-l", "finance", Role::Author));
    assert_eq!(ada.display_name, "Ada.L at the provider");
    // The same subject is the same account, whatever its name or groups became.
    let again = ts.sso().sso_sign_in(&identity("sub-ada", "ada.renamed", &["research-team"])).await.unwrap();
    assert_eq!((again.id, again.department.name.as_str()), (ada.id, "finance"));

    let log = ts.admin().audit_log(&root, &Default::default()).await.unwrap();
    assert!(log.entries.iter().any(|e| e.action == "sso.group_mapped" && e.target == "group:fin-devs"));
    assert!(log.entries.iter().any(|e| e.action == "user.registered" && e.target == "user:ada-l"));
});

store_test!(someone_in_no_mapped_group_gets_no_account_and_is_told_why, |db: Db| async move {
    let ts = Toolshed::new(db, Settings::default());
    let root = admin(&ts).await;
    ts.sso().map_group(&root, "research-team", "general", Role::Member).await.unwrap();
    let err = ts.sso().sso_sign_in(&identity("sub-eve", "eve", &["contractors"])).await.unwrap_err();
    assert!(matches!(err, AccountError::NoMappedGroup(_)), "{err:?}");
    assert!(err.to_string().contains("your groups: contractors"), "{err}");
    assert!(ts.accounts().user_by_username("eve").await.unwrap().is_none());
    // Unmapping stops new accounts; accounts already made stay.
    let bob = ts.sso().sso_sign_in(&identity("sub-bob", "bob", &["research-team"])).await.unwrap();
    ts.sso().unmap_group(&root, "research-team").await.unwrap();
    assert!(ts.sso().group_mappings(&root).await.unwrap().is_empty());
    assert_eq!(ts.sso().sso_sign_in(&identity("sub-bob", "bob", &["research-team"])).await.unwrap().id, bob.id);
    let err = ts.sso().sso_sign_in(&identity("sub-cy", "cy", &["research-team"])).await.unwrap_err();
    assert!(matches!(err, AccountError::NoMappedGroup(_)), "{err:?}");
});

store_test!(a_provider_username_never_takes_over_a_local_account, |db: Db| async move {
    let ts = Toolshed::new(db, Settings::default());
    let root = admin(&ts).await;
    ts.sso().map_group(&root, "staff", "general", Role::Member).await.unwrap();
    let imposter = ts.sso().sso_sign_in(&identity("sub-x", "root", &["staff"])).await.unwrap();
    assert_ne!(imposter.id, root.id);
    assert_eq!(imposter.username, "root-2");
    assert!(!imposter.is_admin);
    // An account made by the provider has no password that works.
    for password in ["", "sso", "a-long-enough-password"] {
        let err = ts.signin().sign_in("root-2", password, &SignInFrom::address("10.0.0.9".parse().unwrap())).await.unwrap_err();
        assert!(matches!(err, AccountError::InvalidCredentials), "{err:?}");
    }
});

store_test!(a_deactivated_account_cannot_sign_in_through_the_provider, |db: Db| async move {
    let ts = Toolshed::new(db, Settings::default());
    let root = admin(&ts).await;
    ts.sso().map_group(&root, "staff", "general", Role::Member).await.unwrap();
    let ada = ts.sso().sso_sign_in(&identity("sub-ada", "ada", &["staff"])).await.unwrap();
    ts.admin().set_active(&root, &ada.username, false).await.unwrap();
    let err = ts.sso().sso_sign_in(&identity("sub-ada", "ada", &["staff"])).await.unwrap_err();
    assert!(matches!(err, AccountError::Deactivated), "{err:?}");
});

store_test!(the_admin_group_makes_and_unmakes_admins_but_never_the_last_one, |db: Db| async move {
    let ts = Toolshed::new(db, Settings { sso_admin_group: Some("toolshed-admins".into()), ..Settings::default() });
    let root = admin(&ts).await;
    ts.sso().map_group(&root, "staff", "general", Role::Member).await.unwrap();
    let ada = ts.sso().sso_sign_in(&identity("sub-ada", "ada", &["staff", "toolshed-admins"])).await.unwrap();
    assert!(ada.is_admin);
    let ada = ts.sso().sso_sign_in(&identity("sub-ada", "ada", &["staff"])).await.unwrap();
    assert!(!ada.is_admin, "left the group, no longer an admin");
    // With the local admin deactivated, Ada is the last admin and stays one.
    let ada = ts.sso().sso_sign_in(&identity("sub-ada", "ada", &["staff", "toolshed-admins"])).await.unwrap();
    ts.admin().set_active(&ada, "root", false).await.unwrap();
    assert!(ts.sso().sso_sign_in(&identity("sub-ada", "ada", &["staff"])).await.unwrap().is_admin);
});

store_test!(only_admins_map_groups_and_only_to_existing_departments, |db: Db| async move {
    let ts = Toolshed::new(db, Settings::default());
    let root = admin(&ts).await;
    let fiona = user(&ts, "fiona", "finance").await;
    let err = ts.sso().map_group(&fiona, "staff", "finance", Role::Maintainer).await.unwrap_err();
    assert!(matches!(err, AdminError::Forbidden), "{err:?}");
    assert!(matches!(ts.sso().group_mappings(&fiona).await.unwrap_err(), AdminError::Forbidden));
    let err = ts.sso().map_group(&root, "staff", "nowhere", Role::Member).await.unwrap_err();
    assert!(matches!(err, AdminError::UnknownDepartment(_)), "{err:?}");
    let err = ts.sso().map_group(&root, "  ", "finance", Role::Member).await.unwrap_err();
    assert!(matches!(err, AdminError::Invalid(_)), "{err:?}");
    // Mapping a group again replaces its department and role.
    ts.sso().map_group(&root, "staff", "general", Role::Member).await.unwrap();
    ts.sso().map_group(&root, "staff", "finance", Role::Author).await.unwrap();
    let mappings = ts.sso().group_mappings(&root).await.unwrap();
    assert_eq!(mappings.len(), 1);
    assert_eq!((mappings[0].department.as_str(), mappings[0].role), ("finance", Role::Author));
});

store_test!(with_passwords_off_only_the_provider_signs_people_in, |db: Db| async move {
    let ts = Toolshed::new(db, Settings { passwords: false, ..Settings::default() });
    admin(&ts).await;
    let err = ts.signin().sign_in("root", "a-long-enough-password", &SignInFrom::address("10.0.0.9".parse().unwrap())).await.unwrap_err();
    assert!(matches!(err, AccountError::PasswordsOff), "{err:?}");
    // Nor does anyone register an account with a password.
    let reg = Registration::parse("ada", "Ada", "general", "a-long-enough-password").unwrap();
    let err = ts.membership().join(reg, None).await.unwrap_err();
    assert!(matches!(err, AccountError::RegistrationClosed), "{err:?}");
});
