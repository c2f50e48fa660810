//! Accounts, on SQLite and on PostgreSQL.

use toolshed_domain::accounts::Registration;
use toolshed_domain::signin::SignInFrom;

use toolshed_domain::{AccountError, Db, Settings, Toolshed};

fn toolshed(db: Db) -> Toolshed {
    Toolshed::new(db, settings())
}

/// 3 failures per account and source; an address at all accounts: 60.
fn settings() -> Settings {
    Settings { login_failures_per_account: 3, ..Settings::default() }
}

fn from(address: &str) -> SignInFrom {
    SignInFrom::address(address.parse().unwrap())
}

fn alice() -> Registration {
    Registration::parse("Alice", "Alice Liddell", "Finance", "looking-glass-42").unwrap()
}

fn bob() -> Registration {
    Registration::parse("Bob", "Bob Cratchit", "Finance", "counting-house-1843").unwrap()
}

store_test!(registering_creates_the_user_and_their_department, |db: Db| async move {
    let ts = toolshed(db);
    let user = ts.accounts().register(alice(), None).await.unwrap();
    assert_eq!(user.username, "alice");
    assert_eq!(user.department.name, "finance");
    assert_eq!(user.department.title, "Finance");
    assert!(!user.is_admin);
    assert_eq!(ts.accounts().departments().await.unwrap().len(), 1);
});

store_test!(a_taken_username_is_refused_and_nothing_is_written, |db: Db| async move {
    let ts = toolshed(db);
    ts.accounts().register(alice(), None).await.unwrap();
    let again = Registration::parse("ALICE", "Other Alice", "legal", "another-secret-9").unwrap();
    let err = ts.accounts().register(again, None).await.unwrap_err();
    assert!(matches!(err, AccountError::UsernameTaken(ref u) if u == "alice"), "{err:?}");
    // The department of the failed registration was rolled back with it.
    let names: Vec<_> = ts.accounts().departments().await.unwrap().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["finance"]);
});

store_test!(signing_in_checks_the_password_with_one_generic_error, |db: Db| async move {
    let ts = toolshed(db);
    let alice = ts.accounts().register(alice(), None).await.unwrap();
    assert_eq!(ts.signin().sign_in(" Alice ", "looking-glass-42", &from("10.0.0.1")).await.unwrap().user.id, alice.id);
    let wrong = ts.signin().sign_in("alice", "wrong", &from("10.0.0.1")).await.unwrap_err();
    let unknown = ts.signin().sign_in("nobody", "wrong", &from("10.0.0.1")).await.unwrap_err();
    assert_eq!(wrong.to_string(), unknown.to_string());
    assert_eq!(wrong.to_string(), "Invalid username or password.");
});

store_test!(guesses_from_one_address_lock_out_that_address_only, |db: Db| async move {
    let ts = toolshed(db);
    ts.accounts().register(alice(), None).await.unwrap();
    for _ in 0..3 {
        assert!(matches!(ts.signin().sign_in("alice", "guess", &from("10.0.0.1")).await, Err(AccountError::InvalidCredentials)));
    }
    let err = ts.signin().sign_in("alice", "looking-glass-42", &from("10.0.0.1")).await.unwrap_err();
    assert!(matches!(err, AccountError::RateLimited), "{err:?}");
    // Alice, elsewhere, is not locked out by the attacker.
    assert!(ts.signin().sign_in("alice", "looking-glass-42", &from("10.0.0.2")).await.is_ok());
});

store_test!(guesses_at_one_account_leave_the_other_accounts_behind_that_address_alone, |db: Db| async move {
    let ts = toolshed(db);
    ts.accounts().register(alice(), None).await.unwrap();
    ts.accounts().register(bob(), None).await.unwrap();
    // Someone behind the office's NAT keeps guessing at Alice: 3 are checked, the rest refused.
    for _ in 0..100 {
        let _ = ts.signin().sign_in("alice", "guess", &from("192.0.2.7")).await;
    }
    let err = ts.signin().sign_in("alice", "looking-glass-42", &from("192.0.2.7")).await.unwrap_err();
    assert!(matches!(err, AccountError::RateLimited), "{err:?}");
    // Bob, behind the same NAT, signs in to his own account.
    assert_eq!(ts.signin().sign_in("bob", "counting-house-1843", &from("192.0.2.7")).await.unwrap().user.username, "bob");
});

