//! The operator's command line.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::TempDir;

fn toolshed(data_dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolshed"));
    cmd.env("TOOLSHED_DATA_DIR", data_dir).env_remove("DATABASE_URL");
    cmd
}

#[test]
fn help_documents_every_setting_with_its_environment_variable() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolshed")).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for var in ["TOOLSHED_ADDR", "DATABASE_URL", "TOOLSHED_DATA_DIR", "TOOLSHED_BASE_URL", "TOOLSHED_SESSION_KEY"] {
        assert!(help.contains(var), "--help mentions {var}:\n{help}");
    }
    for sub in ["serve", "migrate", "admin"] {
        assert!(help.contains(sub), "--help lists {sub}");
    }
}

#[test]
fn migrate_creates_the_sqlite_database_under_the_data_dir() {
    let dir = TempDir::new();
    let out = toolshed(dir.path()).arg("migrate").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.path().join("toolshed.db").exists());
}

#[test]
fn admin_create_user_reads_the_password_from_stdin() {
    let dir = TempDir::new();
    let run = |args: &[&str], stdin: &str| {
        let mut child = toolshed(dir.path())
            .args(["admin", "create-user"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(&["--username", "ops", "--admin"], "a-long-admin-secret\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "created admin user ops in department general");

    let out = run(&["--username", "ops"], "another-long-password\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already taken"));

    let out = run(&["--username", "weak", "--department", "sales"], "short\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 10 characters"));
}

#[test]
fn an_unsupported_database_url_is_a_clear_error() {
    let dir = TempDir::new();
    let out = toolshed(dir.path()).arg("migrate").env("DATABASE_URL", "mysql://nope").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported database URL"));
}

#[test]
fn settings_nobody_could_sign_in_with_are_refused_at_start() {
    let dir = TempDir::new();
    let start = |vars: &[(&str, &str)]| {
        let out = toolshed(dir.path()).arg("migrate").envs(vars.iter().copied()).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, err) = start(&[("TOOLSHED_PASSWORDS", "off")]);
    assert!(!ok && err.contains("need single sign-on: set TOOLSHED_OIDC_ISSUER"), "{err}");
    let (ok, err) = start(&[("TOOLSHED_REGISTRATION", "sso")]);
    assert!(!ok && err.contains("need single sign-on"), "{err}");
    let (ok, err) = start(&[("TOOLSHED_PASSWORDS", "maybe")]);
    assert!(!ok && err.contains("TOOLSHED_PASSWORDS must be on or off"), "{err}");
    let (ok, err) = start(&[("TOOLSHED_OIDC_ISSUER", "https://id.example.test")]);
    assert!(!ok && err.contains("TOOLSHED_OIDC_CLIENT_ID must be too"), "{err}");
    let (ok, err) = start(&[
        ("TOOLSHED_OIDC_ISSUER", "https://id.example.test"),
        ("TOOLSHED_OIDC_CLIENT_ID", "toolshed"),
        ("TOOLSHED_PASSWORDS", "off"),
    ]);
    assert!(ok, "{err}");
}
