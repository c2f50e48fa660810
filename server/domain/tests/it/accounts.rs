//! Accounts, on SQLite and on PostgreSQL.

use toolshed_domain::accounts::Registration;

use toolshed_domain::{AccountError, Db, Settings, Toolshed};

fn toolshed(db: Db) -> Toolshed {
    Toolshed::new(db, Settings { login_failures_per_account: 3, login_failures_per_client: 5, ..Settings::default() })
}

fn alice() -> Registration {
    Registration::parse("Alice", "Alice Liddell", "Finance", "looking-glass-42").unwrap()
}

store_test!(registering_creates_the_user_and_their_department, |db: Db| async move {
    let ts = toolshed(db);
    let user = ts.register(alice(), None).await.unwrap();
    assert_eq!(user.username, "alice");
    assert_eq!(user.department.name, "finance");
    assert_eq!(user.department.title, "Finance");
    assert!(!user.is_admin);
    assert_eq!(ts.departments().await.unwrap().len(), 1);
});

store_test!(a_taken_username_is_refused_and_nothing_is_written, |db: Db| async move {
    let ts = toolshed(db);
    ts.register(alice(), None).await.unwrap();
    let again = Registration::parse("ALICE", "Other Alice", "legal", "another-secret-9").unwrap();
    let err = ts.register(again, None).await.unwrap_err();
    assert!(matches!(err, AccountError::UsernameTaken(ref u) if u == "alice"), "{err:?}");
    // The department of the failed registration was rolled back with it.
    let names: Vec<_> = ts.departments().await.unwrap().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["finance"]);
});

store_test!(signing_in_checks_the_password_with_one_generic_error, |db: Db| async move {
    let ts = toolshed(db);
    let alice = ts.register(alice(), None).await.unwrap();
    assert_eq!(ts.sign_in(" Alice ", "looking-glass-42", "10.0.0.1").await.unwrap().id, alice.id);
    let wrong = ts.sign_in("alice", "wrong", "10.0.0.1").await.unwrap_err();
    let unknown = ts.sign_in("nobody", "wrong", "10.0.0.1").await.unwrap_err();
    assert_eq!(wrong.to_string(), unknown.to_string());
    assert_eq!(wrong.to_string(), "Invalid username or password.");
});

store_test!(repeated_failures_lock_the_account_even_for_the_right_password, |db: Db| async move {
    let ts = toolshed(db);
    ts.register(alice(), None).await.unwrap();
    for i in 0..3 {
        let client = format!("10.0.0.{i}");
        assert!(matches!(ts.sign_in("alice", "guess", &client).await, Err(AccountError::InvalidCredentials)));
    }
    let err = ts.sign_in("alice", "looking-glass-42", "10.0.0.9").await.unwrap_err();
    assert!(matches!(err, AccountError::RateLimited), "{err:?}");
});

store_test!(repeated_failures_from_one_address_are_refused_across_accounts, |db: Db| async move {
    let ts = toolshed(db);
    ts.register(alice(), None).await.unwrap();
    for i in 0..5 {
        let _ = ts.sign_in(&format!("user{i}"), "guess", "192.0.2.7").await;
    }
    let err = ts.sign_in("alice", "looking-glass-42", "192.0.2.7").await.unwrap_err();
    assert!(matches!(err, AccountError::RateLimited), "{err:?}");
    assert!(ts.sign_in("alice", "looking-glass-42", "192.0.2.8").await.is_ok());
});

store_test!(changing_the_password_invalidates_older_sessions, |db: Db| async move {
    let ts = toolshed(db);
    let alice = ts.register(alice(), None).await.unwrap();
    let err = ts.change_password(alice.id, "not-it", "through-the-mirror-7").await.unwrap_err();
    assert!(matches!(err, AccountError::WrongCurrentPassword));
    let err = ts.change_password(alice.id, "looking-glass-42", "short").await.unwrap_err();
    assert!(matches!(err, AccountError::Invalid(_)));
    let updated = ts.change_password(alice.id, "looking-glass-42", "through-the-mirror-7").await.unwrap();
    assert!(ts.user_for_session(alice.id, alice.session_epoch).await.unwrap().is_none());
    assert!(ts.user_for_session(alice.id, updated.session_epoch).await.unwrap().is_some());
    assert!(ts.sign_in("alice", "looking-glass-42", "10.0.0.1").await.is_err());
    assert!(ts.sign_in("alice", "through-the-mirror-7", "10.0.0.1").await.is_ok());
});

store_test!(the_first_admin_is_created_once_with_a_generated_password, |db: Db| async move {
    let ts = toolshed(db);
    let (username, password) = ts.ensure_first_admin().await.unwrap().expect("created on an empty database");
    assert_eq!(username, "admin");
    assert!(password.len() >= 20);
    let admin = ts.sign_in("admin", &password, "127.0.0.1").await.unwrap();
    assert!(admin.is_admin);
    assert_eq!(admin.department.name, "general");
    assert!(ts.ensure_first_admin().await.unwrap().is_none());
});

store_test!(sessions_survive_in_the_database_and_die_with_the_password, |db: Db| async move {
    use std::sync::Arc;
    use toolshed_domain::sessions::DbSessionStore;
    use tower_sessions::{session::Id, Session, SessionStore};

    let ts = toolshed(db.clone());
    let alice = ts.register(alice(), None).await.unwrap();
    let store = Arc::new(DbSessionStore::new(db));
    let session = Session::new(None, store.clone(), None);
    ts.start_session(&session, &alice).await.unwrap();
    session.save().await.unwrap();
    let id: Id = session.id().expect("saved sessions have an id");

    // Another replica loads the same record from the database.
    let again = Session::new(Some(id), store.clone(), None);
    assert_eq!(ts.session_user(&again).await.unwrap().map(|u| u.id), Some(alice.id));

    ts.change_password(alice.id, "looking-glass-42", "through-the-mirror-7").await.unwrap();
    let stale = Session::new(Some(id), store.clone(), None);
    assert!(ts.session_user(&stale).await.unwrap().is_none());
    assert!(store.load(&id).await.unwrap().is_none(), "a stale session is deleted");
});