store_test!(spraying_guesses_over_many_accounts_from_one_address_hits_the_address_bound, |db: Db| async move {
    let ts = toolshed(db);
    ts.accounts().register(alice(), None).await.unwrap();
    // One failure at each of 60 accounts (20 times the per-account limit): every one checked.
    for i in 0..60 {
        let err = ts.signin().sign_in(&format!("user{i}"), "guess", &from("192.0.2.7")).await.unwrap_err();
        assert!(matches!(err, AccountError::InvalidCredentials), "guess {i}: {err:?}");
    }
    let err = ts.signin().sign_in("alice", "looking-glass-42", &from("192.0.2.7")).await.unwrap_err();
    assert!(matches!(err, AccountError::RateLimited), "{err:?}");
    assert!(ts.signin().sign_in("alice", "looking-glass-42", &from("192.0.2.8")).await.is_ok());
});

store_test!(the_sign_in_limits_hold_across_replicas, |db: Db| async move {
    let one = toolshed(db.clone());
    let other = Toolshed::new(db, settings());
    one.accounts().register(alice(), None).await.unwrap();
    one.accounts().register(bob(), None).await.unwrap();
    for _ in 0..3 {
        assert!(matches!(one.signin().sign_in("alice", "guess", &from("10.0.0.1")).await, Err(AccountError::InvalidCredentials)));
    }
    // The guesses went through one replica; the next attempt comes through the other.
    let err = other.signin().sign_in("alice", "looking-glass-42", &from("10.0.0.1")).await.unwrap_err();
    assert!(matches!(err, AccountError::RateLimited), "{err:?}");
    assert!(other.signin().sign_in("bob", "counting-house-1843", &from("10.0.0.1")).await.is_ok());
});

store_test!(a_browser_that_signed_in_before_keeps_signing_in_while_its_address_is_refused, |db: Db| async move {
    let ts = toolshed(db);
    ts.accounts().register(alice(), None).await.unwrap();
    let device = ts.signin().sign_in("alice", "looking-glass-42", &from("192.0.2.7")).await.unwrap().device;
    // Someone behind the same address guesses at every account, Alice's included.
    for i in 0..6 {
        let _ = ts.signin().sign_in(if i % 2 == 0 { "alice" } else { "admin" }, "guess", &from("192.0.2.7")).await;
    }
    assert!(matches!(ts.signin().sign_in("alice", "looking-glass-42", &from("192.0.2.7")).await, Err(AccountError::RateLimited)));
    let known = SignInFrom { client: "192.0.2.7".parse().unwrap(), device: Some(device.clone()) };
    assert_eq!(ts.signin().sign_in("alice", "looking-glass-42", &known).await.unwrap().device, device);
    // The device counts for Alice only, and a made-up one for nobody.
    let forged = SignInFrom { device: Some("made-up".into()), ..known.clone() };
    assert!(matches!(ts.signin().sign_in("alice", "looking-glass-42", &forged).await, Err(AccountError::RateLimited)));
});

store_test!(many_addresses_guessing_one_account_do_not_lock_out_its_known_browser, |db: Db| async move {
    let ts = toolshed(db);
    ts.accounts().register(alice(), None).await.unwrap();
    let device = ts.signin().sign_in("alice", "looking-glass-42", &from("10.9.9.9")).await.unwrap().device;
    // 3 guesses from each of 10 addresses: the limit for unknown sources together.
    for i in 0..30 {
        let _ = ts.signin().sign_in("alice", "guess", &from(&format!("10.0.1.{}", i / 3))).await;
    }
    assert!(matches!(ts.signin().sign_in("alice", "looking-glass-42", &from("10.0.2.1")).await, Err(AccountError::RateLimited)));
    let known = SignInFrom { client: "10.0.2.1".parse().unwrap(), device: Some(device) };
    assert!(ts.signin().sign_in("alice", "looking-glass-42", &known).await.is_ok());
});

store_test!(a_burst_of_concurrent_guesses_gets_no_more_password_checks_than_the_limit, |db: Db| async move {
    let ts = toolshed(db);
    ts.accounts().register(alice(), None).await.unwrap();
    let guesses = (0..24).map(|_| {
        let ts = ts.clone();
        tokio::spawn(async move { ts.signin().sign_in("alice", "guess", &from("10.0.0.1")).await })
    });
    let mut checked = 0;
    for guess in guesses {
        match guess.await.unwrap() {
            Err(AccountError::InvalidCredentials) => checked += 1,
            Err(AccountError::RateLimited) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!((1..=3).contains(&checked), "{checked} guesses were checked against a limit of 3");
});

store_test!(changing_the_password_invalidates_older_sessions, |db: Db| async move {
    let ts = toolshed(db);
    let alice = ts.accounts().register(alice(), None).await.unwrap();
    let err = ts.accounts().change_password(alice.id, "not-it", "through-the-mirror-7").await.unwrap_err();
    assert!(matches!(err, AccountError::WrongCurrentPassword));
    let err = ts.accounts().change_password(alice.id, "looking-glass-42", "short").await.unwrap_err();
    assert!(matches!(err, AccountError::Invalid(_)));
    let updated = ts.accounts().change_password(alice.id, "looking-glass-42", "through-the-mirror-7").await.unwrap();
    assert!(ts.accounts().user_for_session(alice.id, alice.session_epoch).await.unwrap().is_none());
    assert!(ts.accounts().user_for_session(alice.id, updated.session_epoch).await.unwrap().is_some());
    assert!(ts.signin().sign_in("alice", "looking-glass-42", &from("10.0.0.1")).await.is_err());
    assert!(ts.signin().sign_in("alice", "through-the-mirror-7", &from("10.0.0.1")).await.is_ok());
});

store_test!(the_first_admin_is_created_once_with_a_generated_password, |db: Db| async move {
    let ts = toolshed(db);
    let (username, password) = ts.accounts().ensure_first_admin().await.unwrap().expect("created on an empty database");
    assert_eq!(username, "admin");
    assert!(password.len() >= 20);
    let admin = ts.signin().sign_in("admin", &password, &from("127.0.0.1")).await.unwrap().user;
    assert!(admin.is_admin);
    assert_eq!(admin.department.name, "general");
    assert!(ts.accounts().ensure_first_admin().await.unwrap().is_none());
});

store_test!(sessions_survive_in_the_database_and_die_with_the_password, |db: Db| async move {
    use std::sync::Arc;
    use toolshed_domain::sessions::DbSessionStore;
    use tower_sessions::{session::Id, Session, SessionStore};

    let ts = toolshed(db.clone());
    let alice = ts.accounts().register(alice(), None).await.unwrap();
    let store = Arc::new(DbSessionStore::new(db));
    let session = Session::new(None, store.clone(), None);
    ts.sessions().start_session(&session, &alice).await.unwrap();
    session.save().await.unwrap();
    let id: Id = session.id().expect("saved sessions have an id");

    // Another replica loads the same record from the database.
    let again = Session::new(Some(id), store.clone(), None);
    assert_eq!(ts.sessions().session_user(&again).await.unwrap().map(|u| u.id), Some(alice.id));

    ts.accounts().change_password(alice.id, "looking-glass-42", "through-the-mirror-7").await.unwrap();
    let stale = Session::new(Some(id), store.clone(), None);
    assert!(ts.sessions().session_user(&stale).await.unwrap().is_none());
    assert!(store.load(&id).await.unwrap().is_none(), "a stale session is deleted");
});
